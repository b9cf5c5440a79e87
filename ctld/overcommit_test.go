package ctld

import (
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// registerTmp registers node (8 CPUs, 8 GPUs as register does) with
// tmpMB of temporary disk.
func (h *harness) registerTmp(node string, tmpMB int64) error {
	h.t.Helper()
	gpus, _ := gres.Fake(node, gres.FakeConfig{Count: 8})
	_, err := h.s.register(api.NodeRegistration{Name: node, CPUs: 8, MemoryMB: 64 * 1024, TmpDiskMB: tmpMB, GPUs: gpus})
	return err
}

// TestOvercommitMinCPUsTmp: the controller refuses hostile values of
// --mincpus and --tmp (and a node's temporary disk) as malformed, what
// no node can give as impossible, keeps each node's reported TmpDisk,
// and runs --overcommit jobs with more tasks than CPUs, --mincpus and
// --tmp jobs where they fit.
func TestOvercommitMinCPUsTmp(t *testing.T) {
	h := newHarness(t)
	// Before any node has said how much temporary disk it has, --tmp
	// is not judged: the job waits for the nodes.
	early := h.submit(api.JobSpec{TmpDiskMB: 999999})

	for _, tmp := range []int64{-1, api.MaxMemMB + 1} {
		if err := h.registerTmp("gpu01", tmp); err == nil || !strings.Contains(err.Error(), "temporary disk") {
			t.Errorf("registration with %d MB of temporary disk: %v, want it refused", tmp, err)
		}
	}
	if err := h.registerTmp("gpu01", 2048); err != nil {
		t.Fatal(err)
	}
	if err := h.registerTmp("gpu02", 100000); err != nil {
		t.Fatal(err)
	}
	if got := h.s.nodes["gpu01"].TmpDiskMB; got != 2048 {
		t.Errorf("gpu01 TmpDiskMB = %d, want 2048", got)
	}
	h.s.schedulePass()
	if j := h.job(early); j.State != api.StatePending || j.Reason != api.ReasonBadConstraints || !strings.Contains(j.ReasonDetail, "temporary disk") {
		t.Errorf("--tmp=999999 submitted before registration: %s %s %q", j.State, j.Reason, j.ReasonDetail)
	}

	for _, tt := range []struct {
		name    string
		spec    api.JobSpec
		wantErr string
	}{
		{"negative --mincpus", api.JobSpec{MinCPUs: -1}, "--mincpus=-1 is not between 0 and"},
		{"huge --mincpus", api.JobSpec{MinCPUs: 1 << 30}, "--mincpus=1073741824 is not between 0 and"},
		{"negative --tmp", api.JobSpec{TmpDiskMB: -5}, "--tmp=-5M is not between 0 and"},
		{"huge --tmp", api.JobSpec{TmpDiskMB: api.MaxMemMB + 1}, "is not between 0 and"},
		{"--mincpus no node has", api.JobSpec{MinCPUs: 999999}, "Requested node configuration is not available (999999 CPUs per node requested"},
		{"--tmp no node has", api.JobSpec{TmpDiskMB: 999999}, "Requested node configuration is not available (999999 MB of temporary disk per node requested (--tmp)"},
		{"more tasks than CPUs without --overcommit", api.JobSpec{NodeList: []string{"gpu01"}, Nodes: 1, Tasks: 9},
			"Requested node configuration is not available (required node gpu01 can never hold 9 CPUs"},
		{"--overcommit past MaxTasksPerNode on one node", api.JobSpec{Nodes: 1, Tasks: 513, Overcommit: true},
			"Requested node configuration is not available (513 tasks per node requested (--overcommit)"},
	} {
		if _, err := h.trySubmit(tt.spec); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
		}
	}

	over := h.submit(api.JobSpec{NodeList: []string{"gpu01"}, Nodes: 1, Tasks: 9, CPUsPerTask: 2, Overcommit: true})
	minc := h.submit(api.JobSpec{MinCPUs: 4})
	tmp := h.submit(api.JobSpec{TmpDiskMB: 50000})
	h.s.schedulePass()
	if j := h.job(over); j.State != api.StateRunning || len(j.Alloc) != 1 || j.Alloc[0].Node != "gpu01" || j.Alloc[0].CPUs != 2 || j.Alloc[0].Tasks != 9 {
		t.Errorf("-w gpu01 -n9 -c2 -O: %s %q on %+v, want RUNNING with 2 CPUs and 9 tasks on gpu01", j.State, j.ReasonDetail, j.Alloc)
	}
	if j := h.job(minc); j.State != api.StateRunning || j.AllocCPUs() != 4 {
		t.Errorf("--mincpus=4: %s on %+v, want RUNNING with 4 CPUs", j.State, j.Alloc)
	}
	if j := h.job(tmp); j.State != api.StateRunning || j.BatchHost() != "gpu02" {
		t.Errorf("--tmp=50000: %s on %+v, want RUNNING on gpu02", j.State, j.Alloc)
	}
	// The batch environment learns of --overcommit (SLURM_OVERCOMMIT).
	var launched bool
	for _, l := range h.sync("gpu01").Launch {
		if l.JobID == over {
			launched = true
			if l.Request == nil || !l.Request.Overcommit || l.NumTasks != 9 {
				t.Errorf("launch of the overcommitted job: request %+v, %d tasks", l.Request, l.NumTasks)
			}
		}
	}
	if !launched {
		t.Errorf("gpu01 got no launch of job %d", over)
	}
}
