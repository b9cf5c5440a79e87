package api

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestJobListRoundTrip(t *testing.T) {
	req := true
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	l := JobList{Now: now, Jobs: []Job{
		{ID: 1, JobSpec: JobSpec{Name: "a", Requeue: &req, GPUs: 2}, State: StateRunning, SubmitTime: now,
			Alloc: []NodeAlloc{{Node: "gpu01", CPUs: 2, GPUs: []int{0, 1}}}},
		{ID: 2, State: StatePending, Reason: ReasonResources, ReasonDetail: "0/2 nodes available"},
	}}
	var buf bytes.Buffer
	if err := WriteJobList(&buf, l); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJobList(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l, got); diff != "" {
		t.Errorf("json (-want +got):\n%s", diff)
	}
	buf.Reset()
	if err := WriteJobsGob(&buf, l.Jobs); err != nil {
		t.Fatal(err)
	}
	jobs, err := ReadJobsGob(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l.Jobs, jobs); diff != "" {
		t.Errorf("gob (-want +got):\n%s", diff)
	}
	var empty bytes.Buffer
	WriteJobList(&empty, JobList{Now: now})
	if got := empty.String(); got != `{"jobs":[],"now":"2026-11-29T12:00:00Z"}`+"\n" {
		t.Errorf("empty listing %q", got)
	}
	if _, err := ReadJobsGob(bytes.NewReader([]byte("garbage"))); err == nil {
		t.Error("garbage decoded")
	}
}
