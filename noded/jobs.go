package noded

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/runtime"
	"github.com/tide-hpc/tide/noded/steps"
)

// job is tided's record of one job incarnation. Every field is guarded
// by Daemon.mu.
type job struct {
	ref  api.JobRef
	dir  string
	spec api.LaunchSpec
	// hasSpec is false for a directory whose launch.json was unreadable.
	hasSpec bool
	marks   markers
	// status is set once the job finished.
	status *jobStatus
	// pid identifies the job's process (the process group leader), read
	// from the pid file the supervisor writes.
	pid procIdentity

	deadline, warn, escalate *time.Timer
	// signalledAt is when the controller last had the job signalled (a
	// preemption's checkpoint signal): an acknowledgement counts from
	// then; ackWatch is set while tided watches for it (checkpoint.go).
	signalledAt time.Time
	ackWatch    bool
	// recovered marks a job found in the state directory at start: it
	// may have been signalled by the tided before this one.
	recovered bool
	// ops runs the job's runtime calls (signals, freeze, thaw) in
	// order, outside Daemon.mu (suspend.go).
	ops serialOps
	// held are signals that arrived before the job's process existed,
	// delivered once it does (holdSignalLocked).
	held []heldSignal
	// launching is set while the job's launch runs (launch.go): until
	// then the job may have no directory and nothing of it runs.
	launching *launchState
}

func (j *job) finished() bool { return j.status != nil }

func (j *job) stopTimers() {
	for _, t := range []**time.Timer{&j.deadline, &j.warn, &j.escalate} {
		if *t != nil {
			(*t).Stop()
			*t = nil
		}
	}
}

