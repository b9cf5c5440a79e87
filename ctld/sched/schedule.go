package sched

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Constant details, so that blocked jobs cost no formatting.
const (
	detailPriority  = "waiting for higher-priority jobs"
	detailMaxStarts = "start limit of this scheduling pass reached"
)

// Schedule decides, for one snapshot and time, which pending jobs start
// where and why every other job stays pending. It is pure: it reads no
// clock, does no I/O, never modifies snap or its jobs, and the same input
// gives the same Plan. A nil snap gives an empty Plan.
//
// Jobs are taken in priority order (see order.go). Each goes through
// the gates (hold, begin time, partition limits, required nodes; with
// queues, their quotas), then the node-filter chain and the best-fit
// choice; a job that fits takes its resources from the pass's working
// copy, and one that does not is diagnosed, may choose preemption
// victims (preempt.go) and may block lower-priority jobs
// (holdForPriority).
func Schedule(snap *Snapshot, now time.Time, cfg Config) Plan {
	return schedule(snap, now, cfg, &Scratch{})
}

// Scratch is memory that successive passes of one caller reuse: the
// arrays of a pass grow with the pending jobs (at 100,000 of them some
// 16 MB a pass), and a controller holding a large heap paid for them
// in collections, which ran into the passes themselves. The zero value
// is ready; a Scratch serves one pass at a time.
type Scratch struct {
	decisions   []Decision
	keys, radix []pendKey
	classes     classes
	classFails  []classFail
	// tailHits is the last pass's count of jobs decided by their class.
	tailHits int
}

// Schedule is the package's Schedule with sc's memory. The Plan's
// Pending lives in sc: it is valid until sc's next pass.
func (sc *Scratch) Schedule(snap *Snapshot, now time.Time, cfg Config) Plan {
	return schedule(snap, now, cfg, sc)
}

func schedule(snap *Snapshot, now time.Time, cfg Config, sc *Scratch) Plan {
	plan := Plan{Now: now}
	if snap == nil {
		return plan
	}
	cfg = cfg.Resolved()
	p := newPass(snap, cfg)
	p.sh = newShare(snap, cfg, now)
	pol := newPolicy(cfg, now, len(p.parts))
	// Classes are numbered by the legacy order (orderPending); a pass in
	// share mode has none.
	sc.classes.reset()
	it := newOrder(snap, p.sh, now, cfg, sc)
	p.classFails = slices.Grow(sc.classFails[:0], sc.classes.count())[:sc.classes.count()]
	clear(p.classFails)
	sc.classFails = p.classFails
	plan.Pending = slices.Grow(sc.decisions[:0], len(snap.Pending))
	defer func() {
		// What an earlier, longer pass left beyond this one's end would
		// keep its jobs' strings alive.
		clear(plan.Pending[len(plan.Pending):cap(plan.Pending)])
		sc.decisions = plan.Pending[:0]
		sc.tailHits = p.tailHits
	}()
	for e := it.next(); e != nil; e = it.next() {
		n := len(plan.Pending)
		start, ok := p.decide(e, snap.Probes[e.id], now, &plan, pol)
		if ok {
			start.Backfilled = len(pol.reservations) > 0
			plan.Starts = append(plan.Starts, start)
			pol.onStart(p, &start)
			if p.sh != nil {
				p.sh.account(e.queue, e.job.User, allocGPUs(start.Alloc))
			}
		} else if n < len(plan.Pending) {
			p.decided(e, &plan.Pending[n], pol)
		}
		it.done(e, ok)
	}
	plan.Closed = pol.closed(p, &plan)
	plan.Reservations = pol.reservations
	return plan
}

