package ctld

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

func TestPassThrottleWait(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	tests := []struct {
		name     string
		minGap   time.Duration
		start    time.Time // of the last pass; zero: none yet
		took     time.Duration
		kickedAt time.Duration // after the last pass ended
		want     time.Duration
	}{
		{name: "first pass runs at once", minGap: 20 * ms, kickedAt: 0, want: 0},
		{name: "off", minGap: 0, start: t0, took: 5 * ms, kickedAt: 0, want: 0},
		{name: "right after a short pass", minGap: 20 * ms, start: t0, took: 5 * ms, kickedAt: 0, want: 20 * ms},
		{name: "part of the gap gone", minGap: 20 * ms, start: t0, took: 5 * ms, kickedAt: 15 * ms, want: 5 * ms},
		{name: "after a quiet spell", minGap: 20 * ms, start: t0, took: 5 * ms, kickedAt: 20 * ms, want: 0},
		{name: "long after", minGap: 20 * ms, start: t0, took: 5 * ms, kickedAt: time.Minute, want: 0},
		{name: "a long pass waits three times its length", minGap: 20 * ms, start: t0, took: 300 * ms, kickedAt: 100 * ms, want: 800 * ms},
		{name: "a long pass, quiet since", minGap: 20 * ms, start: t0, took: 300 * ms, kickedAt: 900 * ms, want: 0},
		{name: "a pass of a third of the gap", minGap: 30 * ms, start: t0, took: 10 * ms, kickedAt: 0, want: 30 * ms},
		{name: "a pass just over it", minGap: 30 * ms, start: t0, took: 11 * ms, kickedAt: 0, want: 33 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := passThrottle{minGap: tt.minGap}
			end := t0.Add(tt.took)
			if !tt.start.IsZero() {
				th.ran(tt.start, end)
			}
			if got := th.wait(end.Add(tt.kickedAt)); got != tt.want {
				t.Errorf("wait = %s, want %s", got, tt.want)
			}
		})
	}
}

// passCounter records when the pure core runs, i.e. when a pass with
// pending jobs runs.
type passCounter struct {
	mu     sync.Mutex
	starts []time.Time
}

func (c *passCounter) wrap(s *Server) {
	inner := s.schedule
	s.schedule = func(snap *sched.Snapshot, now time.Time, cfg sched.Config) sched.Plan {
		c.mu.Lock()
		c.starts = append(c.starts, time.Now())
		c.mu.Unlock()
		return inner(snap, now, cfg)
	}
}

func (c *passCounter) get() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.starts...)
}

// startLoop runs the server's scheduling loop until the test ends, with
// min_interval minGap and no periodic pass to speak of.
func startLoop(t *testing.T, h *harness, minGap time.Duration) *passCounter {
	t.Helper()
	// A pending job that cannot start (its nodes never registered)
	// makes every pass run the core.
	h.submit(api.JobSpec{Partition: "gpu", GPUs: 1})
	c := &passCounter{}
	c.wrap(h.s)
	h.s.cl.Scheduler.MinInterval = minGap
	h.s.cl.Scheduler.Interval = time.Hour
	for len(h.s.kick) > 0 {
		<-h.s.kick // the submission's kick: the test kicks itself
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.s.loop(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// waitPasses waits until the passes counted stop changing for quiet.
func waitPasses(c *passCounter, quiet time.Duration) []time.Time {
	last, since := len(c.get()), time.Now()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n := len(c.get()); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > quiet {
			break
		}
	}
	return c.get()
}

// A storm of kicks shares passes: at most one at once, one more after
// each min_interval, and the last kick still gets a pass after it.
func TestKickStormCoalesces(t *testing.T) {
	h := newHarness(t)
	const gap = 200 * time.Millisecond
	c := startLoop(t, h, gap)
	t0 := time.Now()
	var last time.Time
	for i := 0; i < 300; i++ {
		last = time.Now()
		h.s.Kick()
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(t0)
	starts := waitPasses(c, 3*gap)
	// One pass at the first kick, then one per gap at most (the gap
	// runs from a pass's end, so fewer on a slow machine).
	most := 2 + int(elapsed/gap)
	if len(starts) < 2 || len(starts) > most {
		t.Fatalf("%d passes for 300 kicks over %s, want 2 to %d", len(starts), elapsed, most)
	}
	if !starts[len(starts)-1].After(last) {
		t.Errorf("no pass after the last kick (%s): passes at %v", last.Format(time.StampMicro), starts)
	}
	for i := 1; i < len(starts); i++ {
		// Each start is at least gap after the one before began (it
		// is gap after that one ended).
		if d := starts[i].Sub(starts[i-1]); d < gap {
			t.Errorf("passes %d and %d only %s apart, min_interval %s", i-1, i, d, gap)
		}
	}
}

// Without the throttle every kick after a pass has ended gets its own
// pass, as before scheduler.min_interval.
func TestKickUnthrottled(t *testing.T) {
	h := newHarness(t)
	c := startLoop(t, h, 0)
	for i := 1; i <= 5; i++ {
		h.s.Kick()
		for deadline := time.Now().Add(10 * time.Second); len(c.get()) < i && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if n := len(c.get()); n != i {
			t.Fatalf("after kick %d: %d passes, want %d", i, n, i)
		}
	}
}

// The first kick runs its pass at once; a kick right after a pass waits
// for min_interval (here longer than the test).
func TestKickFirstPassNotDelayed(t *testing.T) {
	h := newHarness(t)
	c := startLoop(t, h, time.Hour) // beyond the configurable range: a kick after a pass would wait an hour
	h.s.Kick()
	for deadline := time.Now().Add(10 * time.Second); len(c.get()) < 1 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := len(c.get()); n != 1 {
		t.Fatalf("first kick: %d passes, want 1", n)
	}
	h.s.Kick()
	time.Sleep(200 * time.Millisecond)
	if n := len(c.get()); n != 1 {
		t.Fatalf("a kick right after a pass ran its pass at once (%d passes), want it delayed by min_interval", n)
	}
}
