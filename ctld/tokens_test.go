package ctld

import (
	"context"
	"sync"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestSubmitTokenIdempotent: a repeated submission with the same token
// gets the first one's job, before and after a controller restart, even
// when the first job now makes a new one fail its checks; the same token
// of another user, or no token, is a new job.
func TestSubmitTokenIdempotent(t *testing.T) {
	h := newHarnessWith(t, shareConfig)
	spec := api.JobSpec{Script: "#!/bin/sh\ntrue\n", WorkDir: "/home/bob"}
	submit := func(c caller, token string) uint64 {
		t.Helper()
		resp, err := h.s.submit(context.Background(), c, api.SubmitRequest{Spec: spec, Token: token})
		if err != nil {
			t.Fatal(err)
		}
		return resp.JobID
	}
	first := submit(bob, "tok-1")
	if again := submit(bob, "tok-1"); again != first {
		t.Fatalf("repeat got job %d, first was %d", again, first)
	}
	// bob's queue allows two jobs: a repeat is no third.
	second := submit(bob, "tok-2")
	if again := submit(bob, "tok-2"); again != second {
		t.Fatalf("repeat at the submit limit got %d, want %d", again, second)
	}
	h.restart()
	if again := submit(bob, "tok-1"); again != first {
		t.Fatalf("after restart the repeat got %d, want %d", again, first)
	}
	if other := submit(h.alice, "tok-1"); other == first {
		t.Fatal("another user's token matched bob's job")
	}
	h.s.mu.Lock()
	n := 0
	for _, j := range h.s.jobs {
		if j.UserID == bob.uid {
			n++
		}
	}
	h.s.mu.Unlock()
	if n != 2 {
		t.Fatalf("bob has %d jobs, want 2", n)
	}
}

// TestSubmitTokenTwins: concurrent submissions with one token make one
// job and all get its id.
func TestSubmitTokenTwins(t *testing.T) {
	h := newHarness(t)
	const twins = 16
	ids := make([]uint64, twins)
	var wg sync.WaitGroup
	for i := range twins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := h.s.submit(context.Background(), h.alice, api.SubmitRequest{Token: "same",
				Spec: api.JobSpec{Script: "#!/bin/sh\ntrue\n", WorkDir: "/home/alice"}})
			if err != nil {
				t.Error(err)
			}
			ids[i] = resp.JobID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || id == 0 {
			t.Fatalf("twins got %v", ids)
		}
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if len(h.s.jobs) != 1 {
		t.Fatalf("%d jobs", len(h.s.jobs))
	}
}

// TestSubmitTokenForgotten: a token leaves memory with its job.
func TestSubmitTokenForgotten(t *testing.T) {
	h := newHarness(t)
	resp, err := h.s.submit(context.Background(), h.alice, api.SubmitRequest{Token: "t",
		Spec: api.JobSpec{Script: "#!/bin/sh\ntrue\n", WorkDir: "/home/alice"}})
	if err != nil {
		t.Fatal(err)
	}
	h.s.cancel(h.alice, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{resp.JobID}}})
	h.clock.add(h.s.cl.Timeouts.MinJobAge * 2)
	h.s.mu.Lock()
	h.s.forgetOldJobs(h.clock.now())
	left := len(h.s.tokens)
	h.s.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d tokens left", left)
	}
}
