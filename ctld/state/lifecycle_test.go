package state

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// jobIn returns a job record as the controller keeps one in state s.
func jobIn(s api.JobState) *api.Job {
	j := &api.Job{ID: 7, State: api.StatePending, Reason: api.ReasonPriority, ReasonDetail: "3 jobs ahead",
		SubmitTime: t0, EligibleTime: t0}
	if s == api.StatePending {
		return j
	}
	j.State, j.Reason, j.ReasonDetail = api.StateRunning, api.ReasonNone, ""
	j.StartTime, j.Launched = t0.Add(time.Minute), true
	j.Alloc = []api.NodeAlloc{{Node: "gpu01", CPUs: 4, GPUs: []int{0, 1}}}
	switch {
	case s == api.StateCompleting:
		j.State, j.CancelRequested = s, true
	case s == api.StateSuspended:
		j.State = s
		j.Preempting = &api.Preempting{By: 9, Mode: api.PreemptSuspend}
	case s.Terminal():
		j.State, j.Reason, j.EndTime, j.Exit = s, api.ReasonNonZeroExit, t0.Add(time.Hour), api.ExitStatus{Code: 2}
	}
	return j
}

// changeTo is a well-formed change to state to at t0+2h.
func changeTo(to api.JobState) Change {
	return Change{To: to, At: t0.Add(2 * time.Hour)}
}

func TestLifecycleTable(t *testing.T) {
	// What the controller does, written out again by hand: the table
	// must say exactly this.
	terminal := []api.JobState{api.StateCompleted, api.StateFailed, api.StateCancelled, api.StateTimeout,
		api.StateNodeFail, api.StateOOM, api.StatePreempted}
	want := map[api.JobState][]api.JobState{
		api.StatePending: {api.StateRunning, api.StateCancelled},
		api.StateRunning: {api.StateSuspended, api.StateCompleting, api.StatePending, api.StateCompleted,
			api.StateFailed, api.StateTimeout, api.StateOOM, api.StateNodeFail, api.StatePreempted},
		api.StateSuspended: {api.StateRunning, api.StateCompleting, api.StatePending, api.StateCompleted,
			api.StateFailed, api.StateTimeout, api.StateOOM, api.StateNodeFail},
		api.StateCompleting: {api.StateCompleting, api.StatePending, api.StateCancelled, api.StatePreempted,
			api.StateNodeFail},
	}
	for _, s := range terminal {
		want[s] = []api.JobState{api.StatePending}
	}
	for _, from := range api.AllJobStates {
		for _, to := range api.AllJobStates {
			ok := slices.Contains(want[from], to)
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				j := jobIn(from)
				before := *j
				err := Transition(j, changeTo(to))
				if ok {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					if j.State != to {
						t.Fatalf("state %s after the change", j.State)
					}
					if Allowed(from, to) != nil {
						t.Fatal("Allowed disagrees with Transition")
					}
					return
				}
				var te *TransitionError
				if !errors.Is(err, api.ErrConflict) || !errors.As(err, &te) || te.From != from || te.To != to || te.JobID != 7 {
					t.Fatalf("err = %v, want a TransitionError %s to %s wrapping ErrConflict", err, from, to)
				}
				if diff := cmp.Diff(&before, j); diff != "" {
					t.Fatalf("a refused change touched the job (-want +got):\n%s", diff)
				}
				if !errors.Is(Allowed(from, to), api.ErrConflict) {
					t.Fatal("Allowed disagrees with Transition")
				}
			})
		}
	}
	n := 0
	for _, tos := range want {
		n += len(tos)
	}
	if n != len(Lifecycle) {
		t.Errorf("Lifecycle has %d edges, want %d (an edge repeated?)", len(Lifecycle), n)
	}
	for _, e := range Lifecycle {
		if e.Why == "" {
			t.Errorf("edge %s to %s says nothing about why", e.From, e.To)
		}
	}
}

func TestLifecycleShape(t *testing.T) {
	// Every state is reachable from PENDING, and every state that is
	// not final can reach a final one: no job is stuck by the table.
	reach := func(from api.JobState) map[api.JobState]bool {
		seen := map[api.JobState]bool{from: true}
		for q := []api.JobState{from}; len(q) > 0; q = q[1:] {
			for _, e := range Lifecycle {
				if e.From == q[0] && !seen[e.To] {
					seen[e.To] = true
					q = append(q, e.To)
				}
			}
		}
		return seen
	}
	fromPending := reach(api.StatePending)
	for _, s := range api.AllJobStates {
		if !fromPending[s] {
			t.Errorf("%s cannot be reached from PENDING", s)
		}
		if s.Terminal() {
			continue
		}
		final := false
		for r := range reach(s) {
			final = final || r.Terminal()
		}
		if !final {
			t.Errorf("a %s job can never end", s)
		}
	}
}

