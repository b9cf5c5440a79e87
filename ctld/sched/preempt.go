package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Preemption. A job that passed its quotas and does not fit (Resources)
// may take running jobs' resources, by two rules:
//
//   - reclaim: its queue stays within its guarantee with the job, and
//     running jobs of other queues borrow (RunningJob.Borrowing, or jobs
//     outside any queue, which own no share): the borrowers give back;
//   - priority: running jobs of its own queue (of no queue, for a job
//     outside any) whose level is at most the job's level minus the
//     victim class's PreemptGap.
//
// Levels are before aging: aging orders the queue, it does not buy the
// right to stop other jobs. Never victims: classes that are never
// preempted, jobs that ran less than their class's MinRuntime, jobs
// already preempting, jobs chosen earlier in the same pass.
//
// The victims must free a placeable shape, not scattered GPUs. For every
// node of the job's partition that holds candidates, the cheapest prefix
// of its candidates (borrowers first, then lowest level, then least run
// time lost since the last checkpoint or start) that lets the node take
// the job's smallest slot is found on a copy of the node; nodes are then
// taken cheapest prefix first until the pass's own placement (find, the
// same filters, NVLink sets, switches and best fit as a start) places
// the job on the copy, and victims whose removal still lets it place are
// dropped, most expensive first. The nodes the job would get are held
// for it for the rest of the pass.
//
// Victims already preempting for the job (RunningJob.PreemptFor) are
// counted first: when they make room, no new victim is chosen.

// maxPreemptSearches bounds the victim searches of one pass, so that a
// deep queue of blocked jobs cannot make a pass slow; the rest wait for
// the next pass.
const maxPreemptSearches = 32

// maxPreemptScans bounds the candidate scans (one pass over the running
// jobs each) of one pass, for the many blocked jobs that find none.
const maxPreemptScans = 256

// victim is one preemption candidate.
type victim struct {
	k        int // index in share.running
	reclaim  bool
	borrower bool
	level    int
	lost     time.Duration
}

