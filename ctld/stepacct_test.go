package ctld

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

func taskUse(task int, cpuUsec, rss uint64) api.TaskUsage {
	return api.TaskUsage{Task: task, UserUsec: cpuUsec, SystemUsec: cpuUsec / 10, RSS: rss, VMSize: 2 * rss}
}

// usageSync sends one sync of node carrying usage reports.
func (h *harness) usageSync(node string, us []api.NodeUsage, jobs ...api.NodeJobReport) {
	h.t.Helper()
	if _, err := h.s.sync(context.Background(), api.NodeSyncRequest{Name: node, Jobs: jobs, Usage: us}); err != nil {
		h.t.Fatal(err)
	}
}

// TestStepUsageFromNodes follows a two-node job: running reports are
// kept for sstat and not stored; final ones are stored and summed per
// step; the batch step's usage comes with the job's end; what a node
// reports about a job it does not run is dropped; and all of it is
// still there after a controller restart.
func TestStepUsageFromNodes(t *testing.T) {
	h, id := stepHarness(t, api.JobSpec{Name: "train", Nodes: 2, TasksPerNode: 2, TimeLimit: 600})
	ctx := context.Background()
	if _, err := h.s.createStep(ctx, h.alice, id, api.StepRequest{Argv: []string{"/bin/true"}, Cwd: "/home/alice"}); err != nil {
		t.Fatal(err)
	}
	j := h.job(id)
	batch := j.BatchHost()
	other := "gpu01"
	if batch == other {
		other = "gpu02"
	}
	running := api.NodeUsage{JobID: id, StepID: 0, Node: "liar", UserID: 4242, Tasks: []api.TaskUsage{taskUse(2, 500, 1<<20)}}
	h.usageSync(other, []api.NodeUsage{running})
	h.s.mu.Lock()
	live := h.s.liveUsage(id, 0)
	h.s.mu.Unlock()
	if live == nil || live.Tasks != 1 || live.CPU.MaxNode != other || live.UserID != j.UserID || live.Final {
		t.Fatalf("running usage of %d.0 = %+v; want one task on %s, owned by %d", id, live, other, j.UserID)
	}
	if got, err := h.s.listUsage(ctx, []uint64{id}); err != nil || len(got) != 0 {
		t.Fatalf("stored usage while the step runs = %+v, %v; want none", got, err)
	}
	w := h.get(1000, "/api/v1/accounting/usage?live=1&job="+jobIDString(id), "")
	var liveList api.UsageList
	if err := json.Unmarshal(w.Body.Bytes(), &liveList); err != nil || len(liveList.Usage) != 1 || liveList.Usage[0].StepID != 0 || liveList.Usage[0].Tasks != 1 {
		t.Fatalf("live usage answer %d %s (%v)", w.Code, w.Body, err)
	}

	h.usageSync(batch, []api.NodeUsage{{JobID: id, StepID: 0, Final: true, Tasks: []api.TaskUsage{taskUse(0, 3_000_000, 8<<20), taskUse(1, 1_000_000, 2<<20)}}})
	h.usageSync(other, []api.NodeUsage{
		{JobID: id, StepID: 0, Final: true, Cgroup: &api.CgroupTotals{UserUsec: 9_000_000, SystemUsec: 1}, Tasks: []api.TaskUsage{taskUse(2, 2_000_000, 16<<20), taskUse(3, 2_000_000, 4<<20)}},
		// Not a step of a job this node runs: dropped.
		{JobID: id + 100, StepID: 0, Final: true, Tasks: []api.TaskUsage{taskUse(0, 1, 1)}},
	})
	h.s.mu.Lock()
	live = h.s.liveUsage(id, 0)
	h.s.mu.Unlock()
	if live != nil {
		t.Errorf("running usage left after the final reports: %+v", live)
	}
	// The batch script's totals, with the job's end.
	end := finished(id, 0)
	end.Usage = &api.NodeUsage{StepID: 7, Node: "liar", Tasks: []api.TaskUsage{taskUse(0, 40_000, 3<<20)}}
	h.usageSync(batch, nil, end)
	if st := h.job(id).State; st != api.StateCompleted {
		t.Fatalf("job %s after its end", st)
	}

	check := func(when string) {
		t.Helper()
		got, err := h.s.listUsage(ctx, []uint64{id})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].StepID != 0 || got[1].StepID != api.BatchStepID {
			t.Fatalf("%s: usage %+v; want step 0 and the batch step", when, got)
		}
		s0, b := got[0], got[1]
		if s0.Nodes != 2 || s0.Tasks != 4 || !s0.Final || s0.UserID != 1000 ||
			s0.RSS.Max != 16<<20 || s0.RSS.MaxNode != other || s0.RSS.MaxTask != 2 ||
			s0.CPU.Max != 3_300_000 || s0.CPU.MaxNode != batch || s0.CPU.MaxTask != 0 ||
			s0.UserUsec != 4_000_000+9_000_000 {
			t.Errorf("%s: step 0 = %+v", when, s0)
		}
		if b.Nodes != 1 || b.Tasks != 1 || b.RSS.Max != 3<<20 || b.RSS.MaxNode != batch || b.UserUsec != 40_000 {
			t.Errorf("%s: batch step = %+v", when, b)
		}
	}
	if got, err := h.s.listUsage(ctx, []uint64{id + 100}); err != nil || len(got) != 0 {
		t.Errorf("usage stored for a job the node does not run: %+v, %v", got, err)
	}
	check("after the job's end")
	h.restart()
	check("after a controller restart")
}

