package runtime

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/stepd"
)

// Runtime runs the jobs of one kind on a node: tided picks one per job (a
// job with a container image runs under the containerd runtime, every
// other job as a process under the supervisor). The shape follows
// containerd's Task: start, signal, wait (the channel Start returns),
// stats, pause and resume (Freeze, Thaw), delete.
//
// Every runtime keeps the job directory's contract (Job.Dir), so that
// reports, markers and restarts work the same whatever runs the job: the
// daemon writes the directory before Start, and the runtime (or the
// supervisor it hands the job to) writes status.json when the job ends.
//
// A runtime knows nothing of the daemon: it gets plain values (Job) and
// never takes the daemon's lock. The daemon calls State under its lock
// (it must not block) and every other method outside it; calls for one
// job come one at a time, in the order the daemon decided them.
type Runtime interface {
	// Name says what failed in an error message ("supervisor",
	// "container").
	Name() string

	// Start runs the prepared job j (Spec and Resolve set) and returns
	// once the job is handed over, with a channel that is closed when
	// the job's status.json is written or the runtime lost the job (no
	// status.json then). The job may still be starting when Start
	// returns (an image being pulled, a supervisor not yet at the
	// script). An error means that nothing of the job runs; IsJobFault
	// tells the job's own faults (its files, mounts, image) from the
	// node's. ctx bounds the handing over, never the job: a kill that
	// must stop a start in flight is a kill marker in the job directory,
	// which the runtime honours before the job runs.
	Start(ctx context.Context, j Job) (exited <-chan struct{}, err error)

	// Reattach takes up a job that an earlier tided started and whose
	// directory has no status.json (Spec and Resolve set). It returns
	// the exit channel of a job that still runs, as Start does; or the
	// status of one that ended meanwhile, which it has written to
	// status.json; or an error when the job is lost (nothing of it is
	// known to run any more).
	Reattach(ctx context.Context, j Job) (exited <-chan struct{}, st *stepd.Status, err error)

	// State reports what the runtime knows of the job's processes
	// without waiting for anyone (the daemon calls it under its lock):
	// from its own memory or the job directory.
	State(j Job) State

	// Signal sends sig to every process of the job, or to its batch
	// shell alone (batchOnly). A job with nothing running gives
	// ErrNotRunning.
	Signal(ctx context.Context, j Job, sig syscall.Signal, batchOnly bool) error

	// Stats reports the job's resource use as far as the runtime can
	// honestly tell (see Stats); a job with nothing running gives
	// ErrNotRunning.
	Stats(ctx context.Context, j Job) (Stats, error)

	// Freeze stops every process of the job (suspend). It chooses how
	// (one of stepd.FreezeCgroup, FreezeSignal, FreezeContainer), calls
	// mark with that way just before it freezes, so that the daemon's
	// frozen marker says how to thaw even if tided stops in between, and
	// returns it.
	Freeze(ctx context.Context, j Job, mark func(how string)) (how string, err error)

	// Thaw lets a job frozen the way how says run again ("" when the
	// marker did not say: the runtime thaws whatever it can). A job with
	// nothing running any more gives ErrNotRunning: nothing to thaw.
	Thaw(ctx context.Context, j Job, how string) error

	// Delete removes what the runtime keeps of a job that ended or is
	// lost: whatever still runs of it is killed, and its container,
	// snapshot or cgroup removed. It is idempotent.
	Delete(ctx context.Context, j Job) error

	// Close releases the runtime's connections when tided stops. Jobs
	// keep running, and the exit channels of jobs still running are
	// left open: the next tided reattaches them.
	Close() error
}

// Job is one job incarnation as the daemon hands it to its runtime.
type Job struct {
	// Ref names the incarnation.
	Ref api.JobRef
	// Dir is the job directory (<state_dir>/jobs/<id>.<restart>). Before
	// Start the daemon has written launch.json, exec.json and the script
	// there (noded/stepd's contract, which the supervisor reads). The
	// kill markers (killed, timedout) the daemon writes there are for
	// the runtime to honour when a kill races the start: a job whose
	// marker is there before it runs never runs. The runtime writes
	// status.json there when the job ends.
	Dir string
	// Spec is the launch as the controller sent it; set for Start and
	// Reattach. A runtime only reads it.
	Spec *api.LaunchSpec
	// Resolve returns what the job runs on this node as the daemon
	// resolves it from Spec (what exec.json holds for the supervisor),
	// for a runtime that does not hand exec.json to the supervisor. Set
	// with Spec. It may look the user's groups up, so it is called
	// outside any lock, once per Start or Reattach at most.
	Resolve func() Launch
}

