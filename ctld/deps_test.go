package ctld

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestDepState(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	job := func(st api.JobState, startedAgo time.Duration) *api.Job {
		j := &api.Job{State: st}
		if startedAgo > 0 {
			j.StartTime = now.Add(-startedAgo)
		}
		return j
	}
	pending := job(api.StatePending, 0)
	running := job(api.StateRunning, time.Minute)
	ok := job(api.StateCompleted, time.Hour)
	failed := job(api.StateFailed, time.Hour)
	cancelled := job(api.StateCancelled, time.Hour)
	meta := &api.Job{State: api.StatePending, ArrayJobID: 5, ArrayPending: api.NewTaskSet([]int{3, 4})}
	tests := []struct {
		name    string
		kind    string
		recs    []*api.Job
		minutes int
		want    api.DepState
	}{
		{name: "after pending", kind: api.DepAfter, recs: []*api.Job{pending}, want: api.DepUnfulfilled},
		{name: "after running", kind: api.DepAfter, recs: []*api.Job{running}, want: api.DepFulfilled},
		{name: "after cancelled", kind: api.DepAfter, recs: []*api.Job{cancelled}, want: api.DepFulfilled},
		{name: "after+5 started a minute ago", kind: api.DepAfter, recs: []*api.Job{running}, minutes: 5, want: api.DepUnfulfilled},
		{name: "after+5 started an hour ago", kind: api.DepAfter, recs: []*api.Job{ok}, minutes: 5, want: api.DepFulfilled},
		{name: "afterany running", kind: api.DepAfterAny, recs: []*api.Job{running}, want: api.DepUnfulfilled},
		{name: "afterany cancelled", kind: api.DepAfterAny, recs: []*api.Job{cancelled}, want: api.DepFulfilled},
		{name: "afterany failed", kind: api.DepAfterAny, recs: []*api.Job{failed}, want: api.DepFulfilled},
		{name: "afterok completed", kind: api.DepAfterOK, recs: []*api.Job{ok}, want: api.DepFulfilled},
		{name: "afterok failed", kind: api.DepAfterOK, recs: []*api.Job{failed}, want: api.DepFailed},
		{name: "afterok cancelled", kind: api.DepAfterOK, recs: []*api.Job{cancelled}, want: api.DepFailed},
		{name: "afterok array with a failed task fails early", kind: api.DepAfterOK, recs: []*api.Job{meta, running, failed}, want: api.DepFailed},
		{name: "afterok array still pending", kind: api.DepAfterOK, recs: []*api.Job{meta, ok}, want: api.DepUnfulfilled},
		{name: "afternotok completed", kind: api.DepAfterNotOK, recs: []*api.Job{ok}, want: api.DepFailed},
		{name: "afternotok failed", kind: api.DepAfterNotOK, recs: []*api.Job{failed}, want: api.DepFulfilled},
		{name: "afternotok array waits for every task", kind: api.DepAfterNotOK, recs: []*api.Job{failed, running}, want: api.DepUnfulfilled},
		{name: "afternotok array one failed", kind: api.DepAfterNotOK, recs: []*api.Job{failed, ok}, want: api.DepFulfilled},
		{name: "forgotten job lifts the condition", kind: api.DepAfterOK, recs: nil, want: api.DepFulfilled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := depState(tt.kind, tt.recs, tt.minutes, now); got != tt.want {
				t.Errorf("depState = %s, want %s", got, tt.want)
			}
		})
	}
}

// endJob reports a running job's end on its node.
func (h *harness) end(id uint64, code int) {
	h.t.Helper()
	j := h.job(id)
	if !j.State.Active() {
		h.t.Fatalf("job %d is %s, not running", id, j.State)
	}
	h.sync(j.BatchHost(), finished(id, code))
}

