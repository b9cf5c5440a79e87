package sched

import (
	"cmp"
	"slices"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// The order of a pass. Without queues and classes it is orderPending's:
// EffPriority (else Priority) descending, then submit time, then id.
//
// With them (share mode), jobs are grouped by queue. Inside a queue they
// go by aged level descending, then Nice ascending, then submit time,
// then id; a job that was waiting for its victims to leave in the last
// pass (Reason WaitingForReclaim or Preempting) goes first, so that the
// resources its victims free are held for it. Across queues the pass
// takes turns by weighted round-robin: the next job is the head of the
// queue whose used share (GPUs of its running jobs and of its starts in
// this pass, over its guarantee, at least 1) is lowest; ties go to the
// higher head level, then the older head. A queue of 8 guaranteed GPUs
// holding 4 thus goes before one of 64 holding 16, and no queue starves
// another by size. Jobs outside any queue form one more group whose
// share is their GPUs over the GPUs no queue is guaranteed (at least 1):
// they compete for the unguaranteed part of the cluster like a queue
// that owns it. A heap over the groups keeps each step O(log queues).

// entry is one pending job with its ordering keys.
type entry struct {
	job *api.Job
	// level is the job's level before aging, aged after; starving is
	// when it passed the starvation threshold (zero = not starving).
	level, aged int
	starving    time.Time
	qos         *QOSInfo
	// queue indexes share.queues (-1 = none); ahead counts the jobs of
	// its group ordered before it that stay pending.
	queue  int
	ahead  int
	urgent bool
	nice   int
	submit int64
	id     uint64
	// class is the job's class (tail.go; 0 = none, or in share mode)
	// and limit its --time.
	class int32
	limit int64
}

// order hands out the pass's jobs one at a time.
type order struct {
	sh *share

	// Legacy mode.
	legacy []pendKey
	pos    int
	cur    entry

	// Share mode: entries, groups of entry indices (sorted), and the
	// heap of non-empty groups.
	entries []entry
	groups  []ogroup
	heap    []int
	hpos    []int
	top     int // group of the entry last handed out
}

type ogroup struct {
	queue int // -1 = jobs outside any queue
	idx   []int32
	head  int
	// pending counts the group's jobs decided pending so far.
	pending int
	// The heap key, cached from the head and the queue's share (key).
	urgent   bool
	use, den int
	aged     int
	submit   int64
	id       uint64
}

// key refreshes group g's cached heap key.
func (o *order) key(g int) {
	gr := &o.groups[g]
	e := &o.entries[gr.idx[gr.head]]
	gr.urgent, gr.aged, gr.submit, gr.id = e.urgent, e.aged, e.submit, e.id
	gr.use, gr.den = o.share(gr.queue)
}

// newOrder prepares the order of pending for the pass.
func newOrder(snap *Snapshot, sh *share, now time.Time, cfg Config, sc *Scratch) *order {
	pending := snap.Pending
	o := &order{sh: sh}
	if sh == nil {
		o.legacy = orderPending(pending, snap, now, cfg, sc)
		return o
	}
	o.entries = make([]entry, 0, len(pending))
	o.groups = make([]ogroup, len(sh.queues)+1)
	for g := range o.groups {
		o.groups[g].queue = g
	}
	o.groups[len(sh.queues)].queue = -1
	count := make([]int32, len(o.groups)+1)
	for _, j := range pending {
		if j == nil {
			continue
		}
		q := sh.qosOf(j.QOS)
		e := entry{job: j, qos: q, queue: sh.queueOf(j.Account), nice: j.Nice, submit: j.SubmitTime.UnixNano(), id: j.ID,
			urgent: j.Reason.Reclaims()}
		e.level = JobLevel(j, q)
		e.aged, e.starving = AgedLevel(e.level, j, now, sh.age)
		count[o.groupOf(&e)+1]++
		o.entries = append(o.entries, e)
	}
	// Sort compact keys group by group (a counting sort places them),
	// then lay the entries out in that order, so that the pass walks
	// them sequentially.
	for g := 1; g < len(count); g++ {
		count[g] += count[g-1]
	}
	keys := make([]okey, len(o.entries))
	fill := slices.Clone(count[:len(o.groups)])
	for x := range o.entries {
		e := &o.entries[x]
		g := o.groupOf(e)
		keys[fill[g]] = okey{hi: packKey(e), submit: e.submit, id: e.id, idx: int32(x)}
		fill[g]++
	}
	sorted := make([]entry, len(o.entries))
	idx := make([]int32, len(o.entries))
	for g := range o.groups {
		seg := keys[count[g]:count[g+1]]
		slices.SortFunc(seg, compareKeys)
		for k := range seg {
			at := count[g] + int32(k)
			sorted[at] = o.entries[seg[k].idx]
			idx[at] = at
		}
		o.groups[g].idx = idx[count[g]:count[g+1]]
	}
	o.entries = sorted
	o.hpos = make([]int, len(o.groups))
	for g := range o.groups {
		o.hpos[g] = -1
		if len(o.groups[g].idx) == 0 {
			continue
		}
		o.key(g)
		o.hpos[g] = len(o.heap)
		o.heap = append(o.heap, g)
	}
	for k := len(o.heap)/2 - 1; k >= 0; k-- {
		o.down(k)
	}
	return o
}

// groupOf is the group of an entry: its queue, or the last group.
func (o *order) groupOf(e *entry) int {
	if e.queue < 0 {
		return len(o.groups) - 1
	}
	return e.queue
}

// okey is an entry's sort key inside its group: hi packs urgency, aged
// level and nice so that most comparisons need one integer.
type okey struct {
	hi     uint64
	submit int64
	id     uint64
	idx    int32
}

// packKey packs what compareEntries compares first: urgent jobs first
// (bit 63 clear), then higher aged levels (bits 32-39 hold 255 minus
// the level), then lower nice (bits 0-31, offset).
func packKey(e *entry) uint64 {
	var k uint64
	if !e.urgent {
		k = 1 << 63
	}
	k |= uint64(255-min(max(e.aged, 0), 255)) << 32
	return k | uint64(uint32(int64(min(max(e.nice, -1<<31), 1<<31-1))+1<<31))
}

func compareKeys(a, b okey) int {
	if c := cmp.Compare(a.hi, b.hi); c != 0 {
		return c
	}
	if c := cmp.Compare(a.submit, b.submit); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// compareEntries is the order inside a group (see the file comment);
// packKey and compareKeys implement it on compact keys.
func compareEntries(a, b *entry) int {
	if a.urgent != b.urgent {
		if a.urgent {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(b.aged, a.aged); c != 0 {
		return c
	}
	if c := cmp.Compare(a.nice, b.nice); c != 0 {
		return c
	}
	if c := cmp.Compare(a.submit, b.submit); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// next returns the next job's entry, or nil at the end. The entry stays
// valid until the following call of next.
func (o *order) next() *entry {
	if o.sh == nil {
		if o.pos >= len(o.legacy) {
			return nil
		}
		k := &o.legacy[o.pos]
		o.pos++
		o.cur = entry{job: k.job, queue: -1, id: k.id, class: k.class, limit: k.limit}
		return &o.cur
	}
	if len(o.heap) == 0 {
		return nil
	}
	g := o.heap[0]
	o.top = g
	gr := &o.groups[g]
	e := &o.entries[gr.idx[gr.head]]
	e.ahead = gr.pending
	return e
}

// done tells the order that the job last handed out was decided;
// started is set when it started (its queue's share grew).
func (o *order) done(e *entry, started bool) {
	if o.sh == nil {
		return
	}
	g := o.top
	gr := &o.groups[g]
	gr.head++
	if !started {
		gr.pending++
	}
	if gr.head >= len(gr.idx) {
		o.remove(o.hpos[g])
	} else {
		o.key(g)
		o.fix(o.hpos[g])
	}
	if started && e.queue >= 0 {
		for _, a := range o.sh.queues[e.queue].chain[1:] {
			if k := o.hpos[a]; k >= 0 {
				o.key(a)
				o.fix(k)
			}
		}
	}
}

// less orders two groups of the heap by their heads.
func (o *order) less(ga, gb int) bool {
	a, b := &o.groups[ga], &o.groups[gb]
	if a.urgent != b.urgent {
		return a.urgent
	}
	if c := ratioLess(a.use, a.den, b.use, b.den); c != 0 {
		return c < 0
	}
	if a.aged != b.aged {
		return a.aged > b.aged
	}
	if a.submit != b.submit {
		return a.submit < b.submit
	}
	return a.id < b.id
}

// share returns a group's used share as use/den.
func (o *order) share(queue int) (use, den int) {
	if queue < 0 {
		return o.sh.noQueueUse, max(o.sh.unguaranteed, 1)
	}
	q := &o.sh.queues[queue]
	return q.use, max(q.info.Guaranteed, 1)
}

func (o *order) swap(i, j int) {
	o.heap[i], o.heap[j] = o.heap[j], o.heap[i]
	o.hpos[o.heap[i]] = i
	o.hpos[o.heap[j]] = j
}

func (o *order) up(k int) {
	for k > 0 {
		parent := (k - 1) / 2
		if !o.less(o.heap[k], o.heap[parent]) {
			return
		}
		o.swap(k, parent)
		k = parent
	}
}

func (o *order) down(k int) {
	n := len(o.heap)
	for {
		l := 2*k + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && o.less(o.heap[r], o.heap[l]) {
			m = r
		}
		if !o.less(o.heap[m], o.heap[k]) {
			return
		}
		o.swap(k, m)
		k = m
	}
}

func (o *order) fix(k int) {
	o.down(k)
	o.up(k)
}

func (o *order) remove(k int) {
	last := len(o.heap) - 1
	g := o.heap[k]
	if k != last {
		o.swap(k, last)
	}
	o.heap = o.heap[:last]
	o.hpos[g] = -1
	if k < last {
		o.fix(k)
	}
}