// decided completes a pending job's Decision: its expected start and,
// in share mode, its level, starvation and the reasons after the
// decisive one.
func (p *pass) decided(e *entry, d *Decision, pol *policy) {
	if at, ok := pol.expected(e.id); ok {
		d.ExpectedStart = at
	}
	if p.sh == nil {
		// Without queues and classes levels mean nothing yet (jobs are
		// ordered by EffPriority): decisions stay as they were.
		return
	}
	d.Level, d.StarvingSince = e.aged, e.starving
	// Most pending jobs get a line or two: they are formatted with
	// appends and share one backing array, which keeps a deep queue's
	// decisions to one allocation per line.
	var more [3]string
	n := 0
	if !e.starving.IsZero() {
		b := append(p.fmtBuf[:0], "Starving since "...)
		b = e.starving.UTC().AppendFormat(b, time.RFC3339)
		more[n], p.fmtBuf = string(b), b
		n++
	}
	if e.ahead > 0 && d.Reason.WaitsInLine() {
		b := append(p.fmtBuf[:0], "Priority: "...)
		b = strconv.AppendInt(b, int64(e.ahead), 10)
		b = append(b, " jobs ahead in queue "...)
		if e.ahead == 1 {
			b = append(b[:len(b)-len(" jobs ahead in queue ")], " job ahead in queue "...)
		}
		b = append(b, queueName(p.sh, e.queue)...)
		more[n], p.fmtBuf = string(b), b
		n++
	}
	if p.borrowing > 0 && !d.Reason.Reclaims() {
		more[n] = fmt.Sprintf("Borrowing: queue %s would borrow %d GPUs of idle share", queueName(p.sh, e.queue), p.borrowing)
		n++
	}
	if n == 0 {
		return
	}
	if cap(p.moreBuf)-len(p.moreBuf) < n {
		p.moreBuf = make([]string, 0, 1024)
	}
	at := len(p.moreBuf)
	p.moreBuf = append(p.moreBuf, more[:n]...)
	d.More = p.moreBuf[at : at+n : at+n]
}

// orderPending returns the keys of the pending jobs (nil entries
// dropped) in sc's memory, in order: higher priority first, then earlier
// submit, then lower id. It numbers their classes in sc.classes.
func orderPending(pending []*api.Job, snap *Snapshot, now time.Time, cfg Config, sc *Scratch) []pendKey {
	var cls *classes
	if cfg.Policy == PolicyBackfill && cfg.Backfill.ReserveDepth > 0 {
		// Only a reservation depth makes a tail (tail.go).
		cls = &sc.classes
	}
	keys := pendingKeys(sc.keys, pending, snap, now, cfg, cls)
	// Jobs an earlier, longer pass left beyond the end would stay
	// reachable.
	clear(keys[len(keys):cap(keys)])
	clear(sc.radix[min(len(keys), len(sc.radix)):cap(sc.radix)])
	sc.keys = keys
	sortPending(keys, &sc.radix)
	n := len(keys)
	for n > 0 && keys[n-1].job == nil {
		n--
	}
	return keys[:n]
}

