package nvml

import (
	"errors"
	"testing"
)

// TestRealSystem opens the machine's own library through NewSystem, as
// tided does: without libnvidia-ml the error is the clean "NVML
// unavailable" (no symbol lookup crash); with a GPU (required by -gpu)
// Open succeeds and the inventory lists it.
func TestRealSystem(t *testing.T) {
	src := NewSystem()
	if err := src.Open(); err != nil {
		if *gpu {
			t.Fatalf("-gpu: Open: %v", err)
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Open() = %v, want an NVML unavailable error", err)
		}
		src.Close() // nothing held: a no-op
		t.Logf("no NVML here, as expected: %v", err)
		return
	}
	defer src.Close()
	devs, err := src.Inventory("")
	if err != nil {
		t.Fatalf("Inventory after Open: %v", err)
	}
	if len(devs) == 0 {
		t.Fatal("NVML opened but lists no GPU")
	}
	t.Logf("%d GPUs through NewSystem, the first %s %q", len(devs), devs[0].UUID, devs[0].Model)
}
