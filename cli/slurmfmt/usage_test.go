package slurmfmt

import (
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// Known outputs of Slurm 22.05's helpers (src/sacct/print.c
// _elapsed_time, convert_num_unit with CONVERT_NUM_UNIT_EXACT,
// _print_small_double) for the same numbers.
func TestUsageFormats(t *testing.T) {
	elapsed := []struct {
		usec uint64
		want string
	}{
		{0, "00:00:00"},
		{999, "00:00:00"}, // under a millisecond: no fraction
		{1_234_567, "00:01.234"},
		{61_000_000, "00:01:01"},
		{3599_999_000, "59:59.999"},
		{3600_000_001, "01:00:00"},
		{90061_500_000, "1-01:01:01"},
	}
	for _, tt := range elapsed {
		if got := ElapsedUsec(tt.usec); got != tt.want {
			t.Errorf("ElapsedUsec(%d) = %q, want %q", tt.usec, got, tt.want)
		}
	}
	sizes := []struct {
		bytes uint64
		want  string
	}{
		{0, "0"},
		{2332, "2332"},
		{4886528, "4772K"}, // 4772 KiB: exact in K, not in M
		{1 << 20, "1M"},    // 1024 K
		{1572864, "1.50M"}, // a half is exact
		{1610612736, "1.50G"},
		{1073152, "1048K"},
		{1001, "1001"},
		{1 << 40, "1T"},
	}
	for _, tt := range sizes {
		if got := BytesSize(tt.bytes); got != tt.want {
			t.Errorf("BytesSize(%d) = %q, want %q", tt.bytes, got, tt.want)
		}
	}
	disk := []struct {
		bytes uint64
		want  string
	}{
		{0, "0"},
		{10 << 10, "0.01M"},
		{1 << 20, "1.00M"},
		{5 << 19, "2.50M"},
		{3 << 20, "3M"},
		{1536 << 20, "1.50G"},
	}
	for _, tt := range disk {
		if got := DiskMB(tt.bytes); got != tt.want {
			t.Errorf("DiskMB(%d) = %q, want %q", tt.bytes, got, tt.want)
		}
	}
}

// TestSmallDoubleBytes checks sstat's disk sizes, which Slurm prints
// from the byte count itself (src/sstat/print.c), and the whole-second
// CPU statistics.
func TestSmallDoubleBytes(t *testing.T) {
	for _, tt := range []struct {
		bytes uint64
		want  string
	}{
		{0, "0"},
		{1, "1.00M"}, // Slurm's own quirk: one byte is "not above one"
		{2332, "2332"},
		{5 << 19, "2.50M"},
		{3 << 30, "3G"},
	} {
		if got := SmallDouble(float64(tt.bytes), UnitNone); got != tt.want {
			t.Errorf("SmallDouble(%d, UnitNone) = %q, want %q", tt.bytes, got, tt.want)
		}
	}
	if got := CPUSecs(61_999_999); got != "00:01:01" {
		t.Errorf("CPUSecs(61.999999 s) = %q, want 00:01:01", got)
	}
}

func TestTRESUsage(t *testing.T) {
	stat := func(tot, max uint64, maxNode string, maxTask int) api.UsageStat {
		return api.UsageStat{Tot: tot, Max: max, MaxNode: maxNode, MaxTask: maxTask, Min: max / 2, MinNode: "n1", MinTask: 1}
	}
	u := &api.StepUsage{Tasks: 2,
		CPU: stat(4_000_000, 3_000_000, "n2", 1), RSS: stat(3<<20, 2<<20, "n2", 1), VMSize: stat(8<<20, 6<<20, "n1", 0),
		Pages: stat(4, 3, "n1", 0), DiskRead: stat(2048, 1024, "n1", 0), DiskWrite: stat(0, 0, "n1", 0)}
	tests := []struct {
		side  TRESSide
		which TRESWhich
		want  string
	}{
		{TRESIn, TRESTot, "cpu=00:00:04,energy=0,fs/disk=2K,mem=3M,pages=4,vmem=8M"},
		{TRESIn, TRESAve, "cpu=00:00:02,energy=0,fs/disk=1K,mem=1.50M,pages=2,vmem=4M"},
		{TRESIn, TRESMaxNode, "cpu=n2,fs/disk=n1,mem=n2,pages=n1,vmem=n1"},
		{TRESIn, TRESMaxTask, "cpu=1,fs/disk=0,mem=1,pages=0,vmem=0"},
		{TRESOut, TRESMax, "energy=0,fs/disk=0"},
	}
	for _, tt := range tests {
		if got := TRESUsage(tt.side, tt.which, u); got != tt.want {
			t.Errorf("TRESUsage(%d, %d) = %q, want %q", tt.side, tt.which, got, tt.want)
		}
	}
	u.GPU, u.GPUMem, u.GPUUtil = true, stat(1<<30, 1<<30, "n1", 0), stat(90, 90, "n1", 0)
	if got, want := TRESUsage(TRESIn, TRESMax, u), "cpu=00:00:03,energy=0,fs/disk=1K,gres/gpumem=1G,gres/gpuutil=90,mem=2M,pages=3,vmem=6M"; got != want {
		t.Errorf("TRESUsage with GPU readings = %q, want %q", got, want)
	}
}
