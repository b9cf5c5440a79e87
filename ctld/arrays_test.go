package ctld

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/accounting"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// arrayRecords returns copies of every record of array id, by task.
func (h *harness) arrayRecords(id uint64) []api.Job {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	var out []api.Job
	for _, j := range h.s.jobs {
		if j.ArrayJobID == id {
			out = append(out, *j)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// activeTasks lists the array ids of the active tasks of array id.
func (h *harness) activeTasks(id uint64) []string {
	var out []string
	for _, j := range h.arrayRecords(id) {
		if j.State.Active() {
			out = append(out, j.ArrayID())
		}
	}
	sort.Strings(out)
	return out
}

// finishActive reports every active job as ended with code, node by node.
func (h *harness) finishActive(code int) {
	h.t.Helper()
	h.s.mu.Lock()
	byNode := map[string][]api.NodeJobReport{}
	for _, j := range h.s.jobs {
		if j.State.Active() {
			rep := finished(j.ID, code)
			rep.Restart = j.Restarts
			byNode[j.BatchHost()] = append(byNode[j.BatchHost()], rep)
		}
	}
	h.s.mu.Unlock()
	for node, reps := range byNode {
		h.sync(node, reps...)
	}
}

func TestArrayThrottle(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	id := h.submit(api.JobSpec{Name: "sweep", Array: "0-19%4"})
	meta := h.job(id)
	if meta.ArrayJobID != id || meta.ArrayPending.Len() != 20 || meta.ArrayThrottle != 4 || meta.Stdout != api.ArrayDefaultStdout {
		t.Fatalf("meta record: %+v", meta)
	}
	if got := meta.ArrayID(); got != fmt.Sprintf("%d_[0-19%%4]", id) {
		t.Fatalf("ArrayID = %s", got)
	}
	seen := map[int]bool{}
	for round := 0; round < 5; round++ {
		h.s.schedulePass()
		h.s.schedulePass() // a second pass must not exceed the throttle
		active := h.activeTasks(id)
		if len(active) != 4 {
			t.Fatalf("round %d: %d tasks running, want 4: %v", round, len(active), active)
		}
		for _, j := range h.arrayRecords(id) {
			if j.State.Active() {
				if seen[j.ArrayTaskID] {
					t.Fatalf("task %d started twice", j.ArrayTaskID)
				}
				seen[j.ArrayTaskID] = true
			}
		}
		if round < 4 {
			if m := h.job(id); m.State != api.StatePending || m.Reason != api.ReasonJobArrayTaskLimit {
				t.Fatalf("round %d: meta %s %s", round, m.State, m.Reason)
			}
		}
		h.finishActive(0)
	}
	if len(seen) != 20 {
		t.Fatalf("ran %d tasks", len(seen))
	}
	recs := h.arrayRecords(id)
	if len(recs) != 20 {
		t.Fatalf("%d records, want one per task", len(recs))
	}
	// The last task took over the meta record (and its id), as in Slurm.
	last := h.job(id)
	if last.IsArrayMeta() || last.ArrayTaskID != 19 || last.State != api.StateCompleted {
		t.Fatalf("last task: %+v", last.ArrayID())
	}
}

func TestArrayTaskLaunchAndSpool(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	id := h.submit(api.JobSpec{Name: "arr", Array: "1,3,5-9", Script: "#!/bin/sh\necho task\n"})
	h.s.schedulePass()
	recs := h.arrayRecords(id)
	if len(recs) != 7 {
		t.Fatalf("%d records after one pass on an idle cluster, want all 7 tasks started", len(recs))
	}
	var tasks []int
	for _, j := range recs {
		if j.State != api.StateRunning {
			t.Fatalf("task %s is %s", j.ArrayID(), j.State)
		}
		tasks = append(tasks, j.ArrayTaskID)
	}
	sort.Ints(tasks)
	if diff := cmp.Diff([]int{1, 3, 5, 6, 7, 8, 9}, tasks); diff != "" {
		t.Fatalf("tasks (-want +got):\n%s", diff)
	}
	// A split-off task reads the array's script from the spool.
	task := recs[0]
	if task.ID == id {
		task = recs[1]
	}
	script, _, err := h.s.store.Spool(context.Background(), task.ID)
	if err != nil || !strings.Contains(script, "echo task") {
		t.Fatalf("spool of task %d: %q %v", task.ID, script, err)
	}
	if a := api.ArrayLaunchOf(&task); a == nil || a.JobID != id || a.Count != 7 || a.Min != 1 || a.Max != 9 || a.Step != 1 {
		t.Fatalf("launch of %s: %+v", task.ArrayID(), a)
	}
}

// TestLargeArrayPassIsSmall: a 10,000-task array is one record, and a
// pass offers the scheduler only as many tasks as could start.
func TestLargeArrayPassIsSmall(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	id := h.submit(api.JobSpec{Name: "big", Array: "0-9999", CPUsPerTask: 8})
	h.s.mu.Lock()
	n := len(h.s.jobs)
	snap := h.s.snapshot()
	h.s.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d records for one pending array", n)
	}
	// Two nodes of 8 CPUs fit two 8-CPU tasks.
	if len(snap.Pending) != 2 {
		t.Fatalf("pass sees %d candidates, want 2", len(snap.Pending))
	}
	h.s.schedulePass()
	if got := len(h.activeTasks(id)); got != 2 {
		t.Fatalf("%d tasks running", got)
	}
	h.s.mu.Lock()
	snap = h.s.snapshot()
	h.s.mu.Unlock()
	if len(snap.Pending) != 1 {
		t.Fatalf("full cluster: pass sees %d candidates, want the meta record once", len(snap.Pending))
	}
	if m := h.job(id); m.ArrayPending.Len() != 9998 || m.ArrayTaskString() != "2-9999" {
		t.Fatalf("meta holds %s", m.ArrayTaskString())
	}
}

func TestArraySubmitLimits(t *testing.T) {
	h := newHarnessWith(t, testConfig+"max_array_size: 100\n")
	tests := []struct {
		name, array string
		wantErr     bool
	}{
		{name: "at the limit", array: "0-99"},
		{name: "task id too large", array: "0-100", wantErr: true},
		{name: "bad syntax", array: "5-1", wantErr: true},
		{name: "step and throttle", array: "0-99:10%2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.s.submit(context.Background(), h.alice, api.SubmitRequest{Spec: api.JobSpec{
				Array: tt.array, Script: "#!/bin/sh\n", WorkDir: "/w"}})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), "Invalid job array specification") {
				t.Fatalf("message %q", err)
			}
		})
	}
}

