package scontrol

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/scontrol/scontroltest"
	"github.com/tide-hpc/tide/ctld/api"
)

func ptr[T any](v T) *T { return &v }

func TestJobActions(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []api.JobUpdate
	}{
		{name: "hold", args: []string{"hold", "103"},
			want: []api.JobUpdate{{IDs: []uint64{103}, Action: "hold"}}},
		{name: "user hold of a comma list", args: []string{"uhold", "103,104"},
			want: []api.JobUpdate{{IDs: []uint64{103, 104}, Action: "uhold"}}},
		{name: "release of separate words", args: []string{"release", "103", "104"},
			want: []api.JobUpdate{{IDs: []uint64{103, 104}, Action: "release"}}},
		{name: "requeue abbreviated", args: []string{"req", "101"},
			want: []api.JobUpdate{{IDs: []uint64{101}, Action: "requeue"}}},
		{name: "absolute time limit", args: []string{"update", "JobId=101", "TimeLimit=2:00:00"},
			want: []api.JobUpdate{{IDs: []uint64{101}, Action: "update", TimeLimit: ptr(int64(7200))}}},
		{name: "time limit in days", args: []string{"update", "jobid=101", "timelimit=1-12"},
			want: []api.JobUpdate{{IDs: []uint64{101}, Action: "update", TimeLimit: ptr(int64(36 * 3600))}}},
		{name: "unlimited", args: []string{"update", "JobId=101", "TimeLimit=UNLIMITED"},
			want: []api.JobUpdate{{IDs: []uint64{101}, Action: "update", TimeLimit: ptr(api.Infinite)}}},
		{name: "relative increase in minutes", args: []string{"update", "JobId=101", "TimeLimit=+30"},
			want: []api.JobUpdate{{IDs: []uint64{101}, Action: "update", TimeLimit: ptr(int64(4*3600 + 30*60))}}},
		{name: "relative decrease per job", args: []string{"update", "JobId=101,103", "TimeLimit=-1:00:00", "Comment=shorter"},
			want: []api.JobUpdate{
				{IDs: []uint64{101}, Action: "update", TimeLimit: ptr(int64(3 * 3600)), Comment: ptr("shorter")},
				{IDs: []uint64{103}, Action: "update", TimeLimit: ptr(int64(3 * 3600)), Comment: ptr("shorter")},
			}},
		{name: "every field, keys in any order and case", args: []string{"update", "Name=retrain", "JOBID=103,104",
			"Comment=\"two words\"", "Partition=debug", "Priority=5", "Nice=-5", "Account=physics"},
			want: []api.JobUpdate{{IDs: []uint64{103, 104}, Action: "update", Name: ptr("retrain"),
				Comment: ptr("two words"), Partition: ptr("debug"), Priority: ptr(uint32(5)), Nice: ptr(-5),
				Account: ptr("physics")}}},
		{name: "JobName alias", args: []string{"update", "JobId=103", "JobName=x"},
			want: []api.JobUpdate{{IDs: []uint64{103}, Action: "update", Name: ptr("x")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := scontroltest.Cluster()
			r := run(t, fake, nil, time.UTC, tt.args...)
			if r.code != 0 || r.errOut != "" || r.out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
			}
			if diff := cmp.Diff(tt.want, fake.JobUpdates); diff != "" {
				t.Errorf("updates sent (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeUpdates(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []api.NodeUpdate
	}{
		{name: "drain a range with a quoted reason",
			args: []string{"update", "NodeName=gpu[01-02]", "State=DRAIN", `Reason="maintenance window"`},
			want: []api.NodeUpdate{{Names: []string{"gpu01", "gpu02"}, State: "DRAIN", Reason: "maintenance window"}}},
		{name: "resume in lower case", args: []string{"update", "nodename=gpu04", "state=resume"},
			want: []api.NodeUpdate{{Names: []string{"gpu04"}, State: "RESUME"}}},
		{name: "idle is Slurm's other word for resume", args: []string{"update", "nodename=gpu04", "state=idle", "reason=testing"},
			want: []api.NodeUpdate{{Names: []string{"gpu04"}, State: "RESUME", Reason: "testing"}}},
		{name: "down with reason first", args: []string{"update", "Reason=fan failure", "State=Down", "NodeName=gpu03"},
			want: []api.NodeUpdate{{Names: []string{"gpu03"}, State: "DOWN", Reason: "fan failure"}}},
		{name: "undrain", args: []string{"update", "NodeName=gpu04", "State=UNDRAIN"},
			want: []api.NodeUpdate{{Names: []string{"gpu04"}, State: "UNDRAIN"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := scontroltest.Cluster()
			r := run(t, fake, nil, time.UTC, tt.args...)
			if r.code != 0 || r.errOut != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.errOut)
			}
			if diff := cmp.Diff(tt.want, fake.NodeUpdates); diff != "" {
				t.Errorf("updates sent (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseJobIDs(t *testing.T) {
	tests := []struct {
		name      string
		words     []string
		want      []uint64
		wantTasks []api.TaskRef
		wantErr   bool
	}{
		{name: "one", words: []string{"5"}, want: []uint64{5}},
		{name: "comma list", words: []string{"5,6"}, want: []uint64{5, 6}},
		{name: "words and commas", words: []string{"5,", "6", "7,8"}, want: []uint64{5, 6, 7, 8}},
		{name: "zero", words: []string{"0"}, wantErr: true},
		{name: "negative", words: []string{"-3"}, wantErr: true},
		{name: "array task", words: []string{"5_1"}, wantTasks: []api.TaskRef{{JobID: 5, Task: 1}}},
		{name: "array tasks and jobs", words: []string{"5_[1-2],9"}, want: []uint64{9},
			wantTasks: []api.TaskRef{{JobID: 5, Task: 1}, {JobID: 5, Task: 2}}},
		{name: "bad array task", words: []string{"5_x"}, wantErr: true},
		{name: "none", words: []string{","}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, tasks, err := parseJobIDs(tt.words)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantTasks, tasks); diff != "" {
				t.Errorf("tasks (-want +got):\n%s", diff)
			}
		})
	}
}
