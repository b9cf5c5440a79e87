package nvml

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tide-hpc/tide/gres"
)

var gpu = flag.Bool("gpu", false, "require a real NVIDIA GPU with its driver (make test-gpu)")

// TestRealLibrary runs the real go-nvml library. Without libnvidia-ml (CI,
// laptops) every entry point must return the clean "NVML unavailable"
// error: had any of them called NVML after the failed Init, the test
// binary would have died with a symbol lookup error instead. With a GPU
// (required by -gpu) the inventory must be complete and consistent.
func TestRealLibrary(t *testing.T) {
	lib := nvml.New()
	src := New(lib)
	devs, err := src.Inventory("")
	if err != nil {
		if *gpu {
			t.Fatalf("-gpu: %v", err)
		}
		if !errors.Is(err, ErrUnavailable) || !strings.HasPrefix(err.Error(), "NVML unavailable: init: ") {
			t.Fatalf("Inventory() = %v, want an NVML unavailable error", err)
		}
		if _, err := src.Status(); !errors.Is(err, ErrUnavailable) {
			t.Errorf("Status() = %v, want an NVML unavailable error", err)
		}
		if err := WatchXID(t.Context(), lib, nil, make(chan XIDEvent)); !errors.Is(err, ErrUnavailable) {
			t.Errorf("WatchXID() = %v, want an NVML unavailable error", err)
		}
		t.Logf("no NVML here, as expected: %v", err)
		return
	}
	if len(devs) == 0 {
		t.Fatal("NVML initialised but lists no GPU")
	}
	if err := gres.CheckInventory(devs); err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.UUID == "" || d.Model == "" || d.MemoryMB <= 0 || d.PCIBusID == "" || d.ComputeCap == "" || d.Minor < 0 {
			t.Errorf("gpu %d incomplete: %+v", d.Index, d)
		}
		t.Logf("gpu %d: %s %q (%s) %d MiB cc %s minor %d numa %d", d.Index, d.UUID, d.Model, d.ModelShort(), d.MemoryMB, d.ComputeCap, d.Minor, d.NUMANode)
	}
	t.Logf("topology:\n%s", gres.FormatTopology(devs))
	st, err := src.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != len(devs) {
		t.Fatalf("%d statuses for %d gpus", len(st), len(devs))
	}
	for _, s := range st {
		t.Logf("status %+v", s)
		if s.Health != gres.Healthy {
			t.Errorf("gpu %d is %s: %s", s.Index, s.Health, s.Reason)
		}
	}
	// Registering for XID events must work; a cancelled context returns
	// before the first wait.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := WatchXID(ctx, lib, nil, make(chan XIDEvent, len(devs))); err != nil {
		t.Errorf("WatchXID() = %v", err)
	}
}
