package ctld

import (
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/state"
)

// transition moves job j through the job lifecycle (ctld/state, which
// sets the fields the new state records) and reports whether it did. A
// change the lifecycle refuses is a bug or a request that lost a race:
// it is logged, j is left as it was, and the caller skips what would
// follow the change (accounting, the trail, commands to nodes). Called
// with mu held.
func (s *Server) transition(j *api.Job, c state.Change) bool {
	wasRunning := j.State == api.StateRunning
	if err := state.Transition(j, c); err != nil {
		s.log.Error("job state change refused", "job_id", j.ID, "from", j.State, "to", c.To, "err", err)
		return false
	}
	if wasRunning && j.State != api.StateRunning {
		s.fairStopped(j, c.At)
	}
	return true
}

// mayTransition is transition's check alone, for callers that must act on
// the job as it is (free its nodes) before they change it. Called with
// mu held.
func (s *Server) mayTransition(j *api.Job, c state.Change) bool {
	if err := state.Check(j, c); err != nil {
		s.log.Error("job state change refused", "job_id", j.ID, "from", j.State, "to", c.To, "err", err)
		return false
	}
	return true
}
