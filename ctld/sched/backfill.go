package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Policy decides what the jobs behind one that does not fit may do. The
// pass always takes jobs in priority order; the policies differ only in
// which later jobs may still start.
//
//   - PolicyPriority (Tide's default, Slurm's main scheduler without
//     backfill): a job pending for Resources reserves, for the rest of
//     the pass, every node it could use (blocking.go). Later jobs start
//     only on other nodes (another GPU model, nodes outside its -w, nodes
//     too small for it).
//   - PolicyFIFO: strict order. Once a job that passed its gates does not
//     fit (Resources, Topology, or turned away by a reserved node), every
//     later job of the pass, in any partition, is pending for Priority.
//     Jobs that cannot start by waiting for running jobs (held, begin
//     time, partition limits, NodeDown, BadConstraints) block nothing, or
//     one broken job would stop the cluster.
//   - PolicyBackfill: EASY backfill. The first job pending for Resources
//     gets a reservation in time: the earliest instant at which it fits
//     once running jobs end at their time limits (NodeInfo.Releases, plus
//     the jobs started earlier in the same pass), and the nodes it would
//     get then. A later job may start if it ends (now + its time limit)
//     no later than that instant, anywhere; or, ending later, on nodes
//     the reservation does not hold (reservations are per node, as
//     Slurm's backfill reserves node bitmaps). Only the first blocked job
//     is protected (EASY, not conservative backfill). When no reservation
//     can be computed (jobs without time limits hold what it needs), the
//     pass falls back to PolicyPriority's node holds. Config.BackfillDepth
//     gives the next blocked jobs reservations too (on nodes the earlier
//     ones do not hold, replaying the same releases); a later job then
//     ignores the holds only when it ends by the earliest reservation.
//     Starts behind a reservation are marked Start.Backfilled, and a
//     reserved job's Decision.ExpectedStart is its reservation.
type Policy int

// The policies; the zero value is the default.
const (
	PolicyPriority Policy = iota
	PolicyFIFO
	PolicyBackfill
)

// policyNames are the names ParsePolicy reads and String writes.
var policyNames = []string{PolicyPriority: "priority", PolicyFIFO: "fifo", PolicyBackfill: "backfill"}

// String names the policy as ParsePolicy reads it.
func (pl Policy) String() string {
	if pl >= 0 && int(pl) < len(policyNames) {
		return policyNames[pl]
	}
	return fmt.Sprintf("Policy(%d)", int(pl))
}

// ParsePolicy reads a policy name (case-insensitive): priority (also ""
// and "default"), fifo or backfill, so that configs and the simulator's
// flags share one spelling.
func ParsePolicy(s string) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "default", "priority":
		return PolicyPriority, nil
	case "fifo":
		return PolicyFIFO, nil
	case "backfill":
		return PolicyBackfill, nil
	}
	return 0, api.Invalid("scheduling policy %q is not priority, fifo or backfill", s)
}

// Backfill reservation states of a pass.
const (
	bfNone     = iota // no job has been blocked yet
	bfTimed           // the first blocked job holds nodes from bfAt
	bfFallback        // no time could be computed: priority holds
)

// policy is the per-pass state of cfg.Policy.
type policy struct {
	kind Policy
	now  time.Time

	fifoBlocked bool

	bf int
	// bfAt is the earliest reservation's start; depth bounds the
	// reservations (Config.BackfillDepth) and bfDone stops them after
	// one could not be computed.
	bfAt   time.Time
	depth  int
	bfDone bool
	// reservations is what Plan.Reservations reports.
	reservations []Reservation
	// estimates are the expected starts computed for blocked jobs under
	// PolicyPriority and PolicyFIFO (estimate), which hold no nodes in
	// time; at most depth of them.
	estimates []Reservation
	// started records the releases of jobs started earlier in the pass
	// (until a reservation is made), which the snapshot cannot know.
	started []relEvent
	// Scratch of reserveInTime.
	keys []relKey
	offs []int32
	fits []bool

	// failed caches the decisions of shapes that did not fit (a queue
	// has few shapes: a slice beats a map's hashing).
	failed []failedShape
}

// relEvent is the release of a job started in the pass.
type relEvent struct {
	at   int64 // Unix nanoseconds: cheaper to compare than time.Time
	node int
	cpus int
	mem  int64
	gpus []int
}

func newPolicy(cfg Config, now time.Time) *policy {
	return &policy{kind: cfg.Policy, now: now, depth: max(cfg.BackfillDepth, 1)}
}

