package scontrol

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
)

// arrayFake holds array 7 (tasks 1-9, throttle 2) as in Slurm's sample:
// task 1 runs as job 13, task 2 as job 14, and the meta record 7 holds
// tasks 3-9; job 20 depends on the array.
func arrayFake() *clitest.FakeAPI {
	now := time.Date(2026, 11, 29, 19, 31, 17, 0, time.UTC)
	start := time.Date(2026, 11, 29, 19, 31, 7, 0, time.UTC)
	base := func(id uint64) api.Job {
		return api.Job{ID: id, JobSpec: api.JobSpec{Name: "arr", Partition: "batch", WorkDir: "/home/alice/exp",
			Array: "1-9%2", Stdout: api.ArrayDefaultStdout, TimeLimit: api.Infinite},
			User: "root", Group: "root", EffPriority: 4294901753, State: api.StatePending, Reason: api.ReasonJobArrayTaskLimit,
			SubmitTime: now.Add(-12 * time.Second), ArrayJobID: 7, ArrayThrottle: 2}
	}
	meta := base(7)
	meta.ArrayPending = api.NewTaskSet([]int{3, 4, 5, 6, 7, 8, 9})
	var tasks []api.Job
	for i, id := range []uint64{13, 14} {
		j := base(id)
		j.State, j.Reason, j.ArrayTaskID = api.StateRunning, api.ReasonNone, i+1
		j.EligibleTime, j.StartTime, j.LastSchedEval = start, start, start
		j.Alloc = []api.NodeAlloc{{Node: "n1", CPUs: 1, Tasks: 1}}
		tasks = append(tasks, j)
	}
	dep := api.Job{ID: 20, JobSpec: api.JobSpec{Name: "post", Partition: "batch", WorkDir: "/home/alice/exp",
		Dependency: "afterok:7(unfulfilled)", TimeLimit: api.Infinite},
		User: "root", Group: "root", State: api.StatePending, Reason: api.ReasonDependency, SubmitTime: now}
	return &clitest.FakeAPI{Now: now, Info: api.ClusterInfo{Now: now}, JobRecs: append([]api.Job{meta, dep}, tasks...)}
}

func TestShowArrayJobs(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		golden string
	}{
		{name: "whole array", args: []string{"show", "job", "7"}, golden: "show-job-array"},
		{name: "one task", args: []string{"-o", "show", "job", "7_2"}, golden: "show-job-array-task"},
		{name: "pending task shows the meta record", args: []string{"-o", "show", "job", "7_5"}, golden: "show-job-array-pending-task"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, arrayFake(), nil, time.UTC, tt.args...)
			if r.code != 0 || r.errOut != "" {
				t.Fatalf("exit %d: %s", r.code, r.errOut)
			}
			golden(t, tt.golden, r.out)
		})
	}
	if r := run(t, arrayFake(), nil, time.UTC, "show", "job", "7_12"); r.code != 1 || r.errOut != "slurm_load_jobs error: Invalid job id specified\n" {
		t.Errorf("unknown task: %d %q", r.code, r.errOut)
	}
}

// TestShowCancelledPendingTask: a task cancelled while pending (scancel
// 7_3) is gone for show job 7_3, as in Slurm, while a task cancelled
// after it started is still shown.
func TestShowCancelledPendingTask(t *testing.T) {
	fake := arrayFake()
	var meta api.Job
	for i, j := range fake.JobRecs {
		if j.ID == 7 {
			// Tasks 3 and 4 have left the pending set.
			fake.JobRecs[i].ArrayPending = api.NewTaskSet([]int{5, 6, 7, 8, 9})
			meta = j
		}
	}
	never := meta
	never.ID, never.ArrayTaskID, never.ArrayPending = 30, 3, api.TaskSet{}
	// A cancel stamps a start time on a pending job too.
	never.State, never.StartTime, never.EndTime = api.StateCancelled, meta.SubmitTime.Add(5*time.Second), meta.SubmitTime.Add(5*time.Second)
	ran := never
	ran.ID, ran.ArrayTaskID = 31, 4
	ran.StartTime = meta.SubmitTime.Add(time.Second)
	ran.Alloc = []api.NodeAlloc{{Node: "n1", CPUs: 1, Tasks: 1}}
	fake.JobRecs = append(fake.JobRecs, never, ran)
	if r := run(t, fake, nil, time.UTC, "show", "job", "7_3"); r.code != 1 || r.errOut != "slurm_load_jobs error: Invalid job id specified\n" {
		t.Errorf("task cancelled while pending: exit %d, stderr %q, out %q", r.code, r.errOut, r.out)
	}
	if r := run(t, fake, nil, time.UTC, "show", "job", "7_4"); r.code != 0 || !strings.Contains(r.out, "JobId=31 ArrayJobId=7 ArrayTaskId=4") {
		t.Errorf("task cancelled while running: exit %d, stderr %q, out %q", r.code, r.errOut, r.out)
	}
}

// TestArrayTaskLineMatchesSlurm compares the first line of a running
// task with Slurm's sample (JobId=13 ArrayJobId=7 ArrayTaskId=1 …).
func TestArrayTaskLineMatchesSlurm(t *testing.T) {
	j := api.Job{ID: 13, ArrayJobID: 7, ArrayTaskID: 1, JobSpec: api.JobSpec{Name: "arr"}}
	if got := jobIDLine(&j); got != "JobId=13 ArrayJobId=7 ArrayTaskId=1 JobName=arr" {
		t.Errorf("line = %q", got)
	}
}

func TestUpdateArraysAndDependencies(t *testing.T) {
	two := 2
	none, dep := "", "afterok:5?afterany:6"
	tests := []struct {
		name    string
		args    []string
		want    api.JobUpdate
		wantErr string
	}{
		{name: "throttle", args: []string{"update", "JobId=7", "ArrayTaskThrottle=2"},
			want: api.JobUpdate{Action: "update", IDs: []uint64{7}, ArrayThrottle: &two}},
		{name: "dependency of a task", args: []string{"update", "JobId=7_3", "Dependency=afterok:5?afterany:6"},
			want: api.JobUpdate{Action: "update", Tasks: []api.TaskRef{{JobID: 7, Task: 3}}, Dependency: &dep}},
		{name: "remove dependency", args: []string{"update", "jobid=20", "dependency="},
			want: api.JobUpdate{Action: "update", IDs: []uint64{20}, Dependency: &none}},
		{name: "hold tasks", args: []string{"hold", "7_[3-4]"},
			want: api.JobUpdate{Action: "hold", Tasks: []api.TaskRef{{JobID: 7, Task: 3}, {JobID: 7, Task: 4}}}},
		{name: "bad dependency", args: []string{"update", "JobId=20", "Dependency=before:1"}, wantErr: "Invalid dependency specification: before:1"},
		{name: "relative limit on a task", args: []string{"update", "JobId=7_3", "TimeLimit=+10"}, wantErr: "not supported for array tasks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := arrayFake()
			r := run(t, fake, nil, time.UTC, tt.args...)
			if tt.wantErr != "" {
				if r.code == 0 || !strings.Contains(r.errOut, tt.wantErr) {
					t.Fatalf("exit %d, stderr %q; want %q", r.code, r.errOut, tt.wantErr)
				}
				return
			}
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.errOut)
			}
			if diff := cmp.Diff([]api.JobUpdate{tt.want}, fake.JobUpdates); diff != "" {
				t.Errorf("updates (-want +got):\n%s", diff)
			}
		})
	}
}
