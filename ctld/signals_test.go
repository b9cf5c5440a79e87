package ctld

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

// sentSignals returns the signal commands each node gets for job id at
// its next sync (reporting the job running on its batch host).
func (h *harness) sentSignals(id uint64) map[string][]api.SignalCommand {
	h.t.Helper()
	j := h.job(id)
	out := map[string][]api.SignalCommand{}
	for _, a := range j.Alloc {
		var reps []api.NodeJobReport
		if a.Node == j.BatchHost() && !j.Allocation {
			reps = append(reps, running(id, j.Restarts))
		}
		for _, c := range h.sync(a.Node, reps...).Signals {
			if c.JobID == id {
				out[a.Node] = append(out[a.Node], c)
			}
		}
	}
	return out
}

// startTwoNodeJob starts a batch job on both nodes, its batch host
// reporting it running.
func startTwoNodeJob(t *testing.T, h *harness, spec api.JobSpec) uint64 {
	t.Helper()
	h.register("gpu01")
	h.register("gpu02")
	spec.Nodes = 2
	id := h.submit(spec)
	h.s.schedulePass()
	j := h.job(id)
	if j.State != api.StateRunning || len(j.Alloc) != 2 {
		t.Fatalf("job %d: %s on %v", id, j.State, j.NodeNames())
	}
	h.sync(j.BatchHost(), running(id, 0))
	return id
}

// TestScancelSignalTargets checks where the controller sends scancel's
// signals, as Slurm's job_signal: a plain --signal to the steps on every
// node of the job, -b to the batch shell, -f to the batch shell's
// process group, and SIGKILL without -b as a cancel.
func TestScancelSignalTargets(t *testing.T) {
	ref := func(id uint64) api.JobRef { return api.JobRef{JobID: id} }
	tests := []struct {
		name string
		req  api.CancelRequest
		want func(id uint64) map[string][]api.SignalCommand
		// state is the job's state afterwards.
		state api.JobState
	}{
		{
			name: "signal reaches the steps on every node, not the batch shell",
			req:  api.CancelRequest{Signal: int(syscall.SIGUSR2)},
			want: func(id uint64) map[string][]api.SignalCommand {
				c := api.SignalCommand{JobRef: ref(id), Signal: int(syscall.SIGUSR2), Steps: true}
				return map[string][]api.SignalCommand{"gpu01": {c}, "gpu02": {c}}
			},
			state: api.StateRunning,
		},
		{
			name: "batch sends to the batch shell alone",
			req:  api.CancelRequest{Signal: int(syscall.SIGUSR1), BatchOnly: true},
			want: func(id uint64) map[string][]api.SignalCommand {
				return map[string][]api.SignalCommand{"gpu01": {{JobRef: ref(id), Signal: int(syscall.SIGUSR1), BatchOnly: true}}}
			},
			state: api.StateRunning,
		},
		{
			name: "batch without a signal is SIGKILL to the batch shell",
			req:  api.CancelRequest{BatchOnly: true},
			want: func(id uint64) map[string][]api.SignalCommand {
				return map[string][]api.SignalCommand{"gpu01": {{JobRef: ref(id), Signal: int(syscall.SIGKILL), BatchOnly: true}}}
			},
			state: api.StateRunning,
		},
		{
			name: "full sends to the batch shell's process group",
			req:  api.CancelRequest{Signal: int(syscall.SIGTERM), Full: true, BatchOnly: true},
			want: func(id uint64) map[string][]api.SignalCommand {
				return map[string][]api.SignalCommand{"gpu01": {{JobRef: ref(id), Signal: int(syscall.SIGTERM)}}}
			},
			state: api.StateRunning,
		},
		{
			name: "SIGKILL without batch cancels the job",
			req:  api.CancelRequest{Signal: int(syscall.SIGKILL)},
			want: func(id uint64) map[string][]api.SignalCommand {
				return map[string][]api.SignalCommand{"gpu01": {{JobRef: ref(id), Kill: true}}}
			},
			state: api.StateCompleting,
		},
		{
			name: "SIGKILL with batch and full goes to the batch shell's process group",
			req:  api.CancelRequest{Signal: int(syscall.SIGKILL), BatchOnly: true, Full: true},
			want: func(id uint64) map[string][]api.SignalCommand {
				return map[string][]api.SignalCommand{"gpu01": {{JobRef: ref(id), Signal: int(syscall.SIGKILL)}}}
			},
			state: api.StateRunning,
		},
		{
			name: "SIGKILL with full cancels the job",
			req:  api.CancelRequest{Signal: int(syscall.SIGKILL), Full: true},
			want: func(id uint64) map[string][]api.SignalCommand {
				return map[string][]api.SignalCommand{"gpu01": {{JobRef: ref(id), Kill: true}}}
			},
			state: api.StateCompleting,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			id := startTwoNodeJob(t, h, api.JobSpec{})
			if host := h.job(id).BatchHost(); host != "gpu01" {
				t.Fatalf("batch host %s, the test expects gpu01", host)
			}
			req := tt.req
			req.Filter = api.JobFilter{IDs: []uint64{id}}
			resp, err := h.s.cancel(h.alice, req)
			if err != nil || len(resp.Results) != 1 || resp.Results[0].Error != "" {
				t.Fatalf("cancel = %+v, %v", resp, err)
			}
			if diff := cmp.Diff(tt.want(id), h.sentSignals(id)); diff != "" {
				t.Errorf("signal commands (-want +got):\n%s", diff)
			}
			if st := h.job(id).State; st != tt.state {
				t.Errorf("job state %s, want %s", st, tt.state)
			}
		})
	}
}

