package sched

import (
	"cmp"
	"fmt"
	"slices"
)

// The earliest-start search of PolicyBackfill asks, for each tested
// job and each candidate node, from which instants of the plan the node
// holds the job's slot for its whole limit. Walking every node's plan
// and running the filter chain at each of its instants, for every tested
// job, made that search most of a backfill pass: hundreds of jobs tested,
// each against every node of its partition, each walk lengthened by the
// reservations made before it.
//
// The answer hardly depends on the job. The chain's outcome on a view of
// a node is a function of the request's shape (what shapeOf keys) and of
// the view, and the views are a function of the node's working copy and
// its events. Only the limit differs between jobs of a shape, and it
// enters last: a walk yields the maximal runs of instants at which the
// node holds the slot (fitRun), and a job may start at a run's first
// instant when its rounded end falls by the run's end. (A later instant
// of the same run ends later in the same run: only first instants
// count.) So the pass keeps, per shape, every partition node's runs in
// one list ordered by start (runCache): the earliest start of a job of
// one node is the first run in the list long enough for its limit, and
// the nodes it may get there are the runs of that instant that are long
// enough too. The general search (several nodes) reads the same runs
// instead of walking the nodes.
//
// A node's runs are computed again only after the node changed: every
// event added to its plan (a reservation, the release of a pass start)
// and every start on it are logged (timeline.touch), and a priority hold
// changes the partitions' held counts. A tested job thus walks the nodes
// that the job before it changed, not the partition.
//
// Requests whose outcome depends on more than their shape (-w, -x,
// --switches, constraints that do not parse) and --comm=model ones (the
// island check reads which GPUs are free, not how many) walk the plan
// for every job (first, spans), which is also the reference the cached
// search is tested against (TestFitRunsMatchWalks).
//
// Two smaller shortcuts of the same kind live in timeline.go: narrow
// leaves as it is a node whose reservations take nothing of what it has
// free now before the job would end (dipAt, cached per node like the
// runs), and newTimeline builds each node's events in one array and
// sorts them once instead of inserting them one by one.

// fitRun is a maximal span [from, to) of the plan's instants at which a
// node holds a slot: from is now or an event's instant, to the first
// instant of the node's events at which it no longer does (never: it
// holds the slot to the end of the plan).
type fitRun struct{ from, to int64 }

// indexedRun is a fitRun of a partition member: node indexes the pass's
// nodes and pos is the node's place in the partition's member list (the
// order in which the walks consider nodes).
type indexedRun struct {
	from, to  int64
	node, pos int32
}

// runKey is what, besides the node's view, decides the filter chain's
// outcome for a request: its shape (which selects the filters and fixes
// the partition, slot, ratios, GPU model, --tmp and parsed constraint)
// and the constraint alternative being tried.
type runKey struct {
	shape shapeKey
	alt   int
}

// runCache holds the runs of every member of one partition for one
// shape.
type runCache struct {
	key runKey
	// runs[i] are node i's runs (storage reused when they change);
	// reserved[i] is whether node i was held for priority when they
	// were computed.
	runs     [][]fitRun
	reserved []bool
	// pos is each node's place in the partition's member list (-1:
	// not a member).
	pos []int32
	// all holds the members' runs by start, then member position.
	all []indexedRun
	// logged is how much of the timeline's change log the runs
	// reflect; held is the partitions' held node count then.
	logged int
	held   int
	// mark stamps the nodes found changed in a sync.
	mark  []uint32
	stamp uint32
}

// Test hooks: noShortcuts makes the pass do without this file's shortcuts
// (every search walks the plan with first and spans, narrow windows
// every held node, newTimeline adds releases one by one), the reference
// the tests compare plans with; verifyCache makes every sync walk every
// member again and panic when a cached run differs from the walk (a
// change the log missed), and narrow check every node it leaves as is.
var noShortcuts, verifyCache = false, false

// touch logs that node i changed (an event in its plan, a start on it).
func (tl *timeline) touch(i int) {
	tl.ver[i]++
	if len(tl.caches) > 0 {
		tl.log = append(tl.log, int32(i))
	}
}

// heldNodes is the pass's count of priority holds (summed over the
// partitions that count them): it grows with every hold.
func heldNodes(p *pass) int {
	n := 0
	for i := range p.parts {
		n += p.parts[i].reserved
	}
	return n
}

// runCacheFor returns the runs of r's shape, brought up to date, or nil
// when r's outcome depends on more than its shape or reads GPU indices.
// s is r's slot (shapeOf wants them all alike).
func (tl *timeline) runCacheFor(p *pass, r *Request, s *Slot) *runCache {
	if noShortcuts || r.NVLinkOnly {
		return nil
	}
	shape, ok := shapeOf(r)
	if !ok {
		return nil
	}
	key := runKey{shape: shape, alt: r.FeatureAlt}
	for _, c := range tl.caches {
		if c.key == key {
			tl.sync(c, p, r, s)
			return c
		}
	}
	c := &runCache{key: key, runs: make([][]fitRun, len(p.nodes)), reserved: make([]bool, len(p.nodes)),
		pos: make([]int32, len(p.nodes)), mark: make([]uint32, len(p.nodes)), logged: len(tl.log), held: heldNodes(p)}
	tl.caches = append(tl.caches, c)
	for i := range c.pos {
		c.pos[i] = -1
	}
	for pos, i := range p.parts[r.Part].members {
		c.pos[i] = int32(pos)
	}
	for pos, i := range p.parts[r.Part].members {
		c.runs[i] = tl.walk(p, r, i, s, c.runs[i][:0])
		c.reserved[i] = p.nodes[i].Reserved
		for _, run := range c.runs[i] {
			c.all = append(c.all, indexedRun{from: run.from, to: run.to, node: int32(i), pos: int32(pos)})
		}
	}
	slices.SortFunc(c.all, compareRuns)
	return c
}