// blocks reports whether job r, which passed its gates, is pending for
// Priority without a node scan. For a backfill job that ends before the
// reservation it also lifts the node holds from r's filter chain.
func (pol *policy) blocks(p *pass, r *Request) bool {
	switch pol.kind {
	case PolicyFIFO:
		return pol.fifoBlocked
	case PolicyBackfill:
		if pol.bf == bfTimed && pol.endsBy(r.TimeLimit, pol.bfAt) {
			if r.AnyReserved {
				r.AnyReserved = false
				p.chain.prepare(r)
			}
			return false
		}
		if pol.moreReservations() {
			// The job may still get a reservation of its own.
			return false
		}
	}
	return p.blockedByPriority(r.Part)
}

// endsBy reports whether a job with limit (seconds) started now ends no
// later than at.
func (pol *policy) endsBy(limit int64, at time.Time) bool {
	if limit == api.Infinite || limit < 0 {
		return false
	}
	return !pol.now.Add(time.Duration(limit) * time.Second).After(at)
}

// noFit applies the policy to job r, which passed its gates and did not
// start, for reason.
func (pol *policy) noFit(p *pass, r *Request, reason api.ReasonCode) {
	switch pol.kind {
	case PolicyPriority:
		if reason == api.ReasonResources {
			pol.estimate(p, r)
			p.holdForPriority(r)
		}
	case PolicyFIFO:
		if reason.Blocks() {
			if reason == api.ReasonResources && !pol.fifoBlocked {
				pol.estimate(p, r)
			}
			pol.fifoBlocked = true
		}
	case PolicyBackfill:
		if pol.moreReservations() && (reason == api.ReasonResources || reason == api.ReasonPriority) {
			// Deeper backfill: the next blocked jobs get reservations
			// too, on nodes the earlier ones do not hold.
			if at, ok := pol.reserveInTime(p, r, true); ok {
				if at.Before(pol.bfAt) {
					pol.bfAt = at
				}
			} else {
				pol.bfDone = true
			}
			return
		}
		if reason != api.ReasonResources && !(reason == api.ReasonPriority && pol.bf == bfNone) {
			// Before any reservation, nodes can only be held for
			// preemptors: a job they turn away is blocked too.
			return
		}
		switch pol.bf {
		case bfNone:
			if at, ok := pol.reserveInTime(p, r, true); ok {
				pol.bf, pol.bfAt = bfTimed, at
				return
			}
			pol.bf = bfFallback
			p.holdForPriority(r)
		case bfFallback:
			p.holdForPriority(r)
		}
	}
}

// onStart records the resources of a job started in this pass, so that a
// later reservation knows when they come back.
func (pol *policy) onStart(p *pass, s *Start) {
	if s.TimeLimit == api.Infinite || s.TimeLimit < 0 {
		return
	}
	switch pol.kind {
	case PolicyBackfill:
		if !(pol.bf == bfNone || pol.moreReservations()) {
			return
		}
	default:
		if len(pol.estimates) >= pol.depth {
			return
		}
	}
	at := pol.now.Add(time.Duration(s.TimeLimit) * time.Second).UnixNano()
	for _, a := range s.Alloc {
		if i, ok := p.byName[a.Node]; ok {
			pol.started = append(pol.started, relEvent{at: at, node: i, cpus: a.CPUs, mem: a.MemoryMB, gpus: a.GPUs})
		}
	}
}

// moreReservations reports whether a timed reservation exists and more
// blocked jobs may get one (Config.BackfillDepth).
func (pol *policy) moreReservations() bool {
	return pol.kind == PolicyBackfill && pol.bf == bfTimed && !pol.bfDone && len(pol.reservations) < pol.depth
}

// expected returns the reservation's start of job id when the pass
// just reserved for it, or the estimate it just computed for it.
func (pol *policy) expected(id uint64) (time.Time, bool) {
	if n := len(pol.reservations); n > 0 && pol.reservations[n-1].JobID == id {
		return pol.reservations[n-1].At, true
	}
	if n := len(pol.estimates); n > 0 && pol.estimates[n-1].JobID == id {
		return pol.estimates[n-1].At, true
	}
	return time.Time{}, false
}

// estimate computes, for job r blocked for Resources under
// PolicyPriority or PolicyFIFO, when it is expected to start (squeue
// --start): the instant reserveInTime finds, without holding nodes for
// it in time (those policies hold nodes for the rest of the pass only).
// Slurm's builtin scheduler estimates start times the same way. Only the
// first Config.BackfillDepth blocked jobs (at least one) get one.
func (pol *policy) estimate(p *pass, r *Request) {
	if len(pol.estimates) >= pol.depth {
		return
	}
	if at, ok := pol.reserveInTime(p, r, false); ok {
		pol.estimates = append(pol.estimates, Reservation{JobID: r.Job.ID, At: at})
	}
}

