package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/stepd"
)

// FakeFreeze is how the fake runtime says it froze a job (the frozen
// marker's how).
const FakeFreeze = "fake"

// Fake is an in-memory Runtime for tests of the daemon's bookkeeping. It
// runs nothing: a started job "runs" until the test ends it (Exit, End,
// Lose) or a signal does, and every call is recorded (Calls). It keeps
// the job directory's contract as a supervisor would: a job whose kill
// marker (killed) is there at Start ends at once as killed, the kill
// markers present when the job runs are delivered as signals, and the
// end is written to status.json before the exit channel closes.
//
// A signal ends a running job as it would end a shell that does not
// trap it: every signal whose default action terminates a process,
// unless Trap names it (SIGKILL always ends it). A frozen job is ended
// by signals all the same (the daemon thaws before it kills). The zero
// value is not usable; NewFake makes one.
type Fake struct {
	name string

	mu       sync.Mutex
	jobs     map[api.JobRef]*fakeJob
	calls    []FakeCall
	startErr error
	hold     bool
	traps    map[syscall.Signal]bool
	stats    map[api.JobRef]Stats
	closes   int
	changed  chan struct{}
}

// fakeJob is one job the fake was given.
type fakeJob struct {
	job     Job
	state   State
	started time.Time
	exited  chan struct{}
	// ended: the exit channel is closed.
	ended   bool
	frozen  string
	deleted bool
}

// FakeCall is one call a Fake got, in the order they came.
type FakeCall struct {
	// Op is the method: "start", "reattach", "signal", "freeze",
	// "thaw", "stats" or "delete".
	Op  string
	Ref api.JobRef
	// Signal and BatchOnly are Signal's arguments.
	Signal    syscall.Signal
	BatchOnly bool
	// How is Thaw's argument.
	How string
}

var _ Runtime = (*Fake)(nil)

// NewFake returns a fake runtime that calls itself name in errors
// ("supervisor", "container").
func NewFake(name string) *Fake {
	return &Fake{name: name, jobs: map[api.JobRef]*fakeJob{}, traps: map[syscall.Signal]bool{},
		stats: map[api.JobRef]Stats{}, changed: make(chan struct{})}
}

// FailStarts makes every later Start fail with err (nil: succeed again);
// wrap err with JobFault for a failure of the job's own.
func (f *Fake) FailStarts(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.startErr = err
}

// HoldStarts makes later started jobs wait in State Starting until Run
// (a supervisor that has not started the script yet); false starts them
// running at once.
func (f *Fake) HoldStarts(hold bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hold = hold
}

// Trap makes sigs leave a job running: they are only recorded. SIGKILL
// cannot be trapped.
func (f *Fake) Trap(sigs ...syscall.Signal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range sigs {
		if s != syscall.SIGKILL {
			f.traps[s] = true
		}
	}
}

// SetStats sets what Stats reports for job ref while it runs.
func (f *Fake) SetStats(ref api.JobRef, st Stats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats[ref] = st
}

// Changed returns a channel closed at the fake's next change (a call, a
// job's start or end): tests wait on it instead of polling.
func (f *Fake) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// changedLocked wakes the waiters of Changed.
func (f *Fake) changedLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Calls returns every call so far, in order.
func (f *Fake) Calls() []FakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// CallsOf returns the calls for job ref, in order.
func (f *Fake) CallsOf(ref api.JobRef) []FakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []FakeCall
	for _, c := range f.calls {
		if c.Ref == ref {
			out = append(out, c)
		}
	}
	return out
}

// Started reports whether job ref was started (or reattached) and has
// not ended.
func (f *Fake) Started(ref api.JobRef) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	fj := f.jobs[ref]
	return fj != nil && !fj.ended
}

// Frozen returns how job ref is frozen, "" when it is not.
func (f *Fake) Frozen(ref api.JobRef) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fj := f.jobs[ref]; fj != nil {
		return fj.frozen
	}
	return ""
}

