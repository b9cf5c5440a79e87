package ctld

import (
	"context"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	"github.com/tide-hpc/tide/ctld/state"
)

// fairUsage is the controller's side of the fair-share factor: the
// accounts' decayed GPU-time (state.Usage), charged at every pass from
// the running jobs, and rebuilt once from accounting after a start so
// that a restart does not make every account look idle.
type fairUsage struct {
	u *state.Usage
	// run is scratch of the running jobs charged by a pass.
	run []state.Running
}

// fairRebuildHalfLives is how far back the rebuild reads accounting:
// use older than four half-lives counts less than 1/16.
const fairRebuildHalfLives = 4

// feedUsage charges the running jobs up to now and hands the pass the
// accounts' usage (sched.Snapshot.Usage). Called with mu held.
func (s *Server) feedUsage(snap *sched.Snapshot, now time.Time) {
	f := &s.fair
	if f.u == nil || f.u.HalfLife() != s.cl.Scheduler.PriorityDecayHalfLife {
		// The first pass, or a reconfigure changed the half-life:
		// start over from accounting.
		f.u = state.NewUsage(s.cl.Scheduler.PriorityDecayHalfLife, now)
		go s.rebuildUsage(f.u, now)
	}
	f.run = f.run[:0]
	for _, name := range s.cl.NodeOrder {
		for _, j := range s.nodes[name].batch {
			if j.State != api.StateRunning || j.StartTime.IsZero() {
				continue
			}
			f.run = append(f.run, state.Running{Account: j.Account, GPUs: state.GPUEquivalent(j.Alloc, 0), Start: j.StartTime})
		}
	}
	f.u.Advance(now, f.run)
	snap.Usage = f.u.Map()
}

// rebuildUsage charges the jobs accounting knows of from the last few
// half-lives as of at (the instant u started from), outside the lock,
// and merges them into u if it is still the controller's.
func (s *Server) rebuildUsage(u *state.Usage, at time.Time) {
	if s.store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	since := at.Add(-fairRebuildHalfLives * u.HalfLife())
	// Pending jobs used nothing: leave them out of the read (a deep
	// queue would otherwise be loaded whole).
	started := []api.JobState{api.StateRunning, api.StateCompleting, api.StateSuspended, api.StateCompleted, api.StateFailed,
		api.StateCancelled, api.StateTimeout, api.StateNodeFail, api.StateOOM, api.StatePreempted}
	jobs, err := s.store.QueryJobs(ctx, api.JobFilter{Since: since, Until: at, States: started, All: true})
	if err != nil {
		s.log.Warn("fair share: usage not rebuilt from accounting; it counts from the controller's start", "err", err)
		return
	}
	old := state.NewUsage(u.HalfLife(), at)
	for i := range jobs {
		j := &jobs[i]
		if j.StartTime.IsZero() || j.Account == "" {
			continue
		}
		end := j.EndTime
		if end.IsZero() || end.After(at) {
			end = at
		}
		old.Charge(j.Account, state.GPUEquivalent(j.Alloc, 0), j.StartTime, end)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fair.u == u {
		u.Merge(old)
	}
}

// fairStopped charges job j, which stopped running at at (it ended, was
// requeued or suspended), for its run since the last pass, which no
// pass will see. Called with mu held.
func (s *Server) fairStopped(j *api.Job, at time.Time) {
	if s.fair.u == nil || j.StartTime.IsZero() {
		return
	}
	if at.IsZero() {
		at = s.now()
	}
	s.fair.u.Ended(state.Running{Account: j.Account, GPUs: state.GPUEquivalent(j.Alloc, 0), Start: j.StartTime}, at)
}