// schedule decides one job in partition part: it returns the Start when
// the job fits, or appends its Decision to plan. pol applies cfg.Policy
// to jobs behind one that does not fit. Under p.probe a job that does
// not fit leaves no trace but its Decision (see partlist.go).
func (p *pass) schedule(e *entry, part string, now time.Time, plan *Plan, pol *policy) (Start, bool) {
	job := e.job
	pend := func(reason api.ReasonCode, detail string) (Start, bool) {
		plan.Pending = append(plan.Pending, Decision{JobID: e.id, Reason: reason, Detail: detail})
		return Start{}, false
	}

	p.borrowing = 0
	if reason, detail, ok := p.gate(job, part, now); !ok {
		return pend(reason, detail)
	}
	r := &p.req
	need := 0
	if p.sh != nil {
		if e.qos != nil && e.qos.MaxTime > 0 && (r.TimeLimit == api.Infinite || r.TimeLimit > e.qos.MaxTime) {
			return pend(api.ReasonQOSTimeLimit, fmt.Sprintf("time limit %s exceeds class %s MaxTime %s",
				api.FormatTimeLimit(r.TimeLimit), e.qos.Name, api.FormatTimeLimit(e.qos.MaxTime)))
		}
		for k := range r.Slots {
			need += r.Slots[k].GPUs
		}
		if e.queue >= 0 && need > 0 {
			if id := p.sh.held(e.queue); id != 0 && id != job.ID {
				return pend(api.ReasonQuotaExceeded, p.sh.heldDetail(e.queue, id))
			}
		}
		v := p.sh.admit(e.queue, job.User, need, e.qos)
		if v.reason != "" {
			if p.probe {
				return pend(v.reason, v.detail)
			}
			if v.deficit > 0 && !(pol.kind == PolicyFIFO && pol.fifoBlocked) {
				// Lower jobs of its own queue may give their GPUs back.
				if reason, detail, ok := p.preempt(r, e, need, v.deficit, plan); ok {
					return pend(reason, detail)
				}
			}
			if !e.starving.IsZero() && e.queue >= 0 && v.reason == api.ReasonQuotaExceeded && v.deficit > 0 {
				// Aging alone cannot lift a job over a quota that
				// smaller jobs of its queue keep filling: hold the
				// queue's quota for it until its own jobs drain.
				p.sh.holdFor(e.queue, job.ID)
			}
			return pend(v.reason, v.detail)
		}
		p.borrowing = v.borrowed
	}
	if blocked, detail := pol.blocks(p, r); blocked {
		return pend(api.ReasonPriority, detail)
	}
	if p.cfg.MaxStarts > 0 && len(plan.Starts) >= p.cfg.MaxStarts {
		return pend(api.ReasonPriority, detailMaxStarts)
	}

	p.topoWait = false
	if reason, detail, i, ok := pol.knownFailure(p, r, plan); ok {
		if reason == api.ReasonResources && p.sh != nil && !p.probe {
			if reason, detail, ok := p.preempt(r, e, need, 0, plan); ok {
				return pend(reason, detail)
			}
		}
		if !p.probe {
			pol.cachedNoFit(p, r, reason)
			p.noteTail(e, pol, i+1)
		}
		return pend(reason, detail)
	}
	if start, ok := p.place(r, pol); ok {
		if p.sh != nil && e.queue >= 0 {
			start.Borrowed = p.sh.over(e.queue, allocGPUs(start.Alloc)) - p.sh.over(e.queue, 0)
		}
		return start, true
	}
	if p.probe {
		// Discarded: the job is decided again after its probes.
		return pend(api.ReasonResources, "")
	}
	if pol.narrowed && pol.mayFit {
		// Reservations in time turned it away: if it fits now around
		// nothing else, it waits for higher-priority jobs.
		p.topoWait = false
		if p.findFeatures(r) {
			pol.noFit(p, r, api.ReasonPriority)
			p.noteTail(e, pol, pol.remember(p, r, plan, api.ReasonPriority, detailPriority))
			return pend(api.ReasonPriority, detailPriority)
		}
	}
	if p.topoWait {
		pol.noFit(p, r, api.ReasonTopology)
		return pend(api.ReasonTopology, fmt.Sprintf("waiting for %d nodes under at most %d leaf switches until %s",
			r.Nodes, r.MaxLeaves, r.WaitUntil.UTC().Format(time.RFC3339)))
	}
	if p.hist.count(DetailReserved) > 0 {
		// Nodes the job could use are held for a higher-priority job.
		pol.noFit(p, r, api.ReasonPriority)
		p.noteTail(e, pol, pol.remember(p, r, plan, api.ReasonPriority, detailPriority))
		return pend(api.ReasonPriority, detailPriority)
	}
	reason, detail := p.diagnose(r)
	if r.Nodes > 1 && (reason == api.ReasonResources || reason == api.ReasonNodeDown) {
		if leaf := p.bestLeaf(r); leaf != "" {
			detail += "; " + leaf
		}
	}
	if reason == api.ReasonResources && p.sh != nil {
		if reason, detail, ok := p.preempt(r, e, need, 0, plan); ok {
			return pend(reason, detail)
		}
	}
	pol.noFit(p, r, reason)
	p.noteTail(e, pol, pol.remember(p, r, plan, reason, detail))
	return pend(reason, detail)
}

