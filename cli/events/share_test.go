package events

import (
	"testing"

	"github.com/tide-hpc/tide/cli/clitest"
)

// TestSharingTrail prints a borrowing job's trail: borrow, preemption
// for a reclaim, checkpoint acknowledgement, requeue and the backfilled
// restart, each with the jobs involved and why.
func TestSharingTrail(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		golden string
	}{
		{name: "table", args: []string{"201"}, golden: "events-201-share"},
		{name: "json", args: []string{"--json", "201"}, golden: "events-201-share-json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, clitest.SharingCluster(), newEventsCmd, tt.args...)
			if r.code != 0 || r.errOut != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.errOut)
			}
			golden(t, tt.golden, r.out)
		})
	}
}
