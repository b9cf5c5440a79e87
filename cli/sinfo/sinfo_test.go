package sinfo

import (
	"context"
	"encoding/json"
	"errors"
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
	"github.com/tide-hpc/tide/ctld/api"
)

func TestMain(m *testing.M) {
	time.Local = time.UTC
	os.Exit(m.Run())
}

func exec(t testing.TB, fake *clitest.FakeAPI, args ...string) (string, string, error) {
	t.Helper()
	f, bufs := clitest.Factory(fake, nil)
	cmd := NewCmd(f)
	// A nil slice would make cobra read the test binary's os.Args.
	cmd.SetArgs(append([]string{}, args...))
	cmd.SetOut(bufs.Out)
	cmd.SetErr(bufs.Err)
	err := cmd.ExecuteContext(context.Background())
	return bufs.Out.String(), bufs.Err.String(), err
}

func golden(t testing.TB, name, got string) {
	t.Helper()
	goldenpkg.Check(t, name, got)
}

// troubled adds trouble to the canned cluster: gpu03 stops responding,
// a fifth node is down, and an empty partition exists.
func troubled(f *clitest.FakeAPI) {
	f.NodeRecs[2].Responding = false
	down := f.NodeRecs[3]
	down.Name, down.Hostname, down.Addr = "gpu05", "gpu05", "10.0.0.5"
	down.State, down.Drain, down.AllocGPUs = api.NodeDown, false, nil
	down.Reason, down.ReasonUser = "Not responding", "slurm"
	f.NodeRecs = append(f.NodeRecs, down)
	f.Partitions[0].Nodes = append(f.Partitions[0].Nodes, "gpu05")
	f.Partitions = append(f.Partitions, api.Partition{Name: "empty", State: "UP", MaxTime: 600})
}

// sharedGPUs makes GPU 7 of gpu01 shared by three slices and GPU 5 of
// gpu02 by one, so that whole and shared GPUs show apart.
func sharedGPUs(f *clitest.FakeAPI) {
	n1, n2 := &f.NodeRecs[0], &f.NodeRecs[1]
	n1.AllocGPUs = append(slices.Clone(n1.AllocGPUs), 7, 7, 7)
	n1.SharedGPUs = []api.GPUShare{{Index: 7, Slices: 3, MemMB: 24 * 1024, ComputePct: 30}}
	n2.AllocGPUs = append(slices.Clone(n2.AllocGPUs), 5)
	n2.SharedGPUs = []api.GPUShare{{Index: 5, Slices: 1, MemMB: 8 * 1024}}
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		mutate func(*clitest.FakeAPI)
	}{
		{name: "default"},
		{name: "long", args: []string{"-l"}},
		{name: "node", args: []string{"-N"}},
		{name: "node-long", args: []string{"-N", "-l"}},
		{name: "summarize", args: []string{"-s"}},
		{name: "reasons", args: []string{"-R"}},
		{name: "reasons-long", args: []string{"--list-reasons", "--long"}},
		{name: "gpus", args: []string{"--gpus"}},
		{name: "gpus-node", args: []string{"--gpus", "-N"}},
		{name: "o-gres", args: []string{"-N", "-o", "%N %T %C %G %E"}},
		{name: "o-all-letters", args: []string{"-N", "-o", "%a|%A|%b|%B|%c|%C|%d|%D|%e|%E|%f|%F|%g|%G|%h|%H|%l|%L|%m|%M|%n|%N|%o|%O|%p|%P|%r|%R|%s|%S|%t|%T|%u|%U|%v|%w|%X|%Y|%Z|%z|100%%"}},
		{name: "o-partition-cpus", args: []string{"-o", "%P %c %m %O %e %D %C %N"}},
		{name: "o-exact", args: []string{"-e", "-o", "%P %O %D %N"}},
		{name: "o-no-partition", args: []string{"-o", "%t %D %N"}},
		{name: "O-gres", args: []string{"-N", "-O", "NodeList:8,Partition:.8,StateLong:10,Gres:12,GresUsed:22,GPUsState:12,CPUsState"}},
		{name: "O-partition", args: []string{"-O", "PartitionName,Available:6,Time:.10,DefaultTime:.12,Size:12,NodeAIOT:16,StateCompact"}},
		{name: "partition", args: []string{"-p", "debug"}},
		{name: "nodes", args: []string{"-n", "gpu[03-04]", "-N"}},
		{name: "states-idle", args: []string{"-t", "idle,drain"}},
		{name: "states-mixed", args: []string{"--states=MIX"}},
		{name: "states-slurm-only", args: []string{"-t", "maint,reserved"}},
		{name: "sort", args: []string{"-N", "-S", "-N"}},
		{name: "noheader", args: []string{"-h"}},
		{name: "troubled", mutate: troubled},
		{name: "troubled-node", args: []string{"-N", "-l"}, mutate: troubled},
		{name: "troubled-dead", args: []string{"-d", "-N"}, mutate: troubled},
		{name: "troubled-responding", args: []string{"-r"}, mutate: troubled},
		{name: "troubled-reasons", args: []string{"-R"}, mutate: troubled},
		{name: "troubled-summarize", args: []string{"-s"}, mutate: troubled},
		{name: "troubled-gpus", args: []string{"--gpus"}, mutate: troubled},
		{name: "json", args: []string{"--json"}},
		{name: "O-gpu-shared", args: []string{"-N", "-O", "NodeList:8,GPUsState:12,GPUsShared:14,GPUShared:60"}, mutate: sharedGPUs},
		{name: "O-gpu-shared-partition", args: []string{"-O", "Partition:8,GPUsShared:14,NodeList"}, mutate: sharedGPUs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := slurmfmttest.Cluster()
			if tt.mutate != nil {
				tt.mutate(fake)
			}
			out, errOut, err := exec(t, fake, tt.args...)
			if err != nil {
				t.Fatalf("sinfo %v: %v (stderr %q)", tt.args, err, errOut)
			}
			if errOut != "" {
				t.Errorf("stderr = %q, want empty", errOut)
			}
			golden(t, tt.name, out)
		})
	}
}

