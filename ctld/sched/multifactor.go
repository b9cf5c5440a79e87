package sched

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Multifactor is the order of a pass as a weighted sum of factors, each
// in [0, 1], as Slurm's priority/multifactor plugin computes it:
//
//		priority = AgeWeight × age + LengthWeight × length + SizeWeight × size
//		         + FairshareWeight × fairshare − nice
//
//	  - age: the time the job has waited eligible over MaxAge up to 1
//	    (Slurm's PriorityMaxAge), growing on at AgeAfterMax of that slope
//	    beyond: a job that waited MaxAge outranks every younger job whose
//	    other factors sum to less than AgeWeight, which bounds how long a
//	    long job can be passed by short ones.
//	  - length: how short the job's time limit is, on a log scale: 1 for a
//	    limit of a minute or less, 0 at LengthRef or more (or no limit).
//	    This is shortest-job-first on the users' own estimates: it cuts
//	    the mean wait the most, and it rewards a limit close to the real
//	    run time (an inflated limit waits longer), where EASY backfill
//	    alone rewards it only when the job can slip into a hole. A narrow
//	    job (one GPU or less) at its partition's maximum limit counts as
//	    one of MaxLimitAs (see there).
//	  - size: how few GPUs the job asks for (Slurm's job size factor; a
//	    CPU-only job counts its CPUs over CPUsPerGPU), linearly as
//	    Slurm's: 1 for one GPU (or less), 0 at SizeRef GPUs or more.
//	  - fairshare: 2^(−usage/share) of the job's account (Slurm's classic
//	    fair-share formula): usage is the account's share of the decayed
//	    GPU-time of all accounts (Snapshot.Usage), share its share of the
//	    cluster (its queue's guarantee over all guarantees, or equal
//	    shares of the accounts in Usage when no queue says). An account
//	    that used exactly its share scores 0.5, an idle one 1. Without
//	    Snapshot.Usage the factor is 0.5 for everyone (it orders nothing).
//
// Every factor is in [0, 1] except age past MaxAge. Ties go to the
// earlier submission, then the lower id. A held job is
// never ordered (the held gate). Multifactor orders passes without
// queues or classes; with them the queues' rules (order.go) decide.
type Multifactor struct {
	AgeWeight float64
	MaxAge    time.Duration
	// AgeAfterMax is the share of the age factor's slope that goes on
	// past MaxAge (0: capped at 1, Slurm's rule). With a cap, in a
	// backlog where most jobs waited longer than MaxAge the order falls
	// back to the other factors alone, and the jobs they rank last (long
	// limits) wait without bound.
	AgeAfterMax float64

	LengthWeight float64
	// LengthRef is the time limit whose length factor is 0.
	LengthRef time.Duration
	// MaxLimitAs, when above 0, is the limit a narrow job (one GPU or
	// less by its size) counts as for its length when it asked for its
	// partition's maximum (MaxTime, or MaxLimit in a partition without
	// one) or for no limit, if MaxLimitAs is shorter. The maximum is
	// what users ask for when they do not know (the most popular single
	// limit in real logs), so it says little about the run time; taken at
	// its word, it put such jobs behind every shorter limit of a burst of
	// one-GPU jobs for the whole burst. Wide jobs keep their limit: ranked
	// earlier, their week-long reservations held whole nodes, and in the
	// replays that cost more than it gave (docs/simulator.md).
	MaxLimitAs time.Duration
	// MaxLimit is the maximum limit in partitions without a MaxTime.
	MaxLimit time.Duration

	// SizeWeight weighs the size factor; a negative weight favours
	// wide jobs (Slurm's PriorityFavorSmall=NO).
	SizeWeight float64
	// SizeRef is the GPU count whose size factor is 0; the factor falls
	// linearly from 1 at one GPU.
	SizeRef int
	// CPUsPerGPU converts a CPU-only job's CPUs into GPUs for its size
	// (0: 8).
	CPUsPerGPU int

	FairshareWeight float64
}

