package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/stepd"
)

// EmulateEnv is the job environment variable that sets an emulated job's
// duration (TIDE_EMULATE=90s); see EmulatedDuration.
const EmulateEnv = "TIDE_EMULATE"

// EmulateToken marks an emulated job's duration in its batch script
// ("#SBATCH --comment=tide-emulate:90s"); see EmulatedDuration.
const EmulateToken = "tide-emulate:"

// EmulateFreeze is how the emulated runtime says it froze a job (the
// frozen marker's how).
const EmulateFreeze = "emulated"

// Emulated is the runtime of emulated nodes (tided --emulate): it runs
// no process, cgroup or container. A started job "runs" for the
// duration it carries (EmulatedDuration), then ends with exit 0 through
// the job directory's contract, as a supervisor would: its status.json
// is written, then its exit channel closes. Signals whose default
// action ends a process end it (SIGKILL included), a freeze stops its
// clock until the thaw, and the kill markers the daemon wrote before the
// start are honoured as a supervisor honours them.
//
// Nothing survives the process: an emulated job a later tided finds in
// its state directory is lost (Reattach), as on a node that rebooted.
type Emulated struct {
	// def is the duration of a job that names none (0: it ends at once).
	def time.Duration

	mu   sync.Mutex
	jobs map[api.JobRef]*emuJob
}

// emuJob is one job an Emulated runtime runs. Guarded by Emulated.mu.
type emuJob struct {
	dir     string
	started time.Time
	// left is what remains of the job's duration when the clock last
	// stopped (a freeze); forever: it runs until a signal ends it.
	left    time.Duration
	resumed time.Time
	forever bool
	frozen  bool
	timer   *time.Timer
	exited  chan struct{}
}

var _ Runtime = (*Emulated)(nil)

// NewEmulated returns an emulated runtime whose jobs run def when they
// carry no duration of their own.
func NewEmulated(def time.Duration) *Emulated {
	return &Emulated{def: def, jobs: map[api.JobRef]*emuJob{}}
}

// EmulatedDuration is how long an emulated job runs: the value of
// TIDE_EMULATE in its environment, else the first "tide-emulate:"
// token in its batch script (a "#SBATCH --comment=tide-emulate:90s"
// line, say), else def. A value is a Go duration ("90s", "1m30s"), a
// number of seconds ("90"), or "inf" (also "infinite", "unlimited"):
// the job runs until it is cancelled or reaches its time limit, which
// forever reports. A value that is none of these is an error naming it.
func EmulatedDuration(spec *api.LaunchSpec, def time.Duration) (d time.Duration, forever bool, err error) {
	val, from := "", ""
	for _, kv := range spec.Env {
		if v, ok := strings.CutPrefix(kv, EmulateEnv+"="); ok {
			val, from = v, EmulateEnv // the last one wins, as in a shell
		}
	}
	if from == "" {
		if _, rest, ok := strings.Cut(spec.Script, EmulateToken); ok {
			end := strings.IndexFunc(rest, func(r rune) bool {
				return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '"' || r == '\'' || r == ',' || r == ';'
			})
			if end < 0 {
				end = len(rest)
			}
			val, from = rest[:end], "script's "+EmulateToken
		}
	}
	if from == "" {
		return def, false, nil
	}
	d, forever, err = parseEmulated(val)
	if err != nil {
		return 0, false, fmt.Errorf("emulated job duration (%s) %q: %w", from, val, err)
	}
	return d, forever, nil
}

// maxEmulatedSeconds bounds a duration in seconds (a year; longer is
// "inf").
const maxEmulatedSeconds = 366 * 24 * 3600

// parseEmulated reads one duration value of EmulatedDuration.
func parseEmulated(v string) (time.Duration, bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "inf", "infinite", "unlimited":
		return 0, true, nil
	case "":
		return 0, false, fmt.Errorf("empty (want e.g. 90s, 1m30s, 90 or inf)")
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if n < 0 || n > maxEmulatedSeconds {
			return 0, false, fmt.Errorf("seconds out of range 0-%d", int64(maxEmulatedSeconds))
		}
		return time.Duration(n * float64(time.Second)), false, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, false, fmt.Errorf("not a duration (want e.g. 90s, 1m30s, 90 or inf)")
	}
	if d < 0 {
		return 0, false, fmt.Errorf("negative")
	}
	return d, false, nil
}

// Name says "emulator" in error messages.
func (e *Emulated) Name() string { return "emulator" }

// Start begins the job's clock. A job whose killed marker is already in
// its directory ends at once, killed, without running; a duration it
// cannot read fails the start as the job's own fault.
func (e *Emulated) Start(_ context.Context, j Job) (<-chan struct{}, error) {
	dur, forever := e.def, false
	if j.Spec != nil {
		var err error
		if dur, forever, err = EmulatedDuration(j.Spec, e.def); err != nil {
			return nil, JobFault(err)
		}
	}
	now := time.Now()
	ej := &emuJob{dir: j.Dir, started: now, resumed: now, left: dur, forever: forever, exited: make(chan struct{})}
	killed, timedOut := stepd.ReadKillMarker(j.Dir, stepd.MarkKilled), stepd.ReadKillMarker(j.Dir, stepd.MarkTimedOut)
	e.mu.Lock()
	defer e.mu.Unlock()
	if old := e.jobs[j.Ref]; old != nil {
		return nil, fmt.Errorf("emulator: job %d.%d is already running", j.Ref.JobID, j.Ref.Restart)
	}
	e.jobs[j.Ref] = ej
	if killed != nil {
		// Killed before it ran: it never starts (as a supervisor that
		// finds the marker before the script).
		e.endLocked(j.Ref, ej, KilledStatus(killed, time.Time{}))
		return ej.exited, nil
	}
	if k := timedOut; k != nil {
		e.signalLocked(j.Ref, ej, markerSignal(k))
		return ej.exited, nil
	}
	e.armLocked(j.Ref, ej)
	return ej.exited, nil
}

