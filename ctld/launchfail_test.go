package ctld

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// launchFailedReport is a node's report that it could not launch
// incarnation restart of job id.
func launchFailedReport(id uint64, restart int, why string) api.NodeJobReport {
	return api.NodeJobReport{JobID: id, Restart: restart, State: api.NodeJobFinished,
		Exit: api.ExitStatus{Code: 1}, Error: why, LaunchFailed: true}
}

// startAndFail schedules job id, delivers its launch to the node it got
// and has that node report the launch failed (with others, the node's
// other jobs); it returns the node.
func startAndFail(t *testing.T, h *harness, id uint64, why string, others map[string][]api.NodeJobReport) string {
	t.Helper()
	h.s.schedulePass()
	j := h.job(id)
	if j.State != api.StateRunning {
		t.Fatalf("job %d %s (%s %s), want RUNNING", id, j.State, j.Reason, j.ReasonDetail)
	}
	node := j.BatchHost()
	if resp := h.sync(node, others[node]...); len(resp.Launch) != 1 || resp.Launch[0].Restart != j.Restarts {
		t.Fatalf("launch on %s: %+v", node, resp.Launch)
	}
	resp := h.sync(node, append([]api.NodeJobReport{launchFailedReport(id, j.Restarts, why)}, others[node]...)...)
	if !slices.Contains(resp.Ack, api.JobRef{JobID: id, Restart: j.Restarts}) {
		t.Fatalf("the failed launch's report was not acknowledged: %+v", resp)
	}
	return node
}

