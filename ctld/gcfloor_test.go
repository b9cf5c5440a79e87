package ctld

import (
	"runtime"
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
		{name: "tiny heap", live: 1 << 20, want: 1100},
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
