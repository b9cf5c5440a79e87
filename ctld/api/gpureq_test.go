package api

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolveGPUs(t *testing.T) {
	tests := []struct {
		name    string
		in      JobSpec
		want    JobSpec // the spec after resolution
		wantErr string
	}{
		{name: "nothing to do", in: JobSpec{Tasks: 3}, want: JobSpec{Tasks: 3}},
		{name: "--gpus alone stays a total", in: JobSpec{GPUs: 16}, want: JobSpec{GPUs: 16}},
		{name: "--gpus with -N", in: JobSpec{GPUs: 16, Nodes: 2}, want: JobSpec{GPUs: 16, Nodes: 2}},
		{name: "--gpus and --gpus-per-node fix the node count", in: JobSpec{GPUs: 16, GPUsPerNode: 8},
			want: JobSpec{GPUs: 16, GPUsPerNode: 8, Nodes: 2}},
		{name: "... within -N's range", in: JobSpec{GPUs: 16, GPUsPerNode: 4, Nodes: 2, MaxNodes: 4},
			want: JobSpec{GPUs: 16, GPUsPerNode: 4, Nodes: 4}},
		{name: "... outside -N", in: JobSpec{GPUs: 16, GPUsPerNode: 8, Nodes: 3},
			wantErr: "--gpus=16 with --gpus-per-node=8 needs 2 nodes, outside the 3 requested with -N"},
		{name: "--gpus not a multiple of --gpus-per-node", in: JobSpec{GPUs: 12, GPUsPerNode: 8},
			wantErr: "--gpus=12 is not a multiple of --gpus-per-node=8"},
		{name: "--gpus-per-node above --gpus", in: JobSpec{GPUs: 2, GPUsPerNode: 4},
			wantErr: "--gpus-per-node=4 is more than --gpus=2"},
		{name: "--gpus and --gpus-per-task fix the task count", in: JobSpec{GPUs: 8, GPUsPerTask: 2},
			want: JobSpec{GPUs: 8, GPUsPerTask: 2, Tasks: 4}},
		{name: "... which -n must equal", in: JobSpec{GPUs: 8, GPUsPerTask: 2, Tasks: 3},
			wantErr: "--gpus=8 with --gpus-per-task=2 makes 4 tasks, not the 3 of -n"},
		{name: "--gpus not a multiple of --gpus-per-task", in: JobSpec{GPUs: 7, GPUsPerTask: 2},
			wantErr: "--gpus=7 is not a multiple of --gpus-per-task=2"},
		{name: "-n4 --gpus-per-task=1", in: JobSpec{Tasks: 4, GPUsPerTask: 1}, want: JobSpec{Tasks: 4, GPUsPerTask: 1}},
		{name: "--gpus-per-task with -N: one task per node", in: JobSpec{Nodes: 2, GPUsPerTask: 1},
			want: JobSpec{Nodes: 2, Tasks: 2, GPUsPerTask: 1}},
		{name: "--gpus-per-task with --ntasks-per-node", in: JobSpec{TasksPerNode: 2, GPUsPerTask: 1},
			want: JobSpec{TasksPerNode: 2, GPUsPerTask: 1}},
		{name: "--gpus-per-task without a task count: one task per node", in: JobSpec{GPUsPerTask: 1},
			want: JobSpec{GPUsPerTask: 1}},
		{name: "--gpus-per-task with a node range", in: JobSpec{Nodes: 1, MaxNodes: 3, GPUsPerTask: 1},
			want: JobSpec{Nodes: 1, MaxNodes: 3, GPUsPerTask: 1}},
		{name: "--gpus-per-node and --gpus-per-task fix tasks per node", in: JobSpec{Tasks: 8, GPUsPerNode: 8, GPUsPerTask: 2},
			want: JobSpec{Tasks: 8, GPUsPerNode: 8, GPUsPerTask: 2, TasksPerNode: 4}},
		{name: "... which --ntasks-per-node must equal", in: JobSpec{Tasks: 8, TasksPerNode: 2, GPUsPerNode: 8, GPUsPerTask: 2},
			wantErr: "makes 4 tasks per node, not the 2 of --ntasks-per-node"},
		{name: "--gpus-per-node not a multiple of --gpus-per-task", in: JobSpec{Tasks: 2, GPUsPerNode: 3, GPUsPerTask: 2},
			wantErr: "--gpus-per-node=3 is not a multiple of --gpus-per-task=2"},
		{name: "--gpus-per-task above --gpus-per-node", in: JobSpec{Tasks: 2, GPUsPerNode: 1, GPUsPerTask: 2},
			wantErr: "--gpus-per-task=2 is more than --gpus-per-node=1"},
		{name: "fewer GPUs than nodes", in: JobSpec{GPUs: 2, Nodes: 4},
			wantErr: "--gpus=2 is fewer than the 4 nodes of -N"},
		{name: "all three", in: JobSpec{GPUs: 16, GPUsPerNode: 8, GPUsPerTask: 2},
			want: JobSpec{GPUs: 16, GPUsPerNode: 8, GPUsPerTask: 2, Nodes: 2, Tasks: 8, TasksPerNode: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.in
			err := s.ResolveGPUs()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, s); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTaskGPUs(t *testing.T) {
	s := JobSpec{GPUsPerTask: 2}
	a := NodeAlloc{Tasks: 3, GPUs: []int{1, 2, 4, 5, 6, 7}}
	want := [][]int{{1, 2}, {4, 5}, {6, 7}}
	got := s.TaskGPUs(&a)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TaskGPUs (-want +got):\n%s", diff)
	}
	// The sets never share an index and cannot grow into each other.
	got[0] = append(got[0], 99)
	if a.GPUs[2] != 4 {
		t.Errorf("appending to a task's set changed the allocation: %v", a.GPUs)
	}
	for _, tt := range []struct {
		name string
		s    JobSpec
		a    NodeAlloc
	}{
		{"no per-task request", JobSpec{GPUs: 4}, NodeAlloc{Tasks: 2, GPUs: []int{0, 1, 2, 3}}},
		{"too few GPUs for the tasks", JobSpec{GPUsPerTask: 2}, NodeAlloc{Tasks: 3, GPUs: []int{0, 1, 2, 3}}},
		{"no tasks", JobSpec{GPUsPerTask: 1}, NodeAlloc{GPUs: []int{0}}},
	} {
		if got := tt.s.TaskGPUs(&tt.a); got != nil {
			t.Errorf("%s: TaskGPUs = %v, want nil", tt.name, got)
		}
	}
}

func TestPartitionNames(t *testing.T) {
	for in, want := range map[string][]string{
		"":             nil,
		"gpu":          {"gpu"},
		" gpu ":        {"gpu"},
		"a,b":          {"a", "b"},
		"b,a":          {"b", "a"},
		"a, b,,a , c,": {"a", "b", "c"},
		",":            nil,
	} {
		if diff := cmp.Diff(want, PartitionNames(in)); diff != "" {
			t.Errorf("PartitionNames(%q) (-want +got):\n%s", in, diff)
		}
	}
}

func TestJobPartitionViews(t *testing.T) {
	pending := Job{State: StatePending, JobSpec: JobSpec{Partition: "a,b"}}
	running := Job{State: StateRunning, JobSpec: JobSpec{Partition: "b"}, PartitionList: "a,b"}
	requeued := Job{State: StatePending, JobSpec: JobSpec{Partition: "b"}, PartitionList: "a,b"}
	for _, tt := range []struct {
		name        string
		j           Job
		shown       string
		in, notIn   []string
		filterMatch bool
	}{
		{"pending", pending, "a,b", []string{"a", "b"}, []string{"c", "a,b"}, true},
		{"running", running, "b", []string{"b"}, []string{"a"}, false},
		{"requeued", requeued, "a,b", []string{"a", "b"}, []string{"c"}, true},
	} {
		if got := tt.j.ShownPartition(); got != tt.shown {
			t.Errorf("%s: ShownPartition = %q, want %q", tt.name, got, tt.shown)
		}
		for _, p := range tt.in {
			if !tt.j.InPartition(p) {
				t.Errorf("%s: not in partition %s", tt.name, p)
			}
		}
		for _, p := range tt.notIn {
			if tt.j.InPartition(p) {
				t.Errorf("%s: in partition %s", tt.name, p)
			}
		}
		f := JobFilter{Partitions: []string{"a"}, All: true}
		if got := f.Match(&tt.j); got != tt.filterMatch {
			t.Errorf("%s: squeue -p a matches = %v, want %v", tt.name, got, tt.filterMatch)
		}
	}
}