// reserveInTime finds the earliest instant at which r fits, replaying the
// releases of running jobs in time order on a copy of the pass's nodes,
// and holds the nodes it would get then. It uses the same filters and
// node choice as a start, on the copy.
//
// It runs once per pass with a blocked job, over every running job, so
// it keeps the work per release small: events are sorted as 16-byte keys
// that hold no pointers, the copy is two allocations, and the full node
// choice (find) runs only at instants where enough partition nodes pass
// the filters for r's smallest slot, a count kept per release.
//
// hold false only computes the instant: no node is held and no
// reservation is recorded (pol.estimate).
func (pol *policy) reserveInTime(p *pass, r *Request, hold bool) (time.Time, bool) {
	if p.anyReserved && !r.AnyReserved {
		// Nodes held for earlier jobs stay theirs in the future too.
		r.AnyReserved = true
		p.chain.prepare(r)
	}
	keys := pol.keys[:0]
	now := pol.now.UnixNano()
	offs := slices.Grow(pol.offs[:0], len(p.nodes))[:len(p.nodes)]
	for i := range p.nodes {
		offs[i] = int32(len(keys))
		for _, rel := range p.nodes[i].Info.Releases {
			// Overdue jobs end any moment.
			at := max(rel.At.UnixNano(), now)
			keys = append(keys, relKey{at: at, ord: int32(len(keys)), node: int32(i)})
		}
	}
	nRel := int32(len(keys))
	for k, e := range pol.started {
		keys = append(keys, relKey{at: e.at, ord: nRel + int32(k), node: int32(e.node)})
	}
	pol.keys, pol.offs = keys, offs
	if len(keys) == 0 {
		return time.Time{}, false
	}
	slices.SortFunc(keys, func(a, b relKey) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.ord, b.ord)
	})

	needGPUs, needCPUs := 0, 0
	for _, s := range r.Slots {
		needGPUs += s.GPUs
		needCPUs += s.CPUs
	}
	smallest := &r.Slots[len(r.Slots)-1]
	future := make([]NodeState, len(p.nodes))
	size := 0
	for i := range p.nodes {
		size += max(p.nodes[i].Info.GPUs, len(p.nodes[i].FreeGPUs))
	}
	gpuBuf := make([]int, size)
	freeGPUs, freeCPUs, fitting := 0, 0, 0
	// fits marks partition nodes that pass the filters for the smallest
	// slot: find cannot succeed while fewer than r.Nodes do.
	fits := slices.Grow(pol.fits[:0], len(p.nodes))[:len(p.nodes)]
	for i := range p.nodes {
		n := p.nodes[i]
		c := max(n.Info.GPUs, len(n.FreeGPUs))
		n.FreeGPUs = append(gpuBuf[:0:c], n.FreeGPUs...)
		gpuBuf = gpuBuf[c:]
		future[i] = n
		fits[i] = false
		if n.Usable && p.inPartition(i, r.Part) {
			freeGPUs += len(n.FreeGPUs)
			freeCPUs += n.FreeCPUs
			if p.chain.check(r, smallest, &future[i]) == "" {
				fits[i] = true
				fitting++
			}
		}
	}
	pol.fits = fits

	saved := p.nodes
	defer func() { p.nodes = saved }()
	for k := 0; k < len(keys); {
		at := keys[k].at
		for ; k < len(keys) && keys[k].at == at; k++ {
			key := keys[k]
			i := int(key.node)
			n := &future[i]
			before, cpus := len(n.FreeGPUs), n.FreeCPUs
			if key.ord < nRel {
				rel := &n.Info.Releases[key.ord-offs[i]]
				release(n, rel.CPUs, rel.MemMB, rel.GPUs)
			} else {
				e := &pol.started[key.ord-nRel]
				release(n, e.cpus, e.mem, e.gpus)
			}
			if n.Usable && p.inPartition(i, r.Part) {
				freeGPUs += len(n.FreeGPUs) - before
				freeCPUs += n.FreeCPUs - cpus
				if !fits[i] && p.chain.check(r, smallest, n) == "" {
					fits[i] = true
					fitting++
				}
			}
		}
		if freeGPUs < needGPUs || freeCPUs < needCPUs || fitting < r.Nodes {
			continue
		}
		p.nodes = future
		ok := p.find(r)
		p.nodes = saved
		if ok && !hold {
			return time.Unix(0, at).In(pol.now.Location()), true
		}
		if ok {
			res := Reservation{JobID: r.Job.ID, At: time.Unix(0, at).In(pol.now.Location()), Nodes: make([]string, len(p.picked))}
			for k, i := range p.picked {
				p.reserve(i)
				res.Nodes[k] = p.nodes[i].Info.Name
			}
			pol.reservations = append(pol.reservations, res)
			return res.At, true
		}
	}
	return time.Time{}, false
}

