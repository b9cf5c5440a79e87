package noded

import (
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// signalSteps carries out a SignalCommand addressed to a job's steps
// (Slurm's default target of scancel --signal and --signal=SIG@TIME):
// the tasks of every step of the job's incarnation running on this
// node get the signal, the batch shell and its other children do not.
// A node may run steps of a job it did not launch, so the job need not
// be in the job table. It reports whether any step got the signal.
func (d *Daemon) signalSteps(c api.SignalCommand) bool {
	if c.Signal <= 0 || c.Signal > api.MaxSignal {
		return false
	}
	sig := syscall.Signal(c.Signal)
	d.mu.Lock()
	if j := d.jobs[c.JobRef]; j != nil && !j.finished() && sig != syscall.SIGSTOP && sig != syscall.SIGCONT {
		// A checkpoint signal: an acknowledgement counts from now, as
		// for one sent to the batch shell.
		j.signalledAt, j.ackWatch = time.Now(), true
	}
	d.mu.Unlock()
	n := 0
	if d.steps != nil {
		n = d.steps.signalJobSteps(c.JobRef, c.StepIDs, sig)
	}
	if n == 0 {
		d.log.Debug("signal for the job's steps: none runs here", "job_id", c.JobID, "restart", c.Restart, "signal", c.Signal)
		return false
	}
	d.log.Info("signalled the job's steps", "job_id", c.JobID, "restart", c.Restart, "signal", c.Signal, "steps", n)
	return true
}

// signalJob sends sig to the tasks of every step of job incarnation ref
// running on this node and returns how many steps it reached.
func (s *stepServer) signalJob(ref api.JobRef, sig syscall.Signal) int {
	s.mu.Lock()
	var runs []*stepRun
	for r := range s.running {
		if r.g.JobID == ref.JobID && r.g.Restart == ref.Restart {
			runs = append(runs, r)
		}
	}
	s.mu.Unlock()
	for _, r := range runs {
		r.log.Info("signalling the step's tasks", "signal", int(sig))
		r.signalAll(sig)
	}
	return len(runs)
}
