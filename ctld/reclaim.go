package ctld

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// GPU memory reclaim. Slices of a shared GPU commit memory; MPS enforces
// a slice's limit where the node runs it, but without MPS a process can
// use more than its slice, and a partition that oversubscribes
// (gpu_mem_oversubscribe > 1) promises more than the card has. Nodes
// report each GPU's real memory use with heartbeats. When a shared GPU's
// use crosses its high watermark (a fraction of its physical memory),
// planReclaim decides, in this order:
//
//  1. Nothing, when slices already on their way out (COMPLETING) will
//     bring the use back under the watermark.
//  2. Grow: a slice whose processes use more than it committed is grown
//     to its use (rounded up to whole GiB when that fits) if the GPU has
//     that much uncommitted physical memory. Overruns are attributed
//     through the pid → job map the node sends; a GPU with a single
//     slice attributes everything to it. Largest overrun first.
//  3. Nothing more when the GPU is now safe: the slices that stay commit
//     at most the card, cover every overrun, and explain the memory in
//     use. A card filled within its promises is not reclaimed.
//  4. Preempt: otherwise slices are requeued, lowest priority first and
//     the newest among equals, until the use left is under the
//     watermark or the GPU is safe. A victim whose use is unknown ends
//     the round (what it frees is a guess); the controller then waits
//     for fresh readings (reclaimSettle). Only running slices of jobs
//     that may be requeued (not --no-requeue) are preemptible.
//  5. Stuck: when no preemptible slice is left, a message says so.
//
// Without the pid map (a node that cannot tell, or processes outside
// any job's session) step 2 cannot name the slice that overran, so an
// unexplained overrun goes straight to step 4: a lower-priority slice is
// preempted even though it did not overrun.

// reclaimGPU is one shared GPU as reclaim judges it: pure data, built by
// the controller from the heartbeat and the slices' jobs.
type reclaimGPU struct {
	Node  string
	Index int
	// MemoryMB is the GPU's physical memory, UsedMB what the node reports
	// in use by all its processes.
	MemoryMB, UsedMB int64
	// Watermark is the fraction of MemoryMB above which reclaim acts.
	Watermark float64
	Slices    []reclaimSlice
	// Procs are the GPU's processes; ProcJobs maps their pids to jobs.
	Procs    []gres.ProcUsage
	ProcJobs map[int]uint64
}

// reclaimSlice is one slice on the GPU.
type reclaimSlice struct {
	JobID uint64
	// MemMB is the memory the slice commits on this GPU.
	MemMB    int64
	Priority uint32
	Start    time.Time
	// Preemptible: running, and the job may be requeued.
	Preemptible bool
	// Leaving: the job is ending or being requeued already; its memory
	// is on its way out.
	Leaving bool
	// MaxGrowMB bounds how far the slice may grow: one allocation records
	// one slice size for all its GPUs on the node, so a slice that also
	// sits on other GPUs grows on them too (math.MaxInt64 for none).
	MaxGrowMB int64
}

// reclaimKind is what one reclaim step does.
type reclaimKind string

// Reclaim steps.
const (
	reclaimGrow    reclaimKind = "grow"
	reclaimPreempt reclaimKind = "preempt"
	reclaimStuck   reclaimKind = "stuck"
)

// reclaimAction is one step planReclaim decides.
type reclaimAction struct {
	Kind  reclaimKind
	JobID uint64 // for stuck: the largest overrunner known, else 0
	// MemMB is a grown slice's new size.
	MemMB int64
	// Msg is the event message: what was seen and why this step.
	Msg string
}

// growUnitMB rounds grown slices up to whole GiB when memory allows, so
// that a slice creeping up does not grow on every heartbeat.
const growUnitMB = 1024