func TestDependencies(t *testing.T) {
	tests := []struct {
		name string
		// first runs and ends with code (-1: cancelled while pending).
		code       int
		dep        string
		kill       bool
		wantState  api.JobState
		wantReason api.ReasonCode
		wantDep    string
	}{
		{name: "afterok on success runs", code: 0, dep: "afterok:%d", wantState: api.StateRunning, wantReason: api.ReasonNone},
		{name: "afterok on failure never satisfied", code: 1, dep: "afterok:%d", wantState: api.StatePending,
			wantReason: api.ReasonDependencyNeverSatisfied, wantDep: "afterok:%d(failed)"},
		{name: "afterok on failure with kill-on-invalid-dep", code: 1, dep: "afterok:%d", kill: true,
			wantState: api.StateCancelled, wantReason: api.ReasonDependencyNeverSatisfied, wantDep: "afterok:%d(failed)"},
		{name: "afternotok on failure runs", code: 2, dep: "afternotok:%d", wantState: api.StateRunning, wantReason: api.ReasonNone},
		{name: "afterany on cancelled runs", code: -1, dep: "afterany:%d", wantState: api.StateRunning, wantReason: api.ReasonNone},
		{name: "any of failed afterok or afterany", code: 1, dep: "afterok:%[1]d?afterany:%[1]d", wantState: api.StateRunning, wantReason: api.ReasonNone},
		{name: "all of failed afterok and afterany", code: 1, dep: "afterok:%[1]d,afterany:%[1]d", wantState: api.StatePending,
			wantReason: api.ReasonDependencyNeverSatisfied, wantDep: "afterok:%[1]d(failed),afterany:%[1]d(fulfilled)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.register("gpu01")
			h.register("gpu02")
			first := h.submit(api.JobSpec{Name: "first", Hold: tt.code < 0})
			dep := h.submit(api.JobSpec{Name: "second", Dependency: fmt.Sprintf(tt.dep, first), KillInvalidDep: tt.kill})
			h.s.schedulePass()
			j := h.job(dep)
			if j.State != api.StatePending || j.Reason != api.ReasonDependency || !strings.Contains(j.Dependency, "(unfulfilled)") {
				t.Fatalf("before: %s %s %q", j.State, j.Reason, j.Dependency)
			}
			if tt.code < 0 {
				h.s.cancel(h.alice, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{first}}})
			} else {
				h.end(first, tt.code)
			}
			h.s.schedulePass()
			j = h.job(dep)
			want := ""
			if tt.wantDep != "" {
				want = fmt.Sprintf(tt.wantDep, first)
			}
			if j.State != tt.wantState || j.Reason != tt.wantReason || j.Dependency != want {
				t.Fatalf("after: %s %s %q, want %s %s %q", j.State, j.Reason, j.Dependency, tt.wantState, tt.wantReason, want)
			}
		})
	}
}

func TestDependencySubmitErrors(t *testing.T) {
	h := newHarness(t)
	arr := h.submit(api.JobSpec{Array: "0-3"})
	for _, dep := range []string{"afterok:9999", "afterok:1?", "before:1", fmt.Sprintf("afterok:%d_7", arr)} {
		_, err := h.s.submit(context.Background(), h.alice, api.SubmitRequest{Spec: api.JobSpec{
			Dependency: dep, Script: "#!/bin/sh\n", WorkDir: "/w"}})
		if err == nil || !strings.Contains(err.Error(), "Job dependency problem") {
			t.Errorf("dependency %q: err = %v", dep, err)
		}
	}
	if id := h.submit(api.JobSpec{Dependency: fmt.Sprintf("afterok:%d_3", arr)}); h.job(id).Dependency != fmt.Sprintf("afterok:%d_3(unfulfilled)", arr) {
		t.Errorf("task dependency shown as %q", h.job(id).Dependency)
	}
}