// writeJobDir persists everything about the job before anything starts:
// launch.json, the script (owned by the job's user, 0700) and exec.json.
func (d *Daemon) writeJobDir(j *job) error {
	if err := os.Mkdir(j.dir, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := os.Chmod(j.dir, 0o711); err != nil {
		return err
	}
	// Written by hand (api.LaunchSpec.AppendJSON, the bytes json.Marshal
	// writes): one per job, the job's environment most of it.
	launch, err := j.spec.AppendJSON(nil)
	if err != nil {
		return fmt.Errorf("encode %s: %w", fileLaunch, err)
	}
	if err := writeFileNew(filepath.Join(j.dir, fileLaunch), launch, 0o600); err != nil {
		return err
	}
	script := filepath.Join(j.dir, fileScript)
	if err := d.writeScript(script, j); err != nil {
		return fmt.Errorf("write script: %w", err)
	}
	files := ResolveFiles(&j.spec, d.cfg.Name)
	plan := execPlan{
		JobID:   j.ref.JobID,
		Node:    d.cfg.Name,
		Script:  script,
		Args:    j.spec.Args,
		Env:     BuildEnv(&j.spec, d.cfg.Name),
		WorkDir: workDir(&j.spec),
		Stdin:   files.Stdin,
		Stdout:  files.Stdout,
		Stderr:  files.Stderr,
		Append:  j.spec.OpenMode == "append",
		Umask:   umaskFromEnv(j.spec.Env),
		Rlimits: steps.PlanRlimits(j.spec.Env),
		SetUser: d.asRoot,
		UID:     j.spec.UserID,
		GID:     j.spec.GroupID,
	}
	if plan.SetUser && (plan.UID != uint32(os.Geteuid()) || plan.GID != uint32(os.Getegid())) {
		plan.Groups = d.groups.get(plan.UID, plan.GID, d.log)
	}
	plan.Cgroup = cgroupPlan(&j.spec, d.cfg.Name, d.cfg)
	// Issue 3: a slice job's GPUs get their MPS daemons before the job
	// starts, and the job is pointed at them.
	if gpus := d.jobSliceGPUs(&j.spec); len(gpus) > 0 {
		plan.Env = withMPSEnv(plan.Env, gpus, d.acquireJobMPS(j))
	}
	return writeJSONNew(filepath.Join(j.dir, fileExec), &plan, 0o600)
}

// writeScript writes the batch script, owned by the job's user. It holds
// syscall.ForkLock while the file is open for writing: a supervisor
// forked for another job in that window would inherit the descriptor
// until its exec, and the script's own execve would then fail with
// "text file busy" (golang/go#22315).
func (d *Daemon) writeScript(path string, j *job) error {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	f, err := openFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o700)
	if err != nil {
		return err
	}
	_, err = f.WriteString(j.spec.Script)
	if err == nil && d.asRoot {
		err = f.Chown(int(j.spec.UserID), int(j.spec.GroupID))
	}
	if err == nil {
		err = f.Chmod(0o700)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// finishNow records a job that ended without a supervisor (refused or
// failed to start): status.json first, then the table.
func (d *Daemon) finishNow(j *job, st jobStatus) {
	if err := writeJSONAtomic(filepath.Join(j.dir, fileStatus), &st, 0o644); err != nil {
		d.log.Error("cannot record job status", "job_id", j.ref.JobID, "err", err)
	}
	d.mu.Lock()
	d.finishLocked(j, st)
	d.mu.Unlock()
	d.wake()
}

// supervisorDone handles the end of a supervisor: its status.json is the
// job's status; without one the job is lost (what is left of it is
// killed so it cannot run on unaccounted).
func (d *Daemon) supervisorDone(j *job) {
	d.mu.Lock()
	stopped := d.stopped || j.finished()
	d.mu.Unlock()
	if stopped {
		// A stopped daemon leaves the job to the next one, which finds
		// status.json (or the lost job) when it scans.
		return
	}
	st, err := readStatus(filepath.Join(j.dir, fileStatus))
	if err != nil {
		rt := d.runtimeFor(j)
		// The message is the one operators alert on (operations.md).
		d.log.Error("supervisor ended without a status", "job_id", j.ref.JobID, "runtime", rt.Name(), "err", err)
		d.deleteLost(rt, j.ref, runtimeJob(j))
		st = lostStatus(time.Now())
		if err := writeJSONAtomic(filepath.Join(j.dir, fileStatus), &st, 0o644); err != nil {
			d.log.Error("cannot record job status", "job_id", j.ref.JobID, "err", err)
		}
	}
	d.mu.Lock()
	d.finishLocked(j, st)
	d.mu.Unlock()
	d.wake()
}

// deleteLost has the runtime remove what is left of a lost job: its
// processes (which could run on unaccounted), its cgroup or container.
func (d *Daemon) deleteLost(rt runtime.Runtime, ref api.JobRef, rj runtime.Job) {
	ctx, cancel := runtimeCtx()
	defer cancel()
	if err := rt.Delete(ctx, rj); err != nil {
		d.log.Error("cannot remove what is left of a lost job", "job_id", ref.JobID, "runtime", rt.Name(), "err", err)
	}
}

// finishLocked marks j finished; a forgotten job is dropped at once.
func (d *Daemon) finishLocked(j *job, st jobStatus) {
	if j.finished() {
		return
	}
	j.status = &st
	j.stopTimers()
	d.releaseJobMPS(j)
	d.log.Info("job finished", "job_id", j.ref.JobID, "restart", j.ref.Restart, "exit", st.Exit.String(),
		"timed_out", j.marks.TimedOut != nil, "killed", j.marks.Killed != nil, "error", st.Error)
	if j.marks.Forgotten {
		d.dropLocked(j)
	}
}

// droppedMemory is how long launches of a dropped incarnation are
// ignored.
const droppedMemory = 10 * time.Minute

// dropLocked deletes a finished job's directory and forgets it.
func (d *Daemon) dropLocked(j *job) {
	if err := removeJobDir(j.dir); err != nil {
		d.log.Error("cannot remove job directory", "job_id", j.ref.JobID, "err", err)
	}
	delete(d.jobs, j.ref)
	d.dropped.add(j.ref, time.Now(), droppedMemory)
}

// armLocked sets the job's timers from its spec and markers: the time
// limit, the --signal warning, and a pending SIGKILL escalation.
func (d *Daemon) armLocked(j *job) {
	j.stopTimers()
	if j.finished() || !j.hasSpec {
		return
	}
	now := time.Now()
	if lim := j.spec.TimeLimit; lim > 0 && j.marks.TimedOut == nil {
		deadline := j.spec.StartTime.Add(time.Duration(lim) * time.Second)
		j.deadline = time.AfterFunc(deadline.Sub(now), func() { d.timeout(j) })
		// The batch shell's warning (--signal=B:) is tided's; the steps'
		// warning the controller sends, as it knows every node that may
		// run a step of the job (ctld/signals.go).
		if s := j.spec.Signal; s != nil && s.Signal > 0 && s.BatchOnly && !j.marks.Signalled {
			at := deadline.Add(-time.Duration(s.Seconds) * time.Second)
			j.warn = time.AfterFunc(at.Sub(now), func() { d.sendWarning(j) })
		}
	}
	for _, m := range []*killMarker{j.marks.Killed, j.marks.TimedOut} {
		if m != nil && j.escalate == nil {
			j.escalate = time.AfterFunc(m.KillAt.Sub(now), func() { d.escalateKill(j) })
		}
	}
}

// killWait is the grace between the first signal and SIGKILL.
func (d *Daemon) killWait(j *job) time.Duration {
	if j.spec.KillWait > 0 {
		return time.Duration(j.spec.KillWait) * time.Second
	}
	return d.cfg.KillWait
}

// timeout ends a job at its time limit: marker, SIGTERM, SIGKILL later.
func (d *Daemon) timeout(j *job) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped || j.finished() || j.marks.TimedOut != nil {
		return
	}
	d.log.Info("job reached its time limit", "job_id", j.ref.JobID, "time_limit", j.spec.TimeLimit)
	j.marks.TimedOut = d.endLocked(j, markTimedOut, syscall.SIGTERM)
}

// killLocked ends a job on the controller's request and reports whether
// that is news. A kill of a job already being killed changes nothing:
// the controller repeats commands until it sees their effect, and the
// SIGKILL is due anyway.
func (d *Daemon) killLocked(j *job, sig syscall.Signal) bool {
	if j.finished() || j.marks.Killed != nil {
		return false
	}
	d.log.Info("killing job", "job_id", j.ref.JobID, "signal", int(sig))
	j.marks.Killed = d.endLocked(j, markKilled, sig)
	if l := j.launching; l != nil && !l.slot {
		// Still waiting for a launch slot: end it now, not once it
		// has one.
		d.launchGoOnLocked(j, l)
	}
	return true
}

// endLocked persists a kill marker, then signals the job and arms the
// SIGKILL escalation. The marker comes first so that a supervisor that
// has not recorded the job's pid yet finds it and signals the job
// itself.
func (d *Daemon) endLocked(j *job, marker string, sig syscall.Signal) *killMarker {
	now := time.Now()
	m := &killMarker{Time: now, Signal: int(sig), KillAt: now.Add(d.killWait(j))}
	if j.killBeforeCommitLocked() {
		// The launch has not handed the job to its runtime: its
		// directory may not exist yet and nothing runs. The launch
		// finds the kill in memory and ends the job unstarted.
		return m
	}
	if err := writeJSONAtomic(filepath.Join(j.dir, marker), m, 0o644); err != nil {
		d.log.Error("cannot record kill marker", "job_id", j.ref.JobID, "err", err)
	}
	// A frozen job must run to act on its signal (suspend.go).
	d.resumeLocked(j)
	d.signalLocked(j, sig, false)
	if j.escalate == nil {
		j.escalate = time.AfterFunc(m.KillAt.Sub(now), func() { d.escalateKill(j) })
	}
	return m
}

func (d *Daemon) escalateKill(j *job) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped || j.finished() {
		return
	}
	d.log.Info("kill wait over, sending SIGKILL", "job_id", j.ref.JobID)
	d.resumeLocked(j)
	d.signalLocked(j, syscall.SIGKILL, false)
}

