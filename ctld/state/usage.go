package state

import (
	"math"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// DefaultUsageHalfLife is how long a GPU-second of use takes to count
// half as much in the fair-share factor (Slurm's PriorityDecayHalfLife,
// whose default is 7 days).
const DefaultUsageHalfLife = 7 * 24 * time.Hour

// Usage is each account's decayed GPU-time, the input of the
// multifactor fair-share factor (sched.Snapshot.Usage): a GPU-second
// used at s counts 2^(−(t−s)/HalfLife) at t, so an account's figure is
// its use of the last few half-lives, recent use weighing most, as
// Slurm's decayed usage. It is pure (the caller passes every instant),
// so the controller and the simulator charge use the same way.
//
// Values are GPU-seconds decayed to the instant of the last Advance (a
// CPU-only job counts its CPUs over CPUsPerGPU, as the size factor
// does).
type Usage struct {
	halfLife time.Duration
	at       time.Time
	acct     map[string]float64
}

// NewUsage returns an empty Usage decaying with halfLife (0 or less:
// DefaultUsageHalfLife), starting at at.
func NewUsage(halfLife time.Duration, at time.Time) *Usage {
	if halfLife <= 0 {
		halfLife = DefaultUsageHalfLife
	}
	return &Usage{halfLife: halfLife, at: at, acct: map[string]float64{}}
}

// HalfLife returns u's half-life.
func (u *Usage) HalfLife() time.Duration { return u.halfLife }

// Running is one job charged by Advance: its account, its GPUs (or GPU
// equivalent) and when it started.
type Running struct {
	Account string
	GPUs    float64
	Start   time.Time
}

// Advance decays u to now and charges each running job for the part of
// (last Advance, now] it ran, integrated exactly with its decay. An
// instant before the last one changes nothing (a clock stepped back
// must not mint usage).
func (u *Usage) Advance(now time.Time, running []Running) {
	if !now.After(u.at) {
		return
	}
	f := u.decay(now.Sub(u.at))
	for a, v := range u.acct {
		if v *= f; v < 1e-9 {
			// Forgotten: the map stays the size of the recent accounts.
			delete(u.acct, a)
			continue
		}
		u.acct[a] = v
	}
	for _, r := range running {
		from := r.Start
		if from.Before(u.at) {
			from = u.at
		}
		u.add(r.Account, r.GPUs, from, now, now)
	}
	u.at = now
}

// Ended charges a job that ended at end, after u's last instant, for
// its run since then, which no Advance will see: without it every job
// would lose its last stretch (a replay passes only at events).
func (u *Usage) Ended(r Running, end time.Time) {
	from := r.Start
	if from.Before(u.at) {
		from = u.at
	}
	// Seen from u's instant the stretch is in the future: its weight
	// exceeds 1 now and decays to the right value at the next Advance.
	u.add(r.Account, r.GPUs, from, end, u.at)
}

// Charge adds gpus × [from, to) of account's use, decayed to u's last
// instant: what a controller that restarted rebuilds from accounting.
// Use after u's instant is ignored (Advance charges it).
func (u *Usage) Charge(account string, gpus float64, from, to time.Time) {
	if to.After(u.at) {
		to = u.at
	}
	u.add(account, gpus, from, to, u.at)
}

// add adds gpus × [from, to) seen at t.
func (u *Usage) add(account string, gpus float64, from, to, t time.Time) {
	if gpus <= 0 || !to.After(from) || math.IsNaN(gpus) || math.IsInf(gpus, 0) {
		return
	}
	// ∫ 2^(−(t−s)/H) ds over [from, to] = H/ln2 × (2^(−(t−to)/H) − 2^(−(t−from)/H)).
	h := u.halfLife.Seconds()
	v := gpus * h / math.Ln2 * (u.decay(t.Sub(to)) - u.decay(t.Sub(from)))
	if v > 0 {
		u.acct[account] += v
	}
}

// decay is 2^(−d/HalfLife).
func (u *Usage) decay(d time.Duration) float64 {
	return math.Exp2(-d.Seconds() / u.halfLife.Seconds())
}

// Map returns the accounts' usage at the last Advance. The map is u's
// own: the caller reads it (the scheduling pass, under the lock that
// guards u) and never writes it.
func (u *Usage) Map() map[string]float64 { return u.acct }

// Of returns account's usage at the last Advance.
func (u *Usage) Of(account string) float64 { return u.acct[account] }

// Merge adds o's figures, decayed from o's instant to u's, to u: a
// rebuild made from accounting as of one instant joins the usage the
// controller charged since.
func (u *Usage) Merge(o *Usage) {
	if o == nil {
		return
	}
	f := 1.0
	if u.at.After(o.at) {
		f = u.decay(u.at.Sub(o.at))
	}
	for a, v := range o.acct {
		u.acct[a] += v * f
	}
}

// GPUEquivalent is what a job's allocation counts in Usage per second:
// its whole GPUs, a slice's compute share of its GPU (its GPUs when it
// names no share), and for a job without GPUs its CPUs over cpusPerGPU
// (0: 8), as the multifactor size factor counts them.
func GPUEquivalent(alloc []api.NodeAlloc, cpusPerGPU int) float64 {
	gpus, cpus := 0.0, 0
	for i := range alloc {
		a := &alloc[i]
		cpus += a.CPUs
		switch {
		case a.Sliced() && a.GPUComputePct > 0:
			gpus += float64(len(a.GPUs)) * float64(a.GPUComputePct) / 100
		default:
			gpus += float64(len(a.GPUs))
		}
	}
	if gpus > 0 {
		return gpus
	}
	if cpusPerGPU <= 0 {
		cpusPerGPU = 8
	}
	return float64(cpus) / float64(cpusPerGPU)
}