// planReclaim decides what to do about GPU g (see the comment above). It
// returns nothing when the GPU is under its watermark. Pure: it reads g
// only.
func planReclaim(g reclaimGPU) []reclaimAction {
	high := int64(g.Watermark * float64(g.MemoryMB))
	if g.MemoryMB <= 0 || g.UsedMB <= high || len(g.Slices) == 0 {
		return nil
	}
	use, known := attribute(g)
	est := func(sl *reclaimSlice) int64 {
		if known[sl.JobID] {
			return use[sl.JobID]
		}
		return sl.MemMB
	}
	sl := slices.Clone(g.Slices)
	projected := g.UsedMB
	var committed int64
	for i := range sl {
		committed += sl[i].MemMB
		if sl[i].Leaving {
			projected -= est(&sl[i])
		}
	}
	where := fmt.Sprintf("GPU %d on %s: %s of %s in use, watermark %s", g.Index, g.Node,
		api.FormatMemMB(g.UsedMB), api.FormatMemMB(g.MemoryMB), api.FormatMemMB(high))
	if projected <= high {
		return nil
	}

	// Grow overrunners into uncommitted memory, largest overrun first.
	var out []reclaimAction
	free := g.MemoryMB - committed
	over := func(s *reclaimSlice) int64 {
		if !known[s.JobID] || s.Leaving {
			return 0
		}
		return max(use[s.JobID]-s.MemMB, 0)
	}
	order := make([]int, 0, len(sl))
	for i := range sl {
		if over(&sl[i]) > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(over(&sl[b]), over(&sl[a])), cmp.Compare(sl[a].JobID, sl[b].JobID))
	})
	for _, i := range order {
		s := &sl[i]
		u := use[s.JobID]
		room := min(free, s.MaxGrowMB)
		to := (u + growUnitMB - 1) / growUnitMB * growUnitMB
		if to-s.MemMB > room {
			to = u
		}
		if to-s.MemMB > room {
			continue // stays an uncovered overrun
		}
		out = append(out, reclaimAction{Kind: reclaimGrow, JobID: s.JobID, MemMB: to,
			Msg: fmt.Sprintf("%s; job %d uses %s of its %s slice: grown to %s into uncommitted memory (%s free before)",
				where, s.JobID, api.FormatMemMB(u), api.FormatMemMB(s.MemMB), api.FormatMemMB(to), api.FormatMemMB(free))})
		free -= to - s.MemMB
		s.MemMB = to
	}

	// Preempt until the use left is under the watermark or what stays
	// is safe.
	gone := make([]bool, len(sl))
	for i := range sl {
		gone[i] = sl[i].Leaving
	}
	unsafe := func() string {
		var stay, need, explained int64
		blocked := false // an overrun its other GPUs cannot take
		for i := range sl {
			if gone[i] {
				continue
			}
			o := over(&sl[i])
			stay += sl[i].MemMB
			need += o
			explained += max(est(&sl[i]), sl[i].MemMB)
			blocked = blocked || o > sl[i].MaxGrowMB
		}
		switch {
		case need > 0 && (stay+need > g.MemoryMB || blocked):
			return fmt.Sprintf("slices overran by %s with no uncommitted memory to grow into", api.FormatMemMB(need))
		case stay > g.MemoryMB:
			return fmt.Sprintf("slices commit %s of %s (oversubscribed)", api.FormatMemMB(stay), api.FormatMemMB(g.MemoryMB))
		case projected > explained:
			return fmt.Sprintf("%s in use beyond what the slices commit, not attributable to a job", api.FormatMemMB(projected-explained))
		}
		return ""
	}
	why := unsafe()
	if why == "" {
		return out
	}
	cand := make([]int, 0, len(sl))
	for i := range sl {
		if !gone[i] && sl[i].Preemptible && (est(&sl[i]) > 0 || sl[i].MemMB > 0) {
			cand = append(cand, i)
		}
	}
	slices.SortFunc(cand, func(a, b int) int {
		x, y := &sl[a], &sl[b]
		return cmp.Or(cmp.Compare(x.Priority, y.Priority), y.Start.Compare(x.Start), cmp.Compare(y.JobID, x.JobID))
	})
	for _, i := range cand {
		s := &sl[i]
		out = append(out, reclaimAction{Kind: reclaimPreempt, JobID: s.JobID,
			Msg: fmt.Sprintf("%s; %s: preempted the %s slice of job %d (priority %d, lowest preemptible on the GPU)",
				where, why, api.FormatMemMB(s.MemMB), s.JobID, s.Priority)})
		gone[i] = true
		projected -= est(s)
		if why = unsafe(); projected <= high || why == "" || !known[s.JobID] {
			// Without its real use, what the victim frees is a guess:
			// wait for a reading taken after it is gone.
			return out
		}
	}
	var worst uint64
	var worstOver int64
	for i := range sl {
		if o := over(&sl[i]); !gone[i] && o > worstOver {
			worst, worstOver = sl[i].JobID, o
		}
	}
	return append(out, reclaimAction{Kind: reclaimStuck, JobID: worst,
		Msg: fmt.Sprintf("%s; %s: no preemptible slice left to reclaim", where, why)})
}