// gate runs the checks that need no node scan and fills p.req for the
// job in partition part. ok is false when the job stays pending, with
// its reason.
func (p *pass) gate(job *api.Job, part string, now time.Time) (reason api.ReasonCode, detail string, ok bool) {
	switch {
	case job.HoldKind == api.HoldAdmin:
		return api.ReasonJobHeldAdmin, "", false
	case job.HoldKind != api.HoldNone || job.JobSpec.Hold:
		// sbatch -H before the controller filled in HoldKind.
		return api.ReasonJobHeldUser, "", false
	}
	if !job.BeginTime.IsZero() && job.BeginTime.After(now) {
		return api.ReasonBeginTime, "", false
	}
	pi, found := p.partIdx[part]
	if !found {
		return api.ReasonBadConstraints, fmt.Sprintf("partition %s does not exist", part), false
	}
	ps := &p.parts[pi]
	if !ps.info.Up {
		return api.ReasonPartitionDown, "", false
	}
	limit := effectiveTimeLimit(&job.JobSpec, ps.info)
	if exceedsMaxTime(limit, ps.info) {
		return api.ReasonPartitionTimeLimit, fmt.Sprintf("time limit %s exceeds partition %s MaxTime %s",
			api.FormatTimeLimit(limit), ps.info.Name, api.FormatTimeLimit(ps.info.MaxTime)), false
	}
	reason, detail, ok = p.resolve(job, pi)
	if !ok {
		return reason, detail, false
	}
	p.req.TimeLimit = limit
	if ps.info.MaxNodes > 0 && p.req.Nodes > ps.info.MaxNodes {
		return api.ReasonPartitionNodeLimit, fmt.Sprintf("%d nodes requested, partition %s MaxNodes is %d",
			p.req.Nodes, ps.info.Name, ps.info.MaxNodes), false
	}
	if p.req.Nodes > len(ps.members) {
		return api.ReasonPartitionNodeLimit, fmt.Sprintf("%d nodes requested, partition %s has %d",
			p.req.Nodes, ps.info.Name, len(ps.members)), false
	}
	for _, i := range p.req.Required {
		if !p.nodes[i].Usable {
			code := p.nodes[i].Info.Unusable
			if code == "" {
				code = api.DetailNodeDown
			}
			return api.ReasonReqNodeNotAvail, fmt.Sprintf("required node %s: %s", p.nodes[i].Info.Name, code), false
		}
	}
	p.fillRequest(&job.JobSpec)
	if why := slicingRefused(&p.req, ps.info); why != "" {
		return api.ReasonBadConstraints, why, false
	}
	p.switchLimit(job, now)
	return "", "", true
}

// DefaultSwitchWait is how long --switches=N without @wait holds out for
// its placement (Slurm's max_switch_wait default).
const DefaultSwitchWait = 300 // seconds

// switchLimit applies --switches while its wait lasts: from the time the
// job became eligible (else submitted), for @wait or DefaultSwitchWait.
func (p *pass) switchLimit(job *api.Job, now time.Time) {
	if job.Switches <= 0 || p.topo == nil || p.req.Nodes < 2 {
		return
	}
	from := job.EligibleTime
	if from.IsZero() {
		from = job.SubmitTime
	}
	wait := job.SwitchWait
	if wait <= 0 {
		wait = DefaultSwitchWait
	}
	until := from.Add(time.Duration(wait) * time.Second)
	if now.Before(until) {
		p.req.MaxLeaves, p.req.WaitUntil = job.Switches, until
	}
}

// fillRequest computes the request's slots and selects the filters
// relevant to it.
func (p *pass) fillRequest(spec *api.JobSpec) {
	r := &p.req
	r.Slots = fillSlots(r.Slots, spec, r.Nodes, p.cfg.DefMemPerCPUMB)
	r.AnyReserved = p.anyReserved
	r.Sliced = len(r.Slots) > 0 && r.Slots[0].Sliced()
	part := p.parts[r.Part].info
	r.MemRatio, r.ComputeRatio = ratioOr1(part.GPUMemRatio), ratioOr1(part.GPUComputeRatio)
	r.NVLinkOnly = !r.Sliced && spec.Comm == "model" && len(r.Slots) > 0 && r.Slots[0].GPUs > 1
	p.chain.prepare(r)
}

