package ctld

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	"github.com/tide-hpc/tide/ctld/state"
)

// Preemption, as the controller carries it out. The pure core chooses
// victims (Plan.Preemptions); for each one:
//
//   - requeue and cancel: the victim gets its checkpoint signal (the
//     signal of its --signal, SIGUSR1 by default; B: sends it to the
//     batch shell only) and Job.Preempting records the grace deadline.
//     When the deadline passes, or the job acknowledges its checkpoint
//     (NodeJobReport.CheckpointAck or POST …/checkpoint), it is killed as
//     a cancel is (SIGTERM, kill_wait, SIGKILL). Whenever it ends from
//     then on, whatever its exit code, it returns to PENDING with its
//     restart count raised and its previous nodes recorded (requeue), or
//     ends PREEMPTED (cancel).
//   - suspend (jobs without GPUs only): SIGSTOP, state SUSPENDED, and the
//     job's resources go back to the nodes; it is resumed with SIGCONT as
//     soon as the job it made room for no longer waits and its exact
//     allocation is free again.
//
// Job.Preempting is stored with the job, so a restarted controller
// keeps the deadlines (housekeeping checks them every second).

// defaultCheckpointSignal is sent to a victim without --signal.
const defaultCheckpointSignal = int(syscall.SIGUSR1)

// suspendedRelease reports whether j's resources were given back to its
// nodes by a suspension (it is SUSPENDED, or was cancelled while so).
func suspendedRelease(j *api.Job) bool {
	return j.Preempting != nil && j.Preempting.Mode == api.PreemptSuspend
}

// preempt starts one preemption the pass decided. Called with mu held.
func (s *Server) preempt(p sched.Preemption, now time.Time) {
	j := s.jobs[p.Victim]
	if j == nil || j.State != api.StateRunning || j.Preempting != nil || j.CancelRequested || j.RequeueRequested {
		return
	}
	mode := p.Mode
	switch {
	case mode == api.PreemptNever || mode == "":
		s.log.Error("scheduler chose a victim that may not be preempted", "job_id", j.ID, "for", p.For)
		return
	case mode == api.PreemptSuspend && j.AllocGPUs() > 0:
		// A stopped GPU job keeps its GPU memory: requeue it instead.
		mode = api.PreemptRequeue
	}
	if mode == api.PreemptRequeue && j.Requeue != nil && !*j.Requeue {
		mode = api.PreemptCancel
	}
	grace := time.Duration(max(p.Grace, 0)) * time.Second
	j.Preempting = &api.Preempting{By: p.For, Reclaim: p.Reclaim, Mode: mode, Since: now, Deadline: now.Add(grace), Why: p.Why}
	s.markDirty(j)
	rule := "preempted"
	if p.Reclaim {
		rule = "reclaimed"
	}
	msg := fmt.Sprintf("%s for job %d (%s, grace %s): %s", rule, p.For, mode, grace, p.Why)
	s.event(j, api.EventPreempt, string(api.ReasonPreempted), msg, "")
	if by := s.jobs[p.For]; by != nil {
		reason := api.ReasonPreempting
		if p.Reclaim {
			reason = api.ReasonWaitingForReclaim
		}
		s.event(by, api.EventPreempt, string(reason), fmt.Sprintf("job %d %s for it (%s): %s", j.ID, rule, mode, p.Why), "")
	}
	s.metrics.preempted(mode, p.Reclaim)
	s.log.Info("preempting job", "job_id", j.ID, "for", p.For, "mode", mode, "grace", grace.String(), "why", p.Why)
	if mode == api.PreemptSuspend {
		s.suspend(j)
		return
	}
	if !j.Launched || grace <= 0 {
		s.preemptKill(j, now)
		return
	}
	if j.Signal != nil && j.Signal.Signal > 0 {
		// The job's --signal, to its steps or with B: its batch shell,
		// as at its time limit (Slurm's preempt_send_user_signal).
		s.signalCommands(j, j.Signal.Signal, j.Signal.BatchOnly, false)
		return
	}
	// Tide's default checkpoint signal reaches the batch shell and its
	// children; srun passes it on to its tasks.
	s.signalCommands(j, defaultCheckpointSignal, false, true)
}

// preemptKill ends the grace time of a victim: a launched job is killed
// (SIGTERM, kill_wait, SIGKILL) and requeued or ended when its node
// reports the end; one never launched is dealt with at once. Called with
// mu held.
func (s *Server) preemptKill(j *api.Job, now time.Time) {
	p := j.Preempting
	if p == nil || j.State != api.StateRunning {
		return
	}
	why := "grace time over"
	if p.Acked {
		why = "checkpoint acknowledged"
	}
	if !j.Launched {
		why = "never launched"
	}
	s.log.Info("preemption: killing victim", "job_id", j.ID, "why", why)
	if p.Mode == api.PreemptCancel {
		if !j.Launched {
			s.endJob(j, api.StatePreempted, api.ReasonPreempted, api.ExitStatus{}, now, fmt.Sprintf("preempted for job %d before launch", p.By))
			return
		}
		if !s.transition(j, state.Change{To: api.StateCompleting}) {
			return
		}
		s.markDirty(j)
		if n := s.nodes[j.BatchHost()]; n != nil {
			n.notify()
		}
		return
	}
	s.requeueActive(j, api.ReasonPreempted, fmt.Sprintf("preempted for job %d before launch", p.By))
}