// sendWarning delivers --signal=B: to the batch shell before the time
// limit.
func (d *Daemon) sendWarning(j *job) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped || j.finished() || j.marks.Signalled || j.spec.Signal == nil {
		return
	}
	if err := os.WriteFile(filepath.Join(j.dir, markSignalled), nil, 0o644); err != nil {
		d.log.Error("cannot record signal marker", "job_id", j.ref.JobID, "err", err)
	}
	j.marks.Signalled = true
	d.log.Info("sending time limit warning", "job_id", j.ref.JobID, "signal", j.spec.Signal.Signal)
	d.signalLocked(j, syscall.Signal(j.spec.Signal.Signal), j.spec.Signal.BatchOnly)
}

// signalLocked sends sig to the job's processes (or to the batch shell
// alone) through the job's runtime. Before the job has started there is
// nothing to signal; kill markers cover that window. SIGSTOP and SIGCONT
// to the whole job suspend and resume it through the freezer
// (suspend.go); a SIGCONT to a job that is not frozen is a plain signal.
//
// The runtime's state decides under d.mu: a job whose first process has
// not started yet gets the signal held (holdSignalLocked), one with
// nothing running does not get it, and a running one gets it from the
// job's ops queue, outside d.mu and in order with its freezes and thaws
// (a thaw queued before a kill reaches the job first).
func (d *Daemon) signalLocked(j *job, sig syscall.Signal, batchOnly bool) {
	if j.preparingLocked() {
		// Its launch delivers it once the runtime started the job.
		j.held = append(j.held, heldSignal{sig, batchOnly})
		return
	}
	if !batchOnly {
		switch {
		case sig == syscall.SIGSTOP:
			d.suspendLocked(j)
			return
		case sig == syscall.SIGCONT && d.resumeLocked(j):
			return
		}
	}
	rt, rj := d.runtimeFor(j), runtimeJob(j)
	switch rt.State(rj) {
	case runtime.Starting:
		if !j.finished() {
			// Launched, but the supervisor has not started the script
			// yet: hold the signal for it (a preemption's checkpoint
			// signal right after the start must not be lost).
			d.holdSignalLocked(j, sig, batchOnly)
			return
		}
		fallthrough
	case runtime.Stopped:
		d.log.Debug("job not running, signal not sent", "job_id", j.ref.JobID, "runtime", rt.Name(), "signal", int(sig))
		return
	}
	log := d.log
	j.ops.do(func() {
		ctx, cancel := runtimeCtx()
		defer cancel()
		switch err := rt.Signal(ctx, rj, sig, batchOnly); {
		case errors.Is(err, runtime.ErrNotRunning):
			log.Debug("job not running, signal not sent", "job_id", rj.Ref.JobID, "runtime", rt.Name(), "signal", int(sig))
		case err != nil:
			log.Error("cannot signal job", "job_id", rj.Ref.JobID, "runtime", rt.Name(), "signal", int(sig), "err", err)
		}
	})
}