// DefaultMultifactor is the multifactor of policy tide. The weights come
// from trace replays (docs/simulator.md, "The default policy"): length
// twice age, so that a short job goes before a long one of the same age,
// while a job that waited MaxAge goes before a fresh job up to half of
// the length scale shorter, and three tenths of the age slope after
// that; a narrow job at the maximum limit ordered as one of 8 hours; a small
// weight for wide jobs, because the one-GPU jobs passed them (favouring
// few GPUs instead made the p99 wait of 5-8-GPU jobs worse than under
// EASY), linear up to a node and more (SizeRef 9): a whole node's job
// gains on a one-GPU job almost the full weight, where on the log
// scale up to 64 GPUs it gained half.
var DefaultMultifactor = Multifactor{
	AgeWeight:       1500,
	MaxAge:          12 * time.Hour,
	AgeAfterMax:     0.3,
	LengthWeight:    3000,
	LengthRef:       8 * 7 * 24 * time.Hour,
	MaxLimitAs:      8 * time.Hour,
	MaxLimit:        7 * 24 * time.Hour,
	SizeWeight:      -400,
	SizeRef:         9,
	FairshareWeight: 500,
}

// DefaultTideReserveDepth is policy tide's BackfillConfig.ReserveDepth:
// the first blocked jobs in priority order hold reservations, the rest
// start only where they delay none. Reserving for every tested job
// (Slurm's rule) made the plan rigid under overestimated limits: on the
// Alibaba 2023 replays a job that asked for the 7-day maximum fitted
// before none of hundreds of reservations, so such jobs (and CPU-only
// jobs, which the test limit then left untested) waited far longer than
// under EASY (docs/simulator.md, "The default policy"). Depth 4 did as
// well before narrow jobs at the maximum limit were ordered as shorter
// ones (MaxLimitAs); with that, 8 kept wide jobs' p99 closer to EASY's.
const DefaultTideReserveDepth = 8

// Resolved returns c as a pass runs it: PolicyTide is PolicyBackfill
// in the multifactor order (DefaultMultifactor unless c.Priority says)
// with DefaultTideReserveDepth unless c.Backfill says.
func (c Config) Resolved() Config {
	if c.Policy == PolicyTide {
		c.Policy = PolicyBackfill
		if c.Priority == nil {
			m := DefaultMultifactor
			c.Priority = &m
		}
		if c.Backfill.ReserveDepth <= 0 {
			c.Backfill.ReserveDepth = DefaultTideReserveDepth
		}
	}
	return c
}

// Factors are one job's multifactor factors, each in [0, 1], and the
// priority they sum to (nice subtracted).
type Factors struct {
	Age, Length, Size, Fairshare float64
	Priority                     float64
}

// Factors computes j's factors at now; fs is the pass's fair-share
// input (nil: none), parts the partitions (for their maximum limits;
// nil: MaxLimit everywhere).
func (m *Multifactor) Factors(j *api.Job, now time.Time, fs *fairshare, parts map[string]*PartitionInfo) Factors {
	sc := newScorer(m, fs, parts)
	return sc.factors(j, now)
}

// scorer computes the factors of a pass's jobs with its constants
// worked out once and the last inputs remembered: a deep queue holds
// long runs of jobs with the same limit, size and account, and the
// logarithms and the fair-share lookup were most of a pass's ordering
// cost at 100,000 jobs. It computes exactly what Factors does.
type scorer struct {
	m     *Multifactor
	fs    *fairshare
	parts map[string]*PartitionInfo
	// lenLog is the logarithm of LengthRef (0 when it is a minute or
	// less: the factor is then 0), sizeSpan SizeRef − 1 (0 when SizeRef
	// is 1 or less: the factor is then 0).
	lenLog, sizeSpan float64
	// asLength is MaxLimitAs's length factor; part and partMax the last
	// partition looked up and its maximum limit (seconds).
	asLength float64
	part     string
	partMax  int64
	havePart bool
	// The last inputs and outputs.
	lengths    [16]lengthMemo
	gpus, size float64
	account    string
	fair       float64
	haveSz     bool
	haveFair   bool
}

