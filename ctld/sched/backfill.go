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
//   - PolicyBackfill: Slurm's backfill (sched/backfill). The pass keeps a
//     plan in time of every node's free resources (timeline.go): running
//     jobs end at their time limits (NodeInfo.Releases), jobs started in
//     the pass at theirs, and each reservation made in the pass holds
//     what its job needs from its start to its end. Jobs are tested in
//     priority order; a job starts now only where it leaves every
//     reservation its resources for its whole limit, and a job that
//     cannot start (Resources, or Priority when only reservations stand
//     in its way) gets a reservation at the earliest instant it fits for
//     its whole limit, so no later job can delay it. Once a job of a
//     partition could not start, the partition's later jobs count
//     against BackfillConfig's test limits (MaxJobTest, MaxJobUser,
//     MaxJobPart); beyond them a job is pending for Priority untested,
//     with no expected start. A job whose earliest start is beyond the
//     window gets no reservation; one that fits at no instant of the plan
//     (it waits for jobs without a time limit) holds, for the rest of
//     the pass, the nodes it could use, as under PolicyPriority.
//   - PolicyEASY: textbook EASY backfill on the same plan, for
//     comparison: only the first job that cannot start gets a
//     reservation (without window), later ones may start wherever they
//     leave it its resources, and none is counted or reserved. When that
//     first reservation cannot be made, the pass falls back to
//     PolicyPriority's node holds.
//
// Under PolicyBackfill and PolicyEASY starts made while a reservation
// exists are marked Start.Backfilled, and each reserved job's
// Decision.ExpectedStart is its reservation (Plan.Reservations).
type Policy int

// The policies; the zero value is the default.
const (
	PolicyPriority Policy = iota
	PolicyFIFO
	PolicyBackfill
	PolicyEASY
	// PolicyTide is PolicyBackfill in the multifactor order
	// (Config.Priority, DefaultMultifactor when nil): see
	// Config.Resolved.
	PolicyTide
)

// policyNames are the names ParsePolicy reads and String writes.
var policyNames = []string{PolicyPriority: "priority", PolicyFIFO: "fifo", PolicyBackfill: "backfill", PolicyEASY: "easy", PolicyTide: "tide"}

// String names the policy as ParsePolicy reads it.
func (pl Policy) String() string {
	if pl >= 0 && int(pl) < len(policyNames) {
		return policyNames[pl]
	}
	return fmt.Sprintf("Policy(%d)", int(pl))
}

// Backfills reports whether the policy starts jobs ahead of blocked ones
// by a plan in time (PolicyBackfill, PolicyEASY): passes under it need
// every node's NodeInfo.Releases and report Plan.Reservations. Slurm
// calls such a scheduler sched/backfill.
func (pl Policy) Backfills() bool {
	return pl == PolicyBackfill || pl == PolicyEASY || pl == PolicyTide
}

// ParsePolicy reads a policy name (case-insensitive): tide (also "" and
// "default": the controller's default), priority, fifo, backfill or
// easy, so that configs and the simulator's flags share one spelling.
func ParsePolicy(s string) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "priority":
		return PolicyPriority, nil
	case "fifo":
		return PolicyFIFO, nil
	case "backfill":
		return PolicyBackfill, nil
	case "easy":
		return PolicyEASY, nil
	case "", "default", "tide":
		return PolicyTide, nil
	}
	return 0, api.Invalid("scheduling policy %q is not priority, fifo, backfill, easy or tide", s)
}

// resolved returns c with its defaults applied.
func (c BackfillConfig) resolved() BackfillConfig {
	if c.MaxJobTest <= 0 {
		c.MaxJobTest = DefaultBackfillMaxJobTest
	}
	c.MaxJobUser, c.MaxJobPart, c.ReserveDepth = max(c.MaxJobUser, 0), max(c.MaxJobPart, 0), max(c.ReserveDepth, 0)
	if c.Resolution <= 0 {
		c.Resolution = DefaultBackfillResolution
	}
	if c.Window <= 0 {
		c.Window = DefaultBackfillWindow
	}
	return c
}

