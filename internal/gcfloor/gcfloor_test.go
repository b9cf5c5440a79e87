package gcfloor

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"testing"
)

func TestPercent(t *testing.T) {
	tests := []struct {
		name string
		live uint64
		want int
	}{
		{name: "large heap keeps the base target", live: 100 << 20, want: 40},
		{name: "at the floor", live: 12 << 20 * 100 / 140, want: 40},
		{name: "small heap grows to the floor", live: 4 << 20, want: 200},
		// Under 4 MiB the runtime's heap minimum (4 MiB × GOGC/100)
		// decides: 300 puts it at the floor.
		{name: "tiny heap", live: 1 << 20, want: 300},
		{name: "unknown", live: 0, want: 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percent(tt.live, 40, 12<<20); got != tt.want {
				t.Errorf("Percent(%d) = %d, want %d", tt.live, got, tt.want)
			}
		})
	}
}

// TestPercentGoal asks the runtime itself: with the percentage Percent
// gives for this test's small heap, the next collection is due at the
// floor, not at the runtime's heap minimum scaled far above.
func TestPercentGoal(t *testing.T) {
	for _, tc := range []struct {
		percent int
		floor   uint64
	}{{40, 32 << 20}, {100, 16 << 20}} {
		runtime.GC()
		s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}}
		rtmetrics.Read(s)
		live := s[0].Value.Uint64()
		old := debug.SetGCPercent(Percent(live, tc.percent, tc.floor))
		rtmetrics.Read(s)
		debug.SetGCPercent(old)
		if goal := s[1].Value.Uint64(); goal < tc.floor*9/10 || goal > tc.floor*12/10 {
			t.Errorf("GOGC %d, floor %d: live heap %d bytes, next collection at %d bytes, want about the floor", tc.percent, tc.floor, live, goal)
		}
	}
}
