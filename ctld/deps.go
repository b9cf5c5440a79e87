package ctld

import (
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/state"
)

// Dependencies are evaluated when a pass builds its snapshot: a job
// whose dependency is not satisfied stays out of the scheduler's pending
// list (like a held job) with reason Dependency, or
// DependencyNeverSatisfied once it can no longer be. Job ends kick a
// pass, so dependents are re-evaluated as soon as what they wait for
// finishes. The job's Dependency string carries each item's state in
// Slurm's display form and is cleared once satisfied.

func hasSingleton(dep string) bool { return strings.Contains(strings.ToLower(dep), api.DepSingleton) }

// checkDependency parses a submitted or updated dependency and checks
// that every job it names exists, as Slurm does ("Job dependency
// problem"); it returns the dependency in display form. Called with mu
// held.
func (s *Server) checkDependency(dep string, self *api.Job) (string, error) {
	if len(dep) > api.MaxDependencyLen {
		return "", api.Invalid("%s (dependency is %d bytes, at most %d)", api.ErrTooLong, len(dep), api.MaxDependencyLen)
	}
	d, err := api.ParseDependency(dep)
	if err != nil {
		return "", api.Invalid("%s", api.ErrDependency)
	}
	if d == nil {
		return "", nil
	}
	if len(d.Items) > api.MaxDependencyItems {
		return "", api.Invalid("%s: %d jobs named, at most %d", api.ErrDependency, len(d.Items), api.MaxDependencyItems)
	}
	for _, it := range d.Items {
		if it.Kind == api.DepSingleton {
			continue
		}
		j := s.jobs[it.JobID]
		switch {
		case j == nil, self != nil && (it.JobID == self.ID || self.ArrayJobID != 0 && it.JobID == self.ArrayJobID):
			return "", api.Invalid("%s", api.ErrDependency)
		case it.HasTask:
			spec, err := api.ParseArraySpec(j.Array, 0)
			if j.ArrayJobID != it.JobID || err != nil || !spec.Tasks.Contains(it.Task) {
				return "", api.Invalid("%s", api.ErrDependency)
			}
		}
	}
	if self != nil && s.dependsOn(d, depKey(self)) {
		return "", api.Invalid("%s", api.ErrCircularDependency)
	}
	return d.String(), nil
}

// depKey is what a dependency waits for when it names j: the whole array
// for an array's records (a task's dependency holds back its array),
// else the job.
func depKey(j *api.Job) uint64 {
	if j.ArrayJobID != 0 {
		return j.ArrayJobID
	}
	return j.ID
}

// dependsOn reports whether d, through the dependencies of the jobs it
// names and theirs in turn, waits for the job or array target: a
// dependency that would close a cycle, whose jobs would wait for ever.
// Only pending jobs still carry unsatisfied dependencies, so the walk
// visits each waiting job at most once. Called with mu held.
func (s *Server) dependsOn(d *api.Dependency, target uint64) bool {
	// The dependencies of every waiting job or array, by depKey: an
	// array's records may carry different ones after task updates.
	var waits map[uint64][]string
	seen := map[uint64]bool{}
	stack := []*api.Dependency{d}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, it := range cur.Items {
			if it.Kind == api.DepSingleton {
				continue
			}
			j := s.jobs[it.JobID]
			if j == nil {
				continue
			}
			k := depKey(j)
			if k == target {
				return true
			}
			if seen[k] {
				continue
			}
			seen[k] = true
			if waits == nil {
				waits = map[uint64][]string{}
				s.live.each(func(o *api.Job) {
					if o.State == api.StatePending && o.Dependency != "" {
						waits[depKey(o)] = append(waits[depKey(o)], o.Dependency)
					}
				})
			}
			for _, ds := range waits[k] {
				if next, err := api.ParseDependency(ds); err == nil && next != nil {
					stack = append(stack, next)
				}
			}
		}
	}
	return false
}

// depsReady evaluates pending job j's dependency. It returns whether j
// may be scheduled; for an array meta record with an aftercorr item it
// returns the parsed dependency too, to be checked task by task. j's
// Dependency, reason and trail are updated as the verdict changes, and
// with --kill-on-invalid-dep a failed dependency cancels j. Called with
// mu held.
func (s *Server) depsReady(j *api.Job, ix *jobIndex, now time.Time) (bool, *api.Dependency) {
	if j.Dependency == "" {
		return true, nil
	}
	d, err := api.ParseDependency(j.Dependency)
	if err != nil || d == nil {
		// Only the controller writes the field after submit; a record
		// it cannot read waits for scontrol update to fix it.
		s.log.Error("unreadable dependency", "job_id", j.ID, "dependency", j.Dependency, "err", err)
		s.setPendingReason(j, api.ReasonDependencyNeverSatisfied, "")
		return false, nil
	}
	task := -1
	if j.ArrayJobID != 0 && !j.IsArrayMeta() {
		task = j.ArrayTaskID
	}
	e := s.evalDeps(d, j, task, ix, now)
	if shown := e.String(); shown != j.Dependency {
		j.Dependency = shown
		s.markDirty(j)
	}
	corr := j.IsArrayMeta() && d.HasKind(api.DepAfterCorr)
	switch e.State() {
	case api.DepFailed:
		s.dependencyFailed(j, now)
		return false, nil
	case api.DepFulfilled:
		if !d.HasKind(api.DepSingleton) && !corr {
			// Satisfied for good: Slurm shows no dependency from here on.
			j.Dependency = ""
			s.markDirty(j)
			s.event(j, api.EventUpdate, "", "dependency satisfied", "")
		}
		if j.Reason.Dependency() {
			s.setPendingReason(j, api.ReasonNone, "")
		}
		return true, nil
	}
	if corr {
		// The other items allow it when the per-task check passes.
		return true, d
	}
	s.setPendingReason(j, api.ReasonDependency, "")
	return false, nil
}