// lengthMemo is one time limit's length factor.
type lengthMemo struct {
	limit  int64
	length float64
	ok     bool
}

func newScorer(m *Multifactor, fs *fairshare, parts map[string]*PartitionInfo) *scorer {
	sc := &scorer{m: m, fs: fs, parts: parts}
	if ref := m.LengthRef.Minutes(); ref > 1 {
		sc.lenLog = math.Log(ref)
	}
	if m.MaxLimitAs > 0 {
		sc.asLength = logShortOf(m.MaxLimitAs.Minutes(), sc.lenLog)
	}
	if m.SizeRef > 1 {
		sc.sizeSpan = float64(m.SizeRef - 1)
	}
	return sc
}

func (sc *scorer) factors(j *api.Job, now time.Time) Factors {
	m := sc.m
	var f Factors
	from := j.EligibleTime
	if from.IsZero() {
		from = j.SubmitTime
	}
	if m.MaxAge > 0 && !from.IsZero() && now.After(from) {
		w := float64(now.Sub(from)) / float64(m.MaxAge)
		f.Age = min(1, w)
		if w > 1 && m.AgeAfterMax > 0 {
			f.Age += m.AgeAfterMax * (w - 1)
		}
	}
	// Limits repeat but interleave (a queue mixes a handful of them): a
	// small cache by the limit's low bits.
	slot := &sc.lengths[uint64(j.TimeLimit)%uint64(len(sc.lengths))]
	if !slot.ok || slot.limit != j.TimeLimit {
		slot.limit, slot.ok = j.TimeLimit, true
		slot.length = logShortOf(float64(j.TimeLimit)/60, sc.lenLog)
		if j.TimeLimit <= 0 || j.TimeLimit == api.Infinite {
			slot.length = 0
		}
	}
	f.Length = slot.length
	g := m.gpus(&j.JobSpec)
	if !sc.haveSz || sc.gpus != g {
		sc.gpus, sc.haveSz = g, true
		sc.size = 0
		if sc.sizeSpan > 0 {
			sc.size = min(1, max(0, 1-(g-1)/sc.sizeSpan))
		}
	}
	f.Size = sc.size
	if sc.asLength > f.Length && g <= 1 && sc.atMax(j) {
		f.Length = sc.asLength
	}
	if !sc.haveFair || sc.account != j.Account {
		sc.account, sc.haveFair = j.Account, true
		sc.fair = sc.fs.factor(j.Account)
	}
	f.Fairshare = sc.fair
	f.Priority = m.AgeWeight*f.Age + m.LengthWeight*f.Length + m.SizeWeight*f.Size +
		m.FairshareWeight*f.Fairshare - float64(j.Nice)
	return f
}

// atMax reports whether j asked for its partition's maximum limit or
// for none.
func (sc *scorer) atMax(j *api.Job) bool {
	if j.TimeLimit <= 0 || j.TimeLimit == api.Infinite {
		return true
	}
	if !sc.havePart || sc.part != j.Partition {
		sc.part, sc.havePart = j.Partition, true
		sc.partMax = int64(sc.m.MaxLimit / time.Second)
		if p := sc.parts[j.Partition]; p != nil && p.MaxTime > 0 && p.MaxTime != api.Infinite {
			sc.partMax = p.MaxTime
		}
	}
	return j.TimeLimit == sc.partMax
}

