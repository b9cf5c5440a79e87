package steps

// Signalling and cancelling steps: a step's tasks, scancel J.S and the
// cancels a node remembers for steps whose srun has not come yet.

import (
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepio"
)

// signalAll signals every task's process group.
func (r *stepRun) signalAll(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.tasks {
		if t.cmd == nil || t.cmd.Process == nil {
			continue
		}
		pid := t.cmd.Process.Pid
		if t.done {
			// The leader is reaped; what is left of its group (if
			// anything) still gets the signal.
			_ = syscall.Kill(-pid, sig)
			continue
		}
		if err := syscall.Kill(-pid, sig); err != nil {
			_ = syscall.Kill(pid, sig)
		}
	}
}

// kill ends the step's tasks: SIGTERM, then SIGKILL after the kill wait
// unless they are gone by then.
func (r *stepRun) kill() {
	r.teardown.Do(func() {
		r.signalAll(syscall.SIGTERM)
		go func() {
			t := time.NewTimer(r.s.cfg.KillWait)
			defer t.Stop()
			select {
			case <-r.allDone:
			case <-t.C:
				r.signalAll(syscall.SIGKILL)
			}
		}()
	})
}

// cancelMemory is how long a node remembers a cancelled step, longer
// than any grant is good for.
const cancelMemory = 10 * time.Minute

// Signal sends sig to the tasks of job incarnation ref's steps ids
// running on this node (every step of the job when ids is empty) and
// returns how many steps it reached. SIGKILL to named steps is scancel
// J.S: srun hears that the step was cancelled, as from Slurm's
// slurmstepd, the tasks are killed at once, and a step of ids that has
// not reached this node yet is refused when it does.
func (s *Server) Signal(ref api.JobRef, ids []uint32, sig syscall.Signal) int {
	if len(ids) == 0 {
		return s.signalJob(ref, sig)
	}
	now := time.Now()
	s.mu.Lock()
	if sig == syscall.SIGKILL {
		if s.cancelled == nil {
			s.cancelled = map[stepID]time.Time{}
		}
		for k, exp := range s.cancelled {
			if !now.Before(exp) {
				delete(s.cancelled, k)
			}
		}
		for _, id := range ids {
			s.cancelled[stepID{ref, id}] = now.Add(cancelMemory)
		}
	}
	var runs []*stepRun
	for r := range s.running {
		if r.g.JobID == ref.JobID && r.g.Restart == ref.Restart && slices.Contains(ids, r.g.StepID) {
			runs = append(runs, r)
		}
	}
	s.mu.Unlock()
	for _, r := range runs {
		if sig == syscall.SIGKILL {
			r.cancel(time.Now())
			continue
		}
		r.log.Info("signalling the step's tasks", "signal", int(sig))
		r.signalAll(sig)
	}
	return len(runs)
}

// cancel ends the step on scancel J.S: srun gets Slurm's notice, the
// tasks SIGKILL. It is idempotent.
func (r *stepRun) cancel(now time.Time) {
	r.cancelOnce.Do(func() {
		r.log.Info("step cancelled, killing its tasks")
		r.sendCancelNotice(now, "")
		r.signalAll(syscall.SIGKILL)
	})
}

// expire ends the step at its job's end time (the job's time limit):
// srun gets slurmstepd's "DUE TO TIME LIMIT" notice, the tasks SIGTERM
// and, after the kill wait, SIGKILL (kill). It is idempotent.
func (r *stepRun) expire(now time.Time) {
	r.cancelOnce.Do(func() {
		r.log.Info("step reached its job's end, killing its tasks")
		r.sendCancelNotice(now, " DUE TO TIME LIMIT")
		r.kill()
	})
}

// sendCancelNotice tells srun, in slurmstepd's words, that the step was
// cancelled (why: "" or " DUE TO ..."), and marks it killed so that
// start() starts no more tasks. Before the Ready frame the notice waits
// for it.
func (r *stepRun) sendCancelNotice(now time.Time, why string) {
	msg := fmt.Sprintf("slurmstepd: error: *** STEP %s ON %s CANCELLED AT %s%s ***\n", r.g.ID(), r.s.cfg.Node, now.Format("2006-01-02T15:04:05"), why)
	f := stepio.Frame{Type: stepio.Notice, Task: stepio.NoticeCancelled, Payload: []byte(msg)}
	r.mu.Lock()
	r.killed = true
	ready := r.readySent
	if !ready {
		r.notice = &f // srun hears of it after the Ready frame
	}
	r.mu.Unlock()
	if ready {
		_ = r.w.Write(f)
	}
}
