package sched

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Sharing the cluster (issue 5): levels, aging, queue quotas and
// borrowing. The pass turns the machinery on when the snapshot names
// queues or job classes (Snapshot.Queues or Snapshot.QOS); without
// either it orders and places jobs exactly as before.
//
// GPU accounting. A job's GPUs are the GPU indices of its allocation,
// summed over its nodes: whole GPUs count one each, and a slice
// allocation counts one GPU per sliced GPU index (a 10 GB slice of one
// GPU counts as 1), so that quotas never let slices multiply a share.
//
// Borrowing. A queue's use above its Guaranteed is borrowed. The GPUs a
// queue may borrow form one pool: the GPUs no top-level queue is
// guaranteed, plus, for every other top-level queue, the part of its
// guarantee it does not use, bounded by its LendLimit; minus what every
// queue already borrows and what jobs outside any queue hold. Borrowers
// are assumed to draw from the unguaranteed GPUs first. Cap and
// BorrowLimit apply to the job's queue and to each of its ancestors
// (a child's use counts for its parents), the pool to its top-level
// queue; siblings inside a parent share the parent's guarantee freely.

// DefaultStarvationAge is the aging threshold when Config.StarvationAge
// is 0.
const DefaultStarvationAge = 30 * time.Minute

// maxAgedLevel caps aging: a starving job outranks every fresh job, but
// the level stays a small number.
const maxAgedLevel = 20

// defaultLevel is the level of a job with neither a level nor a class.
const defaultLevel = 5

// DefaultQOS returns the job classes every cluster ships with, fresh on
// each call so that callers may adjust them, so that the controller's
// config and the tests share one table. Levels 1-10; times in seconds.
func DefaultQOS() map[string]*QOSInfo {
	return map[string]*QOSInfo{
		api.QOSTraining: {Name: api.QOSTraining, MinLevel: 3, MaxLevel: 8, DefaultLevel: 5,
			Mode: api.PreemptRequeue, PreemptGap: 2, GraceTime: 300, MinRuntime: 600},
		api.QOSInference: {Name: api.QOSInference, MinLevel: 6, MaxLevel: 10, DefaultLevel: 8,
			Mode: api.PreemptNever},
		api.QOSBatch: {Name: api.QOSBatch, MinLevel: 1, MaxLevel: 6, DefaultLevel: 3,
			Mode: api.PreemptRequeue, PreemptGap: 1, GraceTime: 60, MinRuntime: 60},
		api.QOSDebug: {Name: api.QOSDebug, MinLevel: 1, MaxLevel: 4, DefaultLevel: 2,
			Mode: api.PreemptCancel, PreemptGap: 1, GraceTime: 10, MinRuntime: 0, MaxTime: 7200},
	}
}

// preemptible reports whether jobs of class q may be preempted at all.
func (q *QOSInfo) preemptible() bool {
	return q != nil && q.Mode != "" && q.Mode != api.PreemptNever
}

// gap is how many levels above a victim of class q a same-queue job
// must be (at least 1).
func (q *QOSInfo) gap() int {
	if q == nil || q.PreemptGap < 1 {
		return 1
	}
	return q.PreemptGap
}

// JobLevel is a pending job's level before aging, so that the
// controller's Job.Level and the scheduler agree: Job.Level when the
// controller set it, else JobSpec.Priority when it is 1-10, else the
// class's DefaultLevel (5 without a class), clamped to the class's
// range. q may be nil.
func JobLevel(j *api.Job, q *QOSInfo) int {
	lvl := defaultLevel
	switch {
	case j.Share.Level != 0:
		lvl = j.Share.Level
	case j.JobSpec.Priority >= api.MinLevel && j.JobSpec.Priority <= api.MaxLevel:
		lvl = int(j.JobSpec.Priority)
	case q != nil && q.DefaultLevel > 0:
		lvl = q.DefaultLevel
	}
	if q != nil {
		if q.MinLevel > 0 && lvl < q.MinLevel {
			lvl = q.MinLevel
		}
		if q.MaxLevel > 0 && lvl > q.MaxLevel {
			lvl = q.MaxLevel
		}
	}
	return lvl
}

// AgedLevel applies aging to level: a job eligible since EligibleTime
// (else SubmitTime) is Starving from that time plus age, and its level
// rises by one per full age waited beyond that, up to 20. age 0 means
// DefaultStarvationAge, negative turns aging off (zero since).
func AgedLevel(level int, j *api.Job, now time.Time, age time.Duration) (aged int, since time.Time) {
	if age == 0 {
		age = DefaultStarvationAge
	}
	from := j.EligibleTime
	if from.IsZero() {
		from = j.SubmitTime
	}
	if age < 0 || from.IsZero() {
		return level, time.Time{}
	}
	since = from.Add(age)
	if now.Before(since) {
		return level, time.Time{}
	}
	return min(level+int(now.Sub(since)/age), max(level, maxAgedLevel)), since
}

