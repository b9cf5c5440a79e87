package ctld

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tide-hpc/tide/accounting"
	"github.com/tide-hpc/tide/ctld/api"
)

// laneTimeout bounds how long a test waits for a submission that must
// not wait for the server's lock: long enough for any loaded machine; a
// submission that waits for the lock never returns while the test holds
// it.
const laneTimeout = time.Minute

// submitAsync submits spec as alice (with token, when not empty) in a
// goroutine of its own.
func (h *harness) submitAsync(token string, spec api.JobSpec) <-chan submitResult {
	if spec.Script == "" {
		spec.Script = "#!/bin/sh\ntrue\n"
	}
	if spec.WorkDir == "" {
		spec.WorkDir = "/home/alice"
	}
	out := make(chan submitResult, 1)
	go func() {
		resp, err := h.s.submit(context.Background(), h.alice, api.SubmitRequest{Token: token, Spec: spec})
		out <- submitResult{resp, err}
	}()
	return out
}

// warmCapacity builds the capacity lists submissions are checked
// against, which a submission builds under the lock when a registration
// retired them.
func (h *harness) warmCapacity() {
	for _, p := range h.s.partitions {
		h.s.partCapacity(p)
	}
}

type submitResult struct {
	resp api.SubmitResponse
	err  error
}

// await is the submission's result, failing the test (after unlocking
// mu when held) if it does not come.
func (h *harness) await(r <-chan submitResult, held bool) submitResult {
	h.t.Helper()
	select {
	case res := <-r:
		return res
	case <-time.After(laneTimeout):
		if held {
			h.s.mu.Unlock()
		}
		h.t.Fatal("the submission was not answered while the server's lock was held")
		return submitResult{}
	}
}

// TestSubmitWithoutServerLock: a submission that needs nothing the
// server's lock guards (no dependency, no queue) is stored and answered
// while a scheduling pass holds the lock, and the next holder of the
// lock finds the job in the job table; one with a dependency is checked
// under the lock, once it is free.
func TestSubmitWithoutServerLock(t *testing.T) {
	h := newHarness(t)
	first := h.submit(api.JobSpec{}) // builds the capacity lists too
	h.s.mu.Lock()                    // a pass in progress
	res := h.await(h.submitAsync("tok", api.JobSpec{Name: "lane"}), true)
	if res.err != nil {
		h.s.mu.Unlock()
		t.Fatal(res.err)
	}
	id := res.resp.JobID
	_, inTable := h.s.jobs[id]
	dep := h.submitAsync("", api.JobSpec{Dependency: "afterok:" + strconv.FormatUint(first, 10)})
	time.Sleep(10 * time.Millisecond) // time to reach the lock
	select {
	case r := <-dep:
		h.s.mu.Unlock()
		t.Fatalf("a submission with a dependency was answered while the lock was held: %+v, %v", r.resp, r.err)
	default:
	}
	h.s.mu.Unlock()
	if id <= first {
		t.Errorf("job id %d after %d", id, first)
	}
	if inTable {
		t.Errorf("job %d in the job table while the pass held the lock", id)
	}
	stored, err := h.s.store.QueryJobs(context.Background(), api.JobFilter{IDs: []uint64{id}})
	if err != nil || len(stored) != 1 || stored[0].Name != "lane" {
		t.Fatalf("job %d answered but stored as %+v (%v)", id, stored, err)
	}
	j := h.job(id) // takes the lock: the job is merged
	if j.Name != "lane" || j.State != api.StatePending || j.SubmitToken != "tok" {
		t.Errorf("merged job %+v", j)
	}
	if j.Script != "" || j.Environment != nil {
		t.Errorf("the merged job keeps its script or environment: %q %v", j.Script, j.Environment)
	}
	script, _, err := h.s.store.Spool(context.Background(), id)
	if err != nil || script != "#!/bin/sh\ntrue\n" {
		t.Errorf("spool of job %d: %q, %v", id, script, err)
	}
	// The same token again answers with the same job.
	again := h.await(h.submitAsync("tok", api.JobSpec{Name: "lane"}), false)
	if again.err != nil || again.resp.JobID != id {
		t.Errorf("repeat of the submission: job %d, %v; want %d", again.resp.JobID, again.err, id)
	}
	d := h.await(dep, false)
	if d.err != nil {
		t.Fatal(d.err)
	}
	if j := h.job(d.resp.JobID); j.Dependency == "" || j.Reason != api.ReasonDependency {
		t.Errorf("job with a dependency: %q, reason %s", j.Dependency, j.Reason)
	}
}

// TestSubmitLaneTwinsWhileLocked: twins of one submission (the same
// token) answered while the server's lock is held get one job.
func TestSubmitLaneTwinsWhileLocked(t *testing.T) {
	h := newHarness(t)
	const twins = 8
	h.warmCapacity()
	h.s.mu.Lock()
	results := make([]<-chan submitResult, twins)
	for i := range results {
		results[i] = h.submitAsync("same", api.JobSpec{})
	}
	ids := map[uint64]bool{}
	for _, r := range results {
		res := h.await(r, true)
		if res.err != nil {
			h.s.mu.Unlock()
			t.Fatal(res.err)
		}
		ids[res.resp.JobID] = true
	}
	h.s.mu.Unlock()
	if len(ids) != 1 {
		t.Fatalf("twins got jobs %v", ids)
	}
	h.s.mu.Lock()
	n := len(h.s.jobs)
	h.s.mu.Unlock()
	if n != 1 {
		t.Errorf("%d jobs in memory, want 1", n)
	}
	stored, err := h.s.store.QueryJobs(context.Background(), api.JobFilter{All: true})
	if err != nil || len(stored) != 1 {
		t.Errorf("%d jobs stored (%v), want 1", len(stored), err)
	}
}

// TestSubmitLaneNotStored: a submission whose commit fails is refused,
// never reaches the job table, and gives its token up, so that the
// client's retry makes the job.
func TestSubmitLaneNotStored(t *testing.T) {
	h := newHarness(t)
	write := h.s.submits.write
	var mu sync.Mutex
	fail := true
	h.s.submits.write = func(ctx context.Context, b *accounting.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return errors.New("disk full")
		}
		return write(ctx, b)
	}
	h.warmCapacity()
	h.s.mu.Lock()
	res := h.await(h.submitAsync("retry", api.JobSpec{}), true)
	h.s.mu.Unlock()
	if !errors.Is(res.err, api.ErrUnavailable) {
		t.Fatalf("failed commit answered %+v, %v", res.resp, res.err)
	}
	h.s.mu.Lock()
	n := len(h.s.jobs)
	h.s.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d jobs in memory after a failed commit", n)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	ok := h.await(h.submitAsync("retry", api.JobSpec{}), false)
	if ok.err != nil || ok.resp.JobID == 0 {
		t.Fatalf("retry: %+v, %v", ok.resp, ok.err)
	}
	if j := h.job(ok.resp.JobID); j.SubmitToken != "retry" {
		t.Errorf("retried job's token %q", j.SubmitToken)
	}
}
