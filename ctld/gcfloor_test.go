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
	if free, _ := heapFreeBytes(); free > idleReturnBytes {
		t.Errorf("%d bytes of free heap held after returnIdleMemory, want at most %d", free, idleReturnBytes)
	}
	if returnIdleMemory() {
		t.Errorf("returnIdleMemory acted again with nothing to return")
	}
}

// TestReturnIdleMemoryLeavesOrdinaryGarbage: at a large live heap, the
// free heap an ordinary collection leaves (less than half the live
// heap) is not worth a forced collection.
func TestReturnIdleMemoryLeavesOrdinaryGarbage(t *testing.T) {
	live := make([][]byte, 0, 256)
	for range 256 {
		live = append(live, make([]byte, 1<<20))
	}
	garbage := make([][]byte, 0, 64)
	for range 64 {
		garbage = append(garbage, make([]byte, 1<<20))
	}
	runtime.KeepAlive(garbage)
	garbage = nil
	runtime.GC()
	free, heap := heapFreeBytes()
	if free <= idleReturnBytes || free > heap/2 {
		t.Skipf("the runtime left %d bytes free of a %d-byte live heap: not the case under test", free, heap)
	}
	if returnIdleMemory() {
		t.Errorf("returnIdleMemory forced a collection for %d free bytes at a %d-byte live heap", free, heap)
	}
	runtime.KeepAlive(live)
}
