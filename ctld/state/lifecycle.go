package state

import (
	"fmt"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Job lifecycle.
//
// A job's state changes only through Transition, which checks the change
// against one table (Lifecycle) and sets what every state records (the
// start time of a start, the end time, reason and exit status of an end,
// the reset of a requeue) the one way the controller always did. The
// controller (ctld) calls it under its mutex and, once the change is
// allowed, does what needs I/O: accounting, the job's trail, commands to
// the nodes. A
// change the table lacks is refused with the job left as it was, so a bug
// or a request that lost a race (the cancel of a job that has just ended)
// cannot put a job into a state, or a state's fields, the controller does
// not know.

// Edge is one transition of the job lifecycle.
type Edge struct {
	From, To api.JobState
	// Why says what moves a job along this edge in the controller.
	Why string
}

// Lifecycle is every transition the controller makes, and no other:
// Transition refuses a change that is not here. A new transition is a new
// edge (and a case in the table test), never an assignment of Job.State
// in the controller.
//
// A job reaches COMPLETING only when the controller stops a running
// incarnation (cancel, requeue, preemption in cancel mode); one that ends
// on its own goes straight from RUNNING (or SUSPENDED) to its final state.
// Final states are left only by a requeue (scontrol requeue of a finished
// job still in memory).
var Lifecycle = []Edge{
	{api.StatePending, api.StateRunning, "the scheduler starts it"},
	{api.StatePending, api.StateCancelled, "scancel, --kill-on-invalid-dep, an allocation released before it started"},

	{api.StateRunning, api.StateSuspended, "preemption in suspend mode (SIGSTOP)"},
	{api.StateSuspended, api.StateRunning, "resumed (SIGCONT) once the preemptor no longer needs the room"},

	{api.StateRunning, api.StateCompleting, "scancel, scontrol requeue, GPU memory reclaim, preemption: the node is told to kill it"},
	{api.StateSuspended, api.StateCompleting, "scancel or scontrol requeue of a suspended job"},
	{api.StateCompleting, api.StateCompleting, "a second request on a job already stopping (scancel after a requeue request): it records the request"},

	{api.StateRunning, api.StateCompleted, "exit 0"},
	{api.StateRunning, api.StateFailed, "non-zero exit, a launch the job's own request failed, an allocation released with an error"},
	{api.StateRunning, api.StateTimeout, "time limit"},
	{api.StateRunning, api.StateOOM, "the OOM killer at the job's memory limit"},
	{api.StateRunning, api.StateNodeFail, "its node stopped responding or forgot the job"},
	{api.StateRunning, api.StatePreempted, "preempted in cancel mode: ended in its grace time, or never launched"},

	{api.StateSuspended, api.StateCompleted, "its processes ended while stopped (exit 0)"},
	{api.StateSuspended, api.StateFailed, "its processes ended while stopped (non-zero exit)"},
	{api.StateSuspended, api.StateTimeout, "time limit while stopped"},
	{api.StateSuspended, api.StateOOM, "the OOM killer while stopped"},
	{api.StateSuspended, api.StateNodeFail, "its node stopped responding or forgot the job"},

	{api.StateCompleting, api.StateCancelled, "the node reports the end of a cancelled job (or a cancel before launch)"},
	{api.StateCompleting, api.StatePreempted, "the node reports the end of a victim killed in cancel mode"},
	{api.StateCompleting, api.StateNodeFail, "its node stopped responding or forgot the job"},

	{api.StateRunning, api.StatePending, "requeue: a launch the node could not carry out, node failure with --requeue, a requeue-mode victim that ended in its grace time"},
	{api.StateSuspended, api.StatePending, "requeue: node failure with --requeue"},
	{api.StateCompleting, api.StatePending, "requeue: the node reports the end of a requeued job (or it was never launched)"},
	{api.StateCompleted, api.StatePending, "scontrol requeue of a finished job"},
	{api.StateFailed, api.StatePending, "scontrol requeue of a finished job"},
	{api.StateCancelled, api.StatePending, "scontrol requeue of a finished job"},
	{api.StateTimeout, api.StatePending, "scontrol requeue of a finished job"},
	{api.StateNodeFail, api.StatePending, "scontrol requeue of a finished job"},
	{api.StateOOM, api.StatePending, "scontrol requeue of a finished job"},
	{api.StatePreempted, api.StatePending, "scontrol requeue of a finished job"},
}

// allowed is Lifecycle as a set of (from, to) pairs.
var allowed = func() map[[2]api.JobState]bool {
	m := make(map[[2]api.JobState]bool, len(Lifecycle))
	for _, e := range Lifecycle {
		if stateIndex(e.From) < 0 || stateIndex(e.To) < 0 {
			panic(fmt.Sprintf("state: lifecycle edge %s to %s names an unknown state", e.From, e.To))
		}
		m[[2]api.JobState{e.From, e.To}] = true
	}
	return m
}()

// stateIndex is s's place in api.AllJobStates, -1 for a word that is no
// job state.
func stateIndex(s api.JobState) int {
	for i, k := range api.AllJobStates {
		if k == s {
			return i
		}
	}
	return -1
}

// Change is one requested transition of a job, with what the new state
// records.
type Change struct {
	// To is the state the job moves to.
	To api.JobState
	// At is when it happens: a start's start time, an end's end time, a
	// requeue's new eligible time. Those require it; suspend, resume and
	// a move to COMPLETING ignore it.
	At time.Time
	// Reason is the job's reason in its new state: why it ended (a final
	// state), why it waits (a requeue), why it is being stopped (to
	// COMPLETING, where ReasonNone keeps the reason the job has). Empty
	// means ReasonNone. Starts, suspends and resumes ignore it.
	Reason api.ReasonCode
	// Exit is the exit status a final state records.
	Exit api.ExitStatus
	// Cancel and Requeue say why a move to COMPLETING stops the running
	// incarnation: a cancel (its end is CANCELLED whatever the exit) or a
	// requeue (its end returns the job to PENDING). Neither: the
	// controller kills it for another reason (preemption in cancel mode)
	// and the end decides. Other moves refuse them.
	Cancel, Requeue bool
}

// TransitionError is a change of a job's state that Transition refused.
// It wraps api.ErrConflict when the lifecycle has no such transition (a
// bug, or a request that lost a race), and api.ErrInvalidArgument when
// the change is malformed (a word that is no job state, an end without a
// time): test with errors.Is.
type TransitionError struct {
	JobID    uint64
	From, To api.JobState
	// Problem says what is wrong.
	Problem string
	class   error
}

// Error names the job, the change and the problem.
func (e *TransitionError) Error() string {
	return fmt.Sprintf("job %d: %s to %s: %s: %v", e.JobID, e.From, e.To, e.Problem, e.class)
}

// Unwrap returns the error class (api.ErrConflict or
// api.ErrInvalidArgument).
func (e *TransitionError) Unwrap() error { return e.class }

// Allowed reports whether the lifecycle has a transition from from to
// to: nil if so, else a *TransitionError (JobID 0).
func Allowed(from, to api.JobState) error {
	f, t := stateIndex(from), stateIndex(to)
	switch {
	case f < 0:
		return &TransitionError{From: from, To: to, Problem: fmt.Sprintf("%q is not a job state", from), class: api.ErrInvalidArgument}
	case t < 0:
		return &TransitionError{From: from, To: to, Problem: fmt.Sprintf("%q is not a job state", to), class: api.ErrInvalidArgument}
	case !allowed[[2]api.JobState{from, to}]:
		return &TransitionError{From: from, To: to, Problem: "not a transition of the job lifecycle", class: api.ErrConflict}
	}
	return nil
}

// Check reports whether Transition(j, c) would succeed, without changing
// j: the controller checks first where what it must do before the change
// (releasing the job's nodes) reads the job as it was.
func Check(j *api.Job, c Change) error {
	if err := Allowed(j.State, c.To); err != nil {
		te := err.(*TransitionError)
		te.JobID = j.ID
		return te
	}
	invalid := func(problem string) error {
		return &TransitionError{JobID: j.ID, From: j.State, To: c.To, Problem: problem, class: api.ErrInvalidArgument}
	}
	if (c.Cancel || c.Requeue) && c.To != api.StateCompleting {
		return invalid("only a move to COMPLETING is a cancel or requeue request")
	}
	if c.At.IsZero() && (c.To.Terminal() || c.To == api.StatePending ||
		c.To == api.StateRunning && j.State == api.StatePending) {
		return invalid("no time given")
	}
	return nil
}

// Transition moves job j as c asks and sets what the new state records:
//
//   - a start (PENDING to RUNNING): start time At, reason None, no
//     detail, no end time, not launched yet;
//   - suspend and resume: the state alone;
//   - a stop (to COMPLETING): the cancel or requeue request, and c's
//     reason unless it is ReasonNone;
//   - an end (to a final state): end time At, c's reason and exit
//     status, no detail; a job that never started gets At as its start
//     time too (sacct shows it with a zero elapsed time);
//   - a requeue (to PENDING): a new incarnation (restart count + 1)
//     eligible at At, waiting for c's reason, with nothing of the last
//     one left: no allocation, placement, start or end time, exit status,
//     requests, time-out, launch or failed launches, and none of its
//     sharing state (preemption, borrowing, starving).
//
// It is pure: no clock, no I/O, no locks. A refused change returns a
// *TransitionError and leaves j as it was.
func Transition(j *api.Job, c Change) error {
	if err := Check(j, c); err != nil {
		return err
	}
	from := j.State
	reason := c.Reason
	if reason == "" {
		reason = api.ReasonNone
	}
	j.State = c.To
	switch {
	case c.To == api.StateRunning && from == api.StatePending:
		j.Reason, j.ReasonDetail = api.ReasonNone, ""
		j.StartTime, j.EndTime = c.At, time.Time{}
		j.Launched = false
	case c.To == api.StateRunning, c.To == api.StateSuspended:
	case c.To == api.StateCompleting:
		j.CancelRequested = j.CancelRequested || c.Cancel
		j.RequeueRequested = j.RequeueRequested || c.Requeue
		if reason != api.ReasonNone {
			j.Reason = reason
		}
	case c.To == api.StatePending:
		j.Reason, j.ReasonDetail = reason, ""
		j.Restarts++
		j.Alloc, j.Placement, j.Launched = nil, "", false
		j.CancelRequested, j.RequeueRequested, j.TimedOut = false, false, false
		j.LaunchFailures, j.LaunchFailNodes = 0, nil
		j.StartTime, j.EndTime, j.EligibleTime = time.Time{}, time.Time{}, c.At
		j.Exit = api.ExitStatus{}
		j.Preempting, j.Borrowing, j.Starving, j.StartedStarving, j.ExpectedStart = nil, false, time.Time{}, false, time.Time{}
	default: // a final state
		j.Reason, j.ReasonDetail, j.Exit, j.EndTime = reason, "", c.Exit, c.At
		if j.StartTime.IsZero() {
			j.StartTime = c.At
		}
	}
	return nil
}
