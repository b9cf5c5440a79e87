package ctld

import (
	"context"
	"net/http"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/api/listing"
)

// storedJob is job id as the store holds it.
func storedJob(t *testing.T, h *harness, id uint64) *api.Job {
	t.Helper()
	jobs, err := h.s.store.LoadJobs(context.Background(), h.clock.now())
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("job %d not in the store", id)
	return nil
}

// A pending job's reason is not written to the store (schedulePass):
// the accounting API (sacct) shows the one in memory, the trail keeps
// the decision, and after a crash the next pass decides it again.
func TestPendingReasonNotStored(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	for range 2 {
		h.submit(api.JobSpec{GPUs: 8})
	}
	h.s.schedulePass()
	waiting := h.submit(api.JobSpec{GPUs: 1})
	h.s.schedulePass()
	if got := h.job(waiting).Reason; got != api.ReasonResources {
		t.Fatalf("reason in memory = %q, want %q", got, api.ReasonResources)
	}
	h.s.mu.Lock()
	h.s.flushAll()
	h.s.mu.Unlock()
	if got := storedJob(t, h, waiting).Reason; got == api.ReasonResources {
		t.Errorf("the pass wrote the pending job's reason to its record")
	}

	w := h.get(uidAlice, "/api/v1/accounting/jobs?all=1", "")
	if w.Code != http.StatusOK {
		t.Fatalf("accounting: %d %s", w.Code, w.Body)
	}
	l, err := listing.ReadJobList(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, j := range l.Jobs {
		if j.ID == waiting {
			found = true
			if j.Reason != api.ReasonResources || j.ReasonDetail == "" {
				t.Errorf("accounting shows reason %q (%q), want %q with its detail", j.Reason, j.ReasonDetail, api.ReasonResources)
			}
		}
	}
	if !found {
		t.Fatalf("accounting does not list job %d", waiting)
	}

	evs, err := h.s.store.Events(context.Background(), waiting)
	if err != nil {
		t.Fatal(err)
	}
	decided := 0
	for _, e := range evs {
		if e.Kind == api.EventPending && e.Reason == string(api.ReasonResources) {
			decided++
		}
	}
	if decided != 1 {
		t.Errorf("trail of job %d: %d pending events for Resources, want 1: %+v", waiting, decided, evs)
	}

	// A crash: the next pass decides the reason again.
	h.restart()
	h.register("gpu01")
	h.register("gpu02")
	h.s.schedulePass()
	if j := h.job(waiting); j.State != api.StatePending || j.Reason != api.ReasonResources {
		t.Errorf("after a crash, job %d is %s (%s), want pending for Resources", waiting, j.State, j.Reason)
	}
}
