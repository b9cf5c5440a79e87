package ctld

import (
	"runtime"
	"testing"
)

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
