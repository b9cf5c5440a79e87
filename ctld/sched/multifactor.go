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
//		priority = AgeWeight × age + SizeWeight × size + FairshareWeight × fairshare − nice
//
//	  - age: the time the job has waited eligible over MaxAge, capped at
//	    1 (Slurm's PriorityMaxAge): a job that waited MaxAge outranks every
//	    younger job whose other factors sum to less than AgeWeight, which
//	    bounds how long a big job can be passed by small ones.
//	  - size: how small the request is, in GPU-hours (GPUs × time limit;
//	    a CPU-only job counts its CPUs over CPUsPerGPU as GPUs), on a log
//	    scale: 1 for a request of at most a minute of one GPU, 0 at SizeRef
//	    GPU-hours or more. Favouring small requests is shortest-job-first
//	    on the users' own estimates: it cuts the mean wait the most, and
//	    it rewards a time limit close to the real run time (an inflated
//	    limit waits longer), the opposite of what EASY backfill alone
//	    does with estimates.
//	  - fairshare: 2^(−usage/share) of the job's account (Slurm's classic
//	    fair-share formula): usage is the account's share of the decayed
//	    GPU-time of all accounts (Snapshot.Usage), share its share of the
//	    cluster (its queue's guarantee over all guarantees, or equal
//	    shares of the accounts in Usage when no queue says). An account
//	    that used exactly its share scores 0.5, an idle one 1. Without
//	    Snapshot.Usage the factor is 0.5 for everyone (it orders nothing).
//
// Ties go to the earlier submission, then the lower id. A held job is
// never ordered (the held gate). Multifactor orders passes without
// queues or classes; with them the queues' rules (order.go) decide.
type Multifactor struct {
	AgeWeight float64
	MaxAge    time.Duration

	SizeWeight float64
	// SizeRef is the request, in GPU-hours, whose size factor is 0.
	SizeRef float64
	// CPUsPerGPU converts a CPU-only job's CPUs into GPUs for its size
	// (0: 8).
	CPUsPerGPU int

	FairshareWeight float64
}

// DefaultMultifactor is the multifactor of policy tide; the weights come
// from trace replays (docs/simulator.md, "The default policy").
var DefaultMultifactor = Multifactor{
	AgeWeight:       1000,
	MaxAge:          8 * time.Hour,
	SizeWeight:      1000,
	SizeRef:         8 * 24 * 7,
	FairshareWeight: 500,
}

// Factors are one job's multifactor factors, each in [0, 1], and the
// priority they sum to (nice subtracted).
type Factors struct {
	Age, Size, Fairshare float64
	Priority             float64
}

// Factors computes j's factors at now; usage is the fair-share input
// (nil: none).
func (m *Multifactor) Factors(j *api.Job, now time.Time, fs *fairshare) Factors {
	var f Factors
	from := j.EligibleTime
	if from.IsZero() {
		from = j.SubmitTime
	}
	if m.MaxAge > 0 && !from.IsZero() && now.After(from) {
		f.Age = min(1, float64(now.Sub(from))/float64(m.MaxAge))
	}
	f.Size = m.sizeFactor(&j.JobSpec)
	f.Fairshare = fs.factor(j.Account)
	f.Priority = m.AgeWeight*f.Age + m.SizeWeight*f.Size + m.FairshareWeight*f.Fairshare - float64(j.Nice)
	return f
}

// sizeFactor is the size factor of a request (see Multifactor).
func (m *Multifactor) sizeFactor(s *api.JobSpec) float64 {
	gpus := float64(s.ReqGPUs())
	if gpus == 0 {
		per := m.CPUsPerGPU
		if per <= 0 {
			per = 8
		}
		gpus = float64(max(1, s.ReqCPUs())) / float64(per)
	}
	limit := s.TimeLimit
	if limit <= 0 || limit == api.Infinite {
		return 0
	}
	// GPU-minutes, at least one: log(1) = 0 is the top of the scale.
	minutes := max(1, gpus*float64(limit)/60)
	ref := max(m.SizeRef*60, 2)
	return max(0, 1-math.Log(minutes)/math.Log(ref))
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
	keys := pendingKeys(pending, snap, now, cfg)
	slices.SortFunc(keys, comparePending)
	for i := range keys {
		pending[i] = keys[i].job
	}
}

// pendKey is a pending job's place in the order of a pass without
// queues.
type pendKey struct {
	score  float64
	submit int64
	job    *api.Job
}

// pendingKeys computes the order keys of pending.
func pendingKeys(pending []*api.Job, snap *Snapshot, now time.Time, cfg Config) []pendKey {
	keys := make([]pendKey, 0, len(pending))
	var fs *fairshare
	if cfg.Priority != nil && snap != nil {
		fs = newFairshare(snap)
	}
	for _, j := range pending {
		if j == nil {
			continue
		}
		k := pendKey{submit: j.SubmitTime.UnixNano(), job: j}
		if m := cfg.Priority; m != nil {
			k.score = m.Factors(j, now, fs).Priority
		} else {
			k.score = float64(priorityOf(j))
		}
		keys = append(keys, k)
	}
	for range len(pending) - len(keys) {
		keys = append(keys, pendKey{score: math.Inf(-1), submit: math.MaxInt64})
	}
	return keys
}

func comparePending(a, b pendKey) int {
	if a.job == nil || b.job == nil {
		return cmp.Compare(boolInt(a.job == nil), boolInt(b.job == nil))
	}
	if c := cmp.Compare(b.score, a.score); c != 0 {
		return c
	}
	if c := cmp.Compare(a.submit, b.submit); c != 0 {
		return c
	}
	return cmp.Compare(a.job.ID, b.job.ID)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