func TestArrayCancelAndHoldTasks(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	id := h.submit(api.JobSpec{Name: "arr", Array: "0-9", Hold: true})
	// scancel N_7: only task 7 leaves the meta record, cancelled.
	resp, _ := h.s.cancel(h.alice, api.CancelRequest{Filter: api.JobFilter{Tasks: []api.TaskRef{{JobID: id, Task: 7}}}})
	if len(resp.Results) != 1 || resp.Results[0].Error != "" || resp.Results[0].ID != fmt.Sprintf("%d_7", id) {
		t.Fatalf("cancel results %+v", resp.Results)
	}
	recs := h.arrayRecords(id)
	if len(recs) != 2 || recs[1].ArrayTaskID != 7 || recs[1].State != api.StateCancelled {
		t.Fatalf("records after scancel N_7: %+v", recs)
	}
	if m := h.job(id); m.ArrayTaskString() != "0-6,8-9" || m.State != api.StatePending {
		t.Fatalf("meta after scancel N_7: %s %s", m.ArrayTaskString(), m.State)
	}
	// Release the array; task 3 is held on its own first.
	h.s.updateJobs(h.alice, api.JobUpdate{Action: "release", IDs: []uint64{id}})
	res, _ := h.s.updateJobs(h.alice, api.JobUpdate{Action: "hold", Tasks: []api.TaskRef{{JobID: id, Task: 3}}})
	if res.Results[0].Error != "" {
		t.Fatalf("hold N_3: %+v", res)
	}
	h.s.schedulePass()
	if got := len(h.activeTasks(id)); got != 8 {
		t.Fatalf("%d tasks running, want 8 (9 pending minus held task 3)", got)
	}
	lf := api.JobFilter{Tasks: []api.TaskRef{{JobID: id, Task: 3}}, All: true}
	if l := h.s.listJobs(lf, seeAll); len(l.Jobs) != 1 || l.Jobs[0].HoldKind == api.HoldNone || l.Jobs[0].ArrayID() != fmt.Sprintf("%d_3", id) {
		t.Fatalf("squeue -j N_3: %+v", l.Jobs)
	}
	// scancel N cancels every record of the array.
	resp, _ = h.s.cancel(h.alice, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{id}}})
	if resp.Results[0].Error != "" {
		t.Fatalf("scancel N: %+v", resp.Results)
	}
	for _, j := range h.arrayRecords(id) {
		if j.State != api.StateCancelled && j.State != api.StateCompleting {
			t.Fatalf("after scancel N: %s is %s", j.ArrayID(), j.State)
		}
	}
	if l := h.s.listJobs(api.JobFilter{IDs: []uint64{id}, All: true}, seeAll); len(l.Jobs) != 10 {
		t.Fatalf("squeue -j N lists %d records, want 10", len(l.Jobs))
	}
}