// Deleted reports whether Delete was called for job ref.
func (f *Fake) Deleted(ref api.JobRef) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	fj := f.jobs[ref]
	return fj != nil && fj.deleted
}

// errUnknown is the error of the test helpers for a job the fake was
// never given, or one that ended.
func errUnknown(ref api.JobRef) error {
	return fmt.Errorf("fake runtime: job %d.%d is not running", ref.JobID, ref.Restart)
}

// Run lets job ref, held in Starting by HoldStarts, run: as a
// supervisor does once it recorded the script's pid, it delivers the
// kill markers found then.
func (f *Fake) Run(ref api.JobRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fj := f.jobs[ref]
	if fj == nil || fj.ended || fj.state != Starting {
		return fmt.Errorf("fake runtime: job %d.%d is not starting", ref.JobID, ref.Restart)
	}
	f.runLocked(fj)
	return nil
}

// runLocked makes fj run and delivers its kill markers.
func (f *Fake) runLocked(fj *fakeJob) {
	fj.state = Running
	f.changedLocked()
	m := stepd.ReadMarkers(fj.job.Dir)
	for _, k := range []*stepd.KillMarker{m.Killed, m.TimedOut} {
		if k == nil || fj.ended {
			continue
		}
		sig := syscall.SIGTERM
		if k.Signal > 0 {
			sig = syscall.Signal(k.Signal)
		}
		f.deliverLocked(fj, sig)
	}
}

// Exit ends job ref with exit, as its script would.
func (f *Fake) Exit(ref api.JobRef, exit api.ExitStatus) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fj := f.jobs[ref]
	if fj == nil || fj.ended {
		return errUnknown(ref)
	}
	return f.endLocked(fj, stepd.Status{StartTime: fj.started, EndTime: time.Now(), Exit: exit})
}

// End ends job ref with the status st (an error, an OOM kill).
func (f *Fake) End(ref api.JobRef, st stepd.Status) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fj := f.jobs[ref]
	if fj == nil || fj.ended {
		return errUnknown(ref)
	}
	return f.endLocked(fj, st)
}

// Lose ends job ref without a status, as a runtime that lost it (a
// supervisor killed, a task containerd forgot).
func (f *Fake) Lose(ref api.JobRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fj := f.jobs[ref]
	if fj == nil || fj.ended {
		return errUnknown(ref)
	}
	f.closeLocked(fj)
	return nil
}

// endLocked writes st to the job's status.json, then closes its exit
// channel.
func (f *Fake) endLocked(fj *fakeJob, st stepd.Status) error {
	if err := stepd.WriteJSONAtomic(filepath.Join(fj.job.Dir, stepd.FileStatus), &st, 0o644); err != nil {
		return fmt.Errorf("fake runtime: record status: %w", err)
	}
	f.closeLocked(fj)
	return nil
}

func (f *Fake) closeLocked(fj *fakeJob) {
	fj.state, fj.ended = Stopped, true
	close(fj.exited)
	f.changedLocked()
}

// terminates reports whether sig's default action ends a process.
func terminates(sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGCHLD, syscall.SIGCONT, syscall.SIGSTOP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU,
		syscall.SIGURG, syscall.SIGWINCH:
		return false
	}
	return sig > 0
}

// deliverLocked ends fj by sig unless sig does not end a process or is
// trapped.
func (f *Fake) deliverLocked(fj *fakeJob, sig syscall.Signal) {
	if !terminates(sig) || f.traps[sig] {
		return
	}
	st := stepd.Status{StartTime: fj.started, EndTime: time.Now(), Exit: api.ExitStatus{Signal: int(sig)}}
	if err := f.endLocked(fj, st); err != nil {
		// The directory is gone: the job ends without a status.
		f.closeLocked(fj)
	}
}

func (f *Fake) recordLocked(c FakeCall) {
	f.calls = append(f.calls, c)
	f.changedLocked()
}

// Name is the name NewFake was given.
func (f *Fake) Name() string { return f.name }

