package scontrol

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/scontrol/scontroltest"
	"github.com/tide-hpc/tide/ctld/api"
)

// tmpDiskFake is the canned cluster with gpu01 reporting 2 GB of
// temporary disk and pending job 103 (-N2 -n2 -c16) asking for
// --tmp=10G --mincpus=20 --overcommit.
func tmpDiskFake(t *testing.T) *clitest.FakeAPI {
	t.Helper()
	fake := scontroltest.Cluster()
	fake.NodeRecs[0].TmpDiskMB = 2048
	if fake.NodeRecs[0].Name != "gpu01" {
		t.Fatalf("node 0 is %s, want gpu01", fake.NodeRecs[0].Name)
	}
	for i := range fake.JobRecs {
		if j := &fake.JobRecs[i]; j.ID == 103 {
			j.TmpDiskMB, j.MinCPUs, j.Overcommit = 10240, 20, true
			return fake
		}
	}
	t.Fatal("no job 103 in the canned cluster")
	return nil
}

// TestShowTmpDiskAndMinCPUs: show node prints the node's TmpDisk, show
// job MinCPUsNode (--mincpus) and MinTmpDiskNode (--tmp), as text and
// as JSON.
func TestShowTmpDiskAndMinCPUs(t *testing.T) {
	fake := tmpDiskFake(t)
	r := run(t, fake, nil, time.UTC, "show", "node", "gpu01")
	if r.code != 0 || !strings.Contains(r.out, " TmpDisk=2048 ") {
		t.Errorf("show node gpu01 (exit %d) lacks TmpDisk=2048:\n%s", r.code, r.out)
	}
	r = run(t, fake, nil, time.UTC, "show", "job", "103")
	// --mincpus=20 on each of 2 nodes is more than 2 tasks × 16 CPUs.
	for _, want := range []string{" NumCPUs=40 ", "MinCPUsNode=20 ", " MinTmpDiskNode=10G\n"} {
		if r.code != 0 || !strings.Contains(r.out, want) {
			t.Errorf("show job 103 (exit %d) lacks %q:\n%s", r.code, want, r.out)
		}
	}

	fixJSONCaller(t, "scontrol", "--json", "show", "node", "gpu01")
	r = run(t, fake, nil, time.UTC, "--json", "show", "node", "gpu01")
	var nodes struct {
		Nodes []struct {
			Name          string `json:"name"`
			TemporaryDisk int64  `json:"temporary_disk"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(r.out), &nodes); err != nil || len(nodes.Nodes) != 1 || nodes.Nodes[0].TemporaryDisk != 2048 {
		t.Errorf("--json show node gpu01: %+v, %v\n%s", nodes, err, r.out)
	}
	r = run(t, fake, nil, time.UTC, "--json", "show", "job", "103")
	var jobs struct {
		Jobs []struct {
			MinCPUs struct{ Number int64 } `json:"minimum_cpus_per_node"`
			MinTmp  struct{ Number int64 } `json:"minimum_tmp_disk_per_node"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(r.out), &jobs); err != nil || len(jobs.Jobs) != 1 || jobs.Jobs[0].MinCPUs.Number != 20 || jobs.Jobs[0].MinTmp.Number != 10240 {
		t.Errorf("--json show job 103: %+v, %v\n%s", jobs, err, r.out)
	}
}

func TestNodeAddr(t *testing.T) {
	tests := []struct {
		name string
		n    api.Node
		want string
	}{
		{name: "declared address", n: api.Node{Addr: "10.0.0.5:6818", StepAddr: "10.0.0.9:7000", Hostname: "h"}, want: "10.0.0.5"},
		{name: "the step listener's host", n: api.Node{StepAddr: "127.0.0.1:41000", Hostname: "h"}, want: "127.0.0.1"},
		{name: "a wildcard listener gives the hostname", n: api.Node{StepAddr: "0.0.0.0:41000", Hostname: "h"}, want: "h"},
		{name: "nothing but the hostname", n: api.Node{Hostname: "h"}, want: "h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nodeAddr(&tt.n); got != tt.want {
				t.Errorf("nodeAddr = %q, want %q", got, tt.want)
			}
		})
	}
}