// TestScancelSignalStates checks the answers for jobs that are not
// simply running.
func TestScancelSignalStates(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	pend := h.submit(api.JobSpec{Hold: true})
	alloc, err := h.s.submit(context.Background(), h.alice, api.SubmitRequest{Spec: api.JobSpec{Name: "alloc", Nodes: 2,
		Allocation: true, WorkDir: "/home/alice"}})
	if err != nil {
		t.Fatal(err)
	}
	h.s.schedulePass()
	if st := h.job(alloc.JobID).State; st != api.StateRunning {
		t.Fatalf("allocation %s", st)
	}
	signal := func(id uint64, req api.CancelRequest) string {
		t.Helper()
		req.Filter = api.JobFilter{IDs: []uint64{id}}
		resp, err := h.s.cancel(h.alice, req)
		if err != nil || len(resp.Results) != 1 {
			t.Fatalf("cancel = %+v, %v", resp, err)
		}
		return resp.Results[0].Error
	}
	if msg := signal(pend, api.CancelRequest{Signal: int(syscall.SIGUSR1)}); msg != "Job is pending execution" {
		t.Errorf("signal to a pending job: %q", msg)
	}
	if msg := signal(alloc.JobID, api.CancelRequest{Signal: int(syscall.SIGUSR1), BatchOnly: true}); msg != "Job script not specified" {
		t.Errorf("-b to an allocation: %q", msg)
	}
	// -f to an allocation, which has no batch shell: its steps.
	if msg := signal(alloc.JobID, api.CancelRequest{Signal: int(syscall.SIGUSR1), Full: true}); msg != "" {
		t.Errorf("-f to an allocation: %q", msg)
	}
	c := api.SignalCommand{JobRef: api.JobRef{JobID: alloc.JobID}, Signal: int(syscall.SIGUSR1), Steps: true}
	if diff := cmp.Diff(map[string][]api.SignalCommand{"gpu01": {c}, "gpu02": {c}}, h.sentSignals(alloc.JobID)); diff != "" {
		t.Errorf("-f to an allocation (-want +got):\n%s", diff)
	}
	// SIGKILL, even with -b, cancels a pending job (Slurm's job_signal).
	if msg := signal(pend, api.CancelRequest{Signal: int(syscall.SIGKILL), BatchOnly: true}); msg != "" {
		t.Errorf("SIGKILL to a pending job: %q", msg)
	}
	if st := h.job(pend).State; st != api.StateCancelled {
		t.Errorf("pending job after SIGKILL: %s", st)
	}
	for _, bad := range []int{-1, 65} {
		if _, err := h.s.cancel(h.alice, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{alloc.JobID}}, Signal: bad}); !errors.Is(err, api.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), "Unknown job signal") {
			t.Errorf("signal %d: %v, want Unknown job signal", bad, err)
		}
	}
	// A finished job: nothing to do, no error.
	if msg := signal(pend, api.CancelRequest{Signal: int(syscall.SIGUSR1)}); msg != "" {
		t.Errorf("signal to a finished job: %q", msg)
	}
	if tr := h.trail(alloc.JobID); !hasEvent(tr, api.EventSignal+"/") {
		t.Errorf("no signal event in the allocation's trail: %v", tr)
	}
}

