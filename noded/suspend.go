package noded

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/noded/ctr"
	"github.com/tide-hpc/tide/noded/stepd"
)

// Suspend and resume. The controller suspends a job (preemption mode
// suspend, or scancel -f --signal=STOP) with a SIGSTOP command and resumes
// it with SIGCONT. A SIGSTOP to a process group would leave running what
// left the group (a daemonised helper, a setsid child) and can be undone
// by any process of the job that sends SIGCONT, so tided freezes the job
// instead:
//
//   - a container job: containerd pauses the task, which freezes the
//     container's cgroup (runc's freezer);
//   - a process job with a job cgroup: the cgroup's freezer (v1
//     freezer.state, v2 cgroup.freeze), which stops every process in it;
//   - a process job without one (cgroups off or unusable): SIGSTOP to the
//     job's process group, as Slurm does without its freezer plugin.
//
// The frozen marker in the job directory (stepd.FrozenMarker) is
// written before the freeze and removed after the thaw, so a tided that
// restarts in between knows that the job is frozen, and how. A kill of a
// frozen job (scancel, time limit, preemption, forget) thaws it first:
// a frozen process cannot act on SIGTERM, and on cgroup v1 not even on
// SIGKILL until it is thawed. The time limit keeps counting while a job
// is suspended (the controller's clock does too).
//
// Freezing waits for the kernel and containerd, so it runs outside
// Daemon.mu on the job's ops queue, in order with the job's other slow
// runtime calls (container signals, thaws).

// serialOps runs a job's slow runtime calls one after another, in the
// order they were asked for, outside Daemon.mu: a thaw queued before a
// kill happens before it, and a freeze and thaw asked for in quick
// succession cannot overtake each other. The zero value is ready.
type serialOps struct {
	mu    sync.Mutex
	queue []func()
}

// do queues f; it runs after everything queued before it.
func (q *serialOps) do(f func()) {
	q.mu.Lock()
	q.queue = append(q.queue, f)
	start := len(q.queue) == 1
	q.mu.Unlock()
	if start {
		go q.run()
	}
}

// run works through the queue until it is empty. The running call stays
// at the head of the queue, so that do starts no second worker.
func (q *serialOps) run() {
	for {
		q.mu.Lock()
		f := q.queue[0]
		q.mu.Unlock()
		f()
		q.mu.Lock()
		q.queue = q.queue[1:]
		if len(q.queue) == 0 {
			q.queue = nil
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
	}
}

// busy reports whether calls are queued or running.
func (q *serialOps) busy() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue) > 0
}

// suspendLocked freezes j and reports whether that is news. A job that
// is being killed is not frozen (it must be able to end), nor one
// frozen already, nor one whose processes do not run (yet).
func (d *Daemon) suspendLocked(j *job) bool {
	log := d.log.With("job_id", j.ref.JobID, "restart", j.ref.Restart)
	switch {
	case j.finished() || j.marks.Frozen != nil:
		return false
	case j.marks.Killed != nil || j.marks.TimedOut != nil:
		log.Info("job is being killed, not suspended")
		return false
	}
	op := d.runtimeFor(j).freezeOpLocked(j)
	if op == nil {
		log.Info("job not running here yet, not suspended")
		return false
	}
	now := time.Now()
	j.marks.Frozen = &stepd.FrozenMarker{Time: now}
	dir := j.dir
	j.ops.do(func() {
		how, err := op(func(how string) {
			if err := stepd.WriteFrozenMarker(dir, stepd.FrozenMarker{Time: now, How: how}); err != nil {
				log.Error("cannot record frozen marker", "err", err)
			}
		})
		if err != nil {
			log.Error("cannot suspend job", "how", how, "err", err)
			return
		}
		log.Info("job suspended", "how", how)
	})
	return true
}