// States of PolicyEASY's one reservation in a pass.
const (
	bfNone     = iota // no job has been blocked yet
	bfTimed           // the first blocked job has its reservation
	bfFallback        // it could not get one: priority holds
)

// Constant details of jobs left untested by backfill's limits.
const (
	detailBackfillTest = "not tested: backfill limit of this pass reached (backfill_max_job_test)"
	detailBackfillUser = "not tested: backfill limit of the user reached (backfill_max_job_user)"
	detailBackfillPart = "not tested: backfill limit of the partition reached (backfill_max_job_part)"
)

// policy is the per-pass state of cfg.Policy.
type policy struct {
	kind Policy
	now  time.Time
	bf   BackfillConfig

	fifoBlocked bool
	// probing is set while a probe (Snapshot.Probes) is decided: it is
	// not counted as tested.
	probing bool

	// tl is the plan in time (PolicyBackfill, PolicyEASY), built when
	// the first job cannot start; narrowed is set while place runs on
	// nodes narrowed by it.
	tl       *timeline
	narrowed bool
	// mayFit is set when a job that did not fit on the narrowed nodes
	// might fit on the nodes as they are (see timeline.mayDiffer).
	mayFit bool
	// easy is PolicyEASY's state (bfNone, bfTimed, bfFallback).
	easy int
	// reservations is what Plan.Reservations reports.
	reservations []Reservation

	// PolicyBackfill's test counts: blocked marks the partitions in
	// which a job could not start (their jobs count from then on);
	// tested, testedUser and testedPart count the jobs tested; counted
	// is the job last counted and countedParts the partitions it was
	// counted in.
	blocked      []bool
	tested       int
	testedUser   map[string]int
	testedPart   []int
	counted      uint64
	countedParts []int

	// depth bounds the estimates, the expected starts computed for
	// blocked jobs under PolicyPriority and PolicyFIFO (estimate), which
	// hold no nodes in time.
	depth     int
	estimates []Reservation
	// started records the releases of jobs started in the pass (until
	// the plan is built), which the snapshot cannot know.
	started []relEvent
	// Scratch of estimateStart.
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

func newPolicy(cfg Config, now time.Time, parts int) *policy {
	bf := cfg.Backfill.resolved()
	pol := &policy{kind: cfg.Policy, now: now, bf: bf, depth: bf.MaxJobTest}
	if cfg.Policy == PolicyBackfill {
		pol.blocked, pol.testedPart = make([]bool, parts), make([]int, parts)
	}
	return pol
}

// blocks reports whether job r, which passed its gates, is pending for
// Priority without a node scan, and with which detail. Under
// PolicyBackfill it counts r as tested when its partition has a job that
// could not start.
func (pol *policy) blocks(p *pass, r *Request) (bool, string) {
	switch pol.kind {
	case PolicyFIFO:
		return pol.fifoBlocked, detailPriority
	case PolicyBackfill:
		if p.blockedByPriority(r.Part) {
			return true, detailPriority
		}
		if pol.blocked[r.Part] {
			if detail := pol.test(r); detail != "" {
				return true, detail
			}
		}
		return false, ""
	}
	return p.blockedByPriority(r.Part), detailPriority
}

// test counts job r as tested in its partition, or returns the detail of
// the limit that leaves it untested.
func (pol *policy) test(r *Request) string {
	if pol.deep() {
		// Past the reservation depth jobs are tested as EASY tests
		// them, uncounted.
		return ""
	}
	id, user := r.Job.ID, r.Job.User
	if pol.counted == id && slices.Contains(pol.countedParts, r.Part) {
		return ""
	}
	first := pol.counted != id || pol.probing
	if first {
		if pol.tested >= pol.bf.MaxJobTest {
			return detailBackfillTest
		}
		if pol.bf.MaxJobUser > 0 && pol.testedUser[user] >= pol.bf.MaxJobUser {
			return detailBackfillUser
		}
	}
	if pol.bf.MaxJobPart > 0 && pol.testedPart[r.Part] >= pol.bf.MaxJobPart {
		return detailBackfillPart
	}
	if pol.probing {
		// Tested where the jobs before left room, but not counted.
		return ""
	}
	if first {
		pol.counted, pol.countedParts = id, pol.countedParts[:0]
		pol.tested++
		if pol.bf.MaxJobUser > 0 {
			if pol.testedUser == nil {
				pol.testedUser = map[string]int{}
			}
			pol.testedUser[user]++
		}
	}
	pol.countedParts = append(pol.countedParts, r.Part)
	pol.testedPart[r.Part]++
	return ""
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
		if reason != api.ReasonResources && reason != api.ReasonPriority && reason != api.ReasonTopology {
			// It cannot start by waiting for running jobs.
			return
		}
		if !pol.blocked[r.Part] {
			// The partition's first job that could not start: it was
			// not counted yet.
			pol.blocked[r.Part] = true
			if pol.test(r) != "" {
				return
			}
		}
		if reason == api.ReasonTopology || pol.reserved(r.Job.ID) || pol.deep() {
			// --switches waits for its own placement; a job of several
			// partitions is reserved in the first where it waits; past
			// the reservation depth a job only starts where it delays
			// no reservation.
			return
		}
		if pol.reserve(p, r) == fitNever {
			// It waits for jobs without a time limit: hold what it
			// could use, as priority blocking does.
			p.holdForPriority(r)
		}
	case PolicyEASY:
		switch pol.easy {
		case bfNone:
			if reason != api.ReasonResources && reason != api.ReasonPriority {
				return
			}
			if pol.reserve(p, r) == fitAt {
				pol.easy = bfTimed
				return
			}
			pol.easy = bfFallback
			p.holdForPriority(r)
		case bfFallback:
			if reason == api.ReasonResources {
				p.holdForPriority(r)
			}
		}
	}
}

