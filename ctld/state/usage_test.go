package state

import (
	"math"
	"testing"
	"time"
)

var u0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

// TestUsageDecay: one GPU-hour used just now counts 3600 GPU-seconds,
// half of that a half-life later, a quarter after two.
func TestUsageDecay(t *testing.T) {
	u := NewUsage(time.Hour, u0)
	u.Charge("a", 1, u0.Add(-time.Hour), u0)
	// ∫ over the last hour of 2^(−age/1h): 3600/ln2 × (1 − 1/2).
	want := 3600 / math.Ln2 * 0.5
	if got := u.Of("a"); !near(got, want) {
		t.Fatalf("usage now = %v, want %v", got, want)
	}
	u.Advance(u0.Add(time.Hour), nil)
	if got := u.Of("a"); !near(got, want/2) {
		t.Errorf("after one half-life = %v, want %v", got, want/2)
	}
	u.Advance(u0.Add(2*time.Hour), nil)
	if got := u.Of("a"); !near(got, want/4) {
		t.Errorf("after two half-lives = %v, want %v", got, want/4)
	}
}

// TestUsageAdvanceIsExact: charging a running job pass by pass gives
// the same figure as charging its whole run at once, however the passes
// fall, and a job that started between passes is charged from its start.
func TestUsageAdvanceIsExact(t *testing.T) {
	for _, steps := range []int{1, 3, 17, 600} {
		u := NewUsage(2*time.Hour, u0)
		start := u0.Add(7 * time.Minute)
		end := u0.Add(5 * time.Hour)
		for k := 1; k <= steps; k++ {
			now := u0.Add(time.Duration(k) * 5 * time.Hour / time.Duration(steps))
			var run []Running
			if now.After(start) {
				run = []Running{{Account: "a", GPUs: 8, Start: start}}
			}
			u.Advance(now, run)
		}
		ref := NewUsage(2*time.Hour, end)
		ref.Charge("a", 8, start, end)
		if got, want := u.Of("a"), ref.Of("a"); !near(got, want) {
			t.Errorf("%d passes: %v, want %v (charged at once)", steps, got, want)
		}
	}
}

// TestUsageRefusesNonsense: a clock stepped back, negative or NaN GPUs,
// an empty or future interval mint nothing.
func TestUsageRefusesNonsense(t *testing.T) {
	u := NewUsage(0, u0)
	if u.HalfLife() != DefaultUsageHalfLife {
		t.Fatalf("half-life %v, want the default", u.HalfLife())
	}
	u.Advance(u0.Add(-time.Hour), []Running{{Account: "a", GPUs: 1, Start: u0.Add(-2 * time.Hour)}})
	u.Charge("a", -1, u0.Add(-time.Hour), u0)
	u.Charge("a", math.NaN(), u0.Add(-time.Hour), u0)
	u.Charge("a", math.Inf(1), u0.Add(-time.Hour), u0)
	u.Charge("a", 1, u0, u0.Add(-time.Hour))
	u.Charge("a", 1, u0.Add(time.Hour), u0.Add(2*time.Hour))
	if len(u.Map()) != 0 {
		t.Fatalf("usage %v, want none", u.Map())
	}
	// Use that runs past the last instant is charged up to it only.
	u.Charge("b", 1, u0.Add(-time.Minute), u0.Add(time.Hour))
	ref := NewUsage(0, u0)
	ref.Charge("b", 1, u0.Add(-time.Minute), u0)
	if !near(u.Of("b"), ref.Of("b")) {
		t.Errorf("future part charged: %v, want %v", u.Of("b"), ref.Of("b"))
	}
}

// TestUsageForgets: an account idle for many half-lives leaves the map.
func TestUsageForgets(t *testing.T) {
	u := NewUsage(time.Hour, u0)
	u.Charge("a", 1, u0.Add(-time.Second), u0)
	u.Advance(u0.Add(100*time.Hour), nil)
	if _, ok := u.Map()["a"]; ok {
		t.Errorf("account idle 100 half-lives still in the map: %v", u.Map())
	}
}

// TestUsageEnded: a job that ends between passes is charged up to its
// end, and the next Advance decays that to the same figure as charging
// the whole run at once.
func TestUsageEnded(t *testing.T) {
	u := NewUsage(time.Hour, u0.Add(-time.Hour))
	r := Running{Account: "a", GPUs: 2, Start: u0.Add(-30 * time.Minute)}
	u.Advance(u0, []Running{r})
	end := u0.Add(20 * time.Minute)
	u.Ended(r, end)
	u.Advance(u0.Add(time.Hour), nil)
	ref := NewUsage(time.Hour, u0.Add(time.Hour))
	ref.Charge("a", 2, r.Start, end)
	if got, want := u.Of("a"), ref.Of("a"); !near(got, want) {
		t.Errorf("usage %v, want %v", got, want)
	}
}