// checkPreemptions kills the victims whose grace time ran out and
// resumes suspended jobs whose room is free again. Called with mu held
// every housekeeping tick.
func (s *Server) checkPreemptions(now time.Time) {
	resumed := false
	for _, name := range s.cl.NodeOrder {
		for _, j := range s.nodes[name].batch {
			switch {
			case j.Preempting == nil:
			case j.State == api.StateRunning && (j.Preempting.Acked || !now.Before(j.Preempting.Deadline)):
				s.preemptKill(j, now)
			case j.State == api.StateSuspended && s.resumable(j):
				s.resume(j)
				resumed = true
			}
		}
	}
	if resumed {
		s.Kick()
	}
}

// checkpointAck records a finished checkpoint of j; a victim in its
// grace time is killed now rather than at its deadline. Called with mu
// held.
func (s *Server) checkpointAck(j *api.Job, now time.Time, actor string) {
	j.LastCheckpoint = now
	s.markDirty(j)
	msg := "checkpoint acknowledged"
	if actor != "" {
		msg += " by " + actor
	}
	if p := j.Preempting; p != nil && !p.Acked && p.Mode != api.PreemptSuspend {
		// Copy on write: listings share the record outside the lock.
		cp := *p
		cp.Acked = true
		j.Preempting, p = &cp, &cp
		msg += fmt.Sprintf("; preemption for job %d proceeds after %s of %s grace", p.By,
			now.Sub(p.Since).Round(time.Second), p.Deadline.Sub(p.Since))
		s.event(j, api.EventCheckpoint, "", msg, actor)
		s.preemptKill(j, now)
		return
	}
	s.event(j, api.EventCheckpoint, "", msg, actor)
}

// suspend stops j (SIGSTOP to all its processes) and gives its
// resources back to its nodes. Called with mu held.
func (s *Server) suspend(j *api.Job) {
	if !s.transition(j, state.Change{To: api.StateSuspended}) {
		return
	}
	for _, a := range j.Alloc {
		if n := s.nodes[a.Node]; n != nil {
			n.release(a)
		}
	}
	s.markDirty(j)
	s.event(j, api.EventSuspend, string(api.ReasonPreempted), fmt.Sprintf("suspended (SIGSTOP) for job %d", j.Preempting.By), "")
	if n := s.nodes[j.BatchHost()]; n != nil {
		n.signals = append(n.signals, api.SignalCommand{JobRef: ref(j), Signal: int(syscall.SIGSTOP)})
		n.notify()
	}
}

// resumable reports whether suspended j may continue: the job it made
// room for no longer waits, and j's exact allocation is free. Called
// with mu held.
func (s *Server) resumable(j *api.Job) bool {
	if by := s.jobs[j.Preempting.By]; by != nil && by.State == api.StatePending {
		return false
	}
	return s.ledger.Check(j.Alloc) == nil
}

// resume takes j's allocation back and continues it (SIGCONT). Called
// with mu held.
func (s *Server) resume(j *api.Job) {
	if !s.transition(j, state.Change{To: api.StateRunning}) {
		return
	}
	for _, a := range j.Alloc {
		s.nodes[a.Node].allocate(a)
	}
	by := j.Preempting.By
	j.Preempting = nil
	s.markDirty(j)
	s.event(j, api.EventResume, "", fmt.Sprintf("resumed (SIGCONT): job %d no longer needs its resources", by), "")
	if n := s.nodes[j.BatchHost()]; n != nil {
		n.signals = append(n.signals, api.SignalCommand{JobRef: ref(j), Signal: int(syscall.SIGCONT)})
		n.notify()
	}
}

// preemptedEnd records the end of a victim's incarnation: requeued
// whatever its exit (Tide sent the signal that ended it), or PREEMPTED.
// Called with mu held.
func (s *Server) preemptedEnd(j *api.Job, rep api.NodeJobReport, end time.Time) {
	p := j.Preempting
	how := "ended " + rep.Exit.String()
	switch {
	case !p.Acked && end.Before(p.Deadline):
		how = "exited during its grace time (" + rep.Exit.String() + ")"
	case p.Acked:
		how = "killed after its checkpoint (" + rep.Exit.String() + ")"
	default:
		how = "killed at its grace deadline (" + rep.Exit.String() + ")"
	}
	if p.Mode == api.PreemptCancel {
		s.endJob(j, api.StatePreempted, api.ReasonPreempted, rep.Exit, end, fmt.Sprintf("preempted for job %d: %s", p.By, how))
		return
	}
	j.Reason = api.ReasonPreempted
	s.requeue(j, end, fmt.Sprintf("preempted for job %d: %s", p.By, how))
}

// notePreempted updates a requeued victim's sharing state and puts
// PREEMPTED in its trail; requeue calls it before clearing the
// allocation. Called with mu held.
func (s *Server) notePreempted(j *api.Job, now time.Time, msg string) {
	if j.Preempting == nil {
		return
	}
	nodes := make([]string, 0, len(j.Alloc))
	for _, a := range j.Alloc {
		nodes = append(nodes, a.Node)
	}
	j.PrevNodes = nodes
	j.Preemptions++
	s.events = append(s.events, api.Event{JobID: j.ID, Time: now, Kind: api.EventPreempt, State: api.StatePreempted,
		Reason: string(api.ReasonPreempted), Message: msg + " on " + strings.Join(nodes, ",")})
	j.Preempting = nil
}