// TestPreemptSignalTargets checks the checkpoint signal of a preempted
// job: its --signal goes where --signal goes at the time limit (the
// steps, or the batch shell with B:), Tide's default SIGUSR1 to the
// batch shell's process group.
func TestPreemptSignalTargets(t *testing.T) {
	tests := []struct {
		name string
		sig  *api.SignalSpec
		want api.SignalCommand
		// nodes that get it: the batch host only, or every node.
		everyNode bool
	}{
		{name: "default", want: api.SignalCommand{Signal: int(syscall.SIGUSR1)}},
		{name: "--signal to the steps", sig: &api.SignalSpec{Signal: int(syscall.SIGUSR2), Seconds: 90},
			want: api.SignalCommand{Signal: int(syscall.SIGUSR2), Steps: true}, everyNode: true},
		{name: "--signal=B:", sig: &api.SignalSpec{Signal: int(syscall.SIGINT), BatchOnly: true},
			want: api.SignalCommand{Signal: int(syscall.SIGINT), BatchOnly: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessWith(t, shareConfig)
			a, _ := startBorrower(t, h, api.JobSpec{Name: "train", QOS: api.QOSTraining, Priority: 3, Signal: tt.sig})
			b, err := h.submitAs(bob, api.JobSpec{GPUs: 8, QOS: api.QOSTraining, Priority: 4})
			if err != nil {
				t.Fatal(err)
			}
			h.preemptNext(a, b.JobID, api.PreemptRequeue, 300, true)
			want := tt.want
			want.JobRef = api.JobRef{JobID: a}
			j := h.job(a)
			wantNodes := map[string][]api.SignalCommand{j.BatchHost(): {want}}
			if tt.everyNode {
				for _, n := range j.NodeNames() {
					wantNodes[n] = []api.SignalCommand{want}
				}
			}
			if diff := cmp.Diff(wantNodes, h.sentSignals(a)); diff != "" {
				t.Errorf("checkpoint signal (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSignalWarningToSteps checks --signal=SIG@TIME without B: the
// controller sends SIG to the job's steps on every node once the time
// comes, once per incarnation, and not again after a restart of its
// own; with B: it leaves the warning to the batch host's tided.
func TestSignalWarningToSteps(t *testing.T) {
	h := newHarness(t)
	id := startTwoNodeJob(t, h, api.JobSpec{TimeLimit: 600, Signal: &api.SignalSpec{Signal: int(syscall.SIGUSR2), Seconds: 90}})
	check := func() {
		h.s.mu.Lock()
		h.s.checkSignalWarnings(h.clock.now())
		h.s.mu.Unlock()
	}
	check()
	if got := h.sentSignals(id); len(got) != 0 {
		t.Fatalf("warning before its time: %+v", got)
	}
	h.clock.add(509 * time.Second)
	check()
	if got := h.sentSignals(id); len(got) != 0 {
		t.Fatalf("warning a second early: %+v", got)
	}
	h.clock.add(time.Second)
	check()
	c := api.SignalCommand{JobRef: api.JobRef{JobID: id}, Signal: int(syscall.SIGUSR2), Steps: true}
	if diff := cmp.Diff(map[string][]api.SignalCommand{"gpu01": {c}, "gpu02": {c}}, h.sentSignals(id)); diff != "" {
		t.Fatalf("warning (-want +got):\n%s", diff)
	}
	h.clock.add(time.Second)
	check()
	if got := h.sentSignals(id); len(got) != 0 {
		t.Fatalf("warning sent twice: %+v", got)
	}
	h.s.mu.Lock()
	h.s.flush()
	h.s.mu.Unlock()
	if !hasWarnEvent(t, h, id) {
		t.Fatalf("no warning in the trail: %v", h.trail(id))
	}

	// A restarted controller finds the warning in the trail.
	h.restart()
	h.register("gpu01", running(id, 0))
	h.register("gpu02")
	check()
	if got := h.sentSignals(id); len(got) != 0 {
		t.Fatalf("warning sent again after a controller restart: %+v", got)
	}

	// A requeued job's next run is warned again.
	if resp, err := h.s.updateJobs(h.alice, api.JobUpdate{Action: "requeue", IDs: []uint64{id}}); err != nil || resp.Results[0].Error != "" {
		t.Fatalf("requeue: %+v, %v", resp, err)
	}
	rep := finished(id, 0)
	rep.Killed = true
	h.sync("gpu01", rep)
	if j := h.job(id); j.State != api.StatePending || j.Restarts != 1 {
		t.Fatalf("after requeue: %s restarts %d", j.State, j.Restarts)
	}
	h.s.schedulePass()
	j := h.job(id)
	if j.State != api.StateRunning {
		t.Fatalf("requeued job %s", j.State)
	}
	h.sync(j.BatchHost(), running(id, 1))
	h.clock.add(510 * time.Second)
	check()
	c.Restart = 1
	got := h.sentSignals(id)
	if len(got) != len(j.Alloc) {
		t.Fatalf("second run's warning: %+v", got)
	}
	for n, cmds := range got {
		if diff := cmp.Diff([]api.SignalCommand{c}, cmds); diff != "" {
			t.Errorf("second run's warning on %s (-want +got):\n%s", n, diff)
		}
	}
}

// TestSignalWarningBatchOnlyLeftToNode checks that the controller sends
// no warning for --signal=B: (tided sends it to the batch shell) nor for
// a job without a time limit.
func TestSignalWarningBatchOnlyLeftToNode(t *testing.T) {
	for _, spec := range []api.JobSpec{
		{TimeLimit: 600, Signal: &api.SignalSpec{Signal: int(syscall.SIGUSR1), Seconds: 90, BatchOnly: true}},
		{TimeLimit: api.Infinite, Signal: &api.SignalSpec{Signal: int(syscall.SIGUSR1), Seconds: 90}},
	} {
		h := newHarnessWith(t, strings.Replace(testConfig, `max_time: "1:00:00"`, `max_time: UNLIMITED`, 1))
		id := startTwoNodeJob(t, h, spec)
		h.clock.add(24 * time.Hour)
		h.s.mu.Lock()
		h.s.checkSignalWarnings(h.clock.now())
		h.s.mu.Unlock()
		if got := h.sentSignals(id); len(got) != 0 {
			t.Errorf("%+v: controller sent %+v", spec.Signal, got)
		}
	}
}

func hasWarnEvent(t *testing.T, h *harness, id uint64) bool {
	t.Helper()
	ev, err := h.s.store.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ev {
		if e.Kind == api.EventSignal && strings.HasPrefix(e.Message, warnEventPrefix) {
			return true
		}
	}
	return false
}