// cachedNoFit applies the policy to job r, whose failure to fit came
// from the failed-shape cache: under PolicyBackfill the job still gets
// its own reservation. (The other policies' holds were made by the
// earlier job of the shape, on the same nodes.)
func (pol *policy) cachedNoFit(p *pass, r *Request, reason api.ReasonCode) {
	if pol.kind == PolicyBackfill {
		pol.noFit(p, r, reason)
	}
}

// deep reports whether the pass made as many reservations as
// BackfillConfig.ReserveDepth allows.
func (pol *policy) deep() bool {
	return pol.bf.ReserveDepth > 0 && len(pol.reservations) >= pol.bf.ReserveDepth
}

// reserved reports whether the pass reserved for job id last.
func (pol *policy) reserved(id uint64) bool {
	n := len(pol.reservations)
	return n > 0 && pol.reservations[n-1].JobID == id
}

// plan returns the pass's plan in time, built on first use.
func (pol *policy) plan(p *pass) *timeline {
	if pol.tl == nil {
		pol.tl = newTimeline(p, pol.now, pol.bf, pol.kind == PolicyBackfill, pol.started)
		pol.started = nil
	}
	return pol.tl
}

// reserve finds the earliest instant at which r fits for its whole time
// limit in the plan and, within the window (PolicyBackfill's; EASY has
// none), reserves what it needs there (Plan.Reservations).
func (pol *policy) reserve(p *pass, r *Request) fit {
	tl := pol.plan(p)
	if p.anyReserved && !r.AnyReserved {
		// Nodes held for earlier jobs stay theirs in the future too.
		r.AnyReserved = true
		p.chain.prepare(r)
	}
	at, f := tl.earliest(p, r, limitNanos(r.TimeLimit))
	if f != fitAt {
		return f
	}
	res := Reservation{JobID: r.Job.ID, At: time.Unix(0, at).In(pol.now.Location()), Nodes: make([]string, len(p.picked))}
	for k, i := range p.picked {
		res.Nodes[k] = p.nodes[i].Info.Name
	}
	pol.reservations = append(pol.reservations, res)
	return fitAt
}