// applySignal carries out one SignalCommand and reports whether it did
// anything.
func (d *Daemon) applySignal(s api.SignalCommand) bool {
	if s.Steps && !s.Kill {
		return d.signalSteps(s)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	j := d.jobs[s.JobRef]
	if j == nil || j.finished() {
		d.log.Debug("signal for a job not running here ignored", "job_id", s.JobID, "restart", s.Restart)
		return false
	}
	switch {
	case s.Kill:
		sig := syscall.SIGTERM
		if s.Signal > 0 {
			sig = syscall.Signal(s.Signal)
		}
		return d.killLocked(j, sig)
	case s.Signal > 0:
		sig := syscall.Signal(s.Signal)
		if sig != syscall.SIGSTOP && sig != syscall.SIGCONT {
			// A checkpoint signal: an acknowledgement counts from now.
			j.signalledAt, j.ackWatch = time.Now(), true
		}
		d.signalLocked(j, sig, s.BatchOnly)
		return true
	}
	return false
}

// applyLimit moves a running job's deadline; it reports whether the
// limit changed.
func (d *Daemon) applyLimit(l api.LimitUpdate) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	j := d.jobs[l.JobRef]
	if j == nil || j.finished() || !j.hasSpec {
		return false
	}
	if la := j.launching; la != nil {
		// The launch reads the spec meanwhile; it takes the new limit
		// once the job runs.
		cur := j.spec.TimeLimit
		if la.limit != nil {
			cur = *la.limit
		}
		if cur == l.TimeLimit {
			return false
		}
		la.limit = &l.TimeLimit
		d.log.Info("time limit changed during the launch", "job_id", j.ref.JobID, "time_limit", l.TimeLimit)
		return true
	}
	if j.spec.TimeLimit == l.TimeLimit {
		return false
	}
	j.spec.TimeLimit = l.TimeLimit
	if err := writeJSONAtomic(filepath.Join(j.dir, fileLaunch), &j.spec, 0o600); err != nil {
		d.log.Error("cannot record new time limit", "job_id", j.ref.JobID, "err", err)
	}
	d.log.Info("time limit changed", "job_id", j.ref.JobID, "time_limit", l.TimeLimit)
	d.armLocked(j)
	return true
}

