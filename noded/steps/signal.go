package steps

import (
	"syscall"

	"github.com/tide-hpc/tide/ctld/api"
)

// signalJob sends sig to the tasks of every step of job incarnation ref
// running on this node and returns how many steps it reached.
func (s *Server) signalJob(ref api.JobRef, sig syscall.Signal) int {
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