// narrow makes the pass's nodes, for job r that would start now, what
// stays free over its whole limit around the reservations (see
// timeline.narrow); restore undoes it, and sets pol.mayFit when r, which
// did not fit (placed false), might fit on the nodes as they are.
func (pol *policy) narrow(p *pass, r *Request) {
	pol.narrowed = pol.tl != nil && pol.tl.narrow(p, limitNanos(r.TimeLimit))
}

func (pol *policy) restore(p *pass, r *Request, placed bool) {
	if pol.narrowed {
		pol.mayFit = !placed && pol.tl.mayDiffer(p, r)
		pol.tl.restore(p)
	}
}

// onStart records the resources of a job started in this pass, so that
// the plan (or an estimate) knows when they come back.
func (pol *policy) onStart(p *pass, s *Start) {
	if pol.tl != nil {
		// The start took from its nodes' working copies: runs cached
		// for them are stale (fitruns.go).
		for _, a := range s.Alloc {
			if i, ok := p.byName[a.Node]; ok {
				pol.tl.touch(i)
			}
		}
	}
	if s.TimeLimit == api.Infinite || s.TimeLimit < 0 {
		return
	}
	if !pol.kind.Backfills() && len(pol.estimates) >= pol.depth {
		return
	}
	at := pol.now.Add(time.Duration(s.TimeLimit) * time.Second).UnixNano()
	for _, a := range s.Alloc {
		i, ok := p.byName[a.Node]
		if !ok {
			continue
		}
		gpus := a.GPUs
		if a.Sliced() {
			// A slice's end frees no whole GPU for sure.
			gpus = nil
		}
		if pol.tl != nil {
			pol.tl.release(p, i, at, a.CPUs, a.MemoryMB, gpus)
			continue
		}
		pol.started = append(pol.started, relEvent{at: at, node: i, cpus: a.CPUs, mem: a.MemoryMB, gpus: gpus})
	}
}

// expected returns the reservation's start of job id when the pass
// just reserved for it, or the estimate it just computed for it.
func (pol *policy) expected(id uint64) (time.Time, bool) {
	if pol.reserved(id) {
		return pol.reservations[len(pol.reservations)-1].At, true
	}
	if n := len(pol.estimates); n > 0 && pol.estimates[n-1].JobID == id {
		return pol.estimates[n-1].At, true
	}
	return time.Time{}, false
}

// estimate computes, for job r blocked for Resources under
// PolicyPriority or PolicyFIFO, when it is expected to start (squeue
// --start): the instant estimateStart finds, without holding nodes for
// it in time (those policies hold nodes for the rest of the pass only).
// Slurm's builtin scheduler estimates start times the same way. Only the
// first BackfillConfig.MaxJobTest blocked jobs get one.
func (pol *policy) estimate(p *pass, r *Request) {
	if len(pol.estimates) >= pol.depth {
		return
	}
	if at, ok := pol.estimateStart(p, r); ok {
		pol.estimates = append(pol.estimates, Reservation{JobID: r.Job.ID, At: at})
	}
}

// estimateStart finds the earliest instant at which r fits, replaying
// the releases of running jobs (and of the pass's starts) in time order
// on a copy of the pass's nodes, with the same filters and node choice
// as a start. Nothing is held: under PolicyPriority and PolicyFIFO the
// instant is only the job's expected start.
//
// It keeps the work per release small: events are sorted as 16-byte
// keys that hold no pointers, the copy is two allocations, and the full
// node choice (find) runs only at instants where enough partition nodes
// pass the filters for r's smallest slot, a count kept per release.
func (pol *policy) estimateStart(p *pass, r *Request) (time.Time, bool) {
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
		if ok {
			return time.Unix(0, at).In(pol.now.Location()), true
		}
	}
	return time.Time{}, false
}

