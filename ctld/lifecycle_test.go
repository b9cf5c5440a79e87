package ctld

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestJobStateChangesGoThroughTheLifecycle keeps every change of a job's
// state in ctld/state: the controller's code assigns no State field but
// the few below, which are not a job's (or, in the interner, not a
// change). A new one fails here: a job's state changes through
// s.transition, a node's or a step's gets a line below.
func TestJobStateChangesGoThroughTheLifecycle(t *testing.T) {
	notJobs := map[string]string{
		"updateState n.State":      "a node's state",
		"checkNodes n.State":       "a node's state",
		"evalDeps it.State":        "a dependency item's state",
		"endStep rec.State":        "a step record's state",
		"listSteps steps[i].State": "a step record's state",
		"cancelSteps rec.State":    "a step record's state",
		"job j.State":              "the interner shares the job's own state word",
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				as, ok := n.(*ast.AssignStmt)
				if !ok || as.Tok != token.ASSIGN {
					return true
				}
				for _, lhs := range as.Lhs {
					if sel, ok := lhs.(*ast.SelectorExpr); !ok || sel.Sel.Name != "State" {
						continue
					}
					key := fn.Name.Name + " " + types.ExprString(lhs)
					if _, ok := notJobs[key]; !ok {
						t.Errorf("%s: %s: assigns a State field; a job's state changes through s.transition (ctld/state)",
							fset.Position(lhs.Pos()), key)
					}
					seen[key] = true
				}
				return true
			})
		}
	}
	for key, what := range notJobs {
		if !seen[key] {
			t.Errorf("%q (%s) is no longer assigned: drop it from the list", key, what)
		}
	}
}

func TestCancelPendingJobDropsItsDiagnosis(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	big := h.submit(api.JobSpec{Nodes: 2, GPUsPerNode: 8})
	h.s.schedulePass()
	waiting := h.submit(api.JobSpec{GPUs: 1})
	h.s.schedulePass()
	if j := h.job(big); j.State != api.StateRunning {
		t.Fatalf("big job %s", j.State)
	}
	if j := h.job(waiting); j.State != api.StatePending || j.ReasonDetail == "" {
		t.Fatalf("waiting job %s with detail %q: nothing to drop", j.State, j.ReasonDetail)
	}
	h.clock.add(time.Minute)
	resp, _ := h.s.cancel(h.alice, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{waiting}}})
	if resp.Results[0].Error != "" {
		t.Fatal(resp.Results[0].Error)
	}
	// Why it waited is no longer true of a cancelled job (squeue and
	// scontrol --json show the detail as state_description).
	j := h.job(waiting)
	now := h.clock.now()
	got := []any{j.State, j.Reason, j.ReasonDetail, j.StartTime, j.EndTime, *j.CancelledBy}
	want := []any{api.StateCancelled, api.ReasonCancelled, "", now, now, uint32(1000)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cancelled job: state, reason, detail, start, end, by (-want +got):\n%s", diff)
	}
	stored, err := h.s.store.QueryJobs(context.Background(), api.JobFilter{IDs: []uint64{waiting}, All: true})
	if err != nil || len(stored) != 1 {
		t.Fatalf("stored: %d records, %v", len(stored), err)
	}
	if stored[0].State != api.StateCancelled || stored[0].ReasonDetail != "" {
		t.Errorf("stored: %s with detail %q", stored[0].State, stored[0].ReasonDetail)
	}
}

// TestRefusedTransitionLeavesTheJob shows what the controller does with
// a change the lifecycle refuses (a late report on a job that has ended,
// a bug): the job stays as it was, nothing goes to the trail or the
// store, and the refusal is logged with the job's id.
func TestRefusedTransitionLeavesTheJob(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	id := h.submit(api.JobSpec{GPUs: 2})
	h.s.schedulePass()
	h.sync("gpu01", running(id, 0))
	h.sync("gpu01", finished(id, 0))
	if j := h.job(id); j.State != api.StateCompleted {
		t.Fatalf("state %s", j.State)
	}
	var logs bytes.Buffer
	h.s.mu.Lock()
	h.s.log = slog.New(slog.NewTextHandler(&logs, nil))
	j := h.s.jobs[id]
	before := *j
	events := len(h.s.events)
	h.s.endJob(j, api.StateFailed, api.ReasonNonZeroExit, api.ExitStatus{Code: 1}, h.clock.now(), "late")
	h.s.requeueActive(j, api.ReasonNone, "late")
	h.s.suspend(j)
	dirty := h.s.dirty[id]
	after := *j
	h.s.mu.Unlock()
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("refused changes touched the job (-want +got):\n%s", diff)
	}
	if len(h.s.events) != events || dirty {
		t.Errorf("refused changes left %d events, dirty %v", len(h.s.events)-events, dirty)
	}
	out := logs.String()
	for _, to := range []api.JobState{api.StateFailed, api.StateCompleting, api.StateSuspended} {
		if !strings.Contains(out, `msg="job state change refused" job_id=`+strconv.FormatUint(id, 10)+" from=COMPLETED to="+string(to)) {
			t.Errorf("no refusal to %s logged:\n%s", to, out)
		}
	}
	// The nodes hold nothing of it still.
	for _, n := range h.s.nodes {
		if n.AllocCPUs != 0 || len(n.AllocGPUs) != 0 {
			t.Errorf("node %s holds %d CPUs, GPUs %v", n.Name, n.AllocCPUs, n.AllocGPUs)
		}
	}
}
