package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseArraySpec(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		max      int
		wantIDs  []int
		throttle int
		shown    string // TaskSet.String, as squeue prints pending tasks
		spec     string // ArraySpec.String
		wantErr  bool
	}{
		{name: "range", in: "0-9", wantIDs: seq(0, 9, 1), shown: "0-9", spec: "0-9"},
		{name: "list and range", in: "1,3,5-9", wantIDs: []int{1, 3, 5, 6, 7, 8, 9}, shown: "1,3,5-9", spec: "1,3,5-9"},
		{name: "step", in: "0-99:4", wantIDs: seq(0, 99, 4), shown: "0-96:4", spec: "0-96:4"},
		{name: "short step prints as a list", in: "0-8:4", wantIDs: []int{0, 4, 8}, shown: "0,4,8", spec: "0-8:4"},
		{name: "throttle", in: "10-99%8", wantIDs: seq(10, 99, 1), throttle: 8, shown: "10-99", spec: "10-99%8"},
		{name: "single", in: "7", wantIDs: []int{7}, shown: "7", spec: "7"},
		{name: "overlap and duplicates merge", in: "5-9,1-6,3", wantIDs: seq(1, 9, 1), shown: "1-9", spec: "1-9"},
		{name: "at max size", in: "0-10000", max: 10001, wantIDs: seq(0, 10000, 1), shown: "0-10000", spec: "0-10000"},
		{name: "over max size", in: "0-10001", max: 10001, wantErr: true},
		{name: "backwards", in: "9-1", wantErr: true},
		{name: "negative", in: "-1-3", wantErr: true},
		{name: "step without range", in: "5:2", wantErr: true},
		{name: "zero step", in: "0-9:0", wantErr: true},
		{name: "empty", in: "", wantErr: true},
		{name: "empty item", in: "1,,2", wantErr: true},
		{name: "bad throttle", in: "0-9%x", wantErr: true},
		{name: "letters", in: "a-b", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseArraySpec(tt.in, tt.max)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseArraySpec(%q) = %v, want error", tt.in, got)
				}
				if err.Error() != ErrInvalidArray {
					t.Fatalf("message %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantIDs, got.Tasks.Ids()); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if got.Throttle != tt.throttle || got.Tasks.String() != tt.shown || got.String() != tt.spec {
				t.Errorf("throttle %d shown %q spec %q; want %d %q %q", got.Throttle, got.Tasks.String(), got.String(),
					tt.throttle, tt.shown, tt.spec)
			}
			if got.Tasks.Len() != len(tt.wantIDs) || got.Tasks.Min() != tt.wantIDs[0] || got.Tasks.Max() != tt.wantIDs[len(tt.wantIDs)-1] {
				t.Errorf("len/min/max = %d/%d/%d", got.Tasks.Len(), got.Tasks.Min(), got.Tasks.Max())
			}
		})
	}
}

func seq(first, last, step int) []int {
	var out []int
	for i := first; i <= last; i += step {
		out = append(out, i)
	}
	return out
}

func TestTaskSetRemove(t *testing.T) {
	set := NewTaskSet(seq(0, 20, 2))
	tests := []struct {
		name   string
		remove []int
		want   string
		step   int
	}{
		{name: "first", remove: []int{0}, want: "2-20:2", step: 2},
		{name: "middle splits the run", remove: []int{10}, want: "0,2,4,6,8,12,14,16,18,20", step: 1},
		{name: "absent id", remove: []int{3}, want: "0-20:2", step: 2},
		{name: "all", remove: seq(0, 20, 2), want: "", step: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := set
			for _, i := range tt.remove {
				s = s.Remove(i)
			}
			if s.String() != tt.want || s.Step() != tt.step {
				t.Errorf("after remove %v: %q step %d, want %q step %d", tt.remove, s.String(), s.Step(), tt.want, tt.step)
			}
			for _, i := range tt.remove {
				if s.Contains(i) {
					t.Errorf("still contains %d", i)
				}
			}
			if set.String() != "0-20:2" {
				t.Errorf("Remove modified its receiver: %s", set)
			}
		})
	}
}

func TestParseJobIDs(t *testing.T) {
	tests := []struct {
		in        string
		wantIDs   []uint64
		wantTasks []TaskRef
		wantErr   bool
	}{
		{in: "12", wantIDs: []uint64{12}},
		{in: "12_*", wantIDs: []uint64{12}},
		{in: "12_7", wantTasks: []TaskRef{{12, 7}}},
		{in: "12_[1-3,5]", wantTasks: []TaskRef{{12, 1}, {12, 2}, {12, 3}, {12, 5}}},
		{in: "12_[1-3%2]", wantErr: true},
		{in: "12_x", wantErr: true},
		{in: "0", wantErr: true},
		{in: "abc", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ids, tasks, err := ParseJobIDs(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff(tt.wantIDs, ids); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantTasks, tasks); diff != "" {
				t.Errorf("tasks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestArrayIDs(t *testing.T) {
	meta := Job{ID: 7, ArrayJobID: 7, ArrayPending: NewTaskSet(seq(10, 99, 1)), ArrayThrottle: 8}
	task := Job{ID: 14, ArrayJobID: 7, ArrayTaskID: 2}
	plain := Job{ID: 9}
	tests := []struct {
		name       string
		j          Job
		id, taskID string
	}{
		{name: "meta", j: meta, id: "7_[10-99%8]", taskID: "10-99%8"},
		{name: "task", j: task, id: "7_2", taskID: "2"},
		{name: "plain", j: plain, id: "9", taskID: "N/A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.j.ArrayID(); got != tt.id {
				t.Errorf("ArrayID = %q, want %q", got, tt.id)
			}
			if got := tt.j.ArrayTaskString(); got != tt.taskID {
				t.Errorf("ArrayTaskString = %q, want %q", got, tt.taskID)
			}
		})
	}
	f := JobFilter{Tasks: []TaskRef{{7, 50}}}
	if !f.Match(&meta) || f.Match(&task) || f.Match(&plain) {
		t.Error("task filter 7_50 must match only the meta record holding it")
	}
	f = JobFilter{IDs: []uint64{7}}
	if !f.Match(&meta) || !f.Match(&task) || f.Match(&plain) {
		t.Error("id filter 7 must match every record of array 7")
	}
	back, err := ParseJobFilter(JobFilter{Tasks: []TaskRef{{7, 2}, {8, 0}}}.Values())
	if err != nil || len(back.Tasks) != 2 || back.Tasks[1] != (TaskRef{8, 0}) {
		t.Errorf("task filter round trip: %+v %v", back, err)
	}
}
