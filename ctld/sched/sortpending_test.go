package sched

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestScoreKeyOrder checks that scoreKey sorts scores descending and
// that pendKey.score gives the score back.
func TestScoreKeyOrder(t *testing.T) {
	scores := []float64{math.Inf(1), math.MaxFloat64, 4500.25, 3000, 1, 1e-300, 0, math.Copysign(0, -1), -1e-300, -0.5, -20, -math.MaxFloat64, math.Inf(-1)}
	for i := 1; i < len(scores); i++ {
		a, b := scoreKey(scores[i-1]), scoreKey(scores[i])
		switch {
		case scores[i-1] == scores[i] && a != b:
			t.Errorf("scores %v and %v are equal but their keys differ: %#x, %#x", scores[i-1], scores[i], a, b)
		case scores[i-1] > scores[i] && !(a < b):
			t.Errorf("score %v > %v but key %#x is not below %#x", scores[i-1], scores[i], a, b)
		}
	}
	for _, s := range scores {
		if got := (pendKey{hi: scoreKey(s)}).score(); got != s {
			t.Errorf("score %v comes back as %v", s, got)
		}
	}
}

// TestSortPendingMatchesComparison checks the radix sort against the
// comparison sort on queues with many ties, negative and infinite
// scores, and nil jobs (sorted last).
func TestSortPendingMatchesComparison(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := []int{0, 1, 511, 512, 3000, 20000}[seed%6]
		pending := make([]*api.Job, n)
		for i := range pending {
			if rng.IntN(50) == 0 {
				continue // a nil entry
			}
			pending[i] = &api.Job{ID: uint64(rng.IntN(n + 1))}
		}
		keys := make([]pendKey, n)
		for i, j := range pending {
			if j == nil {
				keys[i] = pendKey{hi: math.MaxUint64, submit: math.MaxInt64, id: math.MaxUint64}
				continue
			}
			var score float64
			switch rng.IntN(5) {
			case 0:
				score = float64(rng.IntN(4)) // many ties
			case 1:
				score = -rng.Float64() * 1e6
			case 2:
				score = []float64{math.Inf(1), math.Inf(-1), math.Copysign(0, -1)}[rng.IntN(3)]
			default:
				score = rng.Float64() * 4500
			}
			keys[i] = pendKey{hi: scoreKey(score), submit: int64(rng.IntN(10)), id: j.ID, job: j}
		}
		want := slices.Clone(keys)
		slices.SortFunc(want, comparePending)
		sortPending(keys, nil)
		for i := range keys {
			if keys[i].hi != want[i].hi || keys[i].submit != want[i].submit || keys[i].id != want[i].id {
				t.Fatalf("seed %d, %d keys: position %d is %+v, want %+v", seed, n, i, keys[i], want[i])
			}
		}
		for i := 1; i < len(keys); i++ {
			if keys[i-1].job == nil && keys[i].job != nil {
				t.Fatalf("seed %d: a nil job sorts before job %d", seed, keys[i].id)
			}
		}
	}
}

// TestScorerMemoSameAsFresh checks the scorer's memories (length by
// limit, size, fair share by account) against a fresh scorer per job,
// over jobs whose limits collide in the length cache and whose sizes
// and accounts alternate.
func TestScorerMemoSameAsFresh(t *testing.T) {
	m := DefaultMultifactor
	m.SizeWeight = 700
	snap := &Snapshot{Usage: map[string]float64{"a": 3000, "b": 10}}
	fs := newFairshare(snap)
	parts := map[string]*PartitionInfo{"day": {Name: "day", MaxTime: 86400}, "inf": {Name: "inf", MaxTime: api.Infinite}}
	now := time.Unix(1_800_000_000, 0)
	rng := rand.New(rand.NewPCG(3, 9))
	sc := newScorer(&m, fs, parts)
	for i := range 5000 {
		j := &api.Job{ID: uint64(i), SubmitTime: now.Add(-time.Duration(rng.IntN(86400)) * time.Second)}
		j.TimeLimit = []int64{0, 60, 76, 60 + 16*60, 3600, 3616, 86400 * 7, api.Infinite, -5, 86400}[rng.IntN(10)]
		j.GPUs = rng.IntN(10)
		j.Tasks = rng.IntN(40)
		j.Account = []string{"a", "b", "c", ""}[rng.IntN(4)]
		j.Nice = rng.IntN(3)
		j.Partition = []string{"day", "inf", "", "day"}[rng.IntN(4)]
		if got, want := sc.factors(j, now), newScorer(&m, fs, parts).factors(j, now); got != want {
			t.Fatalf("job %d (limit %d, %d GPUs, account %q, partition %q): memo gives %+v, fresh %+v", i, j.TimeLimit, j.GPUs, j.Account, j.Partition, got, want)
		}
	}
}
