package noded

import (
	"syscall"
	"time"
)

// heldSignal is a signal for a job whose process has not started yet.
type heldSignal struct {
	sig       syscall.Signal
	batchOnly bool
}

// Held signals are retried this often, for at most heldSignalWait: a
// supervisor starts the script within milliseconds of the launch, so a
// job that still has no process after that is being torn down anyway.
const (
	heldSignalEvery = 20 * time.Millisecond
	heldSignalWait  = 30 * time.Second
)

// holdSignalLocked keeps sig for process job j until its process runs,
// then delivers it (in arrival order with the others held). Called with
// d.mu held.
func (d *Daemon) holdSignalLocked(j *job, sig syscall.Signal, batchOnly bool) {
	j.held = append(j.held, heldSignal{sig, batchOnly})
	if len(j.held) > 1 {
		return // a retry is already scheduled
	}
	d.log.Debug("job process not started yet, signal held", "job_id", j.ref.JobID, "signal", int(sig))
	deadline := time.Now().Add(heldSignalWait)
	var retry func()
	retry = func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		rt := processRuntime{d}
		_, alive := rt.pidLocked(j)
		switch {
		case j.finished() || (!alive && time.Now().After(deadline)):
			if len(j.held) > 0 {
				d.log.Debug("held signals dropped: the job's process never ran", "job_id", j.ref.JobID, "signals", len(j.held))
			}
			j.held = nil
		case !alive:
			j.pid = procIdentity{} // read the pid file again next time
			time.AfterFunc(heldSignalEvery, retry)
		default:
			held := j.held
			j.held = nil
			for _, h := range held {
				d.signalLocked(j, h.sig, h.batchOnly)
			}
		}
	}
	time.AfterFunc(heldSignalEvery, retry)
}
