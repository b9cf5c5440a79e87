package sched

import (
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
)

// The tail of a deep queue. Under the default policy a queue of 100,000
// jobs is, past its first few reserved jobs, mostly jobs whose shape
// already failed in the pass (knownFailure): each still paid for its
// gates, its request and its shape, reading a dozen cache lines of its
// Job in priority order, scattered over the heap — most of a pass's
// time at that depth. So the order sorts jobs into classes as it reads
// them (in the snapshot's order, once): jobs of one class differ only in
// what the request does not read (their id, name, limit, ...), so they
// get the same Request and the same shape. Once a job of a class ended
// on a remembered shape failure, a later job of the class is decided
// from that entry of the failed-shape cache without visiting its Job,
// under exactly knownFailure's conditions (tailDecision).

// classKey is what a job's request and gates read, but for the hold,
// the begin time and the time limit (checked per job). A job with -w,
// -x, --switches or several partitions has no class: its request
// depends on more (node marks, its eligible time, each partition).
type classKey struct {
	part                                                  string
	nodes, maxNodes, tasks, tasksPerNode, cpusPerTask     int
	memPerNode, memPerCPU, memPerGPU                      int64
	cpusPerGPU, gpus, gpusPerNode, gpusPerTask, gpuShards int
	gpuType, comm, constraint                             string
	gpuMem, tmp                                           int64
	gpuPct, minCPUs                                       int
	exclusive, overcommit                                 bool
}

// classOf returns j's class key, or false when j has none (see
// classKey) or stays pending by a gate that reads its Job (held, begin
// time).
func classOf(j *api.Job) (classKey, bool) {
	s := &j.JobSpec
	if j.HoldKind != api.HoldNone || s.Hold || !s.BeginTime.IsZero() || len(s.NodeList) > 0 || len(s.Exclude) > 0 ||
		s.Switches > 0 {
		return classKey{}, false
	}
	part := j.ReqPartition()
	if strings.Contains(part, ",") {
		return classKey{}, false
	}
	return classKey{
		part: part, nodes: s.Nodes, maxNodes: s.MaxNodes, tasks: s.Tasks, tasksPerNode: s.TasksPerNode,
		cpusPerTask: s.CPUsPerTask, memPerNode: s.MemPerNodeMB, memPerCPU: s.MemPerCPUMB, memPerGPU: s.MemPerGPUMB,
		cpusPerGPU: s.CPUsPerGPU, gpus: s.GPUs, gpusPerNode: s.GPUsPerNode, gpusPerTask: s.GPUsPerTask,
		gpuShards: s.GPUShards, gpuType: s.GPUType, comm: s.Comm, constraint: s.Constraint, gpuMem: s.GPUMemMB,
		tmp: s.TmpDiskMB, gpuPct: s.GPUComputePct, minCPUs: s.MinCPUs, exclusive: s.Exclusive, overcommit: s.Overcommit,
	}, true
}

// classes numbers a pass's classes from 1 (0 = no class).
type classes struct {
	ids  map[classKey]int32
	last classKey
	id   int32
}

// reset empties the table for a new pass.
func (c *classes) reset() {
	if c.ids == nil {
		c.ids = map[classKey]int32{}
	}
	clear(c.ids)
	c.id = 0
}

// of returns j's class number (0 = none).
func (c *classes) of(j *api.Job) int32 {
	k, ok := classOf(j)
	if !ok {
		return 0
	}
	if c.id != 0 && k == c.last {
		return c.id
	}
	id, found := c.ids[k]
	if !found {
		id = int32(len(c.ids) + 1)
		c.ids[k] = id
	}
	c.last, c.id = k, id
	return id
}

// count is the number of classes of the pass.
func (c *classes) count() int { return len(c.ids) }

// classFail is, for one class, the failed-shape entry its last job was
// decided by (index into policy.failed, plus 1; 0 = none) and the
// partition its requests are in.
type classFail struct {
	shape int
	part  int
}

// tailReady reports whether the policy's state lets a job's decision
// come from its class: PolicyBackfill past its reservation depth, where
// a job that does not fit makes no reservation, hold or test count, so
// that a remembered failure decides it with no side effect.
func (pol *policy) tailReady() bool {
	return pol.kind == PolicyBackfill && pol.deep()
}

// tailDecision decides job e from its class when the slow path would
// end on the same remembered shape failure: nothing started, held or
// reserved since that entry was written (the same state generation,
// hence the same blocks, holds and shape), and the job's limit passes
// the partition's MaxTime and, when reservations narrowed the nodes, is
// no shorter than the entry's.
func (p *pass) tailDecision(e *entry, pol *policy, plan *Plan) (*failedShape, bool) {
	if noTail || !p.tailApplies(e, pol) {
		return nil, false
	}
	cf := &p.classFails[e.class-1]
	if cf.shape == 0 {
		return nil, false
	}
	f := &pol.failed[cf.shape-1]
	if f.key.anyReserved != p.anyReserved || f.gen != pol.gen(p, plan) {
		return nil, false
	}
	info := p.parts[cf.part].info
	limit := effectiveLimit(e.limit, info)
	if exceedsMaxTime(limit, info) || f.narrowed && limitNanos(limit) < limitNanos(f.limit) {
		return nil, false
	}
	p.tailHits++
	return f, true
}

// noTail is a test hook: it turns tailDecision off, so that tests can
// compare plans made with and without it.
var noTail = false

// noteTail records, for job e's class, the failed-shape entry (index
// plus 1) that decided it, when the policy's state lets later jobs of
// the class be decided from it.
func (p *pass) noteTail(e *entry, pol *policy, shape int) {
	if shape == 0 || !p.tailApplies(e, pol) {
		return
	}
	p.classFails[e.class-1] = classFail{shape: shape, part: p.req.Part}
}

// tailApplies reports whether job e may be decided by, or leave its
// decision to, its class: it has one, the pass is neither probing nor
// in share mode, and the policy is past its reservation depth.
func (p *pass) tailApplies(e *entry, pol *policy) bool {
	return e.class != 0 && !p.probe && p.sh == nil && pol.tailReady()
}
