package noded

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/runtime"
)

// A job's launch runs beside the sync loop, never on it: the loop
// registers the job (so that a kill, signal, limit, ack or forget in the
// same answer or a later one finds it) and hands the launch to a
// goroutine of its own. Whatever a launch does (a hostile output pattern,
// a slow NSS lookup, a supervisor or containerd that does not answer),
// the node goes on reporting, and at launch_timeout the job fails with
// the reason while the node stays up.
//
// A launch goes through steps; at each step boundary it looks whether
// it may go on (launchGoOnLocked):
//
//	slot ─► job directory ─► root check ─► output directory ─► commit ─► runtime start ─► running
//
// Until the commit nothing of the job can run and its directory may not
// exist: a kill is recorded in memory only, and the launch ends the job
// without starting it. From the commit on the directory is complete and
// kills go through the markers in it, which the supervisor reads before
// it starts the script (and once more after). Signals, limits and held
// signals wait in memory until the runtime has started the job.
//
// At the deadline (launchExpired) the job is failed at once with the step
// it was stuck in; if the launch had committed, a SIGKILL marker keeps
// the runtime from running it. The launch's goroutine may stay stuck in a
// system call for longer: when it comes back it starts nothing and
// cleans up what it made after the deadline (launchCleanupLocked).

// launchConcurrency bounds the launches that run at once on a node.
const launchConcurrency = 16

// Launch steps, as the timeout's reason names them.
const (
	stepSlot   = "waiting for a launch slot"
	stepJobDir = "writing the job directory"
	stepStart  = "starting the " // + the runtime's name
)

// launchState is a launch in flight: from its arrival until the job runs
// under its runtime or the launch failed. Every field is guarded by
// Daemon.mu.
type launchState struct {
	// ctx ends when the launch is decided or expires; the test hook and
	// anything else that can wait get it.
	ctx    context.Context
	cancel context.CancelFunc
	// step says what the launch is doing now, for the timeout's reason.
	step string
	// slot is set once the launch holds one of the launch slots.
	slot bool
	// committed: the job directory is complete and the runtime is about
	// to start the job; kills go through its markers from here on.
	committed bool
	// decided: the launch ran the job or failed it; the deadline no
	// longer applies and the launch's slot is free.
	decided bool
	// expired: the deadline came first. The job was failed then; the
	// launch must not start it and cleans up when it comes back.
	expired bool
	// limit is a time limit that arrived during the launch; it replaces
	// the launch's own once the job runs.
	limit *int64
	timer *time.Timer
}

// launchHook is a test seam: when set (Daemon.launchHook), every launch
// calls it at each step, outside Daemon.mu, with the launch's context,
// which ends at the deadline. An error fails the launch at that step.
type launchHook func(ctx context.Context, ref api.JobRef, step string) error

// applyLaunches registers every launch that names an incarnation not
// known yet and starts its launch in the background. It reports whether
// it registered any. A job is in the table before its launch begins, so
// that commands for it in the same answer or a later one find it.
func (d *Daemon) applyLaunches(specs []api.LaunchSpec) bool {
	started := false
	for i := range specs {
		spec := specs[i]
		d.mu.Lock()
		_, known := d.jobs[spec.JobRef]
		known = known || d.dropped.has(spec.JobRef)
		var j *job
		if !known && !d.stopped {
			if spec.StartTime.IsZero() {
				spec.StartTime = time.Now()
			}
			j = &job{ref: spec.JobRef, dir: filepath.Join(d.jobsDir, dirName(spec.JobRef)), spec: spec, hasSpec: true}
			prepareCheckpoint(j)
			l := &launchState{step: stepSlot}
			l.ctx, l.cancel = context.WithCancel(context.Background())
			j.launching = l
			d.jobs[spec.JobRef] = j
			d.launches.Add(1)
		}
		d.mu.Unlock()
		if j == nil {
			d.log.Debug("launch of a known job ignored", "job_id", spec.JobID, "restart", spec.Restart)
			continue
		}
		started = true
		go d.launch(j, j.launching)
	}
	return started
}

