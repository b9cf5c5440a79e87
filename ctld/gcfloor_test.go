package ctld

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"testing"
)

func TestFloorPercent(t *testing.T) {
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
			if got := floorPercent(tt.live, 40, 12<<20); got != tt.want {
				t.Errorf("floorPercent(%d) = %d, want %d", tt.live, got, tt.want)
			}
		})
	}
}

// TestFloorPercentGoal asks the runtime itself: with the percentage
// floorPercent gives for this test's small heap, the next collection is
// due at the floor, not at the runtime's heap minimum scaled far above.
func TestFloorPercentGoal(t *testing.T) {
	runtime.GC()
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	rtmetrics.Read(s)
	live := s[0].Value.Uint64()
	old := debug.SetGCPercent(floorPercent(live, gcPercent, gcFloorBytes))
	defer debug.SetGCPercent(old)
	rtmetrics.Read(s)
	if goal := s[1].Value.Uint64(); goal < gcFloorBytes*9/10 || goal > gcFloorBytes*12/10 {
		t.Errorf("live heap %d bytes: next collection at %d bytes, want about the floor %d", live, goal, gcFloorBytes)
	}
}

// TestReturnIdleMemory: after a burst of garbage, housekeeping leaves at
// most idleReturnBytes of free heap with the runtime.
func TestReturnIdleMemory(t *testing.T) {
	burst := make([][]byte, 0, 64)
	for range 64 {
		burst = append(burst, make([]byte, 1<<20))
	}
	runtime.KeepAlive(burst)
	burst = nil
	runtime.GC()
	returnIdleMemory()
	if free := heapFreeBytes(); free > idleReturnBytes {
		t.Errorf("%d bytes of free heap held after returnIdleMemory, want at most %d", free, idleReturnBytes)
	}
	if returnIdleMemory() {
		t.Errorf("returnIdleMemory acted again with nothing to return")
	}
}
