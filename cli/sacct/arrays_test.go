package sacct

import (
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
)

// TestArrayJobIDs: JobID prints array tasks as N_I and the pending rest
// as N_[tasks], JobIDRaw the record's own id.
func TestArrayJobIDs(t *testing.T) {
	now := time.Date(2026, 11, 29, 19, 40, 0, 0, time.UTC)
	base := func(id uint64) api.Job {
		return api.Job{ID: id, JobSpec: api.JobSpec{Name: "arr", Partition: "gpu"}, User: "alice", UserID: 1000,
			SubmitTime: now.Add(-time.Hour), ArrayJobID: 7}
	}
	meta := base(7)
	meta.State, meta.ArrayPending = api.StatePending, api.NewTaskSet([]int{2, 3, 4})
	done := base(13)
	done.State, done.ArrayTaskID, done.StartTime, done.EndTime = api.StateCompleted, 1, now.Add(-time.Minute), now
	fake := &clitest.FakeAPI{Now: now, Finished: []api.Job{done}, JobRecs: []api.Job{meta}}
	f, buf := clitest.Factory(fake, nil)
	f.UID = func() int { return 1000 }
	out, errOut, code := clitest.Run(newCmd(f, time.UTC), buf, "sacct",
		[]string{"-j", "7", "-P", "-n", "--format=JobID,JobIDRaw,State"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "7_[2-4]|7|PENDING\n7_1|13|COMPLETED\n7_1.batch|13.batch|COMPLETED\n"
	if out != want {
		t.Errorf("sacct -j 7:\n%s\nwant:\n%s", out, want)
	}
}
