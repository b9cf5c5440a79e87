package squeue

import (
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
)

// arrayCluster holds array 7 (tasks 0-9, throttle 2): tasks 0 and 1 ran
// as jobs 13 and 14 (task 1 still runs), the meta record 7 holds tasks
// 2-9; and job 20 waits for the array to succeed.
func arrayCluster() *clitest.FakeAPI {
	now := time.Date(2026, 11, 29, 19, 40, 0, 0, time.UTC)
	base := func(id uint64) api.Job {
		return api.Job{ID: id, JobSpec: api.JobSpec{Name: "arr", Partition: "gpu", WorkDir: "/home/alice", Array: "0-9%2",
			Stdout: api.ArrayDefaultStdout},
			User: "alice", UserID: 1000, State: api.StatePending, Reason: api.ReasonJobArrayTaskLimit,
			SubmitTime: now.Add(-10 * time.Minute), ArrayJobID: 7, ArrayThrottle: 2}
	}
	meta := base(7)
	meta.ArrayPending = api.NewTaskSet([]int{2, 3, 4, 5, 6, 7, 8, 9})
	done := base(13)
	done.State, done.Reason, done.ArrayTaskID = api.StateCompleted, api.ReasonNone, 0
	done.StartTime, done.EndTime = now.Add(-9*time.Minute), now.Add(-5*time.Minute)
	run := base(14)
	run.State, run.Reason, run.ArrayTaskID = api.StateRunning, api.ReasonNone, 1
	run.StartTime, run.Alloc = now.Add(-5*time.Minute), []api.NodeAlloc{{Node: "gpu01", CPUs: 1, Tasks: 1}}
	dep := api.Job{ID: 20, JobSpec: api.JobSpec{Name: "post", Partition: "gpu", WorkDir: "/home/alice", Dependency: "afterok:7(unfulfilled)"},
		User: "alice", UserID: 1000, State: api.StatePending, Reason: api.ReasonDependency, SubmitTime: now}
	return &clitest.FakeAPI{Now: now, JobRecs: []api.Job{meta, done, run, dep}}
}

func TestArrays(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "array-default"},
		{name: "array-expanded", args: []string{"-r"}},
		{name: "array-job", args: []string{"-j", "7", "-t", "all", "-o", "%.10i %.4A %.4F %.8K %.2t %r"}},
		{name: "array-task", args: []string{"-j", "7_1,7_[4-5]", "-r", "-o", "%i %A %t"}},
		{name: "array-files", args: []string{"-j", "7_1", "-O", "JobArrayId:6,StdOut:40,Dependency:10"}},
		{name: "array-dependency", args: []string{"-j", "20", "-o", "%i %E %r"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := exec(t, arrayCluster(), nil, tt.args...)
			if err != nil || errOut != "" {
				t.Fatalf("squeue %v: %v (stderr %q)", tt.args, err, errOut)
			}
			golden(t, tt.name, out)
		})
	}
}