// launch prepares and starts one job (see the comment at the top of
// this file). l is j.launching, which only this goroutine replaces.
func (d *Daemon) launch(j *job, l *launchState) {
	log := d.log.With("job_id", j.ref.JobID, "restart", j.ref.Restart)
	// The slot, then the deadline: a launch waiting behind slow ones
	// has not begun yet. Every launch holding a slot ends or expires
	// within launch_timeout, so the wait is bounded.
	select {
	case d.launchSlots <- struct{}{}:
	case <-l.ctx.Done(): // decided while waiting (stopped, or killed)
		return
	}
	d.mu.Lock()
	if l.decided {
		// Killed as the slot came: give it back.
		<-d.launchSlots
		d.mu.Unlock()
		return
	}
	l.slot = true
	l.timer = time.AfterFunc(d.cfg.LaunchTimeout, func() { d.launchExpired(j) })
	d.mu.Unlock()

	if !d.launchStep(j, l, stepJobDir, false) {
		return
	}
	if err := d.writeJobDir(j); err != nil {
		log.Error("cannot prepare job", "err", err)
		d.launchFailed(j, l, "prepare job: "+err.Error(), true)
		return
	}
	if err := d.makeCheckpointDir(j); err != nil {
		// The job runs; it can still acknowledge with tide checkpoint-done.
		log.Warn("cannot create the checkpoint acknowledgement directory", "err", err)
	}
	if d.asRoot && j.spec.UserID == 0 && !d.cfg.AllowRootJobs {
		log.Warn("root job refused")
		d.launchFailed(j, l, fmt.Sprintf("root jobs are not allowed on node %s", d.cfg.Name), true)
		return
	}
	if !d.awaitOutputDirs(j, l) {
		return
	}
	rt := d.runtimeFor(j)
	if !d.launchStep(j, l, stepStart+rt.Name(), true) {
		return
	}
	// Not the launch's context: a start cancelled halfway could leave
	// the job running with nobody waiting for it. The deadline reaches
	// a start in flight through the SIGKILL marker instead.
	exited, err := rt.Start(context.Background(), d.startJob(j))

	d.mu.Lock()
	if l.expired {
		// The deadline passed while the runtime started the job: its
		// SIGKILL marker ends it before (or as) it runs. Let the
		// runtime finish with it, then clean up.
		d.mu.Unlock()
		if err == nil {
			<-exited
		}
		d.mu.Lock()
		d.launchCleanupLocked(j)
		d.mu.Unlock()
		return
	}
	if err != nil {
		d.mu.Unlock()
		log.Error("cannot start "+rt.Name(), "err", err)
		d.launchFailed(j, l, "start "+rt.Name()+": "+err.Error(), !runtime.IsJobFault(err))
		return
	}
	d.decideLaunchLocked(l)
	j.launching = nil
	if l.limit != nil && *l.limit != j.spec.TimeLimit {
		j.spec.TimeLimit = *l.limit
		if err := writeJSONAtomic(filepath.Join(j.dir, fileLaunch), &j.spec, 0o600); err != nil {
			log.Error("cannot record new time limit", "err", err)
		}
	}
	if !j.finished() && !d.stopped {
		d.armLocked(j)
		// Signals that came during the launch, in their order; a
		// process job's are held again until its pid is recorded.
		held := j.held
		j.held = nil
		for _, h := range held {
			d.signalLocked(j, h.sig, h.batchOnly)
		}
	}
	d.mu.Unlock()
	log.Info("job launched", "user", j.spec.User)
	go func() {
		<-exited // the job's exit is in status.json
		d.supervisorDone(j)
	}()
}