func compareVictims(a, b *victim) int {
	if a.borrower != b.borrower {
		if a.borrower {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(a.level, b.level); c != 0 {
		return c
	}
	if c := cmp.Compare(a.lost, b.lost); c != 0 {
		return c
	}
	return cmp.Compare(a.k, b.k)
}

// prefixCost is the cost of the victims a node needs.
type prefixCost struct {
	others   int // victims that do not borrow
	maxLevel int
	lost     time.Duration
	n        int
}

func comparePrefix(a, b prefixCost) int {
	if c := cmp.Compare(a.others, b.others); c != 0 {
		return c
	}
	if c := cmp.Compare(a.maxLevel, b.maxLevel); c != 0 {
		return c
	}
	if c := cmp.Compare(a.lost, b.lost); c != 0 {
		return c
	}
	return cmp.Compare(a.n, b.n)
}

// overlay is a copy-on-write layer over the pass's nodes: victims'
// resources are added back to copies and restore puts the originals
// back, so that find runs on "the cluster without these jobs".
type overlay struct {
	saved []savedNode
	mark  []uint32
	stamp uint32
}

type savedNode struct {
	i int
	n NodeState
}

// save copies node i before its first change in the overlay.
func (p *pass) ovSave(i int) *NodeState {
	ov := &p.ov
	if ov.mark == nil {
		ov.mark = make([]uint32, len(p.nodes))
		ov.stamp = 1
	}
	n := &p.nodes[i]
	if ov.mark[i] != ov.stamp {
		ov.mark[i] = ov.stamp
		ov.saved = append(ov.saved, savedNode{i, *n})
		free := make([]int, len(n.FreeGPUs), max(n.Info.GPUs, len(n.FreeGPUs)))
		copy(free, n.FreeGPUs)
		n.FreeGPUs = free
		n.Shared = slices.Clone(n.Shared)
	}
	return n
}

// ovRestore puts every saved node back.
func (p *pass) ovRestore() {
	for _, s := range p.ov.saved {
		p.nodes[s.i] = s.n
	}
	p.ov.saved = p.ov.saved[:0]
	p.ov.stamp++
}

// ovRelease adds running job k's resources back in the overlay.
func (p *pass) ovRelease(k int) {
	for _, a := range p.sh.running[k].Alloc {
		i, ok := p.byName[a.Node]
		if !ok {
			continue
		}
		releaseAlloc(p.ovSave(i), &a)
	}
}

// releaseOn gives back, on node n, the part of alloc that is on it.
func releaseOn(n *NodeState, alloc []api.NodeAlloc, node string) {
	for k := range alloc {
		if alloc[k].Node == node {
			releaseAlloc(n, &alloc[k])
		}
	}
}

// releaseAlloc gives one node's allocation back to n.
func releaseAlloc(n *NodeState, a *api.NodeAlloc) {
	if a.Sliced() {
		releaseSlices(n, a)
		release(n, a.CPUs, a.MemoryMB, nil)
		return
	}
	release(n, a.CPUs, a.MemoryMB, a.GPUs)
}

// releaseSlices takes one slice of a's size off each of its GPUs; a GPU
// left without slices is free again.
func releaseSlices(n *NodeState, a *api.NodeAlloc) {
	for _, g := range a.GPUs {
		k := slices.IndexFunc(n.Shared, func(s SharedGPU) bool { return s.Index == g })
		if k < 0 {
			continue
		}
		sh := &n.Shared[k]
		sh.MemMB = max(sh.MemMB-a.GPUMemMB, 0)
		sh.ComputePct = max(sh.ComputePct-a.GPUComputePct, 0)
		if sh.Slices--; sh.Slices <= 0 {
			n.Shared = slices.Delete(n.Shared, k, k+1)
			if at, found := slices.BinarySearch(n.FreeGPUs, g); !found {
				n.FreeGPUs = slices.Insert(n.FreeGPUs, at, g)
			}
		}
	}
}

// runningLevel is a running job's level (its class default when the
// controller left it 0).
func (sh *share) runningLevel(k int) int {
	if l := sh.running[k].Level; l != 0 {
		return l
	}
	if q := sh.runQOS[k]; q != nil && q.DefaultLevel > 0 {
		return q.DefaultLevel
	}
	return defaultLevel
}

// related reports whether queues a and b are the same or one encloses
// the other.
func (sh *share) related(a, b int) bool {
	if a < 0 || b < 0 {
		return a == b
	}
	return slices.Contains(sh.queues[a].chain, b) || slices.Contains(sh.queues[b].chain, a)
}

// candidates lists the running jobs that job e may preempt, cheapest
// first.
func (p *pass) candidates(r *Request, e *entry, need int, sameQueue bool) []victim {
	sh := p.sh
	reclaim := false
	if e.queue >= 0 && need > 0 && !sameQueue {
		q := &sh.queues[e.queue]
		reclaim = q.use+need <= max(q.info.Guaranteed, 0)
	}
	var out []victim
	for k := range sh.running {
		rj := &sh.running[k]
		q := sh.runQOS[k]
		if sh.chosen[k] || rj.Preempting || !q.preemptible() {
			continue
		}
		if q.MinRuntime > 0 && sh.now.Sub(rj.Start) < time.Duration(q.MinRuntime)*time.Second {
			continue
		}
		rq := sh.runQueue[k]
		v := victim{k: k, borrower: rj.Borrowing || rq < 0 && len(sh.queues) > 0, level: sh.runningLevel(k)}
		switch {
		case reclaim && v.borrower && !sh.related(rq, e.queue):
			v.reclaim = true
		case rq == e.queue && v.level <= e.level-q.gap() && !rj.Starved:
		default:
			continue
		}
		if !p.inPartitionAlloc(rj.Alloc, r.Part) {
			continue
		}
		from := rj.Start
		if rj.LastCheckpoint.After(from) {
			from = rj.LastCheckpoint
		}
		v.lost = max(sh.now.Sub(from), 0)
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b victim) int { return compareVictims(&a, &b) })
	return out
}

// inPartitionAlloc reports whether some node of alloc is in partition pi.
func (p *pass) inPartitionAlloc(alloc []api.NodeAlloc, pi int) bool {
	for _, a := range alloc {
		if i, ok := p.byName[a.Node]; ok && p.inPartition(i, pi) {
			return true
		}
	}
	return false
}

// preempt tries to make room for job e (request r), which did not fit.
// On success the job stays pending with the returned reason: its
// victims are in plan.Preemptions (new ones) or already leaving, and
// the nodes it would get are held for it.
func (p *pass) preempt(r *Request, e *entry, need, deficit int, plan *Plan) (api.ReasonCode, string, bool) {
	sh := p.sh
	existing := sh.preemptFor[e.job.ID]
	defer p.ovRestore()
	if len(existing) > 0 {
		for _, k := range existing {
			p.ovRelease(k)
			if sh.runQueue[k] == e.queue {
				deficit -= sh.runGPUs[k]
			}
		}
		if p.find(r) && deficit <= 0 {
			return p.holdFor(r, e, existing, nil, plan)
		}
	}
	if p.cfg.NoPreemption || sh.attempts >= maxPreemptSearches || sh.scans >= maxPreemptScans {
		return "", "", false
	}
	sh.scans++
	cands := p.candidates(r, e, need, deficit > 0)
	if len(cands) == 0 {
		return "", "", false
	}
	sh.attempts++
	chosen := p.chooseVictims(r, cands, existing, max(deficit, 0))
	if chosen == nil {
		return "", "", false
	}
	// Place once more on the final set, for the nodes to hold.
	p.ovRestore()
	for _, k := range existing {
		p.ovRelease(k)
	}
	for _, v := range chosen {
		p.ovRelease(v.k)
	}
	if !p.find(r) {
		return "", "", false
	}
	return p.holdFor(r, e, existing, chosen, plan)
}

// chooseVictims picks the victims (see the file comment) on top of the
// overlay's current state, or nil when even all candidates do not make
// the job fit.
func (p *pass) chooseVictims(r *Request, cands []victim, existing []int, deficit int) []victim {
	sh := p.sh
	if p.find(r) {
		// The job fits: its victims only give quota back.
		return topUp(sh, cands, nil, deficit)
	}
	smallest := &r.Slots[len(r.Slots)-1]
	// Candidates per node, in cost order.
	perNode := map[int][]int{}
	var nodes []int
	for c := range cands {
		for _, a := range sh.running[cands[c].k].Alloc {
			i, ok := p.byName[a.Node]
			if !ok || !p.inPartition(i, r.Part) {
				continue
			}
			if _, seen := perNode[i]; !seen {
				nodes = append(nodes, i)
			}
			perNode[i] = append(perNode[i], c)
		}
	}
	// The cheapest prefix per node that lets it take the smallest slot.
	type nodePrefix struct {
		node   int
		prefix []int
		cost   prefixCost
	}
	var prefixes []nodePrefix
	for _, i := range nodes {
		if p.chain.checkStatic(r, smallest, &p.nodes[i]) != "" {
			continue
		}
		np := nodePrefix{node: i}
		n := p.nodes[i]
		n.FreeGPUs = append(make([]int, 0, max(n.Info.GPUs, len(n.FreeGPUs))), n.FreeGPUs...)
		n.Shared = slices.Clone(n.Shared)
		ok := p.chain.check(r, smallest, &n) == ""
		for _, c := range perNode[i] {
			if ok {
				break
			}
			releaseOn(&n, sh.running[cands[c].k].Alloc, n.Info.Name)
			np.prefix = append(np.prefix, c)
			v := &cands[c]
			if !v.borrower {
				np.cost.others++
			}
			np.cost.maxLevel = max(np.cost.maxLevel, v.level)
			np.cost.lost += v.lost
			np.cost.n++
			ok = p.chain.check(r, smallest, &n) == ""
		}
		if ok && len(np.prefix) > 0 {
			prefixes = append(prefixes, np)
		}
	}
	if len(prefixes) == 0 {
		return nil
	}
	slices.SortStableFunc(prefixes, func(a, b nodePrefix) int { return comparePrefix(a.cost, b.cost) })

	in := make([]bool, len(cands))
	var set []int
	found, failures := false, 0
	for _, np := range prefixes {
		for _, c := range np.prefix {
			if !in[c] {
				in[c] = true
				set = append(set, c)
				p.ovRelease(cands[c].k)
			}
		}
		if p.find(r) {
			found = true
			break
		}
		if failures++; failures > 2*r.Nodes+8 {
			break
		}
	}
	if !found {
		return nil
	}
	// Minimal set: drop victims, most expensive first, while it places
	// and they still give back the deficit.
	slices.Sort(set) // cands are in cost order
	freed := 0
	for _, c := range set {
		freed += sh.runGPUs[cands[c].k]
	}
	for x := len(set) - 1; x >= 0 && len(set) > 1; x-- {
		if freed-sh.runGPUs[cands[set[x]].k] < deficit {
			continue
		}
		trial := slices.Delete(slices.Clone(set), x, x+1)
		p.ovRestore()
		for _, k := range existing {
			p.ovRelease(k)
		}
		for _, c := range trial {
			p.ovRelease(cands[c].k)
		}
		if p.find(r) {
			freed -= sh.runGPUs[cands[set[x]].k]
			set = trial
		}
	}
	return topUp(sh, cands, set, deficit)
}

// topUp returns the candidates of set, adding the cheapest others until
// they hold at least deficit GPUs; nil when they cannot or when the set
// stays empty.
func topUp(sh *share, cands []victim, set []int, deficit int) []victim {
	freed := 0
	for _, c := range set {
		freed += sh.runGPUs[cands[c].k]
	}
	for c := 0; c < len(cands) && freed < deficit; c++ {
		if !slices.Contains(set, c) && sh.runGPUs[cands[c].k] > 0 {
			set = append(set, c)
			freed += sh.runGPUs[cands[c].k]
		}
	}
	if freed < deficit || len(set) == 0 {
		return nil
	}
	slices.Sort(set)
	out := make([]victim, len(set))
	for x, c := range set {
		out[x] = cands[c]
	}
	return out
}

// holdFor holds the nodes p.picked for job e, records its new victims
// in plan and returns its reason.
func (p *pass) holdFor(r *Request, e *entry, existing []int, chosen []victim, plan *Plan) (api.ReasonCode, string, bool) {
	sh := p.sh
	picked := slices.Clone(p.picked)
	p.ovRestore()
	for _, i := range picked {
		p.reserve(i)
	}
	reclaimFrom := map[string]bool{}
	var ids []uint64
	requeue := false
	for _, k := range existing {
		rj := &sh.running[k]
		ids = append(ids, rj.JobID)
		if !sh.related(sh.runQueue[k], e.queue) {
			reclaimFrom[queueName(sh, sh.runQueue[k])] = true
		}
		requeue = requeue || !rj.NoRequeue && sh.runQOS[k] != nil && sh.runQOS[k].Mode == api.PreemptRequeue
	}
	for _, v := range chosen {
		sh.chosen[v.k] = true
		pr := sh.preemption(v, e)
		plan.Preemptions = append(plan.Preemptions, pr)
		ids = append(ids, pr.Victim)
		if v.reclaim {
			reclaimFrom[queueName(sh, sh.runQueue[v.k])] = true
		}
		requeue = requeue || pr.Mode == api.PreemptRequeue
	}
	slices.Sort(ids)
	what := "stopping"
	if requeue {
		what = "checkpointing"
	}
	jobs := joinIDs(ids)
	if len(reclaimFrom) > 0 {
		qs := make([]string, 0, len(reclaimFrom))
		for q := range reclaimFrom {
			qs = append(qs, q)
		}
		slices.Sort(qs)
		word := "queue"
		if len(qs) > 1 {
			word = "queues"
		}
		return api.ReasonWaitingForReclaim, fmt.Sprintf("from %s %s: %s %s %s", word, strings.Join(qs, ","), plural(len(ids), "job"), jobs, what), true
	}
	return api.ReasonPreempting, fmt.Sprintf("%s %s %s", plural(len(ids), "job"), jobs, what), true
}

// preemption builds the Preemption of victim v for job e.
func (sh *share) preemption(v victim, e *entry) Preemption {
	rj := &sh.running[v.k]
	q := sh.runQOS[v.k]
	mode := q.Mode
	if mode == api.PreemptSuspend && sh.runGPUs[v.k] > 0 {
		// A suspended GPU job would keep its GPU memory.
		mode = api.PreemptRequeue
	}
	if mode == api.PreemptRequeue && rj.NoRequeue {
		mode = api.PreemptCancel
	}
	pq := queueName(sh, e.queue)
	vq := queueName(sh, sh.runQueue[v.k])
	var rule string
	if v.reclaim {
		g := 0
		if e.queue >= 0 {
			g = sh.queues[e.queue].info.Guaranteed
		}
		rule = fmt.Sprintf("reclaim: queue %s takes back its guaranteed share (%d/%d GPUs used) from borrowing queue %s",
			pq, useOf(sh, e.queue), g, vq)
	} else {
		rule = fmt.Sprintf("priority: level %d >= %d + gap %d of class %s in queue %s", e.level, v.level, q.gap(), q.Name, pq)
	}
	why := fmt.Sprintf("job %d (queue %s, class %s, level %d) preempted (%s) for job %d (queue %s, level %d): %s",
		rj.JobID, vq, q.Name, v.level, mode, e.job.ID, pq, e.level, rule)
	return Preemption{Victim: rj.JobID, For: e.job.ID, Reclaim: v.reclaim, Mode: mode, Grace: q.GraceTime, Why: why}
}

func useOf(sh *share, qi int) int {
	if qi < 0 {
		return sh.noQueueUse
	}
	return sh.queues[qi].use
}

// queueName names queue qi for messages ("(none)" outside any queue).
func queueName(sh *share, qi int) string {
	if qi < 0 {
		return "(none)"
	}
	return sh.queues[qi].info.Name
}

func joinIDs(ids []uint64) string {
	var b strings.Builder
	for k, id := range ids {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(id, 10))
	}
	return b.String()
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