func TestTransitionRefusesMalformedChanges(t *testing.T) {
	tests := []struct {
		name string
		from api.JobState
		c    Change
	}{
		{"unknown target", api.StateRunning, Change{To: "FINISHED", At: t0}},
		{"empty target", api.StateRunning, Change{At: t0}},
		{"unknown current state", "BOGUS", changeTo(api.StatePending)},
		{"end without a time", api.StateRunning, Change{To: api.StateCompleted}},
		{"cancel without a time", api.StatePending, Change{To: api.StateCancelled, Reason: api.ReasonCancelled}},
		{"start without a time", api.StatePending, Change{To: api.StateRunning}},
		{"requeue without a time", api.StateFailed, Change{To: api.StatePending}},
		{"cancel request on an end", api.StateRunning, Change{To: api.StateFailed, At: t0, Cancel: true}},
		{"requeue request on a requeue", api.StateCompleting, Change{To: api.StatePending, At: t0, Requeue: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := jobIn(api.StateRunning)
			j.State = tt.from
			before := *j
			err := Transition(j, tt.c)
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
			if err2 := Check(&before, tt.c); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("Check says %v, Transition %v", err2, err)
			}
			if diff := cmp.Diff(&before, j); diff != "" {
				t.Fatalf("a refused change touched the job (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTransitionFields(t *testing.T) {
	at := t0.Add(2 * time.Hour)
	tests := []struct {
		name string
		from api.JobState
		// edit prepares the job beyond jobIn.
		edit func(j *api.Job)
		c    Change
		// want edits jobIn(from) (after edit) into the expected result.
		want func(j *api.Job)
	}{
		{
			name: "start",
			from: api.StatePending,
			c:    Change{To: api.StateRunning, At: at, Reason: api.ReasonCancelled},
			want: func(j *api.Job) {
				j.State, j.Reason, j.ReasonDetail, j.StartTime = api.StateRunning, api.ReasonNone, "", at
			},
		},
		{
			name: "end",
			from: api.StateRunning,
			c:    Change{To: api.StateFailed, At: at, Reason: api.ReasonNonZeroExit, Exit: api.ExitStatus{Code: 3}},
			want: func(j *api.Job) {
				j.State, j.Reason, j.EndTime, j.Exit = api.StateFailed, api.ReasonNonZeroExit, at, api.ExitStatus{Code: 3}
			},
		},
		{
			name: "end with the empty reason is None",
			from: api.StateRunning,
			c:    Change{To: api.StateCompleted, At: at},
			want: func(j *api.Job) { j.State, j.Reason, j.EndTime = api.StateCompleted, api.ReasonNone, at },
		},
		{
			name: "cancel of a pending job clears its diagnosis and starts it at its end",
			from: api.StatePending,
			c:    Change{To: api.StateCancelled, At: at, Reason: api.ReasonCancelled},
			want: func(j *api.Job) {
				j.State, j.Reason, j.ReasonDetail = api.StateCancelled, api.ReasonCancelled, ""
				j.StartTime, j.EndTime = at, at
			},
		},
		{
			name: "cancel request",
			from: api.StateRunning,
			c:    Change{To: api.StateCompleting, Cancel: true},
			want: func(j *api.Job) { j.State, j.CancelRequested = api.StateCompleting, true },
		},
		{
			name: "requeue request with a reason",
			from: api.StateRunning,
			c:    Change{To: api.StateCompleting, Requeue: true, Reason: api.ReasonPreempted},
			want: func(j *api.Job) {
				j.State, j.RequeueRequested, j.Reason = api.StateCompleting, true, api.ReasonPreempted
			},
		},
		{
			name: "a kill without request keeps the reason",
			from: api.StateRunning,
			edit: func(j *api.Job) { j.Reason = api.ReasonGPUMemReclaim },
			c:    Change{To: api.StateCompleting, Reason: api.ReasonNone},
			want: func(j *api.Job) { j.State = api.StateCompleting },
		},
		{
			name: "a cancel after a requeue request keeps both",
			from: api.StateCompleting,
			edit: func(j *api.Job) { j.CancelRequested, j.RequeueRequested = false, true },
			c:    Change{To: api.StateCompleting, Cancel: true},
			want: func(j *api.Job) { j.CancelRequested = true },
		},
		{
			name: "suspend and resume change the state alone",
			from: api.StateRunning,
			c:    Change{To: api.StateSuspended, At: at, Reason: api.ReasonPreempted},
			want: func(j *api.Job) { j.State = api.StateSuspended },
		},
		{
			name: "resume",
			from: api.StateSuspended,
			c:    Change{To: api.StateRunning, At: at},
			want: func(j *api.Job) { j.State = api.StateRunning },
		},
		{
			name: "requeue of a stopping job is a new incarnation",
			from: api.StateCompleting,
			edit: func(j *api.Job) {
				j.RequeueRequested, j.TimedOut, j.Placement = true, true, "best fit"
				j.LaunchFailures, j.LaunchFailNodes = 2, []string{"gpu02"}
				j.Preempting = &api.Preempting{By: 9, Mode: api.PreemptRequeue}
				j.Borrowing, j.Starving, j.StartedStarving, j.ExpectedStart = true, t0, true, t0
				j.Exit = api.ExitStatus{Signal: 15}
				j.Restarts = 2
			},
			c: Change{To: api.StatePending, At: at, Reason: api.ReasonPreempted},
			want: func(j *api.Job) {
				*j = api.Job{ID: 7, State: api.StatePending, Reason: api.ReasonPreempted, SubmitTime: t0,
					EligibleTime: at, Restarts: 3}
			},
		},
		{
			name: "requeue of a finished job",
			from: api.StateTimeout,
			c:    Change{To: api.StatePending, At: at},
			want: func(j *api.Job) {
				*j = api.Job{ID: 7, State: api.StatePending, Reason: api.ReasonNone, SubmitTime: t0,
					EligibleTime: at, Restarts: 1}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := jobIn(tt.from)
			if tt.edit != nil {
				tt.edit(j)
			}
			want := *j
			want.Alloc = slices.Clone(j.Alloc)
			tt.want(&want)
			if err := Transition(j, tt.c); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&want, j); diff != "" {
				t.Errorf("job after the change (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTransitionProperties drives random requested changes through
// Transition and checks after each that the job is one the controller
// knows: a known state reached by an edge of the table, final states left
// only by a requeue, an end time exactly when final, a start time exactly
// when not pending, requests only on a stopping or ended job, and a
// refused change that left the job untouched.
func TestTransitionProperties(t *testing.T) {
	targets := append(slices.Clone(api.AllJobStates), "", "DONE")
	reasons := []api.ReasonCode{"", api.ReasonNone, api.ReasonCancelled, api.ReasonPreempted, api.ReasonTimeLimit}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 23))
		j := jobIn(api.StatePending)
		now := t0
		applied := 0
		for step := range 300 {
			now = now.Add(time.Duration(rng.IntN(600)) * time.Second)
			c := Change{To: targets[rng.IntN(len(targets))], Reason: reasons[rng.IntN(len(reasons))]}
			if rng.IntN(20) > 0 {
				c.At = now
			}
			c.Cancel, c.Requeue = rng.IntN(4) == 0, rng.IntN(4) == 0
			if c.To == api.StateCompleting || rng.IntN(3) == 0 {
				c.Exit = api.ExitStatus{Code: rng.IntN(3)}
			}
			if j.State == api.StatePending && rng.IntN(2) == 0 {
				// The scheduler's word on a waiting job.
				j.Reason, j.ReasonDetail = api.ReasonResources, "0/4 nodes available: 4 InsufficientGPU"
			}
			before := *j
			from := j.State
			err := Transition(j, c)
			where := func() string { return fmt.Sprintf("seed %d step %d: %s to %+v", seed, step, from, c) }
			if err != nil {
				if !errors.Is(err, api.ErrConflict) && !errors.Is(err, api.ErrInvalidArgument) {
					t.Fatalf("%s: error of no class: %v", where(), err)
				}
				if !reflect.DeepEqual(&before, j) {
					t.Fatalf("%s: refused (%v) but changed (-want +got):\n%s", where(), err, cmp.Diff(&before, j))
				}
			} else {
				applied++
				if Allowed(from, j.State) != nil || j.State != c.To {
					t.Fatalf("%s: reached %s, not an edge of the table", where(), j.State)
				}
				if from.Terminal() && j.State != api.StatePending {
					t.Fatalf("%s: left a final state other than by requeue", where())
				}
				if j.State == api.StatePending && j.Restarts != before.Restarts+1 {
					t.Fatalf("%s: requeue counted %d to %d", where(), before.Restarts, j.Restarts)
				}
			}
			if stateIndex(j.State) < 0 {
				t.Fatalf("%s: unknown state %q", where(), j.State)
			}
			if j.State.Terminal() == j.EndTime.IsZero() {
				t.Fatalf("%s: state %s with end time %v", where(), j.State, j.EndTime)
			}
			if (j.State == api.StatePending) != j.StartTime.IsZero() {
				t.Fatalf("%s: state %s with start time %v", where(), j.State, j.StartTime)
			}
			if j.State != api.StatePending && j.ReasonDetail != "" {
				t.Fatalf("%s: %s job keeps the diagnosis %q", where(), j.State, j.ReasonDetail)
			}
			if (j.CancelRequested || j.RequeueRequested) && j.State != api.StateCompleting && !j.State.Terminal() {
				t.Fatalf("%s: %s job with a cancel or requeue request", where(), j.State)
			}
			if !j.StartTime.IsZero() && !j.EndTime.IsZero() && j.EndTime.Before(j.StartTime) {
				t.Fatalf("%s: ends %v before it starts %v", where(), j.EndTime, j.StartTime)
			}
		}
		if applied == 0 {
			t.Fatalf("seed %d: no change was applied", seed)
		}
	}
}