// relKey is one release in the replay order of estimateStart: by time,
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
		// Node holds are absolute under every policy (a reservation in
		// time is no hold). Under PolicyBackfill a partition whose jobs
		// are counted is closed once the test limit is reached.
		if all || p.blockedByPriority(pi) || pol.untested(pi) {
			out = append(out, p.parts[pi].info.Name)
		}
	}
	return out
}

// untested reports whether, under PolicyBackfill, every later job of
// partition pi would be left untested by the test limits.
func (pol *policy) untested(pi int) bool {
	if pol.kind != PolicyBackfill || !pol.blocked[pi] {
		return false
	}
	return pol.tested >= pol.bf.MaxJobTest || pol.bf.MaxJobPart > 0 && pol.testedPart[pi] >= pol.bf.MaxJobPart
}

// A deep queue holds many jobs of the same shape. Within a pass
// resources only shrink and holds and reservations only grow, so once a
// job of some shape failed to fit, the next job of that shape fails the
// same way for as long as nothing was started, held or reserved in
// between, unless reservations turned the first away and the next one
// has a shorter limit (which may end before them). The pass then reuses
// the decision instead of scanning the partition again; that is what
// keeps EASY (where most jobs are scanned) linear in the queue.

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

// stateGen changes whenever the pass starts a job, holds a node, makes
// a reservation or changes PolicyEASY's state.
type stateGen struct{ starts, reserved, reservations, easy int }

type failedShape struct {
	key    shapeKey
	gen    stateGen
	reason api.ReasonCode
	detail string
	// narrowed is set when reservations narrowed the nodes (the outcome
	// then holds for limits no shorter than limit).
	narrowed bool
	limit    int64
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
	g := stateGen{starts: len(plan.Starts), reservations: len(pol.reservations), easy: pol.easy}
	for i := range p.parts {
		g.reserved += p.parts[i].reserved
	}
	return g
}

// knownFailure returns the decision of an earlier job of r's shape when
// nothing changed since, and the index of its entry in pol.failed.
func (pol *policy) knownFailure(p *pass, r *Request, plan *Plan) (api.ReasonCode, string, int, bool) {
	if len(pol.failed) == 0 {
		return "", "", 0, false
	}
	k, ok := shapeOf(r)
	if !ok {
		return "", "", 0, false
	}
	for i := range pol.failed {
		if f := &pol.failed[i]; f.key == k {
			if f.gen != pol.gen(p, plan) || f.narrowed && limitNanos(r.TimeLimit) < limitNanos(f.limit) {
				return "", "", 0, false
			}
			return f.reason, f.detail, i, true
		}
	}
	return "", "", 0, false
}

// remember records the decision of r, which did not fit, after the
// policy acted on it, and returns the index of its entry in pol.failed
// plus 1 (0: r's outcome depends on more than its shape).
func (pol *policy) remember(p *pass, r *Request, plan *Plan, reason api.ReasonCode, detail string) int {
	k, ok := shapeOf(r)
	if !ok {
		return 0
	}
	f := failedShape{key: k, gen: pol.gen(p, plan), reason: reason, detail: detail, narrowed: pol.narrowed, limit: r.TimeLimit}
	for i := range pol.failed {
		if old := &pol.failed[i]; old.key == k {
			if old.gen == f.gen && limitNanos(old.limit) < limitNanos(f.limit) {
				// Nothing changed since a shorter job of the shape
				// failed: it stands for more limits.
				f.limit = old.limit
			}
			if old.gen == f.gen && !old.narrowed {
				f.narrowed = false
			}
			*old = f
			return i + 1
		}
	}
	pol.failed = append(pol.failed, f)
	return len(pol.failed)
}
