package ctld

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	"github.com/tide-hpc/tide/ctld/state"
)

// ledgerLimits are the bounds of slices of a shared GPU: memory and
// compute up to scheduler.max_gpu_oversubscribe times the GPU's (every
// partition's own ratio is capped by it).
func ledgerLimits(cl *Cluster) state.Limits {
	r := cl.Scheduler.MaxGPUOversubscribe
	if r <= 0 {
		r = 1
	}
	return state.Limits{MemRatio: r, ComputePct: int(math.Floor(100*r + 1e-9))}
}

func (s *Server) schedConfig() sched.Config {
	return sched.Config{MaxStarts: s.cl.Scheduler.MaxStarts, DefMemPerCPUMB: s.cl.Scheduler.DefMemPerCPUMB,
		Policy: s.cl.Policy, StarvationAge: s.cl.Scheduler.StarvationAge, Backfill: s.cl.Scheduler.Backfill(),
		Priority:     s.cl.Scheduler.Priority(s.cl.Policy),
		NoPreemption: !s.cl.Scheduler.Preemption}
}

// snapshot builds the scheduler's input from live state. Called with mu
// held; the jobs are shared read-only with the pure core for the pass.
func (s *Server) snapshot() *sched.Snapshot {
	snap := &sched.Snapshot{Partitions: s.partInfos(), Tree: s.cl.Tree}
	snap.Nodes = make([]sched.NodeInfo, 0, len(s.nodes))
	// Every policy reads them: backfill for its reservations, the
	// others for the blocked job's expected start (squeue --start).
	releases := s.releases()
	for _, name := range s.cl.NodeOrder {
		n := s.nodes[name]
		ok, why := n.usable()
		info := sched.NodeInfo{
			Name: name, Usable: ok, Unusable: why,
			CPUs: n.CPUs, MemoryMB: n.MemoryMB,
			TmpDiskMB: n.TmpDiskMB, GPUModel: n.GPUModel(), GPUs: len(n.GPUs), FreeGPUs: make([]int, 0, len(n.GPUs)),
			Switch: n.Switch, Matrix: n.matrix, GPUMemMB: gpuMemMB(n.GPUs),
			Features: sched.SortedFeatures(n.Features), Releases: releases[name],
		}
		// What is free comes from the ledger the plan is applied to.
		s.ledger.Node(name).Fill(&info)
		if !n.registered {
			// Not heard from since the controller started: its declared
			// size (it is unusable anyway), so that a job that fits it
			// waits for the node (NodeDown) rather than be judged one
			// that can never run (BadConstraints), as every pending job
			// was after a controller restart until the nodes registered.
			c := s.capacity(n)
			info.CPUs, info.MemoryMB, info.GPUs, info.GPUModel, info.GPUMemMB = c.CPUs, c.MemoryMB, c.GPUs, c.GPUModel, c.GPUMemMB
			info.TmpDiskMB = c.TmpDiskMB
			info.Features = c.Features
		}
		snap.Nodes = append(snap.Nodes, info)
	}
	// Held jobs, unmet dependencies and throttled arrays stay out; an
	// array's meta record becomes a few candidate tasks (arrays.go).
	s.addPending(snap)
	s.shareSnapshot(snap)
	return snap
}

