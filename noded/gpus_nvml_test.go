package noded

import (
	"errors"
	"strings"
	"testing"

	gresnvml "github.com/tide-hpc/tide/gres/nvml"
)

// TestOpenGPUsNVML starts the NVML source as tided does (through
// gres/nvml alone): on a machine without libnvidia-ml the start fails
// with the clean "NVML unavailable" error naming the setting, and where
// a driver is present the inventory comes back from it.
func TestOpenGPUsNVML(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Name, cfg.StateDir = "n1", t.TempDir()
	cfg.GPUs.Source = GPUSourceNVML
	d := &Daemon{cfg: cfg}
	err := d.openGPUs()
	if err != nil {
		if !errors.Is(err, gresnvml.ErrUnavailable) || !strings.HasPrefix(err.Error(), "gpus.source nvml: NVML unavailable") {
			t.Fatalf("openGPUs() = %v, want gpus.source nvml: NVML unavailable: ...", err)
		}
		if d.nvml != nil {
			t.Error("a source that did not open was kept")
		}
		return
	}
	defer d.closeGPUs()
	if d.nvml == nil || len(d.gpus) == 0 {
		t.Fatalf("NVML opened: source %v, %d GPUs", d.nvml, len(d.gpus))
	}
}