// FactorsFor returns the factors of jobs at now as a pass over snap
// computes them (one fair-share input from snap's Usage and Queues), for
// the controller's priority listing (sprio). A nil job gets zero
// factors.
func (m *Multifactor) FactorsFor(jobs []*api.Job, snap *Snapshot, now time.Time) []Factors {
	var fs *fairshare
	var parts map[string]*PartitionInfo
	if snap != nil {
		fs, parts = newFairshare(snap), snap.Partitions
	}
	out := make([]Factors, len(jobs))
	sc := newScorer(m, fs, parts)
	for i, j := range jobs {
		if j != nil {
			out[i] = sc.factors(j, now)
		}
	}
	return out
}

// ShareMode reports whether snap configures queues or job classes: a
// pass then orders by the queues' rules (order.go), not by
// Config.Priority.
func (snap *Snapshot) ShareMode() bool { return len(snap.Queues) > 0 || len(snap.QOS) > 0 }

// gpus is the GPU count of a request for its size factor.
func (m *Multifactor) gpus(s *api.JobSpec) float64 {
	if g := s.ReqGPUs(); g > 0 {
		return float64(g)
	}
	per := m.CPUsPerGPU
	if per <= 0 {
		per = 8
	}
	return float64(max(1, s.ReqCPUs())) / float64(per)
}

// logShortOf is 1 − log(v)/log(ref), clamped to [0, 1], with log(ref)
// given: 1 for v ≤ 1, 0 for v ≥ ref (and for a ref of 1 or less, whose
// logRef is 0).
func logShortOf(v, logRef float64) float64 {
	if logRef == 0 {
		return 0
	}
	return min(1, max(0, 1-math.Log(max(v, 1))/logRef))
}

// fairshare is a pass's fair-share input: each account's usage share
// and cluster share.
type fairshare struct {
	usage map[string]float64
	total float64
	share map[string]float64
	even  float64
}

// newFairshare prepares the fair-share factor from snap (nil when the
// snapshot has no usage).
func newFairshare(snap *Snapshot) *fairshare {
	if len(snap.Usage) == 0 {
		return nil
	}
	fs := &fairshare{usage: snap.Usage}
	for _, u := range snap.Usage {
		fs.total += u
	}
	guaranteed := 0
	for _, q := range snap.Queues {
		if q.Parent == "" {
			guaranteed += q.Guaranteed
		}
	}
	if guaranteed > 0 {
		fs.share = make(map[string]float64, len(snap.Queues))
		for name, q := range snap.Queues {
			if q.Parent == "" && q.Guaranteed > 0 {
				fs.share[name] = float64(q.Guaranteed) / float64(guaranteed)
			}
		}
	}
	fs.even = 1 / float64(len(snap.Usage))
	return fs
}

// factor is 2^(−usage/share) of account (0.5 without usage data).
func (fs *fairshare) factor(account string) float64 {
	if fs == nil {
		return 0.5
	}
	share := fs.even
	if fs.share != nil {
		share = fs.share[account]
	}
	if fs.total <= 0 {
		return 1
	}
	if share <= 0 {
		// An account with no share of the cluster comes after every
		// account that has one, as far as its usage goes.
		if fs.usage[account] > 0 {
			return 0
		}
		return 0.5
	}
	return math.Exp2(-(fs.usage[account] / fs.total) / share)
}

// SortPending sorts pending (nil entries allowed, sorted last) in the
// order a pass under cfg at now takes them when the snapshot has no
// queues or classes: by multifactor priority under cfg.Priority, else
// by EffPriority. The simulator sorts its queue with it so that a
// prefix of the queue is what the pass would consider first.
func SortPending(pending []*api.Job, snap *Snapshot, now time.Time, cfg Config) {
	keys := pendingKeys(nil, pending, snap, now, cfg, nil)
	sortPending(keys, nil)
	for i := range keys {
		pending[i] = keys[i].job
	}
}

