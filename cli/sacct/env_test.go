package sacct

import (
	"strings"
	"testing"
)

// TestEnvTimeFormat checks SLURM_TIME_FORMAT on sacct's dates, and that
// SACCT_FEDERATION and SACCT_LOCAL change nothing on one cluster.
func TestEnvTimeFormat(t *testing.T) {
	args := []string{"-a", "-X", "-o", "jobid,submit,start,end", "-S", "2026-01-01"}
	std := run(t, 0, nil, args...)
	if std.code != 0 {
		t.Fatalf("exit %d: %s", std.code, std.errOut)
	}
	got := run(t, 0, map[string]string{"SLURM_TIME_FORMAT": "%b %d %H:%M", "SACCT_FEDERATION": "1", "SACCT_LOCAL": "1"}, args...)
	if got.code != 0 {
		t.Fatalf("exit %d: %s", got.code, got.errOut)
	}
	if got.out == std.out || strings.Contains(got.out, "T1") || strings.Contains(got.out, "T0") {
		t.Errorf("standard:\n%s\nwith SLURM_TIME_FORMAT:\n%s", std.out, got.out)
	}
	golden(t, "env-time-format", got.out)
	same := run(t, 0, map[string]string{"SLURM_TIME_FORMAT": "standard", "SACCT_FEDERATION": "1", "SACCT_LOCAL": "1"}, args...)
	if same.out != std.out {
		t.Errorf("SLURM_TIME_FORMAT=standard:\n%s\nunset:\n%s", same.out, std.out)
	}
}