// Start takes the job, unless FailStarts says otherwise. A job whose
// killed marker is in its directory ends at once, killed by its signal,
// without running.
func (f *Fake) Start(_ context.Context, j Job) (<-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recordLocked(FakeCall{Op: "start", Ref: j.Ref})
	if f.startErr != nil {
		return nil, f.startErr
	}
	if j.Resolve != nil {
		_ = j.Resolve() // as a runtime that reads it would
	}
	fj := &fakeJob{job: j, state: Starting, started: time.Now(), exited: make(chan struct{})}
	f.jobs[j.Ref] = fj
	if k := stepd.ReadKillMarker(j.Dir, stepd.MarkKilled); k != nil {
		st := KilledStatus(k, time.Time{})
		if err := f.endLocked(fj, st); err != nil {
			return nil, err
		}
		return fj.exited, nil
	}
	if !f.hold {
		f.runLocked(fj)
	}
	return fj.exited, nil
}

// Reattach finds a job the fake was given before (by an earlier daemon
// in the same test) that still runs; any other is lost.
func (f *Fake) Reattach(_ context.Context, j Job) (<-chan struct{}, *stepd.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recordLocked(FakeCall{Op: "reattach", Ref: j.Ref})
	fj := f.jobs[j.Ref]
	if fj == nil || fj.ended {
		return nil, nil, errUnknown(j.Ref)
	}
	fj.job.Dir = j.Dir
	return fj.exited, nil, nil
}

// State is the job's state in the fake; Stopped for a job it does not
// know.
func (f *Fake) State(j Job) State {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fj := f.jobs[j.Ref]; fj != nil {
		return fj.state
	}
	return Stopped
}

// Signal records sig, and ends the job by it unless it is trapped or
// does not end a process.
func (f *Fake) Signal(_ context.Context, j Job, sig syscall.Signal, batchOnly bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recordLocked(FakeCall{Op: "signal", Ref: j.Ref, Signal: sig, BatchOnly: batchOnly})
	fj := f.jobs[j.Ref]
	if fj == nil || fj.state != Running {
		return ErrNotRunning
	}
	f.deliverLocked(fj, sig)
	return nil
}

// Stats reports what SetStats set for the job.
func (f *Fake) Stats(_ context.Context, j Job) (Stats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recordLocked(FakeCall{Op: "stats", Ref: j.Ref})
	fj := f.jobs[j.Ref]
	if fj == nil || fj.state != Running {
		return Stats{}, ErrNotRunning
	}
	return f.stats[j.Ref], nil
}

// Freeze marks the job frozen (FakeFreeze).
func (f *Fake) Freeze(_ context.Context, j Job, mark func(string)) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recordLocked(FakeCall{Op: "freeze", Ref: j.Ref})
	fj := f.jobs[j.Ref]
	if fj == nil || fj.state != Running {
		return "", ErrNotRunning
	}
	mark(FakeFreeze)
	fj.frozen = FakeFreeze
	return FakeFreeze, nil
}

// Thaw marks the job running again.
func (f *Fake) Thaw(_ context.Context, j Job, how string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recordLocked(FakeCall{Op: "thaw", Ref: j.Ref, How: how})
	fj := f.jobs[j.Ref]
	if fj == nil || fj.state != Running {
		return ErrNotRunning
	}
	fj.frozen = ""
	return nil
}

// Delete records the deletion; a job still running ends without a
// status (its processes are killed).
func (f *Fake) Delete(_ context.Context, j Job) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recordLocked(FakeCall{Op: "delete", Ref: j.Ref})
	fj := f.jobs[j.Ref]
	if fj == nil {
		fj = &fakeJob{job: j, exited: make(chan struct{})}
		close(fj.exited)
		fj.ended = true
		f.jobs[j.Ref] = fj
	}
	fj.deleted = true
	if !fj.ended {
		f.closeLocked(fj)
	}
	return nil
}

// Close leaves the jobs running: the next daemon of the test may
// reattach them. It only counts (Closes).
func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closes++
	f.changedLocked()
	return nil
}

// Closes is how many times Close was called.
func (f *Fake) Closes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closes
}