// markerSignal is the signal a kill marker asks for (SIGTERM when it
// names none).
func markerSignal(k *stepd.KillMarker) syscall.Signal {
	if k.Signal > 0 {
		return syscall.Signal(k.Signal)
	}
	return syscall.SIGTERM
}

// armLocked starts the job's clock for what is left of its duration.
func (e *Emulated) armLocked(ref api.JobRef, ej *emuJob) {
	if ej.forever {
		return
	}
	ej.resumed = time.Now()
	ej.timer = time.AfterFunc(ej.left, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.jobs[ref] != ej {
			return // ended meanwhile
		}
		if ej.frozen {
			ej.left = 0 // frozen as it ran out: it ends at the thaw
			return
		}
		e.endLocked(ref, ej, stepd.Status{StartTime: ej.started, EndTime: time.Now()})
	})
}

// endLocked records the job's end in status.json, then closes its exit
// channel and forgets it.
func (e *Emulated) endLocked(ref api.JobRef, ej *emuJob, st stepd.Status) {
	if ej.timer != nil {
		ej.timer.Stop()
	}
	// Without a status.json the daemon takes the job for lost, which is
	// what a runtime that could not record the end should report.
	_ = stepd.WriteJSONAtomic(filepath.Join(ej.dir, stepd.FileStatus), &st, 0o644)
	delete(e.jobs, ref)
	close(ej.exited)
}

// signalLocked ends the job by sig when sig's default action ends a
// process; other signals change nothing.
func (e *Emulated) signalLocked(ref api.JobRef, ej *emuJob, sig syscall.Signal) {
	if !terminates(sig) {
		return
	}
	e.endLocked(ref, ej, stepd.Status{StartTime: ej.started, EndTime: time.Now(), Exit: api.ExitStatus{Signal: int(sig)}})
}

// Reattach finds nothing: an emulated job does not outlive the tided
// that ran it.
func (e *Emulated) Reattach(_ context.Context, j Job) (<-chan struct{}, *stepd.Status, error) {
	return nil, nil, fmt.Errorf("emulator: job %d.%d ended with the tided that emulated it", j.Ref.JobID, j.Ref.Restart)
}

// State is Running for a job whose clock was started and has not run
// out, Stopped otherwise.
func (e *Emulated) State(j Job) State {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.jobs[j.Ref] != nil {
		return Running
	}
	return Stopped
}

// Signal ends the job when sig would end a process (batchOnly or not:
// an emulated job is its batch shell alone).
func (e *Emulated) Signal(_ context.Context, j Job, sig syscall.Signal, _ bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	ej := e.jobs[j.Ref]
	if ej == nil {
		return ErrNotRunning
	}
	e.signalLocked(j.Ref, ej, sig)
	return nil
}

// Stats reports nothing measured: an emulated job uses nothing.
func (e *Emulated) Stats(_ context.Context, j Job) (Stats, error) {
	if e.State(j) != Running {
		return Stats{}, ErrNotRunning
	}
	return Stats{}, nil
}

// Freeze stops the job's clock (EmulateFreeze).
func (e *Emulated) Freeze(_ context.Context, j Job, mark func(string)) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ej := e.jobs[j.Ref]
	if ej == nil {
		return "", ErrNotRunning
	}
	mark(EmulateFreeze)
	if !ej.frozen {
		ej.frozen = true
		if ej.timer != nil && ej.timer.Stop() {
			ej.left = max(ej.left-time.Since(ej.resumed), 0)
		}
	}
	return EmulateFreeze, nil
}

// Thaw starts the job's clock again for what was left of its duration.
func (e *Emulated) Thaw(_ context.Context, j Job, _ string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	ej := e.jobs[j.Ref]
	if ej == nil {
		return ErrNotRunning
	}
	if ej.frozen {
		ej.frozen = false
		e.armLocked(j.Ref, ej)
	}
	return nil
}

// Delete ends a job still running without a status (its "processes"
// are killed); it is idempotent.
func (e *Emulated) Delete(_ context.Context, j Job) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ej := e.jobs[j.Ref]; ej != nil {
		if ej.timer != nil {
			ej.timer.Stop()
		}
		delete(e.jobs, j.Ref)
		close(ej.exited)
	}
	return nil
}

// Close leaves the clocks running; nothing is held open.
func (e *Emulated) Close() error { return nil }

// Running is how many jobs the runtime runs now (for tests and the
// emulator's own accounting).
func (e *Emulated) Running() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.jobs)
}