func compareRuns(a, b indexedRun) int {
	if c := cmp.Compare(a.from, b.from); c != 0 {
		return c
	}
	return cmp.Compare(a.pos, b.pos)
}

// sync walks again the members that changed since c was last brought up
// to date: those the log names, and on a new priority hold those whose
// hold is new.
func (tl *timeline) sync(c *runCache, p *pass, r *Request, s *Slot) {
	members := p.parts[r.Part].members
	c.stamp++
	changed := tl.changed[:0]
	mark := func(i int) {
		if c.mark[i] != c.stamp {
			c.mark[i] = c.stamp
			changed = append(changed, i)
		}
	}
	if held := heldNodes(p); held != c.held {
		c.held = held
		for _, i := range members {
			if p.nodes[i].Reserved != c.reserved[i] {
				mark(i)
			}
		}
	}
	for _, i := range tl.log[c.logged:] {
		if c.pos[i] >= 0 {
			mark(int(i))
		}
	}
	c.logged = len(tl.log)
	tl.changed = changed
	for _, i := range changed {
		pos := c.pos[i]
		old := c.runs[i]
		fresh := tl.walk(p, r, i, s, tl.fresh[:0])
		tl.fresh = fresh
		c.reserved[i] = p.nodes[i].Reserved
		// A change leaves the runs before and after it as they were
		// (a reservation changes its node from its start to its end):
		// only the ones between move in the ordered list.
		h := 0
		for h < len(old) && h < len(fresh) && old[h] == fresh[h] {
			h++
		}
		t := 0
		for t < len(old)-h && t < len(fresh)-h && old[len(old)-1-t] == fresh[len(fresh)-1-t] {
			t++
		}
		for _, run := range old[h : len(old)-t] {
			if k, found := slices.BinarySearchFunc(c.all, indexedRun{from: run.from, pos: pos}, compareRuns); found {
				c.all = slices.Delete(c.all, k, k+1)
			}
		}
		for _, run := range fresh[h : len(fresh)-t] {
			x := indexedRun{from: run.from, to: run.to, node: int32(i), pos: pos}
			k, _ := slices.BinarySearchFunc(c.all, x, compareRuns)
			c.all = slices.Insert(c.all, k, x)
		}
		c.runs[i] = append(old[:0], fresh...)
	}
	if verifyCache {
		tl.verify(c, p, r, s)
	}
}

// verify panics when c is not what walking every member gives (a test
// hook: see verifyCache).
func (tl *timeline) verify(c *runCache, p *pass, r *Request, s *Slot) {
	var all []indexedRun
	for pos, i := range p.parts[r.Part].members {
		want := tl.walk(p, r, i, s, nil)
		if !slices.Equal(want, c.runs[i]) {
			panic(fmt.Sprintf("sched: cached runs of node %s are %v, its plan gives %v", p.nodes[i].Info.Name, c.runs[i], want))
		}
		for _, run := range want {
			all = append(all, indexedRun{from: run.from, to: run.to, node: int32(i), pos: int32(pos)})
		}
	}
	slices.SortFunc(all, compareRuns)
	if !slices.Equal(all, c.all) {
		panic(fmt.Sprintf("sched: ordered runs are %v, the members' runs give %v", c.all, all))
	}
}

// walk appends to dst node i's runs for slot s of r: the node's plan
// walked instant by instant, the filter chain run on its view at each.
// A node that the static filters turn away (or that is down or held for
// a higher-priority job) has none.
func (tl *timeline) walk(p *pass, r *Request, i int, s *Slot, dst []fitRun) []fitRun {
	n := &p.nodes[i]
	if !n.Usable || n.Reserved || p.chain.checkStatic(r, s, n) != "" {
		return dst
	}
	evs := tl.ev[i]
	// The view lives in tl: filters take it by pointer through an
	// interface, which would move a local to the heap.
	v := &tl.view
	*v = *n
	v.Shared = nil
	var sum tlSum
	// Only --comm=model's island check reads which GPUs are free (and
	// such requests are not cached): any indices do.
	list := p.emptyGPUs
	from := int64(-1)
	t := tl.now
	for k := 0; ; {
		for ; k < len(evs) && evs[k].at <= t; k++ {
			sum.add(&evs[k])
		}
		c, m, g := sum.free(n)
		v.FreeCPUs, v.FreeMemMB = c, m
		v.FreeGPUs = list[:min(max(g, 0), len(list))]
		v.Idle = c >= capCPUs(n) && m >= capMem(n) && g >= n.Info.GPUs && len(n.Shared) == 0
		good := c >= 0 && m >= 0 && g >= 0 && p.chain.check(r, s, v) == ""
		if good && from < 0 {
			from = t
		} else if !good && from >= 0 {
			dst = append(dst, fitRun{from: from, to: t})
			from = -1
		}
		if k == len(evs) {
			break
		}
		t = evs[k].at
	}
	if from >= 0 {
		dst = append(dst, fitRun{from: from, to: never})
	}
	return dst
}

// earliestCached is earliestOne's search on c: the earliest instant at
// which a member holds the slot for a whole limit, and in tl.cands the
// members that do from then, in member order.
func (tl *timeline) earliestCached(c *runCache, limit int64) (int64, bool) {
	tl.cands = tl.cands[:0]
	best, found := int64(never), false
	for k := range c.all {
		x := &c.all[k]
		if found && x.from > best {
			break
		}
		if tl.end(x.from, limit) <= x.to {
			best, found = x.from, true
			tl.cands = append(tl.cands, x.node)
		}
	}
	return best, found
}