func TestArraySurvivesRestart(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	id := h.submit(api.JobSpec{Name: "arr", Array: "0-99%2"})
	h.s.schedulePass()
	h.s.mu.Lock()
	h.s.flushAll()
	h.s.mu.Unlock()
	h.restart()
	m := h.job(id)
	if !m.IsArrayMeta() || m.ArrayTaskString() != "2-99%2" {
		t.Fatalf("meta after restart: %s", m.ArrayTaskString())
	}
	if got := h.activeTasks(id); len(got) != 2 {
		t.Fatalf("active after restart: %v", got)
	}
	// New tasks get ids after the split ones.
	next := h.submit(api.JobSpec{Name: "x"})
	for _, j := range h.arrayRecords(id) {
		if j.ID >= next {
			t.Fatalf("task id %d reused by job %d", j.ID, next)
		}
	}
}

func TestArrayThrottleUpdate(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	id := h.submit(api.JobSpec{Name: "arr", Array: "0-9%1"})
	h.s.schedulePass()
	if got := len(h.activeTasks(id)); got != 1 {
		t.Fatalf("%d running", got)
	}
	three := 3
	res, _ := h.s.updateJobs(h.alice, api.JobUpdate{Action: "update", IDs: []uint64{id}, ArrayThrottle: &three})
	if res.Results[0].Error != "" {
		t.Fatal(res.Results[0].Error)
	}
	h.s.schedulePass()
	if got := len(h.activeTasks(id)); got != 3 {
		t.Fatalf("%d running after ArrayTaskThrottle=3", got)
	}
}

func TestArrayOutputPatterns(t *testing.T) {
	j := api.Job{ID: 14, ArrayJobID: 7, ArrayTaskID: 2, JobSpec: api.JobSpec{Name: "arr"}}
	if got := api.ExpandPattern(api.ArrayDefaultStdout, j.PatternVars("n1")); got != "slurm-7_2.out" {
		t.Fatalf("default output = %s", got)
	}
	if got := api.ExpandPattern("%x-%A-%a-%j.log", j.PatternVars("n1")); got != "arr-7-2-14.log" {
		t.Fatalf("pattern = %s", got)
	}
}

// BenchmarkPassWithLargeArray times a scheduling pass on a full cluster
// with a 10,000-task array pending: it must cost about what one pending
// job costs, not 10,000.
func BenchmarkPassWithLargeArray(b *testing.B) {
	for _, tc := range []struct {
		name  string
		array bool
	}{{"array=10000", true}, {"jobs=1", false}} {
		b.Run(tc.name, func(b *testing.B) {
			s := benchServer(b)
			alice := caller{uid: 1000, gid: 1000, user: "alice", known: true}
			submit := func(spec api.JobSpec) {
				spec.Script, spec.WorkDir = "#!/bin/sh\n", "/w"
				if _, err := s.submit(context.Background(), alice, api.SubmitRequest{Spec: spec}); err != nil {
					b.Fatal(err)
				}
			}
			// Fill both nodes so that nothing starts.
			submit(api.JobSpec{Name: "fill", Nodes: 2, CPUsPerTask: 8})
			s.schedulePass()
			spec := api.JobSpec{Name: "wait"}
			if tc.array {
				spec.Array = "0-9999"
			}
			submit(spec)
			s.schedulePass()
			s.mu.Lock()
			n := len(s.snapshot().Pending)
			s.mu.Unlock()
			if n != 1 {
				b.Fatalf("pass sees %d pending, want 1", n)
			}
			for b.Loop() {
				s.schedulePass()
			}
		})
	}
}

// benchServer is a controller on testConfig with both nodes registered.
func benchServer(b *testing.B) *Server {
	s := benchServerOf(b, testConfig)
	for _, node := range []string{"gpu01", "gpu02"} {
		gpus, _ := gres.Fake(node, gres.FakeConfig{Count: 8})
		if _, err := s.register(api.NodeRegistration{Name: node, CPUs: 8, MemoryMB: 64 * 1024, GPUs: gpus}); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// benchServerOf is a controller of config (YAML) on a fresh store, for
// benchmarks (tests use the harness, which keeps a fake clock).
func benchServerOf(b testing.TB, config string) *Server {
	b.Helper()
	cfg, err := ParseConfig(strings.NewReader(config))
	if err != nil {
		b.Fatal(err)
	}
	cl, err := cfg.Validate()
	if err != nil {
		b.Fatal(err)
	}
	st, err := accounting.Open(filepath.Join(b.TempDir(), "tide.db"))
	if err != nil {
		b.Fatal(err)
	}
	s, err := newServer(cl, slog.New(slog.DiscardHandler), st, "k", time.Now)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