// schedulePass runs the pure core once and applies its plan: starts
// become RUNNING (committed before any node hears of them), and pending
// jobs whose reason changed get a trail entry.
func (s *Server) schedulePass() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.releaseBuffered(now)
	s.checkPreemptions(now)
	snap := s.snapshot()
	s.feedUsage(snap, now)
	if len(snap.Pending) == 0 {
		s.flush()
		return
	}
	t0 := time.Now()
	plan := s.schedule(snap, now, s.schedConfig())
	s.lastPass = time.Since(t0)
	s.metrics.pass(s.lastPass)

	touched := map[string]bool{}
	inst := arrayInstances(snap)
	// The plan applier (ctld/state) re-verifies every start against the
	// ledger as the starts before it left it, and takes its resources.
	applied, rejected := s.ledger.Apply(plan.Starts, func(id uint64) bool {
		j := s.planJob(inst, id)
		return j != nil && j.State == api.StatePending && s.startRecordOK(inst, id, j)
	})
	for _, r := range rejected {
		if !errors.Is(r.Err, state.ErrNotStartable) {
			// The plan no longer matches the nodes (should not happen
			// under one lock); the job waits for the next pass.
			s.log.Error("plan does not fit current state", "job_id", r.Start.JobID, "err", r.Err)
		}
	}
	for _, st := range applied {
		j := s.startRecord(inst, st.JobID, s.planJob(inst, st.JobID))
		if !s.transition(j, state.Change{To: api.StateRunning, At: now}) {
			// Apply took the start's resources: give them back.
			s.ledger.Release(st.Alloc)
			for _, a := range st.Alloc {
				s.nodes[a.Node].syncUsage()
			}
			continue
		}
		startPartition(j, &st)
		j.Placement, j.Alloc, j.LastSchedEval, j.TimeLimit = st.Why, st.Alloc, now, st.TimeLimit
		for _, a := range st.Alloc {
			s.nodes[a.Node].syncUsage()
		}
		host := s.nodes[j.BatchHost()]
		host.batch[j.ID] = j
		touched[host.Name] = true
		s.hostJob(j, touched) // issue 21: nodes that run its steps only
		s.markDirty(j)
		s.event(j, api.EventStart, "", startMessage(st.Why, st.Alloc), "")
		s.shareStarted(j, st, snap, &plan)
		s.metrics.started(now.Sub(j.SubmitTime))
	}
	for _, d := range plan.Pending {
		j := s.jobs[d.JobID]
		if j == nil {
			continue
		}
		j.LastSchedEval = now
		s.shareDecision(j, &d)
		if j.Reason == d.Reason && sameDetail(j.ReasonDetail, &d) {
			continue
		}
		detail := decisionDetail(&d)
		j.Reason, j.ReasonDetail = d.Reason, detail
		// A pending job's reason is not written to the store: every pass
		// decides it again, the accounting API reads it from memory
		// (queryAccounting), and the job's record takes it with its next
		// change of state. Under a storm of submissions writing it
		// rewrote every new job's record a second time, after its first
		// pass: 40 % of the passes' CPU (docs/performance.md).
		s.jobsVersion++
		// Priority reasons change with every queue movement; only real
		// decisions go to the trail.
		if d.Reason != api.ReasonPriority {
			s.event(j, api.EventPending, string(d.Reason), detail, "")
		}
	}
	for _, p := range plan.Preemptions {
		s.preempt(p, now)
	}
	if !s.flush() {
		return
	}
	for name := range touched {
		s.nodes[name].notify()
	}
}

// releases lists, per node, what the active jobs hold there and when
// their time limits run out (start + limit), in job id order, for
// backfill's reservations in time. Jobs without a limit are left out:
// nobody knows when they end. Called with mu held.
func (s *Server) releases() map[string][]sched.Release {
	var active []*api.Job
	for _, n := range s.nodes {
		for _, j := range n.batch {
			if j.State.Active() && !suspendedRelease(j) && j.TimeLimit != api.Infinite && j.TimeLimit > 0 && !j.StartTime.IsZero() {
				active = append(active, j)
			}
		}
	}
	slices.SortFunc(active, func(a, b *api.Job) int { return cmp.Compare(a.ID, b.ID) })
	out := map[string][]sched.Release{}
	for _, j := range active {
		at := j.StartTime.Add(time.Duration(j.TimeLimit) * time.Second)
		for _, a := range j.Alloc {
			out[a.Node] = append(out[a.Node], sched.Release{At: at, CPUs: a.CPUs, MemMB: a.MemoryMB, GPUs: a.GPUs})
		}
	}
	return out
}

// startMessage is a start event's message: the placement's why, then
// the allocation in a fixed form, "[alloc gpu01 cpus=4 mem_mb=8192
// gpus=0,1; gpu02 ...]" (gpu_mem_mb= and gpu_pct= follow for slices), so
// that the trail alone says what every incarnation of a job held from
// its start to its end or requeue event; the chaos test
// (test/integration) rebuilds allocation intervals from it.
func startMessage(why string, alloc []api.NodeAlloc) string {
	var b strings.Builder
	if why != "" {
		b.WriteString(why)
		b.WriteByte(' ')
	}
	b.WriteString("[alloc")
	for i, a := range alloc {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(" " + a.Node + " cpus=" + strconv.Itoa(a.CPUs) + " mem_mb=" + strconv.FormatInt(a.MemoryMB, 10))
		if len(a.GPUs) > 0 {
			b.WriteString(" gpus=")
			for k, g := range a.GPUs {
				if k > 0 {
					b.WriteByte(',')
				}
				b.WriteString(strconv.Itoa(g))
			}
		}
		if a.GPUMemMB > 0 {
			b.WriteString(" gpu_mem_mb=" + strconv.FormatInt(a.GPUMemMB, 10))
		}
		if a.GPUComputePct > 0 {
			b.WriteString(" gpu_pct=" + strconv.Itoa(a.GPUComputePct))
		}
	}
	b.WriteByte(']')
	return b.String()
}