// applyAck drops a finished job the controller has stored; it reports
// whether there was one.
func (d *Daemon) applyAck(r api.JobRef) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if j := d.jobs[r]; j != nil && j.finished() {
		d.dropLocked(j)
		return true
	}
	return false
}

// applyForget stops reporting a job, kills it if it runs and drops it
// once it ended. It reports whether the job was still reported.
func (d *Daemon) applyForget(r api.JobRef) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	j := d.jobs[r]
	if j == nil || j.marks.Forgotten {
		return false
	}
	j.marks.Forgotten = true
	if err := os.WriteFile(filepath.Join(j.dir, markForgotten), nil, 0o644); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Error("cannot record forget marker", "job_id", j.ref.JobID, "err", err)
	}
	if j.finished() {
		d.dropLocked(j)
		return true
	}
	d.log.Info("controller forgot running job, killing it", "job_id", j.ref.JobID)
	d.killLocked(j, syscall.SIGTERM)
	return true
}

// reportsLocked lists every job the controller should hear about.
func (d *Daemon) reportsLocked() []api.NodeJobReport {
	out := make([]api.NodeJobReport, 0, len(d.jobs))
	for _, j := range d.jobs {
		if j.marks.Forgotten {
			continue
		}
		var spec *api.LaunchSpec
		if j.hasSpec {
			spec = &j.spec
		}
		r := report(j.ref, spec, j.status, j.marks)
		if j.status == nil && j.killBeforeCommitLocked() {
			// Its job directory is not complete: nothing of it can run
			// yet, and a tided killed now leaves nothing the next one
			// would know. The controller does not take it for launched
			// (and launches it again if the node forgets it).
			r.State = api.NodeJobLaunching
		}
		r.CheckpointAck = r.State == api.NodeJobRunning && checkpointAcked(j)
		out = append(out, r)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].JobID != out[b].JobID {
			return out[a].JobID < out[b].JobID
		}
		return out[a].Restart < out[b].Restart
	})
	return out
}