// resumeLocked thaws j if it is frozen, and reports whether it was.
func (d *Daemon) resumeLocked(j *job) bool {
	if j.marks.Frozen == nil {
		return false
	}
	log := d.log.With("job_id", j.ref.JobID, "restart", j.ref.Restart)
	op := d.runtimeFor(j).thawOpLocked(j)
	j.marks.Frozen = nil
	dir := j.dir
	j.ops.do(func() {
		// The freeze queued before this has written how it froze.
		var m stepd.FrozenMarker
		_ = readJSON(filepath.Join(dir, stepd.MarkFrozen), &m)
		if op != nil {
			if err := op(m.How); err != nil {
				log.Error("cannot resume job", "how", m.How, "err", err)
				// Still frozen: a later SIGCONT or kill tries again.
				d.mu.Lock()
				if j.marks.Frozen == nil && !j.finished() {
					j.marks.Frozen = &m
				}
				d.mu.Unlock()
				return
			}
		}
		if err := stepd.RemoveFrozenMarker(dir); err != nil {
			log.Error("cannot remove frozen marker", "err", err)
		}
		log.Info("job resumed", "how", m.How)
	})
	return true
}

// freezeOpLocked freezes the job's cgroup when the job runs in one,
// else stops its process group.
func (p processRuntime) freezeOpLocked(j *job) func(func(string)) (string, error) {
	pid, alive := p.pidLocked(j)
	if !alive {
		return nil
	}
	dir, log := j.dir, p.d.log.With("job_id", j.ref.JobID)
	return func(mark func(string)) (string, error) {
		cg, err := stepd.JobCgroup(dir, pid)
		if err == nil {
			mark(stepd.FreezeCgroup)
			if err := cg.Freeze(stepd.FreezeWait); err != nil {
				return stepd.FreezeCgroup, fmt.Errorf("freeze job cgroup: %w", err)
			}
			return stepd.FreezeCgroup, nil
		}
		if !errors.Is(err, stepd.ErrNoJobCgroup) {
			log.Warn("cannot use the job cgroup's freezer, stopping the process group instead", "err", err)
		} else {
			log.Debug("no job cgroup, stopping the process group", "why", err)
		}
		mark(stepd.FreezeSignal)
		return stepd.FreezeSignal, signalGroup(pid, syscall.SIGSTOP)
	}
}

// thawOpLocked undoes freezeOpLocked's work. A marker that does not say
// how (unreadable) thaws the cgroup where there is one, else continues
// the process group.
func (p processRuntime) thawOpLocked(j *job) func(string) error {
	pid, alive := p.pidLocked(j)
	if !alive {
		return nil
	}
	dir, id := j.dir, j.pid
	return func(how string) error {
		if how == stepd.FreezeSignal {
			return signalGroup(pid, syscall.SIGCONT)
		}
		cg, err := stepd.JobCgroup(dir, pid)
		if err != nil {
			if how == stepd.FreezeCgroup {
				if errors.Is(err, stepd.ErrNoJobCgroup) && !id.Alive() {
					// The job ended meanwhile (a kill thawed by another
					// path, or its cgroup removed): its supervisor's end
					// kills and removes what is left, nothing to thaw.
					return nil
				}
				return err
			}
			return signalGroup(pid, syscall.SIGCONT)
		}
		if err := cg.Thaw(stepd.FreezeWait); err != nil {
			return fmt.Errorf("thaw job cgroup: %w", err)
		}
		return nil
	}
}

// freezeOpLocked pauses the job's task.
func (r *ctrRuntime) freezeOpLocked(j *job) func(func(string)) (string, error) {
	task := r.task(j)
	if task == nil {
		return nil
	}
	return func(mark func(string)) (string, error) {
		mark(stepd.FreezeContainer)
		ctx, cancel := r.ctx()
		defer cancel()
		return stepd.FreezeContainer, ctr.Pause(ctx, task)
	}
}

// thawOpLocked resumes the job's paused task.
func (r *ctrRuntime) thawOpLocked(j *job) func(string) error {
	task := r.task(j)
	if task == nil {
		return nil
	}
	return func(string) error {
		ctx, cancel := r.ctx()
		defer cancel()
		return ctr.Resume(ctx, task)
	}
}
