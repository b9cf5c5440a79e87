package gcfloor

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"testing"
)

func TestGOGC(t *testing.T) {
	const mib = 1 << 20
	floorOnly := Target{Percent: 40, Floor: 12 * mib}
	withHeadroom := Target{Percent: 40, Floor: 32 * mib, Headroom: 128 * mib}
	tests := []struct {
		name   string
		target Target
		live   uint64
		want   int
	}{
		{name: "large heap keeps the base target", target: floorOnly, live: 100 * mib, want: 40},
		{name: "at the floor", target: floorOnly, live: 12 * mib * 100 / 140, want: 40},
		{name: "small heap grows to the floor", target: floorOnly, live: 4 * mib, want: 200},
		// Under 4 MiB the runtime's heap minimum (4 MiB × GOGC/100)
		// decides: 300 puts it at the floor.
		{name: "tiny heap", target: floorOnly, live: 1 * mib, want: 300},
		{name: "unknown", target: floorOnly, live: 0, want: 40},
		// Medium heaps gather as much garbage as they hold live.
		{name: "medium heap, as much garbage as live", target: withHeadroom, live: 100 * mib, want: 100},
		// 200 MiB live: 328, not 280.
		{name: "up to the headroom", target: withHeadroom, live: 200 * mib, want: 64},
		{name: "large heap: the percentage's garbage is more", target: withHeadroom, live: 450 * mib, want: 40},
		{name: "at the headroom's end", target: withHeadroom, live: 320 * mib, want: 40},
		// The floor still rules small heaps: 32 MiB, not 2 × 8.
		{name: "small heap: the floor", target: withHeadroom, live: 8 * mib, want: 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.target.GOGC(tt.live); got != tt.want {
				t.Errorf("%+v.GOGC(%d) = %d, want %d", tt.target, tt.live, got, tt.want)
			}
		})
	}
}

// TestGOGCGoal asks the runtime itself: with the percentage GOGC
// gives for this test's small heap, the next collection is due at the
// floor (or live + headroom), not at the runtime's heap minimum scaled
// far above.
func TestGOGCGoal(t *testing.T) {
	for _, tg := range []Target{{Percent: 40, Floor: 32 << 20}, {Percent: 100, Floor: 16 << 20}, {Percent: 40, Floor: 32 << 20, Headroom: 128 << 20}} {
		runtime.GC()
		s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}}
		rtmetrics.Read(s)
		live := s[0].Value.Uint64()
		old := debug.SetGCPercent(tg.GOGC(live))
		rtmetrics.Read(s)
		debug.SetGCPercent(old)
		want := max(tg.Floor, live+min(live, tg.Headroom))
		if goal := s[1].Value.Uint64(); goal < want*9/10 || goal > want*12/10 {
			t.Errorf("%+v: live heap %d bytes, next collection at %d bytes, want about %d", tg, live, goal, want)
		}
	}
}
