package squeue

import (
	"testing"

	"github.com/tide-hpc/tide/cli/clitest"
)

// TestSharingGolden prints the sharing cluster: expected starts from
// the backfill estimate, the sharing reasons with their decisive detail
// in %R, and the PREEMPTED and SUSPENDED states.
func TestSharingGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "share-default"},
		{name: "share-start", args: []string{"--start"}},
		{name: "share-long", args: []string{"-l"}},
		{name: "share-reasons", args: []string{"-t", "PD", "-o", "%.4i %.2t %r|%R"}},
		{name: "share-preempted", args: []string{"-t", "PR"}},
		{name: "share-suspended", args: []string{"-t", "S", "-o", "%.4i %.2t %.10T %.8M %R"}},
		{name: "share-running-and-suspended", args: []string{"-t", "R,SUSPENDED"}},
		{name: "share-all-states", args: []string{"-t", "all", "-o", "%.4i %.2t %.10T %r"}},
		{name: "share-account-as-queue", args: []string{"-A", "moba", "-O", "JobID:5,Account:6,QOS:9,StartTime:20,Reason:18"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := exec(t, clitest.SharingCluster(), nil, tt.args...)
			if err != nil {
				t.Fatalf("squeue %v: %v (stderr %q)", tt.args, err, errOut)
			}
			if errOut != "" {
				t.Errorf("stderr = %q, want empty", errOut)
			}
			golden(t, tt.name, out)
		})
	}
}