// TestLaunchFailuresRequeueThenHold: a launch the node could not carry
// out requeues the job to another node; the third in a row holds it
// (admin hold, Slurm's "launch failed requeued held"), with every failure
// in the trail, and the count survives a controller restart.
func TestLaunchFailuresRequeueThenHold(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	// gpu02 runs a job of its own, so best fit puts the next 1-GPU job
	// there first.
	other := h.submit(api.JobSpec{GPUs: 2, NodeList: []string{"gpu02"}})
	h.s.schedulePass()
	h.sync("gpu02", running(other, 0))
	id := h.submit(api.JobSpec{GPUs: 1})
	others := map[string][]api.NodeJobReport{"gpu02": {running(other, 0)}}

	var nodes []string
	for n := 1; n <= 3; n++ {
		node := startAndFail(t, h, id, "prepare job: open /run/tided/jobs/x/launch.json: read-only file system", others)
		nodes = append(nodes, node)
		j := h.job(id)
		if j.State != api.StatePending || j.Restarts != n || j.LaunchFailures != n || j.Alloc != nil {
			t.Fatalf("after failure %d: %s restarts=%d failures=%d alloc=%v", n, j.State, j.Restarts, j.LaunchFailures, j.Alloc)
		}
		if !slices.Contains(j.LaunchFailNodes, node) {
			t.Errorf("after failure %d on %s: LaunchFailNodes %v", n, node, j.LaunchFailNodes)
		}
		held := n == 3
		if got := j.HoldKind == api.HoldAdmin; got != held {
			t.Fatalf("after failure %d: hold %q, want held=%v", n, j.HoldKind, held)
		}
		if !held && j.Reason != api.ReasonLaunchFailed {
			t.Errorf("after failure %d: reason %s, want LaunchFailed until the next pass", n, j.Reason)
		}
	}
	// The best fit first, then the node not tried yet, then both tried:
	// the best fit again.
	if want := []string{"gpu02", "gpu01", "gpu02"}; !slices.Equal(nodes, want) {
		t.Errorf("launches went to %v, want %v", nodes, want)
	}
	j := h.job(id)
	if j.Reason != api.ReasonJobHeldAdmin || !strings.HasPrefix(j.ReasonDetail, "launch failed requeued held: 3 launches in a row failed, the last on gpu02: prepare job:") {
		t.Errorf("held job: reason %s detail %q", j.Reason, j.ReasonDetail)
	}
	h.s.schedulePass()
	if j := h.job(id); j.State != api.StatePending || j.Reason != api.ReasonJobHeldAdmin {
		t.Fatalf("held job after a pass: %s %s", j.State, j.Reason)
	}
	h.s.flush()
	want := []string{"submit/None", "start/", "requeue/LaunchFailed", "start/", "requeue/LaunchFailed", "start/", "requeue/LaunchFailed", "hold/JobHeldAdmin"}
	if got := h.trail(id); !slices.Equal(got, want) {
		t.Errorf("trail %q, want %q", got, want)
	}
	ev, err := h.s.store.Events(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if m := ev[2].Message; !strings.Contains(m, "launch failed on gpu02 (1 of 3 in a row): prepare job: open") {
		t.Errorf("first failure's event says %q", m)
	}

	h.restart()
	if j := h.job(id); j.LaunchFailures != 3 || j.HoldKind != api.HoldAdmin || !slices.Equal(j.LaunchFailNodes, []string{"gpu01", "gpu02"}) {
		t.Errorf("after a controller restart: failures=%d hold=%q nodes=%v", j.LaunchFailures, j.HoldKind, j.LaunchFailNodes)
	}

	// Only an operator releases it; one more failure holds it again at
	// once.
	if res, _ := h.s.updateJobs(h.alice, api.JobUpdate{IDs: []uint64{id}, Action: "release"}); res.Results[0].Error == "" {
		t.Fatalf("the owner released an admin hold")
	}
	h.register("gpu01")
	h.register("gpu02", running(other, 0))
	root := caller{uid: 0, gid: 0, user: "root", admin: true, known: true}
	if res, _ := h.s.updateJobs(root, api.JobUpdate{IDs: []uint64{id}, Action: "release"}); res.Results[0].Error != "" {
		t.Fatal(res.Results[0].Error)
	}
	startAndFail(t, h, id, "start supervisor: fork/exec: resource temporarily unavailable", others)
	if j := h.job(id); j.HoldKind != api.HoldAdmin || j.LaunchFailures != 4 {
		t.Errorf("after release and one more failure: hold %q failures %d", j.HoldKind, j.LaunchFailures)
	}
}

// TestLaunchFailureOutcomes: what else a failed launch leads to.
func TestLaunchFailureOutcomes(t *testing.T) {
	no, yes := false, true
	tests := []struct {
		name   string
		config string
		spec   api.JobSpec
		report func(id uint64) api.NodeJobReport
		// cancel cancels the job before the report comes.
		cancel    bool
		wantState api.JobState
		wantWhy   api.ReasonCode
	}{
		{name: "requeued", spec: api.JobSpec{}, report: func(id uint64) api.NodeJobReport {
			return launchFailedReport(id, 0, "launch timed out after 1m0s while writing the job directory")
		}, wantState: api.StatePending, wantWhy: api.ReasonLaunchFailed},
		{name: "the job's own error ends it", spec: api.JobSpec{}, report: func(id uint64) api.NodeJobReport {
			return api.NodeJobReport{JobID: id, State: api.NodeJobFinished, Exit: api.ExitStatus{Code: 1},
				Error: "couldn't open output file /nope/out: no such file or directory"}
		}, wantState: api.StateFailed, wantWhy: api.ReasonLaunchFailed},
		{name: "--no-requeue ends it", spec: api.JobSpec{Requeue: &no}, report: func(id uint64) api.NodeJobReport {
			return launchFailedReport(id, 0, "prepare job: no space left on device")
		}, wantState: api.StateFailed, wantWhy: api.ReasonLaunchFailed},
		{name: "--requeue is requeued", spec: api.JobSpec{Requeue: &yes}, report: func(id uint64) api.NodeJobReport {
			return launchFailedReport(id, 0, "prepare job: no space left on device")
		}, wantState: api.StatePending, wantWhy: api.ReasonLaunchFailed},
		{name: "launch_fail_limit 0 ends it", config: "scheduler: {launch_fail_limit: 0}\n", report: func(id uint64) api.NodeJobReport {
			return launchFailedReport(id, 0, "prepare job: no space left on device")
		}, wantState: api.StateFailed, wantWhy: api.ReasonLaunchFailed},
		{name: "launch_fail_limit 1 holds at once", config: "scheduler: {launch_fail_limit: 1}\n", report: func(id uint64) api.NodeJobReport {
			return launchFailedReport(id, 0, "prepare job: no space left on device")
		}, wantState: api.StatePending, wantWhy: api.ReasonJobHeldAdmin},
		{name: "cancelled meanwhile", cancel: true, report: func(id uint64) api.NodeJobReport {
			return launchFailedReport(id, 0, "prepare job: no space left on device")
		}, wantState: api.StateCancelled, wantWhy: api.ReasonCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessWith(t, testConfig+tt.config)
			h.register("gpu01")
			id := h.submit(tt.spec)
			h.s.schedulePass()
			h.sync("gpu01")
			if tt.cancel {
				h.sync("gpu01", running(id, 0))
				if _, err := h.s.cancel(h.alice, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{id}}}); err != nil {
					t.Fatal(err)
				}
			}
			h.sync("gpu01", tt.report(id))
			j := h.job(id)
			if j.State != tt.wantState || j.Reason != tt.wantWhy {
				t.Errorf("job %s %s (%q), want %s %s", j.State, j.Reason, j.ReasonDetail, tt.wantState, tt.wantWhy)
			}
			if j.State == api.StatePending && j.Restarts != 1 {
				t.Errorf("requeued job has restarts=%d, want 1", j.Restarts)
			}
		})
	}
}

