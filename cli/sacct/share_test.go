package sacct

import (
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
)

// TestSharingGolden lists the sharing cluster's jobs: a debug job
// evicted PREEMPTED, a requeued one with its restart count, and -s
// selecting the new states.
func TestSharingGolden(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		golden string
	}{
		{name: "restarts and classes", args: []string{"-a", "-X", "-o", "JobID,JobName%9,Account,QOS%9,State,Restarts,ExitCode"},
			golden: "share-restarts"},
		{name: "preempted only", args: []string{"-a", "-s", "PR", "-S", "2026-11-30T08:00:00"}, golden: "share-preempted"},
		{name: "suspended by name, parsable", args: []string{"-a", "-X", "-P", "-s", "SUSPENDED", "-o", "JobID,State,Restarts"},
			golden: "share-suspended"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, buf := clitest.Factory(clitest.SharingCluster(), nil)
			out, errOut, code := clitest.Run(newCmd(f, time.UTC), buf, "sacct", tt.args)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			golden(t, tt.golden, out)
		})
	}
}
