package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tide-hpc/tide/ctld/api"
)

// Runtime estimates: the time limit each replayed job asks for. The
// scheduler plans with limits (backfill reservations, shadow times), so
// their accuracy decides how well backfilling does; the job itself
// always runs its trace duration (or, under EstimatesLimit, up to a
// limit below it, where a real cluster would have killed it).

// EstimateMode chooses the replayed jobs' time limits.
type EstimateMode string

// Estimate modes.
const (
	// EstimatesExact asks for the duration rounded up to a whole minute:
	// users who know their run times (an upper bound for backfill).
	EstimatesExact EstimateMode = "exact"
	// EstimatesLimit asks for the trace's time_limit where it has one
	// and falls back to EstimatesModel elsewhere. A job whose limit is
	// below its duration is killed at its limit (outcome timeout).
	EstimatesLimit EstimateMode = "limit"
	// EstimatesModel draws a user-style overestimate per job (see
	// modelLimit). It is the default.
	EstimatesModel EstimateMode = "model"
)

// ParseEstimates reads --estimates ("" is the default, model).
func ParseEstimates(s string) (EstimateMode, error) {
	switch m := EstimateMode(s); m {
	case "":
		return EstimatesModel, nil
	case EstimatesExact, EstimatesLimit, EstimatesModel:
		return m, nil
	}
	return "", api.Invalid("--estimates %q: want exact, limit or model", s)
}

// DefaultMaxLimit is the longest limit the model draws in a partition
// without a MaxTime: 7 days, a common ceiling of GPU partitions.
const DefaultMaxLimit = 7 * 86400

// The model (EstimatesModel), after Tsafrir, Etsion and Feitelson,
// "Modeling User Runtime Estimates" (JSSPP 2005), and Mu'alem and
// Feitelson, "Utilization, Predictability, Workloads, and User Runtime
// Estimates in Scheduling the IBM SP2 with Backfilling" (IEEE TPDS
// 12(6), 2001):
//
//   - Estimates are modal: a few round values make up most of them (in
//     Tsafrir et al.'s logs the 20 most popular values cover about 90 %
//     of jobs), and the most popular single value is the maximum the
//     system allows. Their model's default sizes the top bin at about
//     22 % of jobs (89 % for the top 20, less the exponential sizes of
//     ranks 2 to 20).
//   - For the other jobs, accuracy (run time / estimate) is spread
//     widely, close to uniform between 0 and 1 (Mu'alem and Feitelson's
//     histograms of jobs that completed), so that many jobs use a small
//     fraction of their limit.
//
// Per job: with probability pAskMax the job asks for the partition's
// maximum (its MaxTime, else DefaultMaxLimit); otherwise an accuracy a
// is drawn uniformly from (0, 1] and the job asks for the smallest
// popular value at or above duration / a, or the maximum when none is.
// A job that ran longer than the maximum asks for its duration rounded
// up to a whole hour (it ran that long, so its limit was at least
// that). Draws come from a generator seeded by the replay's seed and a
// hash of the job ID, so a job gets the same limit under every policy
// of one run, and whatever window or load selects it.
//
// This keeps the two properties that matter to a backfilling scheduler
// (modal values, the maximum on top, wide overestimates) but draws each
// job independently; Tsafrir et al. instead fit a trace-wide histogram
// of values and assign them to jobs sorted by run time.
const pAskMax = 0.22

// popularLimits are the round limits users ask for, in seconds (the
// model adds the partition's maximum and drops values above it).
var popularLimits = []int64{
	5 * 60, 10 * 60, 15 * 60, 20 * 60, 30 * 60, 45 * 60,
	3600, 2 * 3600, 3 * 3600, 4 * 3600, 6 * 3600, 8 * 3600, 10 * 3600, 12 * 3600, 18 * 3600,
	24 * 3600, 36 * 3600, 48 * 3600, 72 * 3600,
}

// limitModel draws model limits for the jobs of one partition maximum.
type limitModel struct {
	seed uint64
	// max is the longest limit; values are popularLimits up to max,
	// then max.
	max    int64
	values []int64
}

func newLimitModel(seed uint64, maxLimit int64) *limitModel {
	if maxLimit <= 0 {
		maxLimit = DefaultMaxLimit
	}
	m := &limitModel{seed: seed, max: maxLimit}
	for _, v := range popularLimits {
		if v < maxLimit {
			m.values = append(m.values, v)
		}
	}
	m.values = append(m.values, maxLimit)
	return m
}

// limit is the limit job id of duration dur (seconds, at least 0) asks
// for.
func (m *limitModel) limit(id string, dur int64) int64 {
	dur = max(dur, 0)
	if dur > m.max {
		return (dur + 3599) / 3600 * 3600
	}
	src := rand.NewPCG(m.seed, fnv64a(id))
	if unit(src.Uint64()) < pAskMax {
		return m.max
	}
	a := 1 - unit(src.Uint64()) // (0, 1]
	want := float64(dur) / a
	if want >= float64(m.max) {
		return m.max
	}
	i, _ := slices.BinarySearch(m.values, int64(math.Ceil(want)))
	return m.values[i]
}

// fnv64a is the FNV-1a hash of s (hash/fnv's, without its allocation).
func fnv64a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// unit maps 64 random bits to [0, 1).
func unit(x uint64) float64 { return float64(x>>11) / (1 << 53) }

// EstimateSummary says which limits a replay's jobs asked for.
type EstimateSummary struct {
	Mode EstimateMode `json:"mode"`
	// FromTrace counts the jobs that asked for the trace's time_limit
	// (mode limit); Modelled those whose limit the model drew.
	FromTrace int `json:"from_trace,omitempty"`
	Modelled  int `json:"modelled,omitempty"`
}

// describe is the report's line on time limits; timedOut counts the jobs
// killed at their limit.
func (e EstimateSummary) describe(timedOut int) string {
	var s string
	switch e.Mode {
	case EstimatesExact:
		s = "time limits: exact (each job's run time rounded up to a minute)"
	case EstimatesLimit:
		s = fmt.Sprintf("time limits: the trace's for %d jobs, modelled for %d without one", e.FromTrace, e.Modelled)
	default:
		s = "time limits: modelled user estimates (Tsafrir et al. 2005; drawn per job from the seed)"
	}
	if timedOut > 0 {
		s += fmt.Sprintf("; %d jobs killed at a limit below their run time", timedOut)
	}
	return s
}
