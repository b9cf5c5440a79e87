package livesteps

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestOf(t *testing.T) {
	start := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	batch := &api.Job{ID: 7, State: api.StateRunning, StartTime: start,
		Alloc: []api.NodeAlloc{{Node: "n2", CPUs: 4, GPUs: []int{0, 1}}, {Node: "n1", CPUs: 4}}}
	alloc := &api.Job{ID: 8, State: api.StateRunning, StartTime: start, JobSpec: api.JobSpec{Allocation: true},
		Alloc: []api.NodeAlloc{{Node: "n3", CPUs: 2}}}
	recs := []api.StepRecord{
		{JobID: 7, StepID: 3, Name: "late", State: api.StateRunning, Start: start.Add(3 * time.Second), Nodes: []string{"n1"}, NTasks: 1},
		{JobID: 7, StepID: 1, Name: "ended", State: api.StateCompleted, Start: start.Add(time.Second), End: start.Add(2 * time.Second)},
		{JobID: 7, StepID: 0, Name: "before requeue", State: api.StateRunning, Start: start.Add(-time.Hour)},
		{JobID: 7, StepID: 2, Name: "main", State: api.StateRunning, Start: start.Add(2 * time.Second), Nodes: []string{"n1", "n2"}, NTasks: 8, TimeLimit: 60},
		{JobID: 8, StepID: 0, Name: "other job", State: api.StateRunning, Start: start},
	}
	type brief struct {
		ID, Name string
		Tasks    int
		Nodes    []string
	}
	list := func(steps []Step) []brief {
		var out []brief
		for _, s := range steps {
			out = append(out, brief{s.ArrayID(), s.Name, s.Tasks, s.Nodes})
		}
		return out
	}
	want := []brief{{"7.batch", "batch", 1, []string{"n2"}}, {"7.2", "main", 8, []string{"n1", "n2"}}, {"7.3", "late", 1, []string{"n1"}}}
	if diff := cmp.Diff(want, list(Of(batch, recs))); diff != "" {
		t.Errorf("batch job's steps (-want +got):\n%s", diff)
	}
	// An allocation (salloc) has no batch step.
	want = []brief{{"8.0", "other job", 0, nil}}
	if diff := cmp.Diff(want, list(Of(alloc, recs))); diff != "" {
		t.Errorf("allocation's steps (-want +got):\n%s", diff)
	}
	task := *batch
	task.ArrayJobID, task.ArrayTaskID = 5, 2
	if got := Of(&task, nil)[0]; got.ArrayID() != "5_2.batch" || got.IDString() != "7.batch" || got.CPUs != 4 || got.GPUs != 2 {
		t.Errorf("array task's batch step = %s (%s), %d CPUs, %d GPUs", got.ArrayID(), got.IDString(), got.CPUs, got.GPUs)
	}
}