// resolve fills the request's node marks for partition pi: -x and -w
// names become stamps on the nodes, and the node count is raised to the
// number of -w nodes. It fails with BadConstraints when a -w node does
// not exist, is outside the partition or is also excluded. It does not
// read node state or compute slots.
func (p *pass) resolve(job *api.Job, pi int) (api.ReasonCode, string, bool) {
	r := &p.req
	*r = Request{
		Job:       job,
		Part:      pi,
		GPUType:   job.GPUType,
		Exclusive: job.Exclusive,
		TmpDiskMB: job.TmpDiskMB,
		Slots:     r.Slots[:0],
		Required:  r.Required[:0],
		stamp:     p.nextStamp(),
	}
	for _, name := range job.Exclude {
		if i, ok := p.byName[name]; ok {
			p.nodes[i].excluded = r.stamp
			r.Excludes = true
		}
	}
	part := p.parts[pi].info.Name
	for _, name := range job.NodeList {
		i, ok := p.byName[name]
		if !ok || !p.inPartition(i, pi) {
			return api.ReasonBadConstraints, fmt.Sprintf("required node %s is not in partition %s", name, part), false
		}
		if p.nodes[i].excluded == r.stamp {
			return api.ReasonBadConstraints, fmt.Sprintf("node %s is both required and excluded", name), false
		}
		if p.nodes[i].required == r.stamp {
			continue
		}
		p.nodes[i].required = r.stamp
		r.Required = append(r.Required, i)
	}
	r.Nodes = max(job.ReqNodes(), len(r.Required))
	if job.Nodes == 0 || job.MaxNodes > job.Nodes {
		r.Nodes = max(r.Nodes, p.spanCount(&job.JobSpec, pi, job.GPUType))
	}
	r.OnlyRequired = len(r.Required) > 0 && len(r.Required) >= r.Nodes
	return "", "", true
}

// place runs the filter chain over the partition and, when enough nodes
// pass, chooses them and takes their resources. Under a plan in time
// (PolicyBackfill, PolicyEASY) the nodes it sees are what stays free
// over the job's whole limit around the reservations (pol.narrowed tells
// whether that changed any). On failure p.hist holds why nodes were
// turned away and p.cand the nodes that passed.
func (p *pass) place(r *Request, pol *policy) (Start, bool) {
	// Marked here, not in resolve: only jobs that reach a node scan pay
	// for reading the far end of the Job (PrevNodes).
	for _, name := range r.Job.PrevNodes {
		if i, ok := p.byName[name]; ok {
			p.nodes[i].prev = r.stamp
			r.HasPrev = true
		}
	}
	for _, name := range r.Job.LaunchFailNodes {
		if i, ok := p.byName[name]; ok {
			p.nodes[i].avoid = r.stamp
			r.HasAvoid = true
		}
	}
	pol.narrow(p, r)
	ok := p.findFeatures(r)
	pol.restore(p, r, ok)
	if !ok {
		return Start{}, false
	}
	return p.commit(r), true
}

// find is place without taking anything: on success p.picked holds one
// node per slot. Backfill runs it on a future copy of the nodes.
func (p *pass) find(r *Request) bool {
	ps := &p.parts[r.Part]
	p.hist.reset(len(ps.members))
	p.cand = p.cand[:0]
	p.picked = p.picked[:0]

	ok := true
	for k, i := range r.Required {
		if code := p.chain.check(r, &r.Slots[k], &p.nodes[i]); code != "" {
			p.hist.add(code)
			ok = false
			continue
		}
		p.picked = append(p.picked, i)
	}
	if r.OnlyRequired {
		p.hist.addN(api.DetailNodeNotRequested, len(ps.members)-len(r.Required))
	} else {
		smallest := &r.Slots[len(r.Slots)-1]
		for _, i := range ps.members {
			n := &p.nodes[i]
			if n.required == r.stamp {
				continue
			}
			if code := p.chain.check(r, smallest, n); code != "" {
				p.hist.add(code)
				continue
			}
			p.cand = append(p.cand, i)
		}
	}
	p.hist.available = len(p.picked) + len(p.cand)
	if !ok || len(p.picked)+len(p.cand) < r.Nodes {
		return false
	}
	return p.choose(r)
}

