package noded

import (
	"errors"
	"path/filepath"
	"sync"
	"time"

	"github.com/tide-hpc/tide/noded/runtime"
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
// Daemon.mu on the job's ops queue, in order with the job's other
// runtime calls (signals, thaws). How each runtime freezes is its own
// (noded/runtime: Process, Containerd).

// serialOps runs a job's runtime calls one after another, in the order
// they were asked for, outside Daemon.mu: a thaw queued before a kill
// happens before it, and a freeze and thaw asked for in quick
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
	rt, rj := d.runtimeFor(j), runtimeJob(j)
	if rt.State(rj) != runtime.Running {
		log.Info("job not running here yet, not suspended")
		return false
	}
	now := time.Now()
	j.marks.Frozen = &stepd.FrozenMarker{Time: now}
	dir := j.dir
	j.ops.do(func() {
		ctx, cancel := runtimeCtx()
		defer cancel()
		how, err := rt.Freeze(ctx, rj, func(how string) {
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

// resumeLocked thaws j if it is frozen, and reports whether it was. A
// job whose processes no longer run has nothing to thaw: only its
// marker goes.
func (d *Daemon) resumeLocked(j *job) bool {
	if j.marks.Frozen == nil {
		return false
	}
	log := d.log.With("job_id", j.ref.JobID, "restart", j.ref.Restart)
	rt, rj := d.runtimeFor(j), runtimeJob(j)
	running := rt.State(rj) == runtime.Running
	j.marks.Frozen = nil
	dir := j.dir
	j.ops.do(func() {
		// The freeze queued before this has written how it froze.
		var m stepd.FrozenMarker
		_ = readJSON(filepath.Join(dir, stepd.MarkFrozen), &m)
		if running {
			ctx, cancel := runtimeCtx()
			err := rt.Thaw(ctx, rj, m.How)
			cancel()
			if err != nil && !errors.Is(err, runtime.ErrNotRunning) {
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
