package steps

import (
	"slices"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/stepd"
)

// Usage accounting of steps (issue 22): the daemon samples the running
// steps' tasks (Units) with the rest of the node's processes, and takes
// each step's final usage at its end (Host.StepEnded).

// Unit is the part of a running step on this node, as the daemon's
// usage sampler sees it.
type Unit struct {
	Ref  api.JobRef
	Step uint32
	// Tasks maps the pid of each task still running to its global rank.
	Tasks map[int]int
}

// StepUsage is the final usage of a step's part on this node.
type StepUsage struct {
	Ref  api.JobRef
	Step uint32
	// Tasks is what each reaped task's wait told (rusage), by rank.
	Tasks map[int]api.TaskUsage
	// Cgroup holds the totals of the step cgroup made for the step,
	// which also count processes that left the tasks' trees (nil: no
	// such cgroup, or no CPU totals in it).
	Cgroup *api.CgroupTotals
	// InJobCgroup: the tasks ran in the batch script's job cgroup, whose
	// totals then are not the script's alone.
	InJobCgroup bool
}

// Units lists the steps running here, each with its tasks still
// running (a step whose tasks all ended is listed with none).
func (s *Server) Units() []Unit {
	s.mu.Lock()
	runs := make([]*stepRun, 0, len(s.running))
	for r := range s.running {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	out := make([]Unit, 0, len(runs))
	for _, r := range runs {
		u := Unit{Ref: api.JobRef{JobID: r.g.JobID, Restart: r.g.Restart}, Step: r.g.StepID, Tasks: map[int]int{}}
		r.mu.Lock()
		for _, t := range r.tasks {
			if t.cmd != nil && t.cmd.Process != nil && !t.done {
				u.Tasks[t.cmd.Process.Pid] = t.rank
			}
		}
		r.mu.Unlock()
		out = append(out, u)
	}
	return out
}

// stepUsageEnd hands the host the final usage of step run r on this
// node. It is called once every task of r has been reaped and before
// r's cgroup is removed (serve, after allDone).
func (s *Server) stepUsageEnd(r *stepRun) {
	g := r.g
	r.mu.Lock()
	tasks := slices.Clone(r.tasks)
	r.mu.Unlock()
	u := StepUsage{Ref: api.JobRef{JobID: g.JobID, Restart: g.Restart}, Step: g.StepID, Tasks: map[int]api.TaskUsage{}}
	for _, t := range tasks {
		if t.cmd != nil && t.cmd.ProcessState != nil {
			u.Tasks[t.rank] = stepd.RusageTask(t.cmd.ProcessState, t.rank)
		}
	}
	if f := r.fence; f != nil {
		switch {
		case f.step != nil:
			if st, err := f.step.Stats(); err == nil && st.HasCPU {
				u.Cgroup = &api.CgroupTotals{UserUsec: st.UserUsec, SystemUsec: st.SystemUsec,
					HasIO: st.HasIO, ReadBytes: st.ReadBytes, WriteBytes: st.WriteBytes}
			}
		case f.join != nil:
			u.InJobCgroup = true // the batch script's job cgroup
		}
	}
	s.host.StepEnded(u)
}
