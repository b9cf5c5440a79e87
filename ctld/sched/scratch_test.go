package sched_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

// TestScratchSameAsFresh runs a series of snapshots of every size and
// policy through one Scratch, as a controller does, and checks that each
// plan is the one a pass with fresh memory gives: nothing of a pass may
// leak into the next through the reused arrays.
func TestScratchSameAsFresh(t *testing.T) {
	var sc sched.Scratch
	policies := []sched.Policy{sched.PolicyTide, sched.PolicyBackfill, sched.PolicyEASY, sched.PolicyPriority, sched.PolicyFIFO}
	for seed := range 120 {
		// Sizes go up and down so that a pass meets memory left longer
		// by an earlier one.
		snap := randomSnapshot(int64(seed), 4+seed%20, 5+(seed*37)%700)
		if seed%3 == 0 {
			addTopology(t, snap, int64(seed))
		}
		cfg := sched.Config{DefMemPerCPUMB: 1000, Policy: policies[seed%len(policies)]}
		want := sched.Schedule(snap, now, cfg)
		got := sc.Schedule(snap, now, cfg)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d, policy %v, %d jobs: the plan with a reused Scratch differs from a fresh pass's:\n got %s\nwant %s",
				seed, cfg.Policy, len(snap.Pending), planSummary(got), planSummary(want))
		}
	}
}

func planSummary(p sched.Plan) string {
	return fmt.Sprintf("%d starts %+v, %d pending (first %+v), closed %v", len(p.Starts), p.Starts,
		len(p.Pending), p.Pending[:min(3, len(p.Pending))], p.Closed)
}

// TestTailSameAsSlowPath checks that deciding a deep queue's tail by the
// jobs' classes gives exactly the plan of the full path: random clusters
// whose busy nodes free their resources at random times (so that
// backfill reserves and reaches its depth), and queues in which every
// random job comes in several copies (one class) with different limits,
// submit times and priorities, under the policies and depths where the
// shortcut applies and some where it must not.
func TestTailSameAsSlowPath(t *testing.T) {
	hits := 0
	for seed := range 150 {
		rng := rand.New(rand.NewPCG(uint64(seed), 0x7461696c))
		snap := randomSnapshot(int64(seed), 4+seed%24, 5+seed%60)
		if seed%3 == 0 {
			addTopology(t, snap, int64(seed))
		}
		for i := range snap.Nodes {
			n := &snap.Nodes[i]
			var held []int
			for g := range n.GPUs {
				if !slices.Contains(n.FreeGPUs, g) {
					held = append(held, g)
				}
			}
			if len(held) > 0 && rng.IntN(4) != 0 {
				n.Releases = []sched.Release{{At: now.Add(time.Duration(60+rng.IntN(7200)) * time.Second),
					CPUs: n.CPUs - n.FreeCPUs, MemMB: n.MemoryMB - n.FreeMemMB, GPUs: held}}
			}
		}
		base := len(snap.Pending)
		id := uint64(10000)
		for _, j := range snap.Pending[:base] {
			for range 1 + rng.IntN(30) {
				c := *j
				id++
				c.ID = id
				c.TimeLimit = []int64{0, 60, 600, 3000, 3600, 7200, api.Infinite}[rng.IntN(7)]
				c.SubmitTime = c.SubmitTime.Add(time.Duration(rng.IntN(600)) * time.Second)
				c.Priority = uint32(rng.IntN(4))
				snap.Pending = append(snap.Pending, &c)
			}
		}
		cfg := sched.Config{DefMemPerCPUMB: 1000, Policy: sched.PolicyTide}
		switch seed % 5 {
		case 1:
			cfg.Backfill.ReserveDepth = 1
		case 2:
			cfg.Policy, cfg.Backfill.ReserveDepth = sched.PolicyBackfill, 2
		case 3:
			cfg.Policy = sched.PolicyBackfill // no depth: never the tail
		case 4:
			cfg.Policy = sched.PolicyEASY
		}
		var sc sched.Scratch
		got := sc.Schedule(snap, now, cfg)
		hits += sc.TailHits()
		restore := sched.NoTail()
		want := sched.Schedule(snap, now, cfg)
		restore()
		if !reflect.DeepEqual(got, want) {
			for i := range min(len(got.Pending), len(want.Pending)) {
				if !reflect.DeepEqual(got.Pending[i], want.Pending[i]) {
					t.Errorf("seed %d (%v depth %d): decision %d differs:\n got %+v\nwant %+v", seed, cfg.Policy,
						cfg.Backfill.ReserveDepth, i, got.Pending[i], want.Pending[i])
					break
				}
			}
			t.Fatalf("seed %d: the plan with the tail shortcut (%d jobs by class) differs from the full path's:\n got %s\nwant %s",
				seed, sc.TailHits(), planSummary(got), planSummary(want))
		}
	}
	if hits < 1000 {
		t.Errorf("only %d jobs decided by class over every seed: the shortcut is barely exercised", hits)
	}
	t.Logf("%d jobs decided by their class", hits)
}
