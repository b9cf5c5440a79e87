package ctld

import (
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestBackfillPolicy runs scheduler.policy through the controller: the
// snapshot must carry the running jobs' releases (start + time limit)
// for backfill to compute when a blocked job can start.
//
// gpu01 runs an 8-GPU job and gpu02 a 4-GPU job, both ending one hour
// after t0. Ten minutes later a 2-node job is blocked until then (its
// reservation holds both nodes); a 10-minute job ends before that and
// backfills onto gpu02, a 1-hour one would delay it and waits.
func TestBackfillPolicy(t *testing.T) {
	tests := []struct {
		name       string
		policy     string
		shortState api.JobState
		shortWhy   api.ReasonCode
	}{
		{name: "backfill", policy: "backfill", shortState: api.StateRunning, shortWhy: api.ReasonNone},
		{name: "tide", policy: "tide", shortState: api.StateRunning, shortWhy: api.ReasonNone},
		{name: "priority", policy: "priority", shortState: api.StatePending, shortWhy: api.ReasonPriority},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessWith(t, testConfig+"scheduler: {policy: "+tc.policy+"}\n")
			h.register("gpu01")
			h.register("gpu02")
			full := h.submit(api.JobSpec{GPUs: 8, TimeLimit: 3600})
			half := h.submit(api.JobSpec{GPUs: 4, TimeLimit: 3600})
			h.s.schedulePass()
			for _, id := range []uint64{full, half} {
				if j := h.job(id); j.State != api.StateRunning {
					t.Fatalf("job %d: %s %s, want RUNNING", id, j.State, j.Reason)
				}
			}
			h.sync("gpu01", running(full, 0))
			h.sync("gpu02", running(half, 0))

			h.clock.add(10 * time.Minute)
			big := h.submit(api.JobSpec{Nodes: 2, GPUsPerNode: 8, TimeLimit: 600})
			short := h.submit(api.JobSpec{GPUs: 2, TimeLimit: 600})
			long := h.submit(api.JobSpec{GPUs: 2, TimeLimit: 3600})
			h.s.schedulePass()

			if j := h.job(big); j.State != api.StatePending || j.Reason != api.ReasonResources {
				t.Errorf("big job: %s %s, want PENDING Resources", j.State, j.Reason)
			}
			if j := h.job(short); j.State != tc.shortState || j.Reason != tc.shortWhy {
				t.Errorf("short job: %s %s, want %s %s", j.State, j.Reason, tc.shortState, tc.shortWhy)
			} else if j.State == api.StateRunning && j.Alloc[0].Node != "gpu02" {
				t.Errorf("short job on %s, want gpu02", j.Alloc[0].Node)
			}
			if j := h.job(long); j.State != api.StatePending || j.Reason != api.ReasonPriority {
				t.Errorf("long job: %s %s, want PENDING Priority", j.State, j.Reason)
			}
		})
	}
}

// TestReleasesFromRunningJobs checks what the snapshot tells backfill:
// each active job's resources per node at start + time limit.
func TestReleasesFromRunningJobs(t *testing.T) {
	h := newHarnessWith(t, testConfig+"scheduler: {policy: backfill}\n")
	h.register("gpu01")
	h.register("gpu02")
	t0 := h.clock.now()
	wide := h.submit(api.JobSpec{Nodes: 2, GPUsPerNode: 2, CPUsPerGPU: 1, TimeLimit: 1200})
	h.s.schedulePass()
	if j := h.job(wide); j.State != api.StateRunning {
		t.Fatalf("job: %s %s", j.State, j.Reason)
	}
	h.s.mu.Lock()
	snap := h.s.snapshot()
	h.s.mu.Unlock()
	for _, n := range snap.Nodes {
		if len(n.Releases) != 1 {
			t.Fatalf("%s: releases %+v, want one", n.Name, n.Releases)
		}
		r := n.Releases[0]
		if !r.At.Equal(t0.Add(20*time.Minute)) || len(r.GPUs) != 2 || r.CPUs != 2 {
			t.Errorf("%s: release %+v, want 2 CPUs and 2 GPUs at t0+20m", n.Name, r)
		}
	}
}