// relKey is one release in the replay order of reserveInTime: by time,
// then input order (ord: the nodes' Releases node by node, then the
// pass's own starts).
type relKey struct {
	at   int64
	ord  int32
	node int32
}

// release gives cpus, mem and gpus back to n (capped at the node's size,
// so inconsistent input cannot create resources) and marks n idle when
// nothing is held any more.
func release(n *NodeState, cpus int, mem int64, gpus []int) {
	info := n.Info
	n.FreeCPUs = min(n.FreeCPUs+cpus, info.CPUs)
	n.FreeMemMB = min(n.FreeMemMB+mem, info.MemoryMB)
	for _, g := range gpus {
		if k, found := slices.BinarySearch(n.FreeGPUs, g); !found {
			n.FreeGPUs = slices.Insert(n.FreeGPUs, k, g)
		}
	}
	n.Idle = n.FreeCPUs >= info.CPUs && n.FreeMemMB >= info.MemoryMB && len(n.FreeGPUs) >= info.GPUs
}

// closed lists the partitions where a job ordered after every job of the
// pass would be pending whatever its shape (see Plan.Closed).
func (pol *policy) closed(p *pass, plan *Plan) []string {
	all := pol.fifoBlocked || p.cfg.MaxStarts > 0 && len(plan.Starts) >= p.cfg.MaxStarts
	var out []string
	for pi := range p.parts {
		// Under a timed backfill reservation a short job may still pass.
		if all || p.blockedByPriority(pi) && !(pol.kind == PolicyBackfill && pol.bf == bfTimed) {
			out = append(out, p.parts[pi].info.Name)
		}
	}
	return out
}

// A deep queue holds many jobs of the same shape. Within a pass
// resources only shrink and holds only grow, so once a job of some shape
// failed to fit, the next job of that shape fails the same way for as
// long as nothing was started or held in between. The pass then reuses
// the decision instead of scanning the partition again; that is what
// keeps backfill (where most jobs are scanned) linear in the queue.

// shapeKey is what decides a node scan's outcome for jobs without -w,
// -x or --switches whose slots are all alike.
type shapeKey struct {
	part, nodes                       int
	slot                              Slot
	gpuType                           string
	exclusive, nvlink, anyReserved, s bool
	// tmp is --tmp and features the parsed --constraint (one per
	// constraint string in a pass), which turn nodes away by their
	// fixed properties.
	tmp      int64
	features *Constraint
}

// stateGen changes whenever the pass starts a job, holds a node or
// changes its backfill state.
type stateGen struct{ starts, reserved, bf int }

type failedShape struct {
	key    shapeKey
	gen    stateGen
	reason api.ReasonCode
	detail string
}

// shapeOf returns r's key, or false when r's outcome depends on more
// than its shape.
func shapeOf(r *Request) (shapeKey, bool) {
	if len(r.Slots) == 0 || len(r.Required) > 0 || r.Excludes || r.MaxLeaves > 0 || r.Slots[0] != r.Slots[len(r.Slots)-1] ||
		r.FeatureErr != "" {
		return shapeKey{}, false
	}
	return shapeKey{part: r.Part, nodes: r.Nodes, slot: r.Slots[0], gpuType: strings.ToLower(r.GPUType),
		exclusive: r.Exclusive, nvlink: r.NVLinkOnly, anyReserved: r.AnyReserved, s: r.Sliced, tmp: r.TmpDiskMB, features: r.Features}, true
}

func (pol *policy) gen(p *pass, plan *Plan) stateGen {
	g := stateGen{starts: len(plan.Starts), bf: pol.bf}
	for i := range p.parts {
		g.reserved += p.parts[i].reserved
	}
	return g
}

// knownFailure returns the decision of an earlier job of r's shape when
// nothing changed since.
func (pol *policy) knownFailure(p *pass, r *Request, plan *Plan) (api.ReasonCode, string, bool) {
	if len(pol.failed) == 0 {
		return "", "", false
	}
	k, ok := shapeOf(r)
	if !ok {
		return "", "", false
	}
	for i := range pol.failed {
		if f := &pol.failed[i]; f.key == k {
			if f.gen != pol.gen(p, plan) {
				return "", "", false
			}
			return f.reason, f.detail, true
		}
	}
	return "", "", false
}

// remember records the decision of r, which did not fit, after the
// policy acted on it.
func (pol *policy) remember(p *pass, r *Request, plan *Plan, reason api.ReasonCode, detail string) {
	k, ok := shapeOf(r)
	if !ok {
		return
	}
	f := failedShape{key: k, gen: pol.gen(p, plan), reason: reason, detail: detail}
	for i := range pol.failed {
		if pol.failed[i].key == k {
			pol.failed[i] = f
			return
		}
	}
	pol.failed = append(pol.failed, f)
}