// launchStep moves the launch to step and reports whether it may go on
// (launchGoOnLocked, before and after the test hook). commit marks the
// step that hands the complete job directory to the runtime.
func (d *Daemon) launchStep(j *job, l *launchState, step string, commit bool) bool {
	d.mu.Lock()
	if !d.launchGoOnLocked(j, l) {
		d.mu.Unlock()
		return false
	}
	l.step = step
	if commit {
		l.committed = true
	}
	hook, ctx := d.launchHook, l.ctx
	d.mu.Unlock()
	if commit {
		// Reported as running from now on (it was launching).
		d.wake()
	}
	if hook == nil {
		return true
	}
	if err := hook(ctx, j.ref, step); err != nil {
		d.launchFailed(j, l, step+": "+err.Error(), true)
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.launchGoOnLocked(j, l)
}

// launchGoOnLocked reports whether the launch may go on, and when it may
// not, ends it: an expired launch cleans up, a job killed (or forgotten)
// before the commit ends without running, a stopping daemon leaves the
// launch where it is (the next tided finds the directory).
func (d *Daemon) launchGoOnLocked(j *job, l *launchState) bool {
	switch {
	case l.expired:
		d.launchCleanupLocked(j)
		return false
	case d.stopped:
		d.decideLaunchLocked(l)
		return false
	case j.marks.Killed != nil && !l.committed:
		d.decideLaunchLocked(l)
		j.launching = nil
		st := runtime.KilledStatus(j.marks.Killed, time.Now())
		st.StartTime = time.Time{}
		// Recorded as any end is, so that a tided restarted before the
		// controller acknowledges it reports the same.
		if err := os.Mkdir(j.dir, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
			d.log.Error("cannot record job status", "job_id", j.ref.JobID, "err", err)
		} else if err := writeJSONAtomic(filepath.Join(j.dir, fileStatus), &st, 0o644); err != nil {
			d.log.Error("cannot record job status", "job_id", j.ref.JobID, "err", err)
		}
		d.log.Info("job killed during its launch: not started", "job_id", j.ref.JobID, "restart", j.ref.Restart)
		d.finishLocked(j, st)
		go d.wake()
		return false
	}
	return true
}

// launchFailed ends a launch that failed: the job finishes with msg as
// its error. nodeSide says that the node, not the job's request, was at
// fault (jobStatus.LaunchFailed: the controller may retry elsewhere).
func (d *Daemon) launchFailed(j *job, l *launchState, msg string, nodeSide bool) {
	d.mu.Lock()
	if l.expired {
		// Failed already, at the deadline.
		d.launchCleanupLocked(j)
		d.mu.Unlock()
		return
	}
	d.decideLaunchLocked(l)
	j.launching = nil
	d.mu.Unlock()
	d.finishNow(j, jobStatus{Exit: api.ExitStatus{Code: 1}, EndTime: time.Now(), Error: msg, LaunchFailed: nodeSide})
}

// launchExpired fails a launch that is still running at its deadline:
// the job ends now with the step it was stuck in, a launch past its
// commit gets a SIGKILL marker so that the runtime does not run the job,
// and the launch, when it comes back, starts nothing (launchGoOnLocked).
func (d *Daemon) launchExpired(j *job) {
	d.mu.Lock()
	l := j.launching
	if l == nil || l.decided || l.expired || d.stopped {
		d.mu.Unlock()
		return
	}
	l.expired = true
	now := time.Now()
	if l.committed {
		m := &killMarker{Time: now, Signal: int(syscall.SIGKILL), KillAt: now}
		if err := writeJSONAtomic(filepath.Join(j.dir, markKilled), m, 0o644); err != nil {
			d.log.Error("cannot record kill marker", "job_id", j.ref.JobID, "err", err)
		}
	}
	st := jobStatus{Exit: api.ExitStatus{Code: 1}, EndTime: now, LaunchFailed: true,
		Error: fmt.Sprintf("launch timed out after %s while %s", d.cfg.LaunchTimeout, l.step)}
	if err := writeJSONAtomic(filepath.Join(j.dir, fileStatus), &st, 0o644); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Error("cannot record job status", "job_id", j.ref.JobID, "err", err)
	}
	d.decideLaunchLocked(l)
	d.log.Error("launch timed out: job failed", "job_id", j.ref.JobID, "restart", j.ref.Restart,
		"step", l.step, "launch_timeout", d.cfg.LaunchTimeout)
	d.finishLocked(j, st)
	d.mu.Unlock()
	d.wake()
}

// launchCleanupLocked undoes what an expired launch made after its
// deadline: an MPS daemon it acquired, and the job directory if the
// controller has dropped the job meanwhile; a directory still reported
// gets the job's status back (the runtime may have written its own).
// Job cgroups are left alone: they are named by job id, and a later
// incarnation of the job may run in one on this node by now.
func (d *Daemon) launchCleanupLocked(j *job) {
	if j.launching == nil {
		return // cleaned up already
	}
	j.launching = nil
	d.releaseJobMPS(j)
	if d.jobs[j.ref] != j {
		if err := removeJobDir(j.dir); err != nil {
			d.log.Error("cannot remove job directory", "job_id", j.ref.JobID, "err", err)
		}
		return
	}
	if j.status != nil {
		if err := writeJSONAtomic(filepath.Join(j.dir, fileStatus), j.status, 0o644); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Error("cannot record job status", "job_id", j.ref.JobID, "err", err)
		}
	}
}

// decideLaunchLocked records that the launch is decided: its deadline
// and context end, its slot is free, and a stopping tided no longer
// waits for it. It is idempotent.
func (d *Daemon) decideLaunchLocked(l *launchState) {
	if l.decided {
		return
	}
	l.decided = true
	if l.timer != nil {
		l.timer.Stop()
	}
	l.cancel()
	if l.slot {
		<-d.launchSlots
	}
	d.launches.Done()
}

// preparingLocked reports whether j's launch has not handed it to its
// runtime yet (signals and limits wait for that).
func (j *job) preparingLocked() bool { return j.launching != nil }

// killBeforeCommitLocked reports whether a kill of j now can only be
// recorded in memory: its directory may not exist, and nothing runs.
func (j *job) killBeforeCommitLocked() bool {
	return j.launching != nil && !j.launching.committed
}

// waitLaunches waits until every launch in flight is decided (each is,
// at its deadline at the latest), so that a stopping tided does not
// leave a job half-launched behind.
func (d *Daemon) waitLaunches() {
	done := make(chan struct{})
	go func() {
		d.launches.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-time.After(time.Second):
	}
	d.log.Info("waiting for launches in flight before stopping")
	<-done
}
