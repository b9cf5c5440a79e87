package sched_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
)

// TestProbes: n1 and n2 have 4 of 8 GPUs busy until 100s and 300s
// (TestBackfillReservations' cluster). A probed job starts where it
// fits; one that does not leaves no reservation, hold or test count
// behind, so later jobs are decided as if it were not there.
func TestProbes(t *testing.T) {
	half, jobs := halfBusyNode, halfBusyQueue()
	tests := []struct {
		name   string
		policy sched.Policy
		bf     sched.BackfillConfig
		probes []uint64
		want   []string
	}{
		{name: "no probes", policy: sched.PolicyBackfill, bf: exact,
			want: []string{"1 Resources +100s", "2 Resources +300s", "3 Priority +1100s", "4 n1 backfilled"}},
		{name: "a probe gets no reservation", policy: sched.PolicyBackfill, bf: exact, probes: []uint64{2},
			// Without 2's reservation on n2, 3 starts there.
			want: []string{"1 Resources +100s", "2 Resources", "3 n2 backfilled", "4 n1 backfilled"}},
		{name: "a probe that fits starts", policy: sched.PolicyBackfill, bf: exact, probes: []uint64{4},
			want: []string{"1 Resources +100s", "2 Resources +300s", "3 Priority +1100s", "4 n1 backfilled"}},
		{name: "a probe uses no test slot", policy: sched.PolicyBackfill, probes: []uint64{2},
			bf:   sched.BackfillConfig{Resolution: time.Second, MaxJobTest: 2},
			want: []string{"1 Resources +100s", "2 Resources", "3 n2 backfilled", "4 Priority untested"}},
		{name: "a probe past the test limit is untested", policy: sched.PolicyBackfill, probes: []uint64{2, 4},
			bf:   sched.BackfillConfig{Resolution: time.Second, MaxJobTest: 1},
			want: []string{"1 Resources +100s", "2 Priority untested", "3 Priority untested", "4 Priority untested"}},
		{name: "EASY: the first blocked job after the probe reserves", policy: sched.PolicyEASY, bf: exact, probes: []uint64{1},
			want: []string{"1 Resources", "2 Resources +100s", "3 n2 backfilled", "4 n1 backfilled"}},
		{name: "priority: a probe holds no nodes", policy: sched.PolicyPriority, probes: []uint64{1, 3},
			// 2 holds both nodes; 3 is a probe, 4 waits for 2.
			want: []string{"1 Resources", "2 Resources +100s", "3 Priority", "4 Priority"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := st.MakeSnapshot().Nodes(half("n1", 100), half("n2", 300)).
				Partitions(st.MakePartition("gpu", "n1", "n2").Obj()).Jobs(jobs...).Obj()
			if tt.probes != nil {
				s.Probes = map[uint64]bool{}
				for _, id := range tt.probes {
					s.Probes[id] = true
				}
			}
			plan := sched.Schedule(s, now, sched.Config{Policy: tt.policy, Backfill: tt.bf})
			if diff := cmp.Diff(tt.want, bfOutcome(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProbesLeaveNoTrace: on random clusters and queues under every
// policy, a pass in which some jobs are probes and none of them starts
// decides every other job exactly as a pass without the probed jobs
// (starts, reservations, decisions, closed partitions). That is what
// lets the simulator stand one probe for every left-out job of its
// shape.
func TestProbesLeaveNoTrace(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 60
	}
	policies := []sched.Policy{sched.PolicyBackfill, sched.PolicyBackfill, sched.PolicyEASY, sched.PolicyPriority, sched.PolicyFIFO}
	compared, traced := 0, 0
	for seed := range seeds {
		var snap *sched.Snapshot
		switch seed % 3 {
		case 0:
			snap = randomBackfill(uint64(seed))
		case 1:
			snap = randomSnapshot(int64(seed), 4+seed%40, 10+seed%150)
			if seed%2 == 1 {
				addTopology(t, snap, int64(seed))
			}
			addReleases(snap, uint64(seed))
		case 2:
			snap = randomSliceSnapshot(int64(seed), 4+seed%30, 10+seed%120)
			addReleases(snap, uint64(seed))
		}
		cfg := sched.Config{Policy: policies[seed%len(policies)], Backfill: sched.BackfillConfig{
			Resolution: []time.Duration{time.Second, 0, 5 * time.Minute}[seed%3], MaxJobTest: []int{0, 3, 10, 0}[seed%4]}}
		plain := sched.Schedule(snap, now, cfg)
		// Probes among the jobs the plain pass left pending (one that
		// starts there mostly starts as a probe too).
		rng := rand.New(rand.NewPCG(uint64(seed), 0x70726f6265))
		probes := map[uint64]bool{}
		for _, d := range plain.Pending {
			if rng.IntN(3) == 0 {
				probes[d.JobID] = true
			}
		}
		var rest []*api.Job
		for _, j := range snap.Pending {
			if !probes[j.ID] {
				rest = append(rest, j)
			}
		}
		snap.Probes = probes
		probed := sched.Schedule(snap, now, cfg)
		if slices.ContainsFunc(probed.Starts, func(s sched.Start) bool { return probes[s.JobID] }) {
			continue
		}
		for _, d := range probed.Pending {
			if probes[d.JobID] && !d.ExpectedStart.IsZero() {
				t.Errorf("seed %d: probe %d has an expected start", seed, d.JobID)
			}
		}
		// Whether a probe would have left a trace without the flag.
		if slices.ContainsFunc(plain.Reservations, func(r sched.Reservation) bool { return probes[r.JobID] }) ||
			slices.ContainsFunc(plain.Pending, func(d sched.Decision) bool { return probes[d.JobID] && !d.ExpectedStart.IsZero() }) {
			traced++
		}
		snap.Pending, snap.Probes = rest, nil
		without := sched.Schedule(snap, now, cfg)
		probed.Pending = slices.DeleteFunc(probed.Pending, func(d sched.Decision) bool { return probes[d.JobID] })
		if diff := cmp.Diff(without, probed, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("seed %d (%s): a pass with probes differs from one without them (-without +probed):\n%s", seed, cfg.Policy, diff)
		}
		compared++
	}
	if compared < seeds/2 || traced < seeds/10 {
		t.Errorf("not exercised: %d passes compared, %d with a probe that would have reserved or estimated, over %d seeds",
			compared, traced, seeds)
	}
	t.Logf("%d passes compared, %d with a probe that would have reserved or estimated, over %d seeds", compared, traced, seeds)
}
