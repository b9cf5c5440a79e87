package ctld

import (
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestRecoveryGrace: a controller that recovered jobs holds its first
// pass until every node has registered or the grace runs out; one that
// recovered none (a new cluster) does not wait.
func TestRecoveryGrace(t *testing.T) {
	h := newHarness(t)
	now := h.clock.now()
	if d := h.s.passHeld(now); d != 0 {
		t.Fatalf("new cluster: pass held %v", d)
	}
	h.submit(api.JobSpec{GPUs: 1})
	h.restart() // recovers the job: the grace starts
	now = h.clock.now()
	if d := h.s.passHeld(now); d != recoveryGraceMax {
		t.Fatalf("after recovery, no node back: held %v, want %v", d, recoveryGraceMax)
	}
	h.register("gpu01")
	if d := h.s.passHeld(now.Add(time.Second)); d != recoveryGraceMax-time.Second {
		t.Fatalf("one node of two back: held %v", d)
	}
	h.register("gpu02")
	if d := h.s.passHeld(now.Add(time.Second)); d != 0 {
		t.Fatalf("every node back: held %v, want 0", d)
	}

	h.restart()
	now = h.clock.now()
	if d := h.s.passHeld(now.Add(recoveryGraceMax)); d != 0 {
		t.Fatalf("grace over, nodes still away: held %v, want 0", d)
	}
	if d := h.s.passHeld(now); d != 0 {
		t.Fatalf("the grace ends once: held %v after it ended", d)
	}
}
