package sched_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

// addReleases gives the busy resources of a random snapshot's nodes
// time-limit ends (NodeInfo.Releases), as the controller does for
// running jobs: each node's used GPUs, CPUs and memory are split over
// up to three releases at random instants (some overdue), a share of
// them never ends (jobs without a limit), slices' ends give back no
// GPU, and now and then a release names a GPU that is free already
// (inconsistent input the plan must ignore). It also gives the pending
// jobs random limits of 1-240 minutes, a few none.
func addReleases(snap *sched.Snapshot, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x72656c))
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		var used []int
		for g := range n.GPUs {
			if !slices.Contains(n.FreeGPUs, g) && !slices.ContainsFunc(n.Shared, func(s sched.SharedGPU) bool { return s.Index == g }) {
				used = append(used, g)
			}
		}
		cpus, mem := n.CPUs-n.FreeCPUs, n.MemoryMB-n.FreeMemMB
		parts := 1 + rng.IntN(3)
		for k := range parts {
			if rng.IntN(8) == 0 {
				continue // a job without a limit
			}
			take := len(used) / (parts - k)
			rel := sched.Release{At: now.Add(time.Duration(rng.IntN(4000)-200) * time.Second),
				CPUs: cpus / (parts - k), MemMB: mem / int64(parts-k), GPUs: slices.Clone(used[:take])}
			used, cpus, mem = used[take:], cpus-rel.CPUs, mem-rel.MemMB
			if rng.IntN(20) == 0 && len(n.FreeGPUs) > 0 {
				rel.GPUs = append(rel.GPUs, n.FreeGPUs[0])
			}
			n.Releases = append(n.Releases, rel)
		}
	}
	for _, j := range snap.Pending {
		j.TimeLimit = int64(60 * (1 + rng.IntN(240)))
		if rng.IntN(20) == 0 {
			j.TimeLimit = api.Infinite
		}
	}
}

// TestFitRunsMatchWalks: the earliest-start search of PolicyBackfill
// reads each node's runs from a per-shape cache (fitruns.go) instead of
// walking the node's plan for every job. On random clusters with every
// request option (-w, -x, constraints, --comm=model on link matrices,
// switch trees, slices, exclusive and multi-node jobs, several
// partitions, share mode, EASY too) the plans, reservations and every
// decision's text must be exactly those of the walks.
func TestFitRunsMatchWalks(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 60
	}
	reservations, cached := 0, 0
	for seed := range seeds {
		var snap *sched.Snapshot
		switch seed % 3 {
		case 0:
			snap = randomBackfill(uint64(seed))
			if seed%2 == 1 {
				addFeatures(snap, int64(seed))
			}
		case 1:
			snap = randomSnapshot(int64(seed), 4+seed%40, 10+seed%150)
			if seed%2 == 1 {
				addTopology(t, snap, int64(seed))
			}
			if seed%4 == 1 {
				addFeatures(snap, int64(seed))
			}
			addReleases(snap, uint64(seed))
		case 2:
			snap = randomSliceSnapshot(int64(seed), 4+seed%30, 10+seed%120)
			addReleases(snap, uint64(seed))
		}
		if seed%5 == 2 {
			snap.QOS, snap.DefaultQOS = sched.DefaultQOS(), api.QOSBatch
		}
		pol := sched.PolicyBackfill
		if seed%7 == 6 {
			pol = sched.PolicyEASY
		}
		cfg := sched.Config{DefMemPerCPUMB: int64(seed % 3 * 500), Policy: pol, Backfill: sched.BackfillConfig{
			Resolution: []time.Duration{time.Second, 0, 5 * time.Minute, 7 * time.Second}[seed%4],
			MaxJobTest: []int{0, 3, 10, 50, 0}[seed%5],
			Window:     []time.Duration{0, 30 * time.Minute, 3 * time.Hour}[seed%3]}}
		verified := sched.VerifyRuns()
		got := sched.Schedule(snap, now, cfg)
		verified()
		restore := sched.NoShortcuts()
		want := sched.Schedule(snap, now, cfg)
		restore()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("seed %d: cached search differs from the walks (-walk +cached):\n%s", seed, diff)
		}
		reservations += len(got.Reservations)
		if len(got.Reservations) > 1 {
			cached++
		}
	}
	// The comparison means something only where passes reserve, several
	// times (the cache is reused from the second tested job on).
	if reservations < 2*seeds || cached < seeds/3 {
		t.Errorf("not exercised: %d reservations, %d passes with several, over %d seeds", reservations, cached, seeds)
	}
	t.Logf("%d reservations, %d passes with several, over %d seeds", reservations, cached, seeds)
}

// TestFitRunsAfterChanges: a pass in which starts, priority holds and
// reservations keep changing the nodes between jobs of one shape gives,
// job by job, what the walks give (the cache must notice each change).
func TestFitRunsAfterChanges(t *testing.T) {
	for seed := range 40 {
		snap := randomBackfill(uint64(1000 + seed))
		// Many jobs of few shapes, with limits that alternate between
		// short (they may start in holes) and long.
		rng := rand.New(rand.NewPCG(uint64(seed), 0x66))
		for _, j := range snap.Pending {
			j.TimeLimit = []int64{60, 600, 3600, 7200, api.Infinite}[rng.IntN(5)]
		}
		cfg := sched.Config{Policy: sched.PolicyBackfill, Backfill: sched.BackfillConfig{Resolution: time.Second}}
		verified := sched.VerifyRuns()
		got := sched.Schedule(snap, now, cfg)
		verified()
		restore := sched.NoShortcuts()
		want := sched.Schedule(snap, now, cfg)
		restore()
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("cached search differs from the walks (-walk +cached):\n%s", diff)
			}
		})
	}
}