// Launch is what a job runs on this node: its environment, files, user
// and share of the node.
type Launch struct {
	// Env is the job's environment (Slurm's variables included).
	Env []string
	// Files are its standard streams.
	Files Files
	// WorkDir is where it starts (-D, else the submit directory).
	WorkDir string
	// Append opens the output files for appending (--open-mode=append).
	Append bool
	// User is whom the job runs as.
	User User
	// CPUs and MemoryMB are the job's share of this node (0: no
	// limit), GPUs the indices of its GPUs here.
	CPUs     int
	MemoryMB int64
	GPUs     []int
}

// Files are a job's standard files as absolute paths.
type Files struct {
	Stdin  string
	Stdout string
	// Stderr is empty when stderr goes to stdout's file descriptor.
	Stderr string
}

// User is whom a job runs as, and whom its files are created as.
type User struct {
	UID, GID uint32
	Groups   []uint32
	// Umask is the job's umask (-1: tided's own).
	Umask int
	// Switch is false when tided cannot change users (not root) or the
	// job runs as tided's own user.
	Switch bool
}

// State is what a runtime knows of a job's processes (Runtime.State).
type State int

const (
	// Stopped: nothing of the job runs: it was never handed over, it
	// ended, or the runtime lost it. A signal has nothing to reach.
	Stopped State = iota
	// Starting: the runtime has the job but its first process has not
	// started yet (the supervisor has not recorded the script's pid): a
	// signal for the job is held until it does.
	Starting
	// Running: the job's processes run (or are frozen).
	Running
)

func (s State) String() string {
	switch s {
	case Starting:
		return "starting"
	case Running:
		return "running"
	}
	return "stopped"
}

// Stats is what a runtime can tell of a running job's resource use.
// Where a number could not be read its Has field is false: a process job
// without a cgroup has no total of the processes that left its process
// tree, and a runtime reports only what it measured, never a guess.
type Stats struct {
	// Source says where the numbers come from: StatsCgroup or
	// StatsProc; "" when only Pids are known.
	Source string
	// Pids are the job's processes the runtime sees: every process of
	// its cgroup, or (StatsProc) the job's leader alone.
	Pids []int
	// HasCPU: UserUsec and SystemUsec were read. From a cgroup they
	// count every process that ran in it, ended ones included; from
	// /proc the leader and the children it reaped.
	HasCPU               bool
	UserUsec, SystemUsec uint64
	// HasMemory: MemoryBytes was read: the cgroup's current charge
	// (page cache included), or the leader's resident set.
	HasMemory   bool
	MemoryBytes uint64
}

// Where Stats come from (Stats.Source).
const (
	StatsCgroup = "cgroup"
	StatsProc   = "proc"
)

// ErrNotRunning says that nothing of the job runs (any more, or yet) for
// the runtime to signal, freeze, thaw or measure.
var ErrNotRunning = errors.New("job not running")

// jobFault is a start failure the job's own request caused (see
// JobFault).
type jobFault struct{ err error }

func (e jobFault) Error() string { return e.err.Error() }
func (e jobFault) Unwrap() error { return e.err }

// JobFault marks err as the job's own fault: its output files, work
// directory, mounts, an image nobody has. Another node would fail it the
// same way, so it is reported as an error of the job (FAILED), not as a
// launch the controller may retry elsewhere. nil stays nil.
func JobFault(err error) error {
	if err == nil {
		return nil
	}
	return jobFault{err}
}

// IsJobFault reports whether err is the job's own fault (JobFault).
func IsJobFault(err error) bool {
	var f jobFault
	return errors.As(err, &f)
}

// LostError is the error of a job whose supervisor (or task) vanished
// without a status, which happens when the node rebooted under it.
const LostError = "job lost: supervisor gone"

// LostStatus is the status written for a lost job: Slurm's NODE_FAIL
// exit, 0:9.
func LostStatus(now time.Time) stepd.Status {
	return stepd.Status{Exit: api.ExitStatus{Code: 0, Signal: 9}, EndTime: now, Error: LostError}
}

// KilledStatus is the end of a job killed before it ran: as if the kill
// marker's signal had ended it (the controller reports it cancelled or
// timed out from the marker). began is when the launch began.
func KilledStatus(k *stepd.KillMarker, began time.Time) stepd.Status {
	sig := syscall.SIGTERM
	if k.Signal > 0 {
		sig = syscall.Signal(k.Signal)
	}
	return stepd.Status{StartTime: began, EndTime: time.Now(), Exit: api.ExitStatus{Signal: int(sig)}}
}

// killedMarker returns the marker of a kill (scancel, time limit)
// written in the job directory dir, or nil.
func killedMarker(dir string) *stepd.KillMarker {
	m := stepd.ReadMarkers(dir)
	if m.Killed != nil {
		return m.Killed
	}
	return m.TimedOut
}
