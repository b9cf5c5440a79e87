package squeue

import (
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
)

// TestPartitionListsAndStart: a job submitted to several partitions
// (-p a,b) shows the list while pending and the partition it runs in
// once running, squeue -p matches any partition of a pending job's
// list, and --start shows the controller's expected start or N/A.
func TestPartitionListsAndStart(t *testing.T) {
	now := time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)
	job := func(id uint64, st api.JobState, part, list string) api.Job {
		j := api.Job{ID: id, State: st, User: "alice", SubmitTime: now.Add(-time.Hour), PartitionList: list}
		j.Name, j.Partition, j.TimeLimit = "job", part, 600
		if st == api.StateRunning {
			j.StartTime = now.Add(-time.Minute)
			j.Alloc = []api.NodeAlloc{{Node: "b01", CPUs: 1, Tasks: 1}}
		}
		return j
	}
	fresh := job(1, api.StatePending, "a,b", "")
	requeued := job(2, api.StatePending, "b", "a,b")
	requeued.ExpectedStart = now.Add(30 * time.Minute)
	running := job(3, api.StateRunning, "b", "a,b")
	fake := &clitest.FakeAPI{Now: now, JobRecs: []api.Job{fresh, requeued, running}}

	out, _, err := exec(t, fake, nil, "-h", "-o", "%i %P %T")
	if err != nil {
		t.Fatal(err)
	}
	if want := "1 a,b PENDING\n2 a,b PENDING\n3 b RUNNING\n"; out != want {
		t.Errorf("squeue:\n%s\nwant:\n%s", out, want)
	}
	out, _, err = exec(t, fake, nil, "-h", "-p", "a", "-o", "%i")
	if err != nil {
		t.Fatal(err)
	}
	if want := "1\n2\n"; out != want {
		t.Errorf("squeue -p a:\n%s\nwant:\n%s", out, want)
	}
	out, _, err = exec(t, fake, nil, "--start", "-h", "-o", "%i %S")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "2026-03-10T14:30:00") || lines[1] != "1 N/A" {
		t.Errorf("squeue --start:\n%s\nwant job 2 at 2026-03-10T14:30:00 first, then job 1 at N/A", out)
	}
}
