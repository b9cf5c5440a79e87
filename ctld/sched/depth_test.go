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
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
)

// bfOutcome renders starts as "id node [backfilled]" and pending jobs
// as "id Reason [+secs]" (the expected start after now), by job id.
func bfOutcome(p sched.Plan) []string {
	var out []string
	for _, s := range p.Starts {
		txt := fmt.Sprintf("%d %s", s.JobID, s.Alloc[0].Node)
		if s.Backfilled {
			txt += " backfilled"
		}
		out = append(out, txt)
	}
	for _, d := range p.Pending {
		txt := fmt.Sprintf("%d %s", d.JobID, d.Reason)
		if !d.ExpectedStart.IsZero() {
			txt += fmt.Sprintf(" +%ds", int(d.ExpectedStart.Sub(p.Now).Seconds()))
		}
		out = append(out, txt)
	}
	slices.SortFunc(out, func(a, b string) int {
		var x, y int
		fmt.Sscan(a, &x)
		fmt.Sscan(b, &y)
		return x - y
	})
	return out
}

func TestBackfillDepth(t *testing.T) {
	half := func(name string, secs int) sched.NodeInfo {
		n := st.MakeNode(name).CPUs(64).GPUs(8).UsedGPUs(0, 1, 2, 3).UsedCPUs(4).Obj()
		n.Releases = []sched.Release{release(secs, 4, 0, 1, 2, 3)}
		return n
	}
	jobs := []*api.Job{job(1, 8, 1000).Obj(), job(2, 8, 1000).Obj(), job(3, 4, 3600).Obj(), job(4, 4, 60).Obj()}
	tests := []struct {
		name  string
		depth int
		want  []string
	}{
		{name: "EASY protects the first blocked job only", depth: 0,
			want: []string{"1 Resources +100s", "2 Priority", "3 n2 backfilled", "4 n1 backfilled"}},
		{name: "depth 2 protects the second too", depth: 2,
			want: []string{"1 Resources +100s", "2 Priority +300s", "3 Priority", "4 n1 backfilled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := st.MakeSnapshot().Nodes(half("n1", 100), half("n2", 300)).
				Partitions(st.MakePartition("gpu", "n1", "n2").Obj()).Jobs(jobs...).Obj()
			plan := sched.Schedule(s, now, sched.Config{Policy: sched.PolicyBackfill, BackfillDepth: tt.depth})
			if diff := cmp.Diff(tt.want, bfOutcome(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// randomBackfill is a cluster whose busy GPUs end at random times, with
// jobs of unique priorities and random shapes and time limits.
func randomBackfill(seed uint64) *sched.Snapshot {
	rng := rand.New(rand.NewPCG(seed, 0xbf))
	nodes := 2 + rng.IntN(10)
	w := st.MakeSnapshot()
	var names []string
	for i := range nodes {
		name := fmt.Sprintf("n%02d", i+1)
		names = append(names, name)
		n := st.MakeNode(name).CPUs(32).GPUs(8).Obj()
		for g := 0; g < 8; {
			if rng.IntN(3) == 0 {
				g++
				continue
			}
			k := min(1+rng.IntN(4), 8-g)
			held := gpuRange(g, g+k-1)
			n.FreeGPUs = slices.DeleteFunc(n.FreeGPUs, func(x int) bool { return slices.Contains(held, x) })
			n.FreeCPUs -= k
			n.Idle = false
			n.Releases = append(n.Releases, sched.Release{At: now.Add(time.Duration(30+rng.IntN(3600)) * time.Second), CPUs: k, GPUs: held})
			g += k
		}
		w.Nodes(n)
	}
	w.Partitions(st.MakePartition("gpu", names...).Obj())
	for i := range 5 + rng.IntN(40) {
		jw := job(uint64(i+1), []int{1, 2, 4, 8}[rng.IntN(4)], int64(60*(1+rng.IntN(120))))
		if rng.IntN(5) == 0 {
			jw.Nodes(2).GPUs(16)
		}
		w.Jobs(jw.Obj())
	}
	return w.Obj()
}

// TestBackfillNeverDelaysReserved is the property of backfill: a job
// started behind a reserved job either ends by the reservation's start
// or stays off its nodes, so the reserved job still starts then; and
// reservations never share nodes.
func TestBackfillNeverDelaysReserved(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	reservations, backfilled := 0, 0
	for seed := range seeds {
		snap := randomBackfill(uint64(seed))
		if seed%2 == 1 {
			// Share mode: every job has the same level and submit time,
			// so the order is still by id.
			snap.QOS, snap.DefaultQOS = sched.DefaultQOS(), api.QOSBatch
		}
		depth := 1 + seed%4
		plan := sched.Schedule(snap, now, sched.Config{Policy: sched.PolicyBackfill, BackfillDepth: depth})
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			checkPlan(t, snap, plan)
			if len(plan.Reservations) > depth {
				t.Errorf("%d reservations, depth %d", len(plan.Reservations), depth)
			}
			// job(id) gives lower ids higher priority: the pass's order.
			held := map[string]uint64{}
			expected := map[uint64]time.Time{}
			for _, d := range plan.Pending {
				expected[d.JobID] = d.ExpectedStart
			}
			for _, r := range plan.Reservations {
				if !expected[r.JobID].Equal(r.At) {
					t.Errorf("job %d: ExpectedStart %v, reservation %v", r.JobID, expected[r.JobID], r.At)
				}
				for _, n := range r.Nodes {
					if other, dup := held[n]; dup {
						t.Errorf("node %s reserved for jobs %d and %d", n, other, r.JobID)
					}
					held[n] = r.JobID
				}
				for _, s := range plan.Starts {
					if s.JobID < r.JobID {
						continue
					}
					end := now.Add(time.Duration(s.TimeLimit) * time.Second)
					if !end.After(r.At) {
						continue
					}
					for _, a := range s.Alloc {
						if slices.Contains(r.Nodes, a.Node) {
							t.Errorf("job %d (ends %v) backfilled on %s, reserved for job %d from %v", s.JobID, end, a.Node, r.JobID, r.At)
						}
					}
				}
			}
			for _, s := range plan.Starts {
				want := len(plan.Reservations) > 0 && s.JobID > plan.Reservations[0].JobID
				if s.Backfilled != want {
					t.Errorf("job %d: Backfilled %v, want %v", s.JobID, s.Backfilled, want)
				}
			}
		})
		reservations += len(plan.Reservations)
		for _, s := range plan.Starts {
			if s.Backfilled {
				backfilled++
			}
		}
	}
	if reservations < seeds || backfilled == 0 {
		t.Errorf("property not exercised: %d reservations, %d backfilled starts over %d seeds", reservations, backfilled, seeds)
	}
	t.Logf("%d reservations, %d backfilled starts over %d seeds", reservations, backfilled, seeds)
}
