package ctld

import (
	"math"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestFairShareUsage: the passes charge a running job's GPUs to its
// account (8 GPUs × 5 min, barely decayed over a 7-day half-life), hand
// the figure to the core, and a restarted controller rebuilds it from
// accounting rather than forget it.
func TestFairShareUsage(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	id := h.submit(api.JobSpec{GPUs: 8, Account: "ra"})
	h.s.schedulePass()
	j := h.job(id)
	if j.State != api.StateRunning {
		t.Fatalf("job %d: %s, want RUNNING", id, j.State)
	}
	h.sync(j.BatchHost(), running(id, 0))
	h.clock.add(5 * time.Minute)
	h.submit(api.JobSpec{GPUs: 1, Account: "rb"})
	h.s.schedulePass()
	usage := func() (ra, rb float64) {
		h.s.mu.Lock()
		defer h.s.mu.Unlock()
		return h.s.fair.u.Of("ra"), h.s.fair.u.Of("rb")
	}
	ra, rb := usage()
	if want := 8 * 300.0; math.Abs(ra-want) > 0.01*want {
		t.Errorf("account ra charged %.1f GPU-seconds, want about %.0f", ra, want)
	}
	if rb > 1 {
		// The one-GPU job started at this pass: nothing run yet.
		t.Errorf("account rb charged %.1f before running", rb)
	}

	h.sync(j.BatchHost(), finished(id, 0))
	h.s.schedulePass()
	before, _ := usage()
	h.restart()
	h.s.schedulePass()
	deadline := time.Now().Add(10 * time.Second)
	for {
		after, _ := usage()
		if math.Abs(after-before) <= 0.01*before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a restart account ra has %.1f GPU-seconds, want about %.1f (rebuilt from accounting)", after, before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
