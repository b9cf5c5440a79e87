package noded

import (
	"syscall"
	"time"

	"github.com/tide-hpc/tide/noded/runtime"
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

// holdSignalLocked keeps sig for job j until its runtime says that its
// process runs (a supervisor records the script's pid only once the
// script runs), then delivers it (in arrival order with the others
// held). Called with d.mu held.
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
		running := d.runtimeFor(j).State(runtimeJob(j)) == runtime.Running
		switch {
		case j.finished() || (!running && time.Now().After(deadline)):
			if len(j.held) > 0 {
				d.log.Debug("held signals dropped: the job's process never ran", "job_id", j.ref.JobID, "signals", len(j.held))
			}
			j.held = nil
		case !running:
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
