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
	"github.com/tide-hpc/tide/ctld/sched"
)

// shareConfig is testConfig with queues: vision (alice) and nlp (bob)
// each guaranteed half of the 16 GPUs, and a debug class with a short
// MaxTime.
const shareConfig = testConfigHeader + `
partitions:
  - {name: gpu, nodes: "gpu[01-02]", default: true, default_time: "3:00:00", max_time: "10:00:00"}
nodes:
  - {names: "gpu[01-02]", cpus: 8, memory: 64G, gpus: 8}
queues:
  - {name: vision, users: [alice], guaranteed: "50%", cap: 16}
  - {name: nlp, users: [bob], guaranteed: 8, cap: 16, max_submit_per_user: 2}
qos:
  - {name: debug, max_time: 1h}
submit: {rate_per_queue: 1000}
`

var bob = caller{uid: 1001, gid: 1001, user: "bob", known: true}

// submitAs submits spec as c and returns the answer.
func (h *harness) submitAs(c caller, spec api.JobSpec) (api.SubmitResponse, error) {
	h.t.Helper()
	if spec.Script == "" {
		spec.Script = "#!/bin/sh\ntrue\n"
	}
	if spec.WorkDir == "" {
		spec.WorkDir = "/home/" + c.user
	}
	return h.s.submit(context.Background(), c, api.SubmitRequest{Spec: spec})
}

