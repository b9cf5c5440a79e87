package scontrol

import (
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
)

// TestShowSharingGolden shows jobs of the sharing cluster: the level as
// Priority=, the Tide: line of sharing state, the preemption in
// progress and the backfill estimate as a pending job's StartTime.
func TestShowSharingGolden(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		fake   func(*clitest.FakeAPI)
		golden string
	}{
		{name: "borrowing job being preempted", args: []string{"show", "job", "201"}, golden: "show-job-share-preempting"},
		{name: "one-liner of it", args: []string{"-o", "show", "job", "201"}, golden: "show-job-share-o-preempting"},
		{name: "starving job over quota", args: []string{"show", "job", "211"}, golden: "show-job-share-starving"},
		{name: "shorter starvation age ages faster", args: []string{"show", "job", "211"}, golden: "show-job-share-starving-fast",
			fake: func(f *clitest.FakeAPI) { f.Sharing.StarvationAge = 600 }},
		{name: "queues unknown keeps the default age", args: []string{"show", "job", "211"}, golden: "show-job-share-starving",
			fake: func(f *clitest.FakeAPI) { f.QueuesErr = api.Errorf(api.ErrNotFound, "404 page not found") }},
		{name: "waiting for a reclaim with an expected start", args: []string{"show", "job", "210"}, golden: "show-job-share-reclaim"},
		{name: "evicted debug job", args: []string{"show", "job", "220"}, golden: "show-job-share-preempted"},
		{name: "suspended cpu job", args: []string{"show", "job", "204"}, golden: "show-job-share-suspended"},
		{name: "job without a queue", args: []string{"show", "job", "214"}, golden: "show-job-share-noqueue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := clitest.SharingCluster()
			if tt.fake != nil {
				tt.fake(fake)
			}
			r := run(t, fake, nil, time.UTC, tt.args...)
			if r.code != 0 || r.errOut != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.errOut)
			}
			golden(t, tt.golden, r.out)
		})
	}
}