// recover rebuilds the job table from the state directory at start.
// Every job without a status is the runtime's to find again
// (Runtime.Reattach): a live supervisor, a containerd task; what its
// runtime does not find is lost, and what is left of it is removed.
func (d *Daemon) recover(ctx context.Context) error {
	found, err := scanJobDirs(d.jobsDir)
	if err != nil {
		return err
	}
	type reattached struct {
		j      *job
		exited <-chan struct{}
	}
	var waits []reattached
	for _, sj := range found {
		if sj.Status == nil && !validJSONFile(filepath.Join(sj.Dir, fileExec)) {
			// The launch never committed (exec.json is its last file):
			// nothing of the job ran and it was never reported. Dropped;
			// the controller repeats the launch.
			d.log.Warn("launch interrupted before its job directory was complete: dropped, the controller repeats it",
				"job_id", sj.Ref.JobID, "restart", sj.Ref.Restart, "problem", sj.Problem)
			if err := removeJobDir(sj.Dir); err != nil {
				d.log.Error("cannot remove job directory", "job_id", sj.Ref.JobID, "err", err)
			}
			continue
		}
		j := &job{ref: sj.Ref, dir: sj.Dir, marks: sj.Markers, recovered: true}
		if sj.Spec != nil {
			j.spec, j.hasSpec = *sj.Spec, true
		}
		log := d.log.With("job_id", sj.Ref.JobID, "restart", sj.Ref.Restart)
		rt := d.runtimeFor(j)
		lost := sj.Status == nil
		if sj.Status != nil {
			j.status = sj.Status
		} else if j.hasSpec {
			exited, st, err := rt.Reattach(ctx, d.startJob(j))
			switch {
			case err != nil:
				log.Warn("job not found running", "runtime", rt.Name(), "err", err)
			case st != nil:
				j.status, lost = st, false
				log.Info("job ended while tided was down", "runtime", rt.Name(), "exit", st.Exit.String())
			default:
				lost = false
				log.Info("reattached running job", "runtime", rt.Name())
				waits = append(waits, reattached{j, exited})
			}
		}
		if lost {
			if !j.hasSpec {
				log.Warn("job directory damaged", "err", sj.Problem)
			}
			rj := runtimeJob(j)
			st := lostStatus(time.Now())
			if rt.State(rj) == runtime.Starting {
				// The job's first process never started (the supervisor
				// records the script's pid as it starts it): the
				// controller may launch the job again elsewhere.
				st.LaunchFailed = true
				st.Error = "launch interrupted: tided stopped before the job's script started"
			}
			d.deleteLost(rt, sj.Ref, rj)
			if err := writeJSONAtomic(filepath.Join(sj.Dir, fileStatus), &st, 0o644); err != nil {
				return fmt.Errorf("record lost job %d: %w", sj.Ref.JobID, err)
			}
			log.Warn("job lost: supervisor gone", "runtime", rt.Name(), "problem", sj.Problem)
			j.status = &st
		}
		if j.finished() && j.marks.Forgotten {
			if err := removeJobDir(j.dir); err != nil {
				log.Error("cannot remove job directory", "err", err)
			}
			continue
		}
		d.jobs[j.ref] = j
	}
	for _, r := range waits {
		go func() {
			<-r.exited
			d.supervisorDone(r.j)
		}()
	}
	if o, ok := d.ctr.(runtime.OrphanRemover); ok {
		keep := func(ref api.JobRef) bool {
			j := d.jobs[ref]
			return j != nil && !j.finished()
		}
		if err := o.RemoveOrphans(ctx, keep); err != nil {
			d.log.Warn("cannot remove orphaned containers", "err", err)
		}
	}
	d.recoverMPS()
	return nil
}

// watchAcks looks for the checkpoint acknowledgements of jobs
// signalled since (checkpoint.go): a job acknowledges by touching a
// file, which nothing announces.
func (d *Daemon) watchAcks(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.mu.Lock()
		acked := d.newCheckpointAcksLocked()
		d.mu.Unlock()
		if acked {
			d.wake() // the controller ends the job's grace time now
		}
	}
}
