package scontrol

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/scontroltest"
	"github.com/tide-hpc/tide/ctld/api"
)

// privateNodes is a controller with private_data: nodes, as a regular
// user meets it: the node listing is refused.
type privateNodes struct{ *clitest.FakeAPI }

const nodesRefused = "Access/permission denied: node information is for operators on this cluster (private_data: nodes)"

func (privateNodes) Nodes(context.Context) (api.NodeList, error) {
	return api.NodeList{}, api.Errorf(api.ErrPermissionDenied, nodesRefused)
}

// TestPrivateNodes: with the node listing refused, show job -d still
// works (GRES without the GPU model, which only the nodes know), and
// show node and show partition fail with the controller's words, as
// Slurm's scontrol does under PrivateData=nodes.
func TestPrivateNodes(t *testing.T) {
	runAs := func(args ...string) result {
		t.Helper()
		f, buf := clitest.Factory(scontroltest.Cluster(), nil)
		fake := privateNodes{scontroltest.Cluster()}
		f.API = func() (cmdutil.API, error) { return fake, nil }
		out, errOut, code := clitest.Run(newCmd(f, time.UTC), buf, "scontrol", args)
		return result{out: out, errOut: errOut, code: code}
	}
	r := runAs("-d", "show", "job", "101")
	if r.code != 0 || r.errOut != "" {
		t.Fatalf("show -d job: exit %d, stderr %q", r.code, r.errOut)
	}
	full, err := os.ReadFile("testdata/show-job-d-gpu.golden")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.ReplaceAll(string(full), "gpu:h100:", "gpu:"); r.out != want || want == string(full) {
		t.Errorf("show -d job without nodes:\n%s\nwant the golden without GPU models:\n%s", r.out, want)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"show", "node"}, "slurm_load_node error: " + nodesRefused},
		{[]string{"show", "partition"}, "slurm_load_partitions error: " + nodesRefused},
	} {
		r := runAs(tt.args...)
		if r.code != 1 || !strings.Contains(r.errOut, tt.want) || r.out != "" {
			t.Errorf("scontrol %v: exit %d, out %q, stderr %q; want exit 1 with %q", tt.args, r.code, r.out, r.errOut, tt.want)
		}
	}
}