// queueState is one queue in a pass.
type queueState struct {
	info *QueueInfo
	// chain is the queue then its ancestors (indices); top is the last.
	chain []int
	// use is the GPUs held by the queue's jobs and its descendants'
	// (running plus started in this pass).
	use int
	// heldFor is a Starving job that the queue's quota turned away in
	// this pass (0 = none): the queue's later jobs wait for it, so that
	// a stream of smaller jobs cannot keep a big one out forever.
	heldFor uint64
}

// userKey names one user's use inside one queue (per-user limits).
type userKey struct {
	queue int
	user  string
}

type userUse struct{ jobs, gpus int }

// share is the per-pass state of the sharing machinery; nil when the
// snapshot names neither queues nor classes.
type share struct {
	now  time.Time
	age  time.Duration
	qos  map[string]*QOSInfo
	defQ *QOSInfo

	queues []queueState
	qIdx   map[string]int
	// unguaranteed is the usable GPUs no top-level queue is guaranteed
	// (at least 0); noQueueUse the GPUs of jobs outside any queue.
	unguaranteed int
	noQueueUse   int
	// users holds per-user use for queues with per-user limits (nil
	// when no queue has one).
	users map[userKey]*userUse

	running []RunningJob
	// runQueue is each running job's queue index (-1 = none), runGPUs
	// its GPUs, runQOS its class.
	runQueue []int
	runGPUs  []int
	runQOS   []*QOSInfo
	// chosen marks running jobs picked as victims in this pass.
	chosen []bool
	// preemptFor lists, per pending job, the running jobs already
	// preempting for it.
	preemptFor map[uint64][]int
	// attempts and scans count the victim searches and candidate scans
	// of the pass (see preempt.go).
	attempts, scans int
	// details caches quota messages (detail).
	details map[detailKey]string
}

// newShare builds the pass's sharing state, or nil when snap configures
// neither queues nor classes.
func newShare(snap *Snapshot, cfg Config, now time.Time) *share {
	if !snap.ShareMode() {
		return nil
	}
	sh := &share{now: now, age: cfg.StarvationAge, qos: snap.QOS, qIdx: make(map[string]int, len(snap.Queues))}
	if sh.age == 0 {
		sh.age = DefaultStarvationAge
	}
	sh.defQ = snap.QOS[snap.DefaultQOS]
	for name, q := range snap.Queues {
		if q != nil {
			sh.qIdx[name] = -1
		}
	}
	sh.queues = make([]queueState, 0, len(sh.qIdx))
	for _, name := range slices.Sorted(maps.Keys(sh.qIdx)) {
		sh.qIdx[name] = len(sh.queues)
		sh.queues = append(sh.queues, queueState{info: snap.Queues[name]})
	}
	limits := false
	for qi := range sh.queues {
		q := &sh.queues[qi]
		// Walk up the parents; a cycle or unknown parent ends the chain.
		seen := map[int]bool{}
		for at := qi; at >= 0 && !seen[at]; {
			seen[at] = true
			q.chain = append(q.chain, at)
			parent, ok := sh.qIdx[sh.queues[at].info.Parent]
			if !ok || sh.queues[at].info.Parent == "" {
				break
			}
			at = parent
		}
		limits = limits || q.info.MaxRunningPerUser > 0 || q.info.MaxGPUsPerUser > 0
	}
	if limits {
		sh.users = map[userKey]*userUse{}
	}
	total := 0
	for i := range snap.Nodes {
		if snap.Nodes[i].Usable {
			total += snap.Nodes[i].GPUs
		}
	}
	guaranteed := 0
	for qi := range sh.queues {
		if len(sh.queues[qi].chain) == 1 {
			guaranteed += max(sh.queues[qi].info.Guaranteed, 0)
		}
	}
	sh.unguaranteed = max(total-guaranteed, 0)

	sh.running = snap.Running
	n := len(snap.Running)
	sh.runQueue, sh.runGPUs, sh.runQOS, sh.chosen = make([]int, n), make([]int, n), make([]*QOSInfo, n), make([]bool, n)
	for k := range snap.Running {
		rj := &snap.Running[k]
		gpus := allocGPUs(rj.Alloc)
		sh.runGPUs[k] = gpus
		sh.runQOS[k] = sh.qosOf(rj.QOS)
		qi := sh.queueOf(rj.Queue)
		sh.runQueue[k] = qi
		sh.account(qi, rj.User, gpus)
		if rj.Preempting && rj.PreemptFor != 0 {
			if sh.preemptFor == nil {
				sh.preemptFor = map[uint64][]int{}
			}
			sh.preemptFor[rj.PreemptFor] = append(sh.preemptFor[rj.PreemptFor], k)
		}
	}
	return sh
}