// TestUsageHandler answers sacct's question over the API and hides
// nothing from the job's owner.
func TestUsageHandler(t *testing.T) {
	h, id := stepHarness(t, api.JobSpec{Name: "one", TimeLimit: 600})
	end := finished(id, 0)
	end.Usage = &api.NodeUsage{Tasks: []api.TaskUsage{taskUse(0, 1_500_000, 1<<20)}}
	h.usageSync(h.job(id).BatchHost(), nil, end)
	w := h.get(1000, "/api/v1/accounting/usage?job="+jobIDString(id), "")
	if w.Code != http.StatusOK {
		t.Fatalf("answer %d: %s", w.Code, w.Body)
	}
	var list api.UsageList
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Usage) != 1 || list.Usage[0].StepID != api.BatchStepID || list.Usage[0].UserUsec != 1_500_000 {
		t.Errorf("usage answer %+v", list.Usage)
	}
	if w := h.get(1000, "/api/v1/accounting/usage?job=x", ""); w.Code != http.StatusBadRequest {
		t.Errorf("bad job id: answer %d, want 400", w.Code)
	}
}

// TestSummarizeRowsBatchRestarts keeps the last incarnation's batch
// reports only: a requeued job may have run its script on another node.
func TestSummarizeRowsBatchRestarts(t *testing.T) {
	rows := []api.NodeUsage{
		{JobID: 5, StepID: 0, Node: "a", Final: true, Tasks: []api.TaskUsage{taskUse(0, 10, 1)}},
		{JobID: 5, StepID: api.BatchStepID, Node: "a", Restart: 0, Final: true, Tasks: []api.TaskUsage{taskUse(0, 10, 7)}},
		{JobID: 5, StepID: api.BatchStepID, Node: "b", Restart: 1, Final: true, Tasks: []api.TaskUsage{taskUse(0, 20, 9)}},
		{JobID: 6, StepID: api.BatchStepID, Node: "a", Final: true, Tasks: []api.TaskUsage{taskUse(0, 30, 3)}},
	}
	got := summarizeRows(rows)
	var brief []string
	for _, u := range got {
		brief = append(brief, jobIDString(u.JobID)+"."+jobIDString(uint64(u.StepID))+"@"+u.RSS.MaxNode)
	}
	want := []string{"5.0@a", "5.4294967291@b", "6.4294967291@a"}
	if diff := cmp.Diff(want, brief); diff != "" {
		t.Errorf("summaries (-want +got):\n%s", diff)
	}
}

func jobIDString(id uint64) string { return strconv.FormatUint(id, 10) }