// attribute sums the GPU's per-process memory by job, for the slices on
// the GPU. known marks the jobs with at least one attributed process. A
// GPU with a single slice and nothing attributed charges all its use to
// that slice.
func attribute(g reclaimGPU) (use map[uint64]int64, known map[uint64]bool) {
	use, known = map[uint64]int64{}, map[uint64]bool{}
	on := make(map[uint64]bool, len(g.Slices))
	for _, s := range g.Slices {
		on[s.JobID] = true
	}
	for _, p := range g.Procs {
		id, ok := g.ProcJobs[p.PID]
		if !ok || !on[id] || p.MemMB < 0 {
			continue
		}
		use[id] += p.MemMB
		known[id] = true
	}
	if len(g.Slices) == 1 && len(known) == 0 {
		use[g.Slices[0].JobID], known[g.Slices[0].JobID] = g.UsedMB, true
	}
	return use, known
}

// reclaimGPUs runs reclaim on every shared GPU of n that a heartbeat
// shows over its watermark, and applies the steps: grown slices are
// recorded in their job's allocation, preempted ones requeued, each with
// an event. Changes are flushed before the node's commands are built, so
// that a preemption's kill goes out with this very answer. Called with mu
// held.
func (s *Server) reclaimGPUs(n *nodeRec, st []gres.Status, procJobs map[int]uint64) {
	if len(n.SharedGPUs) == 0 {
		clear(n.reclaimStuck)
		return
	}
	lowest := 1.0
	for _, p := range s.partitions {
		lowest = min(lowest, watermarkOf(p))
	}
	var hot []gres.Status
	for _, g := range st {
		sh := n.gpuShare(g.Index)
		if sh.Slices == 0 {
			delete(n.reclaimStuck, g.Index)
			continue
		}
		if float64(g.MemUsedMB) > lowest*float64(n.GPUMemoryMB(g.Index)) {
			hot = append(hot, g)
		} else {
			delete(n.reclaimStuck, g.Index)
		}
	}
	if len(hot) == 0 {
		return
	}
	acted := false
	now := s.now()
	for _, g := range hot {
		in := s.reclaimInput(n, g, procJobs)
		stuck := ""
		settling := now.Before(n.reclaimHold[g.Index])
		for _, a := range planReclaim(in) {
			j := s.jobs[a.JobID]
			if settling && a.Kind != reclaimGrow {
				// Grows are idempotent (to the use seen); preemptions
				// wait for a reading taken after the last one.
				stuck = n.reclaimStuck[g.Index]
				continue
			}
			switch a.Kind {
			case reclaimGrow:
				s.growSlice(n, g.Index, j, a)
				acted = true
			case reclaimPreempt:
				s.log.Warn("GPU memory reclaim: preempting slice", "node", n.Name, "gpu", g.Index, "job_id", a.JobID, "why", a.Msg)
				s.event(j, api.EventReclaim, string(api.ReasonGPUMemReclaim), a.Msg, "")
				s.requeueActive(j, api.ReasonGPUMemReclaim, "requeued before launch: "+a.Msg)
				s.metrics.reclaimed(reclaimPreempt)
				n.reclaimHold[g.Index] = now.Add(reclaimSettle)
				acted = true
			case reclaimStuck:
				stuck = strconv.FormatUint(a.JobID, 10)
				if n.reclaimStuck[g.Index] != stuck {
					s.log.Error("GPU memory reclaim stuck", "node", n.Name, "gpu", g.Index, "why", a.Msg)
					if j != nil {
						s.event(j, api.EventReclaim, string(api.ReasonGPUMemReclaim), a.Msg, "")
						s.markDirty(j)
						acted = true
					}
					s.metrics.reclaimed(reclaimStuck)
				}
			}
		}
		if stuck == "" {
			delete(n.reclaimStuck, g.Index)
		} else {
			n.reclaimStuck[g.Index] = stuck
		}
	}
	if acted {
		s.flush()
	}
}