// allocGPUs counts an allocation's GPUs (see GPU accounting above).
func allocGPUs(alloc []api.NodeAlloc) int {
	n := 0
	for k := range alloc {
		n += len(alloc[k].GPUs)
	}
	return n
}

// qosOf resolves a class name: the named class, else the default one
// (nil when neither exists).
func (sh *share) qosOf(name string) *QOSInfo {
	if q, ok := sh.qos[name]; ok && q != nil {
		return q
	}
	return sh.defQ
}

// queueOf is the index of the queue named by an account (-1 = none).
func (sh *share) queueOf(account string) int {
	if qi, ok := sh.qIdx[account]; ok {
		return qi
	}
	return -1
}

// account adds gpus and one job of user to queue qi and its ancestors.
func (sh *share) account(qi int, user string, gpus int) {
	if qi < 0 {
		sh.noQueueUse += gpus
		return
	}
	for _, a := range sh.queues[qi].chain {
		sh.queues[a].use += gpus
		if sh.users != nil && sh.hasUserLimits(a) {
			k := userKey{a, user}
			u := sh.users[k]
			if u == nil {
				u = &userUse{}
				sh.users[k] = u
			}
			u.jobs++
			u.gpus += gpus
		}
	}
}

func (sh *share) hasUserLimits(qi int) bool {
	q := sh.queues[qi].info
	return q.MaxRunningPerUser > 0 || q.MaxGPUsPerUser > 0
}

// over is how many GPUs queue qi holds above its guarantee with extra
// more.
func (sh *share) over(qi, extra int) int {
	q := &sh.queues[qi]
	return max(q.use+extra-max(q.info.Guaranteed, 0), 0)
}

// pool is how many GPUs queues may still borrow beyond their
// guarantees, seen from the top-level queue top (its own idle guarantee
// does not count: it is not borrowing from itself).
func (sh *share) pool(top int) int {
	avail := sh.unguaranteed - sh.noQueueUse
	for qi := range sh.queues {
		q := &sh.queues[qi]
		if len(q.chain) != 1 {
			continue
		}
		avail -= sh.over(qi, 0)
		if qi == top {
			continue
		}
		idle := max(max(q.info.Guaranteed, 0)-q.use, 0)
		if l := q.info.LendLimit; l >= 0 {
			idle = min(idle, l)
		}
		avail += idle
	}
	return avail
}

// verdict is the outcome of the quotas for one job.
type verdict struct {
	// borrowed is how many of the job's GPUs its queue borrows.
	borrowed int
	// reason and detail say why it may not start (reason "" = it may).
	reason api.ReasonCode
	detail string
	// deficit is how many GPUs its own queue's jobs would have to give
	// back for the quotas to admit it (0 when that would not help:
	// per-user limits), which same-queue preemption may free.
	deficit int
}

// fail records a failed quota with its deficit; the first failure
// names the reason, the largest deficit wins.
func (v *verdict) fail(reason api.ReasonCode, detail string, deficit int) {
	if v.reason == "" {
		v.reason, v.detail = reason, detail
	}
	v.deficit = max(v.deficit, deficit)
}