func TestSingleton(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	a := h.submit(api.JobSpec{Name: "one"})
	h.s.schedulePass()
	b := h.submit(api.JobSpec{Name: "one", Dependency: "singleton"})
	c := h.submit(api.JobSpec{Name: "one", Dependency: "singleton"})
	other := h.submit(api.JobSpec{Name: "two", Dependency: "singleton"})
	bob := caller{uid: 1001, gid: 1001, user: "bob", known: true}
	resp, err := h.s.submit(context.Background(), bob, api.SubmitRequest{Spec: api.JobSpec{
		Name: "one", Dependency: "singleton", Script: "#!/bin/sh\n", WorkDir: "/w"}})
	if err != nil {
		t.Fatal(err)
	}
	h.s.schedulePass()
	states := func() string {
		var out []string
		for _, id := range []uint64{a, b, c, other, resp.JobID} {
			out = append(out, string(h.job(id).State.Short()))
		}
		return strings.Join(out, " ")
	}
	// Bob's "one" and alice's "two" do not wait for alice's "one".
	if got := states(); got != "R PD PD R R" {
		t.Fatalf("states %s", got)
	}
	h.end(a, 0)
	h.s.schedulePass()
	if got := states(); got != "CD R PD R R" {
		t.Fatalf("after the first ended: %s (singletons start one at a time)", got)
	}
	h.end(b, 1)
	h.s.schedulePass()
	if got := states(); got != "CD F R R R" {
		t.Fatalf("after the second ended: %s", got)
	}
}

func TestDependencyUpdate(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	first := h.submit(api.JobSpec{Name: "first", Hold: true})
	dep := h.submit(api.JobSpec{Dependency: fmt.Sprintf("afterok:%d", first)})
	h.s.schedulePass()
	if j := h.job(dep); j.State != api.StatePending || j.Reason != api.ReasonDependency {
		t.Fatalf("%s %s", j.State, j.Reason)
	}
	bad := "afterok:424242"
	if res, _ := h.s.updateJobs(h.alice, api.JobUpdate{Action: "update", IDs: []uint64{dep}, Dependency: &bad}); res.Results[0].Error == "" {
		t.Fatal("update to an unknown job accepted")
	}
	none := ""
	if res, _ := h.s.updateJobs(h.alice, api.JobUpdate{Action: "update", IDs: []uint64{dep}, Dependency: &none}); res.Results[0].Error != "" {
		t.Fatal(res.Results[0].Error)
	}
	h.s.schedulePass()
	if j := h.job(dep); j.State != api.StateRunning || j.Dependency != "" {
		t.Fatalf("after Dependency=: %s %q", j.State, j.Dependency)
	}
}

func TestAfterCorr(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	a := h.submit(api.JobSpec{Name: "prep", Array: "0-3"})
	b := h.submit(api.JobSpec{Name: "train", Array: "0-4", Dependency: fmt.Sprintf("aftercorr:%d", a)})
	h.s.schedulePass()
	// Task 4 has no counterpart in a, so it need not wait.
	if got := h.activeTasks(b); len(got) != 1 || got[0] != fmt.Sprintf("%d_4", b) {
		t.Fatalf("b running %v", got)
	}
	recs := map[int]uint64{}
	for _, j := range h.arrayRecords(a) {
		recs[j.ArrayTaskID] = j.ID
	}
	h.end(recs[0], 0)
	h.end(recs[1], 3)
	h.s.schedulePass()
	got := h.activeTasks(b)
	if len(got) != 2 || got[0] != fmt.Sprintf("%d_0", b) {
		t.Fatalf("b running %v, want tasks 0 and 4", got)
	}
	for _, j := range h.arrayRecords(b) {
		if j.ArrayTaskID == 1 && (j.IsArrayMeta() || j.Reason != api.ReasonDependencyNeverSatisfied) {
			t.Fatalf("task 1 after its counterpart failed: %s %s", j.ArrayID(), j.Reason)
		}
	}
	if m := h.job(b); !m.IsArrayMeta() || m.ArrayTaskString() != "2-3" {
		t.Fatalf("b meta holds %s", m.ArrayTaskString())
	}
}