// choose fills p.picked (after the required nodes) with best-fit nodes
// from p.cand, one per remaining slot, largest slot first. Because later
// slots never need more than earlier ones, a node that fits a slot fits
// every later one, and taking any fitting node per slot finds a choice
// whenever one exists. On failure the candidates left over are counted in
// p.hist against the slot that none of them could take.
func (p *pass) choose(r *Request) bool {
	p.sw = -1
	k := len(p.picked)
	if r.Nodes-k == 1 {
		// The common single-slot case: one linear scan, no sort.
		best, used := p.cand[0], -1
		for _, i := range p.cand {
			if i != best && p.betterFit(i, best) < 0 {
				best = i
			}
			if !p.nodes[i].Idle && (used < 0 || p.betterFit(i, used) < 0) {
				used = i
			}
		}
		if used >= 0 && p.protects(best) && (p.nodes[used].avoid != r.stamp || p.nodes[best].avoid == r.stamp) {
			best = used // spare the leaf's last free node
		}
		p.picked = append(p.picked, best)
		return true
	}
	slices.SortFunc(p.cand, p.betterFit)
	if p.topo != nil && k == 0 {
		// Without -w nodes the job goes under the lowest switch that
		// holds it whole; with them, they decide where it goes.
		if p.sw = p.chooseUnderSwitch(r); p.sw >= 0 {
			if r.MaxLeaves == 0 || p.topo.leavesOf(p.picked) <= r.MaxLeaves {
				return true
			}
			p.picked = p.picked[:0]
		}
		if r.MaxLeaves > 0 {
			// --switches: wait for a placement within the limit rather
			// than take one across more leaves.
			p.topoWait = true
			return false
		}
	}
	for ; k < r.Nodes; k++ {
		s := &r.Slots[k]
		found := p.firstFit(r, s, p.cand)
		if found < 0 {
			for _, i := range p.cand {
				p.hist.add(p.chain.check(r, s, &p.nodes[i]))
			}
			p.hist.available -= len(p.cand)
			return false
		}
		p.picked = append(p.picked, p.cand[found])
		p.cand = slices.Delete(p.cand, found, found+1)
	}
	return true
}

// commit takes the resources of slot k on p.picked[k] from the working
// copy, so later jobs of the pass see them gone, and builds the Start.
// GPU indices are taken lowest first, or by link score on nodes with a
// matrix (see gpuPicker); an exclusive job takes all that is free on its
// (idle) nodes.
func (p *pass) commit(r *Request) Start {
	p.linkScore, p.linkIdeal, p.linkNodes, p.gpuWhy, p.numaNodes = 0, 0, 0, "", 0
	alloc := make([]api.NodeAlloc, len(p.picked))
	for k, i := range p.picked {
		n := &p.nodes[i]
		s := &r.Slots[k]
		cpus, mem, gpus := s.CPUs, s.MemMB, s.GPUs
		if s.WholeMem {
			mem = n.FreeMemMB
		}
		if r.Exclusive {
			cpus, mem = n.FreeCPUs, n.FreeMemMB
			if !s.Sliced() {
				gpus = len(n.FreeGPUs)
			}
		}
		var idx []int
		switch {
		case gpus > 0 && s.Sliced():
			idx = p.takeSlices(n, r, s)
		case gpus > 1 && r.NVLinkOnly && n.Info.Matrix != nil:
			idx = p.takeLinked(n, gpus, n.bestIsland(gpus))
		case gpus > 0 && n.Info.Matrix != nil:
			idx = p.takeLinked(n, gpus, n.FreeGPUs)
		case gpus > 0:
			idx = slices.Clone(n.FreeGPUs[:gpus])
			n.FreeGPUs = n.FreeGPUs[gpus:]
		}
		n.FreeCPUs -= cpus
		n.FreeMemMB -= mem
		if n.Idle && n.Usable {
			p.holes.used(i)
		}
		if n.Idle && p.topo != nil {
			p.topo.markBusy(i)
		}
		n.Idle = false
		alloc[k] = api.NodeAlloc{Node: n.Info.Name, CPUs: cpus, MemoryMB: mem, GPUs: idx, Tasks: s.Tasks,
			NUMA: n.Info.Matrix.NUMANodes(idx)}
		if len(idx) > 0 && s.Sliced() {
			alloc[k].GPUMemMB, alloc[k].GPUComputePct = s.GPUMemMB, s.GPUComputePct
		}
	}
	return Start{JobID: r.Job.ID, Alloc: alloc, TimeLimit: r.TimeLimit, Why: p.why(r)}
}