// TestMatchesSlurm compares with what Slurm 22.05 printed for the same
// cluster, byte for byte.
func TestMatchesSlurm(t *testing.T) {
	tests := []struct {
		sample string
		args   []string
	}{
		{sample: "sinfo.txt"},
		{sample: "sinfo-N-l.txt", args: []string{"-N", "-l"}},
		{sample: "sinfo-N-o-gres.txt", args: []string{"-N", "-o", "%N %T %C %G %E"}},
	}
	for _, tt := range tests {
		t.Run(tt.sample, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", "slurm", tt.sample))
			if err != nil {
				t.Fatal(err)
			}
			got, errOut, err := exec(t, slurmfmttest.Reference(false), tt.args...)
			if err != nil {
				t.Fatalf("sinfo: %v (stderr %q)", err, errOut)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("differs from Slurm's %s (-slurm +tide):\n%s", tt.sample, diff)
			}
		})
	}
}

func TestGPUCounts(t *testing.T) {
	fake := slurmfmttest.Cluster()
	troubled(fake)
	out, _, err := exec(t, fake, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Nodes []struct {
			Name string
			A    int `json:"gpus_alloc"`
			I    int `json:"gpus_idle"`
			T    int `json:"gpus_total"`
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string][3]int{
		"gpu01": {4, 4, 8}, // four allocated
		"gpu02": {4, 4, 8},
		"gpu03": {2, 0, 8}, // not responding: nothing idle
		"gpu04": {0, 0, 8}, // drained
		"gpu05": {0, 0, 8}, // down
	}
	for _, n := range got.Nodes {
		if diff := cmp.Diff(want[n.Name], [3]int{n.A, n.I, n.T}); diff != "" {
			t.Errorf("%s A/I/T (-want +got):\n%s", n.Name, diff)
		}
	}
	// Healthy and responding, gpu03 would have five idle GPUs: eight
	// minus two allocated minus one unhealthy.
	fake = slurmfmttest.Cluster()
	out, _, err = exec(t, fake, "-N", "-n", "gpu03", "-h", "-O", "GPUsState:8")
	if err != nil {
		t.Fatal(err)
	}
	if out != "2/5/8   \n" {
		t.Errorf("gpu03 GPUS(A/I/T) = %q, want 2/5/8", out)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		fakeErr  error
		wantErr  string
		wantCode int
	}{
		{name: "bad state", args: []string{"-t", "idle,sleepy"}, wantErr: "Invalid node state specified: sleepy", wantCode: 1},
		{name: "bad letter", args: []string{"-o", "%P %j"}, wantErr: "Invalid node format specification: j", wantCode: 1},
		{name: "bad long field", args: []string{"-O", "Partition,Bogus"}, wantErr: "Invalid node format specification: Bogus", wantCode: 1},
		{name: "bad sort", args: []string{"-S", "Q"}, wantErr: "Invalid sort specification: Q", wantCode: 1},
		{name: "bad nodes", args: []string{"-n", "gpu[1-"}, wantErr: "invalid entry for --nodes", wantCode: 1},
		{name: "stray argument", args: []string{"gpu01"}, wantErr: "Unrecognized option", wantCode: 2},
		{name: "controller down", fakeErr: api.Errorf(api.ErrUnavailable, "connection refused"), wantErr: "slurm_load_node error: connection refused", wantCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := slurmfmttest.Cluster()
			fake.Err = tt.fakeErr
			out, _, err := exec(t, fake, tt.args...)
			if err == nil {
				t.Fatalf("sinfo %v succeeded: %q", tt.args, out)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %q, want it to contain %q", err, tt.wantErr)
			}
			if code := cmdutil.ExitCode(err); code != tt.wantCode {
				t.Errorf("exit code = %d, want %d", code, tt.wantCode)
			}
			if tt.fakeErr != nil && !errors.Is(err, api.ErrUnavailable) {
				t.Errorf("error %v does not wrap the controller's error", err)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		format string
		sort   int
	}{
		{name: "default", format: DefaultFormat},
		{name: "long", args: []string{"-l"}, format: LongFormat},
		{name: "node", args: []string{"--Node"}, format: NodeFormat},
		{name: "node long", args: []string{"-Nl"}, format: NodeLongFormat},
		{name: "summarize", args: []string{"--summarize"}, format: SummarizeFormat},
		{name: "reasons", args: []string{"-R"}, format: ReasonsFormat},
		{name: "format wins", args: []string{"-N", "-o", "%N"}, format: "%N"},
		{name: "partitions alias", args: []string{"--partitions=gpu", "--Format=NodeList"}, format: "NodeList"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := clitest.Factory(slurmfmttest.Cluster(), nil)
			var got *plan
			cmd := newCmd(f, func(_ context.Context, o *Options) error {
				p, err := o.compile(&env{loc: time.UTC})
				got = p
				return err
			})
			cmd.SetArgs(append([]string{}, tt.args...))
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if got.format != tt.format {
				t.Errorf("format = %q, want %q", got.format, tt.format)
			}
		})
	}
}

func TestIterate(t *testing.T) {
	f, bufs := clitest.Factory(slurmfmttest.Cluster(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rounds := 0
	cmd := newCmd(f, func(ctx context.Context, o *Options) error {
		o.Sleep = func(ctx context.Context, d time.Duration) error {
			rounds++
			if rounds == 3 {
				cancel()
				return ctx.Err()
			}
			return nil
		}
		return run(ctx, o)
	})
	cmd.SetArgs([]string{"-i", "2", "-s", "-p", "debug"})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	round := "Sun Nov 29 19:31:17 2026\n" +
		"PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T)  NODELIST\n" +
		"debug        up    1:00:00          2/0/0/2  gpu[01-02]\n\n"
	if want := strings.Repeat(round, 3); bufs.Out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", bufs.Out.String(), want)
	}
}