// dependencyFailed marks pending j as never satisfiable, and cancels it
// when it asked for --kill-on-invalid-dep. Called with mu held.
func (s *Server) dependencyFailed(j *api.Job, now time.Time) {
	if !j.KillInvalidDep {
		s.setPendingReason(j, api.ReasonDependencyNeverSatisfied, "")
		return
	}
	if !s.transition(j, state.Change{To: api.StateCancelled, Reason: api.ReasonDependencyNeverSatisfied, At: now}) {
		return
	}
	s.markDirty(j)
	s.event(j, api.EventCancel, string(api.ReasonDependencyNeverSatisfied),
		"cancelled: dependency "+j.Dependency+" can never be satisfied (--kill-on-invalid-dep)", "")
	s.metrics.ended(api.StateCancelled)
	s.Kick()
}

// evalDeps returns a copy of d with each item's state decided for job j
// (task t of an array, or -1 for a whole job or meta record, where
// aftercorr items stay unfulfilled). Decided items keep their state.
func (s *Server) evalDeps(d *api.Dependency, j *api.Job, t int, ix *jobIndex, now time.Time) *api.Dependency {
	out := &api.Dependency{Any: d.Any, Items: make([]api.DepItem, len(d.Items))}
	copy(out.Items, d.Items)
	for i := range out.Items {
		it := &out.Items[i]
		switch {
		case it.Kind == api.DepSingleton:
			// Re-decided every pass: another job of the name may start.
			k := nameKey{j.UserID, j.Name}
			first, pending := ix.firstSingleton[k]
			it.State = api.DepUnfulfilled
			if !ix.busyNames[k] && (!pending || first == j.ID || j.ArrayJobID != 0 && first == j.ArrayJobID) {
				it.State = api.DepFulfilled
			}
		case it.State != api.DepUnfulfilled:
		case it.Kind == api.DepAfterCorr && t < 0 && j.IsArrayMeta():
		case it.Kind == api.DepAfterCorr && t >= 0:
			it.State = s.corrState(it.JobID, t, ix)
		default:
			it.State = depState(it.Kind, s.depRecords(*it, ix), it.Minutes, now)
		}
	}
	return out
}

// corrState is aftercorr for task t: afterok on task t of array id. A
// task the other array does not have does not hold anything up.
func (s *Server) corrState(id uint64, t int, ix *jobIndex) api.DepState {
	recs := ix.arrays[id]
	if len(recs) == 0 {
		if j := s.jobs[id]; j != nil {
			return depState(api.DepAfterOK, []*api.Job{j}, 0, time.Time{})
		}
		return api.DepFulfilled
	}
	rec := taskRecord(recs, t)
	if rec == nil {
		return api.DepFulfilled
	}
	return depState(api.DepAfterOK, []*api.Job{rec}, 0, time.Time{})
}

// taskRecord finds the record of task t among an array's records: its
// own, or the meta record that still holds it.
func taskRecord(recs []*api.Job, t int) *api.Job {
	for _, r := range recs {
		if r.IsArrayMeta() && r.ArrayPending.Contains(t) || !r.IsArrayMeta() && r.ArrayTaskID == t {
			return r
		}
	}
	return nil
}

// depRecords are the records an item waits for: a job, every record of
// an array, or one array task. None means the job was forgotten (it
// finished long ago), which like Slurm lifts the condition.
func (s *Server) depRecords(it api.DepItem, ix *jobIndex) []*api.Job {
	recs := ix.arrays[it.JobID]
	if it.HasTask {
		if r := taskRecord(recs, it.Task); r != nil {
			return []*api.Job{r}
		}
		return nil
	}
	if len(recs) > 0 {
		return recs
	}
	if j := s.jobs[it.JobID]; j != nil {
		return []*api.Job{j}
	}
	return nil
}

// depState applies one kind to the records it waits for (an array's
// meta record stands for its unstarted tasks):
//
//   - after: all have started (or were cancelled), plus the +minutes;
//   - afterany: all have ended;
//   - afterok: all completed; fails as soon as one ended otherwise;
//   - afternotok: all ended and one did not complete; fails when all
//     completed.
func depState(kind string, recs []*api.Job, minutes int, now time.Time) api.DepState {
	if len(recs) == 0 {
		return api.DepFulfilled
	}
	ended, notOK := 0, 0
	for _, r := range recs {
		switch {
		case r.State.Terminal():
			ended++
			if r.State != api.StateCompleted {
				notOK++
			}
		case kind == api.DepAfter && r.State != api.StatePending:
		default:
			if kind == api.DepAfter {
				return api.DepUnfulfilled
			}
		}
		if kind == api.DepAfter && minutes > 0 &&
			(r.StartTime.IsZero() || now.Before(r.StartTime.Add(time.Duration(minutes)*time.Minute))) {
			return api.DepUnfulfilled
		}
	}
	all := ended == len(recs)
	switch kind {
	case api.DepAfter:
		return api.DepFulfilled
	case api.DepAfterAny:
		if all {
			return api.DepFulfilled
		}
	case api.DepAfterOK, api.DepAfterCorr:
		if notOK > 0 {
			return api.DepFailed
		}
		if all {
			return api.DepFulfilled
		}
	case api.DepAfterNotOK:
		if all && notOK > 0 {
			return api.DepFulfilled
		}
		if all {
			return api.DepFailed
		}
	}
	return api.DepUnfulfilled
}
