package noded

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
)

// jobRuntime runs jobs of one kind. tided picks one per job (runtimeFor):
// a job with a container image runs as a containerd task, every other
// job as a process under the supervisor. Both keep the job directory's
// contract, so that reporting, markers and restarts work the same: the
// runtime writes status.json when the job ends.
type jobRuntime interface {
	// name says what failed in an error message ("supervisor", "container").
	name() string
	// start runs a prepared job directory. wait blocks until the job's
	// status.json is written, or the runtime lost the job (then
	// supervisorDone records it as lost).
	start(j *job) (wait func(), err error)
	// signalLocked sends sig to every process of the job, or to its batch
	// shell alone. It is called with Daemon.mu held and must not wait
	// for the job. A job not started yet is not signalled: the kill
	// markers, written first, cover that window.
	signalLocked(j *job, sig syscall.Signal, batchOnly bool)
	// freezeOpLocked returns the work that freezes every process of the
	// job, or nil when nothing of it runs. It is called with Daemon.mu
	// held; the work runs on the job's ops queue (suspend.go), calls
	// mark with the way it chose just before it freezes, and returns
	// that way (a stepd.Freeze* constant).
	freezeOpLocked(j *job) func(mark func(how string)) (string, error)
	// thawOpLocked returns the work that lets a job frozen the way how
	// says run again, or nil when nothing of it runs; as freezeOpLocked.
	thawOpLocked(j *job) func(how string) error
}

// runtimeFor picks the job's runtime.
func (d *Daemon) runtimeFor(j *job) jobRuntime {
	if j.hasSpec && j.spec.ContainerImage != "" {
		if d.ctr == nil {
			return noContainers{node: d.cfg.Name}
		}
		return d.ctr
	}
	return processRuntime{d}
}

// processRuntime runs jobs as processes under the shared or per-job
// supervisor (tide-stepd).
type processRuntime struct{ d *Daemon }

func (processRuntime) name() string { return "supervisor" }

func (p processRuntime) start(j *job) (func(), error) {
	if p.d.cfg.Supervisor == SupervisorPerJob {
		return p.d.startSupervisor(j.dir)
	}
	return p.d.superviseShared(j.dir)
}

// pidLocked returns the job's process (the process group leader), read
// from the pid file the supervisor writes, and whether it still runs.
func (p processRuntime) pidLocked(j *job) (int, bool) {
	if j.pid.PID == 0 {
		id, err := readIdentity(filepath.Join(j.dir, filePID))
		if err != nil {
			p.d.log.Error("cannot read job pid", "job_id", j.ref.JobID, "err", err)
		}
		j.pid = id
	}
	return j.pid.PID, j.pid.Alive()
}

// signalLocked signals the job's process group (or the batch shell
// alone), found through the pid file the supervisor writes.
func (p processRuntime) signalLocked(j *job, sig syscall.Signal, batchOnly bool) {
	d := p.d
	if _, alive := p.pidLocked(j); !alive {
		if j.pid.PID == 0 && !j.finished() {
			// Launched, but the supervisor has not started the script
			// yet: hold the signal for it (a preemption's checkpoint
			// signal right after the start must not be lost).
			d.holdSignalLocked(j, sig, batchOnly)
			return
		}
		d.log.Debug("job process not running, signal not sent", "job_id", j.ref.JobID, "signal", int(sig))
		return
	}
	var err error
	if batchOnly {
		err = signalProcess(j.pid.PID, sig)
	} else {
		err = signalGroup(j.pid.PID, sig)
	}
	if err != nil {
		d.log.Error("cannot signal job", "job_id", j.ref.JobID, "err", err)
	}
}

// noContainers is the runtime of container jobs on a node without
// containerd: the controller should not send them (feature containerd),
// and a node that lost containerd refuses them with a clear error.
type noContainers struct{ node string }

var errNoContainers = errors.New("no container runtime")

func (noContainers) name() string { return "container" }

func (n noContainers) start(*job) (func(), error) {
	return nil, fmt.Errorf("%w on node %s (tided has no containerd.socket configured)", errNoContainers, n.node)
}

func (noContainers) signalLocked(*job, syscall.Signal, bool) {}

func (noContainers) freezeOpLocked(*job) func(func(string)) (string, error) { return nil }

func (noContainers) thawOpLocked(*job) func(string) error { return nil }