// admit applies the quotas of queue qi to a job of user that needs gpus
// GPUs and has class q. A job outside any queue is admitted.
func (sh *share) admit(qi int, user string, gpus int, q *QOSInfo) verdict {
	var v verdict
	if qi < 0 {
		return v
	}
	chain := sh.queues[qi].chain
	if sh.users != nil {
		for _, a := range chain {
			info := sh.queues[a].info
			u := sh.users[userKey{a, user}]
			if u == nil {
				u = &userUse{}
			}
			if info.MaxRunningPerUser > 0 && u.jobs >= info.MaxRunningPerUser {
				v.fail(api.ReasonUserLimit, sh.detail(detailKey{kind: 1, q: a, a: u.jobs, user: user}, func() string {
					return fmt.Sprintf("user %s runs %d/%d jobs in queue %s (MaxRunningPerUser)", user, u.jobs, info.MaxRunningPerUser, info.Name)
				}), 0)
				return v
			}
			if info.MaxGPUsPerUser > 0 && u.gpus+gpus > info.MaxGPUsPerUser {
				v.fail(api.ReasonUserLimit, sh.detail(detailKey{kind: 2, q: a, a: u.gpus, b: gpus, user: user}, func() string {
					return fmt.Sprintf("user %s holds %d/%d GPUs in queue %s, job needs %d (MaxGPUsPerUser)", user, u.gpus, info.MaxGPUsPerUser, info.Name, gpus)
				}), 0)
				return v
			}
		}
	}
	if gpus == 0 {
		return v
	}
	for _, a := range chain {
		st := &sh.queues[a]
		if c := st.info.Cap; c > 0 && st.use+gpus > c {
			v.fail(api.ReasonQuotaExceeded, sh.detail(detailKey{kind: 3, q: a, a: st.use}, func() string {
				return fmt.Sprintf("queue %s %d/%d GPUs", st.info.Name, st.use, c)
			}), st.use+gpus-c)
		}
	}
	v.borrowed = sh.over(qi, gpus) - sh.over(qi, 0)
	for _, a := range chain {
		st := &sh.queues[a]
		after := sh.over(a, gpus)
		if bl := st.info.BorrowLimit; bl >= 0 && after > bl && after > sh.over(a, 0) {
			v.fail(api.ReasonQuotaExceeded, sh.detail(detailKey{kind: 4, q: a, a: after}, func() string {
				return fmt.Sprintf("queue %s would borrow %d GPUs, BorrowLimit %d", st.info.Name, after, bl)
			}), after-max(bl, sh.over(a, 0)))
		}
	}
	top := chain[len(chain)-1]
	inc := sh.over(top, gpus) - sh.over(top, 0)
	if (v.borrowed > 0 || inc > 0) && q != nil && !q.preemptible() {
		n := max(v.borrowed, inc)
		v.fail(api.ReasonQuotaExceeded, sh.detail(detailKey{kind: 5, q: qi, a: n, user: q.Name}, func() string {
			return fmt.Sprintf("queue %s would borrow %d GPUs; class %s is never preempted", sh.queues[qi].info.Name, n, q.Name)
		}), n)
	}
	if inc > 0 {
		if avail := sh.pool(top); inc > avail {
			st := &sh.queues[top]
			v.fail(api.ReasonQuotaExceeded, sh.detail(detailKey{kind: 6, q: top, a: st.use, b: inc, c: max(avail, 0)}, func() string {
				return fmt.Sprintf("queue %s %d/%d GPUs guaranteed, %d to borrow, %d lendable",
					st.info.Name, st.use, max(st.info.Guaranteed, 0), inc, max(avail, 0))
			}), inc-max(avail, 0))
		}
	}
	if v.reason != "" {
		v.borrowed = 0
	}
	return v
}

// holdFor reserves the quota of queue qi and its ancestors for the
// Starving job id that the quota turned away.
func (sh *share) holdFor(qi int, id uint64) {
	for _, a := range sh.queues[qi].chain {
		if sh.queues[a].heldFor == 0 {
			sh.queues[a].heldFor = id
		}
	}
}

// held reports the Starving job that holds queue qi's quota (or an
// ancestor's), 0 when none does.
func (sh *share) held(qi int) uint64 {
	for _, a := range sh.queues[qi].chain {
		if id := sh.queues[a].heldFor; id != 0 {
			return id
		}
	}
	return 0
}

// heldDetail is the message of a job of queue qi kept out by the
// starving job id that holds the queue's quota: one string for the
// queue's whole tail, not one formatted per job.
func (sh *share) heldDetail(qi int, id uint64) string {
	return sh.detail(detailKey{kind: 7, q: qi, a: int(id)}, func() string {
		return fmt.Sprintf("queue %s held for starving job %d", sh.queues[qi].info.Name, id)
	})
}

// detailKey names one quota message by what it says, so that the many
// jobs of a deep queue that fail the same way share one string.
type detailKey struct {
	kind, q, a, b, c int
	user             string
}

// detail returns the message of key, formatting it on first use.
func (sh *share) detail(key detailKey, format func() string) string {
	if d, ok := sh.details[key]; ok {
		return d
	}
	if sh.details == nil {
		sh.details = map[detailKey]string{}
	}
	d := format()
	sh.details[key] = d
	return d
}

// ratio compares the share used by two groups as fractions use/den.
func ratioLess(useA, denA, useB, denB int) int {
	l, r := useA*denB, useB*denA
	switch {
	case l < r:
		return -1
	case l > r:
		return 1
	}
	return 0
}