// reclaimSettle is how long reclaim leaves a GPU alone after preempting
// there: a node reads GPU usage every few seconds and repeats the last
// reading with every heartbeat, and the victim's memory is freed only
// once its processes are gone, so acting on the same stale reading again
// would preempt a second slice for the same pressure.
const reclaimSettle = 15 * time.Second

// watermarkOf is a partition's high watermark (the default when unset).
func watermarkOf(p *api.Partition) float64 {
	if p == nil || p.GPUMemHighWatermark <= 0 {
		return DefaultGPUMemHighWatermark
	}
	return p.GPUMemHighWatermark
}

// reclaimInput gathers what planReclaim needs about GPU g of n: the
// slices on it from the active jobs, and the lowest watermark of their
// partitions. Called with mu held.
func (s *Server) reclaimInput(n *nodeRec, g gres.Status, procJobs map[int]uint64) reclaimGPU {
	in := reclaimGPU{Node: n.Name, Index: g.Index, MemoryMB: n.GPUMemoryMB(g.Index), UsedMB: g.MemUsedMB,
		Procs: g.Processes, ProcJobs: procJobs, Watermark: 1}
	for _, j := range s.jobs {
		if !j.State.Active() {
			continue
		}
		for _, a := range j.Alloc {
			if a.Node != n.Name || !a.Sliced() || !slices.Contains(a.GPUs, g.Index) {
				continue
			}
			grow := int64(math.MaxInt64)
			for _, o := range a.GPUs {
				if o != g.Index {
					grow = min(grow, max(n.GPUMemoryMB(o)-n.gpuShare(o).MemMB, 0))
				}
			}
			in.Slices = append(in.Slices, reclaimSlice{JobID: j.ID, MemMB: a.GPUMemMB, Priority: j.EffPriority,
				Start: j.StartTime, Leaving: j.State != api.StateRunning, MaxGrowMB: grow,
				Preemptible: j.State == api.StateRunning && !j.CancelRequested && !j.RequeueRequested &&
					(j.Requeue == nil || *j.Requeue)})
			in.Watermark = min(in.Watermark, watermarkOf(s.partitions[j.Partition]))
		}
	}
	slices.SortFunc(in.Slices, func(a, b reclaimSlice) int { return cmp.Compare(a.JobID, b.JobID) })
	return in
}

// growSlice records a grown slice in j's allocation on n (every GPU of
// the allocation on n grows, as the allocation has one slice size) and
// in the node's shared GPUs. Called with mu held.
func (s *Server) growSlice(n *nodeRec, gpu int, j *api.Job, a reclaimAction) {
	k := slices.IndexFunc(j.Alloc, func(x api.NodeAlloc) bool {
		return x.Node == n.Name && x.Sliced() && slices.Contains(x.GPUs, gpu)
	})
	if k < 0 {
		return
	}
	// Copy on write: listings may share the allocation outside the lock.
	j.Alloc = slices.Clone(j.Alloc)
	n.release(j.Alloc[k])
	j.Alloc[k].GPUMemMB = a.MemMB
	n.allocate(j.Alloc[k]) // the slice ran over: it holds what it took

	s.markDirty(j)
	s.event(j, api.EventReclaim, string(api.ReasonGPUMemReclaim), a.Msg, "")
	s.metrics.reclaimed(reclaimGrow)
	s.log.Info("GPU memory reclaim: slice grown", "node", n.Name, "gpu", gpu, "job_id", j.ID, "gpu_mem_mb", a.MemMB)
}
