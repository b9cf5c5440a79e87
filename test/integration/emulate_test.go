package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
)

// TestEmulatedFleet drives the real controller with one tided emulating
// 50 nodes (issue 26, tided --emulate): the controller's partitions,
// nodes and switch tree come from tided emulate-config; every node
// registers over the node protocol and goes idle; 200 jobs of 4 GPUs
// (two waves on 400 GPUs) all complete through the emulated runtime, on
// many nodes; a job that runs until cancelled is cancelled by scancel.
func TestEmulatedFleet(t *testing.T) {
	if netnsMode {
		t.Skip("one process emulates every node on this host: the netns mode adds nothing here")
	}
	const nodes, jobs = 50, 200
	dir, err := os.MkdirTemp("", "tide-it-emu-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	port := freePort(t)
	key := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(key, []byte("integration-test-key-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	topo, err := exec.Command(filepath.Join(binDir, "tided"), "emulate-config", "--emulate", fmt.Sprint(nodes),
		"--emulate-leaf", "8", "--partition", "emu").CombinedOutput()
	if err != nil {
		t.Fatalf("tided emulate-config: %v\n%s", err, topo)
	}
	if !strings.Contains(string(topo), `nodes: "emu[0001-0050]"`) || !strings.Contains(string(topo), `{name: spine, switches: "leaf[01-07]"}`) {
		t.Fatalf("emulate-config wrote:\n%s", topo)
	}
	socket := filepath.Join(dir, "ctld.sock")
	root := os.Getuid() == 0
	storeYAML, _ := newStore(t, false) // before the daemons' stops are registered: they run first
	cfg := fmt.Sprintf(`version: 1
cluster_name: emu
state_dir: %s/ctld
%ssocket: %s
node_addr: 127.0.0.1:%d
tls: {mode: off}
key_file: %s
allow_root_jobs: %v
timeouts: {node: 30s, kill_wait: 2s, min_job_age: 5m}
scheduler: {interval: 200ms}
%s`, dir, storeYAML, socket, port, key, root, topo)
	if err := os.WriteFile(filepath.Join(dir, "tide.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func(name string, args ...string) *exec.Cmd {
		log, _ := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		cmd := exec.Command(filepath.Join(binDir, name), args...)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			kill(cmd, syscall.SIGTERM)
			if t.Failed() {
				b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
				if len(b) > 6000 {
					b = b[len(b)-6000:]
				}
				t.Logf("--- %s.log (tail)\n%s", name, b)
			}
		})
		return cmd
	}
	start("tidectld", "--config", filepath.Join(dir, "tide.yaml"))
	c := client.NewUnix(socket)
	ctx := context.Background()
	eventually := func(d time.Duration, what string, f func() bool) {
		t.Helper()
		for deadline := time.Now().Add(d); !f(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out after %s waiting for: %s", d, what)
			}
		}
	}
	eventually(10*time.Second, "the controller answers", func() bool { _, err := c.Cluster(ctx); return err == nil })
	start("tided", "--config", "/dev/null", "--controller", fmt.Sprintf("127.0.0.1:%d", port), "--key-file", key,
		"--state-dir", filepath.Join(dir, "nodes"), "--heartbeat", "2s", fmt.Sprintf("--allow-root-jobs=%v", root),
		"--emulate", fmt.Sprint(nodes), "--emulate-gpus", "8", "--emulate-duration", "100ms")
	eventually(30*time.Second, "every emulated node idle", func() bool {
		nl, err := c.Nodes(ctx)
		if err != nil || len(nl.Nodes) != nodes {
			return false
		}
		for _, n := range nl.Nodes {
			if n.State != api.NodeIdle {
				return false
			}
		}
		return true
	})
	nl, _ := c.Nodes(ctx)
	if n := nl.Nodes[0]; !strings.HasPrefix(n.Name, "emu00") || len(n.GPUs) != 8 {
		t.Errorf("node %s has %d GPUs, want an emulated name with 8", n.Name, len(n.GPUs))
	}

	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o777)
	os.Chmod(work, 0o777)
	spec := api.JobSpec{Name: "emu", Script: "#!/bin/sh\n#SBATCH --comment=tide-emulate:1s\nexit 3\n", WorkDir: work, GPUs: 4}
	ids := make([]uint64, 0, jobs)
	for range jobs {
		r, err := c.Submit(ctx, api.SubmitRequest{Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.JobID)
	}
	forever := spec
	forever.Environment = []string{"TIDE_EMULATE=inf"}
	r, err := c.Submit(ctx, api.SubmitRequest{Spec: forever})
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]bool{}
	eventually(2*time.Minute, "every job finished", func() bool {
		jl, err := c.Jobs(ctx, api.JobFilter{IDs: ids, All: true})
		if err != nil {
			return false
		}
		for _, j := range jl.Jobs {
			if !j.State.Terminal() {
				return false
			}
		}
		for _, j := range jl.Jobs {
			if j.State != api.StateCompleted || j.Exit != (api.ExitStatus{}) {
				t.Fatalf("job %d ended %s (%s %s), exit %s; want COMPLETED 0:0 (an emulated job runs no script)",
					j.ID, j.State, j.Reason, j.ReasonDetail, j.Exit)
			}
			hosts[j.BatchHost()] = true
		}
		return len(jl.Jobs) == jobs
	})
	// Two waves of 4-GPU jobs over 50 nodes of 8: the jobs spread over
	// most of the fleet (pack fills each node with two).
	if len(hosts) < nodes/2 {
		t.Errorf("the %d jobs ran on %d nodes, want at least %d", jobs, len(hosts), nodes/2)
	}
	if j, _ := c.Job(ctx, r.JobID); j.State != api.StateRunning {
		t.Fatalf("job %d (TIDE_EMULATE=inf) is %s, want RUNNING until cancelled", r.JobID, j.State)
	}
	if _, err := c.Cancel(ctx, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{r.JobID}}}); err != nil {
		t.Fatal(err)
	}
	eventually(30*time.Second, "the cancelled job ended", func() bool {
		j, err := c.Job(ctx, r.JobID)
		return err == nil && j.State == api.StateCancelled
	})
	// Nothing ran: no output file in the work directory.
	if entries, _ := os.ReadDir(work); len(entries) != 0 {
		t.Errorf("the work directory holds %d entries; emulated jobs write none", len(entries))
	}
}