// pendKey is a pending job's place in the order of a pass without
// queues: hi is its score as an integer that sorts the same way,
// higher scores first (scoreKey), then submit and id. The pass sorts
// 100,000 of them: integers compare faster than floats, and the id kept
// here saves a visit to the job on every tie.
type pendKey struct {
	hi     uint64
	submit int64
	id     uint64
	job    *api.Job
	// limit is the job's --time and class its class (tail.go): what a
	// pass reads of a job of the queue's tail, gathered here, in the
	// snapshot's order.
	limit int64
	class int32
}

// scoreKey maps a score to an integer that is smaller for higher
// scores (IEEE 754 bits with the sign folded, inverted); −0 counts as 0.
func scoreKey(score float64) uint64 {
	if score == 0 {
		score = 0
	}
	b := math.Float64bits(score)
	if b>>63 == 1 {
		b = ^b
	} else {
		b |= 1 << 63
	}
	return ^b
}

// score is the score k was made from.
func (k pendKey) score() float64 {
	b := ^k.hi
	if b>>63 == 1 {
		b &^= 1 << 63
	} else {
		b = ^b
	}
	return math.Float64frombits(b)
}

// pendingKeys computes the order keys of pending into dst's memory (nil:
// new); nil jobs get keys that sort after every job. cls, when not nil,
// numbers the jobs' classes.
func pendingKeys(dst []pendKey, pending []*api.Job, snap *Snapshot, now time.Time, cfg Config, cls *classes) []pendKey {
	keys := slices.Grow(dst[:0], len(pending))
	var sc *scorer
	if cfg.Priority != nil {
		var fs *fairshare
		var parts map[string]*PartitionInfo
		if snap != nil {
			fs, parts = newFairshare(snap), snap.Partitions
		}
		sc = newScorer(cfg.Priority, fs, parts)
	}
	for _, j := range pending {
		if j == nil {
			continue
		}
		k := pendKey{submit: j.SubmitTime.UnixNano(), id: j.ID, job: j, limit: j.TimeLimit}
		if cls != nil {
			k.class = cls.of(j)
		}
		if sc != nil {
			k.hi = scoreKey(sc.factors(j, now).Priority)
		} else {
			k.hi = scoreKey(float64(priorityOf(j)))
		}
		keys = append(keys, k)
	}
	for range len(pending) - len(keys) {
		keys = append(keys, pendKey{hi: math.MaxUint64, submit: math.MaxInt64, id: math.MaxUint64})
	}
	return keys
}

// sortPending sorts keys as comparePending orders them: a radix sort on
// hi, byte by byte (bytes every key shares are skipped), then the runs of
// equal hi by submit and id. At 100,000 jobs it takes a third of the
// comparison sort's time, which was a sixth of a whole pass. buf, when
// not nil, lends (and keeps) the radix sort's second array.
func sortPending(keys []pendKey, buf *[]pendKey) {
	if len(keys) < 512 {
		slices.SortFunc(keys, comparePending)
		return
	}
	var counts [8][256]int
	for i := range keys {
		h := keys[i].hi
		for d := range counts {
			counts[d][byte(h>>(8*d))]++
		}
	}
	var other []pendKey
	if buf != nil {
		other = *buf
	}
	if cap(other) < len(keys) {
		other = make([]pendKey, len(keys))
		if buf != nil {
			*buf = other
		}
	}
	src, dst := keys, other[:len(keys)]
	for d := range counts {
		c := &counts[d]
		if c[byte(src[0].hi>>(8*d))] == len(src) {
			continue
		}
		sum := 0
		for b, n := range c {
			c[b] = sum
			sum += n
		}
		for i := range src {
			b := byte(src[i].hi >> (8 * d))
			dst[c[b]] = src[i]
			c[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j].hi == keys[i].hi {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(keys[i:j], comparePending)
		}
		i = j
	}
}

func comparePending(a, b pendKey) int {
	if a.hi != b.hi {
		return cmp.Compare(a.hi, b.hi)
	}
	if a.submit != b.submit {
		return cmp.Compare(a.submit, b.submit)
	}
	return cmp.Compare(a.id, b.id)
}
