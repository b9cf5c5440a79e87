package listing

import (
	"bytes"
	"github.com/tide-hpc/tide/ctld/api"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestJobListRoundTrip(t *testing.T) {
	req := true
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	l := api.JobList{Now: now, Jobs: []api.Job{
		{ID: 1, JobSpec: api.JobSpec{Name: "a", Requeue: &req, GPUs: 2}, State: api.StateRunning, SubmitTime: now,
			Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 2, GPUs: []int{0, 1}}}},
		{ID: 2, State: api.StatePending, Reason: api.ReasonResources, ReasonDetail: "0/2 nodes available"},
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
	if err := WriteJobs(&buf, l.Jobs); err != nil {
		t.Fatal(err)
	}
	jobs, err := ReadJobs(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l.Jobs, jobs); diff != "" {
		t.Errorf("binary (-want +got):\n%s", diff)
	}
	var empty bytes.Buffer
	WriteJobList(&empty, api.JobList{Now: now})
	if got := empty.String(); got != `{"jobs":[],"now":"2026-11-29T12:00:00Z"}`+"\n" {
		t.Errorf("empty listing %q", got)
	}
	if _, err := ReadJobs(bytes.NewReader([]byte("garbage"))); err == nil {
		t.Error("garbage decoded")
	}
}
