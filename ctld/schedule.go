package ctld

import (
	"slices"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

func (s *Server) schedConfig() sched.Config {
	return sched.Config{MaxStarts: s.cl.Scheduler.MaxStarts, DefMemPerCPUMB: s.cl.Scheduler.DefMemPerCPUMB}
}

// snapshot builds the scheduler's input from live state. Called with mu
// held; the jobs are shared read-only with the pure core for the pass.
func (s *Server) snapshot() *sched.Snapshot {
	snap := &sched.Snapshot{Partitions: make(map[string]*sched.PartitionInfo, len(s.partitions)), Tree: s.cl.Tree}
	for name, p := range s.partitions {
		snap.Partitions[name] = s.partInfo(p)
	}
	snap.Nodes = make([]sched.NodeInfo, 0, len(s.nodes))
	for _, name := range s.cl.NodeOrder {
		n := s.nodes[name]
		ok, why := n.usable()
		free := make([]int, 0, len(n.GPUs))
		for _, g := range n.GPUs {
			if !slices.Contains(n.AllocGPUs, g.Index) {
				free = append(free, g.Index)
			}
		}
		snap.Nodes = append(snap.Nodes, sched.NodeInfo{
			Name: name, Usable: ok, Unusable: why,
			CPUs: n.CPUs, FreeCPUs: n.CPUs - n.AllocCPUs, MemoryMB: n.MemoryMB, FreeMemMB: n.MemoryMB - n.AllocMemMB,
			GPUModel: n.GPUModel(), GPUs: len(n.GPUs), FreeGPUs: free,
			Idle: n.AllocCPUs == 0 && len(n.AllocGPUs) == 0 && n.AllocMemMB == 0, Switch: n.Switch,
			Matrix: n.matrix,
		})
	}
	for _, j := range s.jobs {
		// Held jobs carry their reason from the hold itself; leaving them
		// out keeps passes cheap when thousands wait on a hold.
		if j.State == api.StatePending && j.HoldKind == api.HoldNone && !j.Hold {
			snap.Pending = append(snap.Pending, j)
		}
	}
	return snap
}

// schedulePass runs the pure core once and applies its plan: starts
// become RUNNING (committed before any node hears of them), and pending
// jobs whose reason changed get a trail entry.
func (s *Server) schedulePass() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	snap := s.snapshot()
	if len(snap.Pending) == 0 {
		return
	}
	t0 := time.Now()
	plan := sched.Schedule(snap, now, s.schedConfig())
	s.lastPass = time.Since(t0)
	s.metrics.pass(s.lastPass)

	touched := map[string]bool{}
	for _, st := range plan.Starts {
		j := s.jobs[st.JobID]
		if j == nil || j.State != api.StatePending {
			continue
		}
		if !s.allocOK(st.Alloc) {
			// The plan no longer matches the nodes (should not happen
			// under one lock); leave the job for the next pass.
			s.log.Error("plan does not fit current state", "job_id", j.ID)
			continue
		}
		j.State, j.Reason, j.ReasonDetail = api.StateRunning, api.ReasonNone, ""
		j.Alloc, j.StartTime, j.LastSchedEval, j.TimeLimit = st.Alloc, now, now, st.TimeLimit
		j.Launched = false
		for _, a := range st.Alloc {
			s.nodes[a.Node].allocate(a)
		}
		host := s.nodes[j.BatchHost()]
		host.batch[j.ID] = j
		touched[host.Name] = true
		s.markDirty(j)
		s.event(j, api.EventStart, "", st.Why, "")
		s.metrics.started(now.Sub(j.SubmitTime))
	}
	for _, d := range plan.Pending {
		j := s.jobs[d.JobID]
		if j == nil {
			continue
		}
		j.LastSchedEval = now
		if j.Reason == d.Reason && j.ReasonDetail == d.Detail {
			continue
		}
		j.Reason, j.ReasonDetail = d.Reason, d.Detail
		s.markDirty(j)
		// Priority reasons change with every queue movement; only real
		// decisions go to the trail.
		if d.Reason != api.ReasonPriority {
			s.event(j, api.EventPending, string(d.Reason), d.Detail, "")
		}
	}
	if !s.flush() {
		return
	}
	for name := range touched {
		s.nodes[name].notify()
	}
}

// allocOK re-verifies a plan's allocation against current node state
// (Nomad's plan apply check): nothing is given twice.
func (s *Server) allocOK(alloc []api.NodeAlloc) bool {
	for _, a := range alloc {
		n := s.nodes[a.Node]
		if n == nil || n.CPUs-n.AllocCPUs < a.CPUs || n.MemoryMB-n.AllocMemMB < a.MemoryMB {
			return false
		}
		for _, g := range a.GPUs {
			if slices.Contains(n.AllocGPUs, g) || g < 0 || g >= len(n.GPUs) {
				return false
			}
		}
	}
	return true
}