func TestShareSubmitRules(t *testing.T) {
	root := caller{uid: 500, gid: 500, user: "operator", admin: true, known: true}
	tests := []struct {
		name string
		as   caller
		spec api.JobSpec
		// errClass and errHas describe a refusal; otherwise check runs.
		errClass error
		errHas   []string
		check    func(t *testing.T, j *api.Job)
	}{
		{name: "first queue the user is a member of", as: bob, check: func(t *testing.T, j *api.Job) {
			if j.Account != "nlp" || j.QOS != api.QOSBatch || j.Level != 3 || j.EffPriority != 3 {
				t.Fatalf("account %q qos %q level %d prio %d", j.Account, j.QOS, j.Level, j.EffPriority)
			}
		}},
		{name: "not a member", spec: api.JobSpec{Account: "nlp"}, errClass: api.ErrPermissionDenied,
			errHas: []string{"alice may not submit to queue nlp", "members: users bob"}},
		{name: "member of none", as: caller{uid: 1002, gid: 1002, user: "carol", known: true},
			errClass: api.ErrPermissionDenied, errHas: []string{"carol is a member of no queue", "vision: users alice"}},
		{name: "operator submits anywhere", as: root, spec: api.JobSpec{Account: "nlp", Priority: 10}, check: func(t *testing.T, j *api.Job) {
			if j.Account != "nlp" || j.Level != 10 {
				t.Fatalf("account %q level %d", j.Account, j.Level)
			}
		}},
		{name: "unknown account", spec: api.JobSpec{Account: "physics"}, errClass: api.ErrInvalidArgument,
			errHas: []string{"physics is not a queue (valid: vision, nlp)"}},
		{name: "unknown qos", spec: api.JobSpec{QOS: "urgent"}, errClass: api.ErrInvalidArgument,
			errHas: []string{"Invalid qos specification: urgent (valid: training, inference, batch, debug)"}},
		{name: "user lowers level", spec: api.JobSpec{QOS: api.QOSTraining, Priority: 4}, check: func(t *testing.T, j *api.Job) {
			if j.Level != 4 || j.EffPriority != 4 {
				t.Fatalf("level %d prio %d", j.Level, j.EffPriority)
			}
		}},
		{name: "user may not raise level", spec: api.JobSpec{QOS: api.QOSTraining, Priority: 6},
			errClass: api.ErrPermissionDenied, errHas: []string{"--priority 6 is above qos training's default level 5"}},
		{name: "level out of range", as: root, spec: api.JobSpec{Priority: 11}, errClass: api.ErrInvalidArgument,
			errHas: []string{"not a level from 1 to 10"}},
		{name: "qos max time refuses longer", spec: api.JobSpec{QOS: api.QOSDebug, TimeLimit: 7200},
			errClass: api.ErrInvalidArgument, errHas: []string{"QOSMaxWallDurationPerJobLimit", "2:00:00", "1:00:00"}},
		{name: "qos max time lowers the partition default", spec: api.JobSpec{QOS: api.QOSDebug}, check: func(t *testing.T, j *api.Job) {
			if j.TimeLimit != 3600 || j.Level != 2 {
				t.Fatalf("time limit %d level %d", j.TimeLimit, j.Level)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessWith(t, shareConfig)
			as := tt.as
			if as.user == "" {
				as = h.alice
			}
			resp, err := h.submitAs(as, tt.spec)
			if tt.errClass != nil {
				if err == nil || !errors.Is(err, tt.errClass) {
					t.Fatalf("error %v, want class %v", err, tt.errClass)
				}
				for _, s := range tt.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, h.job(resp.JobID))
		})
	}
}

func TestMaxSubmitPerUser(t *testing.T) {
	h := newHarnessWith(t, shareConfig)
	for i := range 2 {
		if _, err := h.submitAs(bob, api.JobSpec{}); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	_, err := h.submitAs(bob, api.JobSpec{})
	if err == nil || !strings.Contains(err.Error(), "queue nlp allows 2 submitted jobs per user") {
		t.Fatalf("third job: %v", err)
	}
	// Alice's queue has no limit.
	for range 3 {
		h.submit(api.JobSpec{})
	}
}

func TestLevelUpdate(t *testing.T) {
	h := newHarnessWith(t, shareConfig)
	id := h.submit(api.JobSpec{Hold: true})
	up := func(c caller, p uint32) string {
		resp, err := h.s.updateJobs(c, api.JobUpdate{Action: "update", IDs: []uint64{id}, Priority: &p})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Results[0].Error
	}
	if msg := up(h.alice, 5); !strings.Contains(msg, "may only lower") {
		t.Fatalf("raise by user: %q", msg)
	}
	if msg := up(h.alice, 2); msg != "" || h.job(id).Level != 2 {
		t.Fatalf("lower: %q level %d", msg, h.job(id).Level)
	}
	h.s.updateJobs(h.alice, api.JobUpdate{Action: "release", IDs: []uint64{id}})
	if j := h.job(id); j.EffPriority != 2 {
		t.Fatalf("released job's priority %d, want its level 2", j.EffPriority)
	}
}

// planHook stands in for the pure core: the real plan, then edit.
func (h *harness) planHook(edit func(snap *sched.Snapshot, p *sched.Plan)) {
	h.s.schedule = func(snap *sched.Snapshot, now time.Time, cfg sched.Config) sched.Plan {
		p := sched.Schedule(snap, now, cfg)
		edit(snap, &p)
		return p
	}
}

// preemptNext makes the next pass (only) choose victim for job by.
func (h *harness) preemptNext(victim, by uint64, mode api.PreemptMode, grace int64, reclaim bool) {
	done := false
	h.planHook(func(_ *sched.Snapshot, p *sched.Plan) {
		if !done {
			done = true
			p.Preemptions = append(p.Preemptions, sched.Preemption{Victim: victim, For: by, Reclaim: reclaim, Mode: mode,
				Grace: grace, Why: "test"})
		}
	})
	h.s.schedulePass()
}

// signalsFor lists the non-kill signals of resp addressed to job id.
func signalsFor(resp api.NodeSyncResponse, id uint64) (sigs []int, kill bool) {
	for _, s := range resp.Signals {
		if s.JobID != id {
			continue
		}
		if s.Kill {
			kill = true
		} else {
			sigs = append(sigs, s.Signal)
		}
	}
	return sigs, kill
}

func hasEvent(trail []string, want string) bool {
	for _, e := range trail {
		if strings.HasPrefix(e, want) {
			return true
		}
	}
	return false
}

// startBorrower starts a 16-GPU job of alice's queue vision, which
// borrows nlp's idle 8 GPUs, and returns it with its batch host.
func startBorrower(t *testing.T, h *harness, spec api.JobSpec) (uint64, string) {
	t.Helper()
	h.register("gpu01")
	h.register("gpu02")
	spec.Nodes, spec.GPUsPerNode = 2, 8
	id := h.submit(spec)
	h.planHook(func(_ *sched.Snapshot, p *sched.Plan) {
		for i := range p.Starts {
			if p.Starts[i].JobID == id {
				p.Starts[i].Borrowed = 8
			}
		}
	})
	h.s.schedulePass()
	j := h.job(id)
	if j.State != api.StateRunning || !j.Borrowing {
		t.Fatalf("borrower: %s borrowing=%v", j.State, j.Borrowing)
	}
	host := j.BatchHost()
	h.sync(host)
	h.sync(host, running(id, 0))
	return id, host
}

func TestReclaimRequeueWithAck(t *testing.T) {
	h := newHarnessWith(t, shareConfig)
	// Level 3, below bob's batch job (4): bob's job goes first once
	// both wait.
	a, host := startBorrower(t, h, api.JobSpec{Name: "train", QOS: api.QOSTraining, Priority: 3})
	if tr := h.trail(a); !hasEvent(tr, "borrow/") {
		t.Fatalf("no borrow event: %v", tr)
	}
	b, err := h.submitAs(bob, api.JobSpec{GPUs: 8, QOS: api.QOSTraining, Priority: 4})
	if err != nil {
		t.Fatal(err)
	}
	h.preemptNext(a, b.JobID, api.PreemptRequeue, 300, true)
	j := h.job(a)
	if j.Preempting == nil || j.Preempting.By != b.JobID || !j.Preempting.Reclaim || j.State != api.StateRunning ||
		!j.Preempting.Deadline.Equal(h.clock.now().Add(300*time.Second)) {
		t.Fatalf("victim: %s %+v", j.State, j.Preempting)
	}
	resp := h.sync(host, running(a, 0))
	if sigs, kill := signalsFor(resp, a); kill || !cmp.Equal(sigs, []int{int(syscall.SIGUSR1)}) {
		t.Fatalf("checkpoint signal: %v kill=%v", sigs, kill)
	}
	if tr := h.trail(b.JobID); !hasEvent(tr, "preempt/WaitingForReclaim") {
		t.Fatalf("preemptor's trail lacks the preemption: %v", tr)
	}

	// The job acknowledges (touching $TIDE_CHECKPOINT_ACK): the kill
	// follows at once, not at the deadline.
	h.clock.add(20 * time.Second)
	ack := running(a, 0)
	ack.CheckpointAck = true
	h.sync(host, ack)
	j = h.job(a)
	if !j.Preempting.Acked || j.State != api.StateCompleting || !j.RequeueRequested || !j.LastCheckpoint.Equal(h.clock.now()) {
		t.Fatalf("after ack: %s acked=%v requeue=%v", j.State, j.Preempting.Acked, j.RequeueRequested)
	}
	if _, kill := signalsFor(h.sync(host, running(a, 0)), a); !kill {
		t.Fatal("no kill after the acknowledgement")
	}
	rep := finished(a, 0)
	rep.Exit.Signal = 15
	h.sync(host, rep)
	j = h.job(a)
	if j.State != api.StatePending || j.Restarts != 1 || j.Preemptions != 1 || j.Preempting != nil || j.Borrowing ||
		!cmp.Equal(j.PrevNodes, []string{"gpu01", "gpu02"}) || j.Reason != api.ReasonPreempted {
		t.Fatalf("requeued: %s restarts=%d preemptions=%d prev=%v reason=%s", j.State, j.Restarts, j.Preemptions, j.PrevNodes, j.Reason)
	}
	if tr := h.trail(a); !hasEvent(tr, "preempt/Preempted") || !hasEvent(tr, "checkpoint/") || !hasEvent(tr, "requeue/Preempted") {
		t.Fatalf("trail: %v", tr)
	}
	ev, _ := h.s.store.Events(context.Background(), a)
	saw := false
	for _, e := range ev {
		saw = saw || e.State == api.StatePreempted
	}
	if !saw {
		t.Fatal("trail shows no PREEMPTED state")
	}

	// Bob's job runs; when it ends, the restart appends to its output.
	h.s.schedule = sched.Schedule
	h.s.schedulePass()
	if j := h.job(b.JobID); j.State != api.StateRunning {
		t.Fatalf("preemptor %s %s", j.State, j.Reason)
	}
	bh := h.job(b.JobID).BatchHost()
	h.sync(bh, finished(b.JobID, 0))
	h.s.schedulePass()
	j = h.job(a)
	if j.State != api.StateRunning {
		t.Fatalf("restart: %s %s", j.State, j.Reason)
	}
	resp = h.sync(j.BatchHost())
	if len(resp.Launch) != 1 || resp.Launch[0].Restart != 1 || resp.Launch[0].OpenMode != "append" {
		t.Fatalf("relaunch: %+v", resp.Launch)
	}
}

func TestPreemptedExitDuringGraceIsRequeued(t *testing.T) {
	h := newHarnessWith(t, shareConfig)
	a, host := startBorrower(t, h, api.JobSpec{Signal: &api.SignalSpec{Signal: int(syscall.SIGINT), BatchOnly: true}})
	b, _ := h.submitAs(bob, api.JobSpec{GPUs: 8})
	h.preemptNext(a, b.JobID, api.PreemptRequeue, 60, true)
	resp := h.sync(host, running(a, 0))
	var sent *api.SignalCommand
	for i := range resp.Signals {
		if resp.Signals[i].JobID == a {
			sent = &resp.Signals[i]
		}
	}
	if sent == nil || sent.Signal != int(syscall.SIGINT) || !sent.BatchOnly {
		t.Fatalf("--signal=B:INT not used: %+v", resp.Signals)
	}
	h.clock.add(10 * time.Second)
	h.sync(host, finished(a, 1))
	if j := h.job(a); j.State != api.StatePending || j.Restarts != 1 || j.Preemptions != 1 {
		t.Fatalf("exit 1 during grace: %s restarts=%d", j.State, j.Restarts)
	}
}

func TestPreemptCancelModeAfterDeadline(t *testing.T) {
	h := newHarnessWith(t, shareConfig)
	a, host := startBorrower(t, h, api.JobSpec{QOS: api.QOSDebug})
	b, _ := h.submitAs(bob, api.JobSpec{GPUs: 8})
	h.preemptNext(a, b.JobID, api.PreemptCancel, 10, true)
	h.sync(host, running(a, 0))

	// Before the deadline nothing happens; after it SIGTERM is sent.
	h.clock.add(9 * time.Second)
	h.s.mu.Lock()
	h.s.checkPreemptions(h.clock.now())
	h.s.mu.Unlock()
	if j := h.job(a); j.State != api.StateRunning {
		t.Fatalf("killed before the deadline: %s", j.State)
	}
	h.clock.add(time.Second)
	h.s.mu.Lock()
	h.s.checkPreemptions(h.clock.now())
	h.s.flush()
	h.s.mu.Unlock()
	resp := h.sync(host, running(a, 0))
	if _, kill := signalsFor(resp, a); !kill {
		t.Fatalf("no kill at the deadline: %+v", resp.Signals)
	}
	for _, s := range resp.Signals {
		if s.JobID == a && s.Kill && s.Signal != 0 && s.Signal != int(syscall.SIGTERM) {
			t.Fatalf("kill with signal %d, want SIGTERM", s.Signal)
		}
	}
	rep := finished(a, 0)
	rep.Exit.Signal = 15
	h.sync(host, rep)
	if j := h.job(a); j.State != api.StatePreempted || j.Reason != api.ReasonPreempted {
		t.Fatalf("cancel mode: %s %s", j.State, j.Reason)
	}
}

func TestNoRequeueJobIsCancelled(t *testing.T) {
	h := newHarnessWith(t, shareConfig)
	no := false
	a, host := startBorrower(t, h, api.JobSpec{Requeue: &no})
	b, _ := h.submitAs(bob, api.JobSpec{GPUs: 8})
	h.preemptNext(a, b.JobID, api.PreemptRequeue, 60, true)
	if p := h.job(a).Preempting; p == nil || p.Mode != api.PreemptCancel {
		t.Fatalf("--no-requeue victim: %+v", p)
	}
	h.sync(host, finished(a, 0))
	if j := h.job(a); j.State != api.StatePreempted {
		t.Fatalf("state %s", j.State)
	}
}

func TestSuspendAndResume(t *testing.T) {
	h := newHarnessWith(t, shareConfig)
	h.register("gpu01")
	h.register("gpu02")
	cpu := h.submit(api.JobSpec{CPUsPerTask: 8, NodeList: []string{"gpu01"}})
	h.s.schedulePass()
	h.sync("gpu01")
	h.sync("gpu01", running(cpu, 0))
	by, _ := h.submitAs(bob, api.JobSpec{CPUsPerTask: 8, NodeList: []string{"gpu01"}})
	h.preemptNext(cpu, by.JobID, api.PreemptSuspend, 0, false)
	j := h.job(cpu)
	if j.State != api.StateSuspended || h.s.nodes["gpu01"].AllocCPUs != 0 {
		t.Fatalf("suspend: %s, node holds %d CPUs", j.State, h.s.nodes["gpu01"].AllocCPUs)
	}
	if sigs, _ := signalsFor(h.sync("gpu01", running(cpu, 0)), cpu); !cmp.Equal(sigs, []int{int(syscall.SIGSTOP)}) {
		t.Fatalf("SIGSTOP: %v", sigs)
	}
	// The preemptor takes the CPUs; the suspended job waits for them.
	h.s.schedule = sched.Schedule
	h.s.schedulePass()
	if j := h.job(by.JobID); j.State != api.StateRunning {
		t.Fatalf("preemptor: %s %s", j.State, j.Reason)
	}
	if j := h.job(cpu); j.State != api.StateSuspended {
		t.Fatalf("resumed while its CPUs are taken: %s", j.State)
	}
	h.sync("gpu01", running(cpu, 0), running(by.JobID, 0))
	h.sync("gpu01", running(cpu, 0), finished(by.JobID, 0))
	h.s.schedulePass()
	if j := h.job(cpu); j.State != api.StateRunning || j.Preempting != nil || h.s.nodes["gpu01"].AllocCPUs != 8 {
		t.Fatalf("resume: %s %+v cpus=%d", j.State, j.Preempting, h.s.nodes["gpu01"].AllocCPUs)
	}
	if sigs, _ := signalsFor(h.sync("gpu01", running(cpu, 0)), cpu); !cmp.Equal(sigs, []int{int(syscall.SIGCONT)}) {
		t.Fatalf("SIGCONT: %v", sigs)
	}
	if tr := h.trail(cpu); !hasEvent(tr, "suspend/") || !hasEvent(tr, "resume/") {
		t.Fatalf("trail %v", tr)
	}
}

func TestGPUJobIsNeverSuspended(t *testing.T) {
	h := newHarnessWith(t, shareConfig)
	a, _ := startBorrower(t, h, api.JobSpec{})
	b, _ := h.submitAs(bob, api.JobSpec{GPUs: 8})
	h.preemptNext(a, b.JobID, api.PreemptSuspend, 30, true)
	if j := h.job(a); j.State != api.StateRunning || j.Preempting == nil || j.Preempting.Mode != api.PreemptRequeue {
		t.Fatalf("GPU victim: %s %+v", j.State, j.Preempting)
	}
}

func TestPreemptingSurvivesRestart(t *testing.T) {
	h := newHarnessWith(t, shareConfig)
	a, host := startBorrower(t, h, api.JobSpec{})
	b, _ := h.submitAs(bob, api.JobSpec{GPUs: 8})
	h.preemptNext(a, b.JobID, api.PreemptRequeue, 60, true)
	h.restart()
	j := h.job(a)
	if j.Preempting == nil || j.Preempting.By != b.JobID || j.State != api.StateRunning || !j.Borrowing {
		t.Fatalf("after restart: %s %+v", j.State, j.Preempting)
	}
	h.register(host, running(a, 0))
	h.register(otherNode(host), running(a, 0))
	h.clock.add(61 * time.Second)
	h.s.mu.Lock()
	h.s.checkPreemptions(h.clock.now())
	h.s.flush()
	h.s.mu.Unlock()
	if _, kill := signalsFor(h.sync(host, running(a, 0)), a); !kill {
		t.Fatal("deadline not enforced after restart")
	}
}

func otherNode(n string) string {
	if n == "gpu01" {
		return "gpu02"
	}
	return "gpu01"
}

func TestCheckpointAPI(t *testing.T) {
	h := newHarnessWith(t, shareConfig)
	a, _ := startBorrower(t, h, api.JobSpec{})
	if err := h.s.checkpoint(context.Background(), bob, a); !errors.Is(err, api.ErrPermissionDenied) {
		t.Fatalf("bob: %v", err)
	}
	if err := h.s.checkpoint(context.Background(), h.alice, 999); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
	if err := h.s.checkpoint(context.Background(), h.alice, a); err != nil {
		t.Fatal(err)
	}
	if j := h.job(a); !j.LastCheckpoint.Equal(h.clock.now()) || j.Preempting != nil || j.State != api.StateRunning {
		t.Fatalf("checkpoint outside preemption: %+v", j.Share)
	}
	// During a preemption it ends the grace time.
	b, _ := h.submitAs(bob, api.JobSpec{GPUs: 8})
	h.preemptNext(a, b.JobID, api.PreemptRequeue, 300, true)
	if err := h.s.checkpoint(context.Background(), h.alice, a); err != nil {
		t.Fatal(err)
	}
	if j := h.job(a); j.State != api.StateCompleting || !j.Preempting.Acked {
		t.Fatalf("checkpoint during preemption: %s %+v", j.State, j.Preempting)
	}
}

func TestQueueList(t *testing.T) {
	h := newHarnessWith(t, shareConfig)
	startBorrower(t, h, api.JobSpec{})
	if _, err := h.submitAs(bob, api.JobSpec{GPUs: 8}); err != nil {
		t.Fatal(err)
	}
	l := h.s.queueList()
	got := map[string][5]int{}
	for _, q := range l.Queues {
		got[q.Name] = [5]int{q.Guaranteed, q.UsedGPUs, q.BorrowedGPUs, q.LentGPUs, q.Running*10 + q.Pending}
	}
	want := map[string][5]int{"vision": {8, 16, 8, 0, 10}, "nlp": {8, 0, 0, 8, 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("queues (-want +got):\n%s", diff)
	}
	if l.DefaultQOS != api.QOSBatch || len(l.QOS) != 4 || l.QOS[3].Name != api.QOSDebug || l.QOS[3].MaxTime != 3600 || l.StarvationAge != 1800 {
		t.Fatalf("classes: %+v", l)
	}
}

func TestDecisionsAndStarvation(t *testing.T) {
	h := newHarnessWith(t, shareConfig)
	h.register("gpu01")
	h.register("gpu02")
	big := h.submit(api.JobSpec{Nodes: 2, GPUsPerNode: 8})
	h.s.schedulePass()
	wait := h.submit(api.JobSpec{GPUs: 8})
	since := h.clock.now()
	expect := since.Add(time.Hour)
	h.planHook(func(_ *sched.Snapshot, p *sched.Plan) {
		for i := range p.Pending {
			if p.Pending[i].JobID == wait {
				d := &p.Pending[i]
				d.Reason, d.Detail = api.ReasonQuotaExceeded, "queue vision 16/16 GPUs"
				d.More = []string{"Starving since 12:00", "Priority: 1 job ahead"}
				d.StarvingSince, d.Level, d.ExpectedStart = since, 4, expect
			}
		}
	})
	h.s.schedulePass()
	h.s.schedulePass()
	j := h.job(wait)
	if j.Reason != api.ReasonQuotaExceeded || j.ReasonDetail != "queue vision 16/16 GPUs; Starving since 12:00; Priority: 1 job ahead" ||
		!j.Starving.Equal(since) || !j.ExpectedStart.Equal(expect) {
		t.Fatalf("decision: %s %q starving=%v expected=%v", j.Reason, j.ReasonDetail, j.Starving, j.ExpectedStart)
	}
	starving := 0
	for _, e := range h.trail(wait) {
		if strings.HasPrefix(e, "starving/") {
			starving++
		}
	}
	if starving != 1 || h.job(big).State != api.StateRunning {
		t.Fatalf("starving events %d, want 1", starving)
	}
}

func TestSameDetail(t *testing.T) {
	tests := []struct {
		name string
		d    sched.Decision
	}{
		{name: "detail only", d: sched.Decision{Detail: "0/2 nodes available: 2 InsufficientGPU"}},
		{name: "empty", d: sched.Decision{}},
		{name: "more", d: sched.Decision{Detail: "queue a 8/8 GPUs", More: []string{"Starving since 10:42", "Priority: 3 jobs ahead"}}},
		{name: "more without detail", d: sched.Decision{More: []string{"x", "", "y"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := decisionDetail(&tt.d)
			if !sameDetail(want, &tt.d) {
				t.Fatalf("sameDetail(%q) = false", want)
			}
			for _, other := range []string{want + ";", "x" + want, want + "; z", "queue a 8/8 GPUs; Starving since 10:42"} {
				if other != want && sameDetail(other, &tt.d) {
					t.Fatalf("sameDetail(%q) = true for %q", other, want)
				}
			}
		})
	}
}

// TestBorrowAndReclaimWithCore runs the pure core itself: alice's queue
// borrows nlp's idle GPUs, bob's job takes them back.
func TestBorrowAndReclaimWithCore(t *testing.T) {
	h := newHarnessWith(t, shareConfig)
	h.register("gpu01")
	h.register("gpu02")
	a := h.submit(api.JobSpec{Nodes: 2, GPUsPerNode: 8})
	h.clock.add(10 * time.Minute) // past batch's min_runtime
	h.s.schedulePass()
	j := h.job(a)
	if j.State != api.StateRunning || !j.Borrowing {
		t.Fatalf("borrower: %s %s borrowing=%v", j.State, j.ReasonDetail, j.Borrowing)
	}
	host := j.BatchHost()
	h.sync(host)
	h.sync(host, running(a, 0))
	h.clock.add(10 * time.Minute)
	b, err := h.submitAs(bob, api.JobSpec{GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	h.s.schedulePass()
	j = h.job(a)
	if j.Preempting == nil || j.Preempting.By != b.JobID || !j.Preempting.Reclaim || j.Preempting.Mode != api.PreemptRequeue {
		t.Fatalf("victim: %s %+v", j.State, j.Preempting)
	}
	if w := h.job(b.JobID); w.State != api.StatePending || w.Reason != api.ReasonWaitingForReclaim {
		t.Fatalf("reclaimer: %s %s %q", w.State, w.Reason, w.ReasonDetail)
	}
	// A second pass chooses no second victim.
	h.s.schedulePass()
	if tr := h.trail(a); strings.Count(strings.Join(tr, ","), "preempt/") != 1 {
		t.Fatalf("trail %v", tr)
	}
	h.sync(host, finished(a, 0))
	h.s.schedulePass()
	if w := h.job(b.JobID); w.State != api.StateRunning {
		t.Fatalf("reclaimer after the victim left: %s %s %q", w.State, w.Reason, w.ReasonDetail)
	}
	if j := h.job(a); j.State != api.StatePending || j.Restarts != 1 {
		t.Fatalf("victim: %s restarts %d", j.State, j.Restarts)
	}
}