// TestLaunchFailuresCountInARow: a run between two failed launches (a
// launch that worked, then a node failure requeued the job) starts the
// count again.
func TestLaunchFailuresCountInARow(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	yes := true
	id := h.submit(api.JobSpec{Requeue: &yes})
	startAndFail(t, h, id, "prepare job: no space left on device", nil)
	if j := h.job(id); j.LaunchFailures != 1 {
		t.Fatalf("failures %d, want 1", j.LaunchFailures)
	}
	h.s.schedulePass()
	h.sync("gpu01")
	h.sync("gpu01", running(id, 1))
	h.clock.add(time.Minute)
	h.s.mu.Lock()
	h.s.checkNodes(h.clock.now())
	h.s.mu.Unlock()
	j := h.job(id)
	if j.State != api.StatePending || j.Restarts != 2 {
		t.Fatalf("after the node failed: %s restarts=%d", j.State, j.Restarts)
	}
	if j.LaunchFailures != 0 || j.LaunchFailNodes != nil {
		t.Errorf("after a run: failures=%d nodes=%v, want none", j.LaunchFailures, j.LaunchFailNodes)
	}
}

// TestLaunchingIsNotLaunched: a job the node reports launching (its job
// directory not complete) is not taken for launched: the launch is not
// repeated meanwhile, a node that forgets it (tided killed mid-launch)
// gets it again instead of the job ending NODE_FAIL, and a cancel reaches
// it as a kill.
func TestLaunchingIsNotLaunched(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	id := h.submit(api.JobSpec{Nodes: 1, Exclude: []string{"gpu02"}})
	h.s.schedulePass()
	host := h.job(id).BatchHost()
	if resp := h.sync(host); len(resp.Launch) != 1 {
		t.Fatalf("no launch: %+v", resp)
	}
	launching := api.NodeJobReport{JobID: id, State: api.NodeJobLaunching}
	if resp := h.sync(host, launching); len(resp.Launch) != 0 {
		t.Fatalf("launch repeated while launching: %+v", resp)
	}
	if j := h.job(id); j.Launched || j.State != api.StateRunning {
		t.Fatalf("launching job: launched %v, %s", j.Launched, j.State)
	}
	// tided restarts and no longer knows it: launched again.
	if resp := h.register(host); len(resp.Launch) != 1 || h.job(id).State != api.StateRunning {
		t.Fatalf("after a restart mid-launch: %+v, job %s", resp, h.job(id).State)
	}
	h.sync(host, launching)
	h.s.cancel(h.alice, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{id}}})
	resp := h.sync(host, launching)
	if len(resp.Signals) != 1 || !resp.Signals[0].Kill {
		t.Fatalf("no kill for the launching job: %+v", resp)
	}
	h.sync(host, api.NodeJobReport{JobID: id, State: api.NodeJobFinished, Killed: true, Exit: api.ExitStatus{Signal: 15}})
	if j := h.job(id); j.State != api.StateCancelled {
		t.Fatalf("job %s after its kill", j.State)
	}
}
