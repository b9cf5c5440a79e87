package sched_test

import (
	"errors"
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

// release is a running job's Release ending secs after now.
func release(secs int, cpus int, gpus ...int) sched.Release {
	return sched.Release{At: now.Add(time.Duration(secs) * time.Second), CPUs: cpus, GPUs: gpus}
}

// outcome renders a plan as "id:node" for starts and "id:Reason" for
// pending jobs, sorted by job id, so that a case states all of it.
func outcome(p sched.Plan) []string {
	type row struct {
		id  uint64
		txt string
	}
	var rows []row
	for _, s := range p.Starts {
		var nodes []string
		for _, a := range s.Alloc {
			nodes = append(nodes, a.Node)
		}
		rows = append(rows, row{s.JobID, fmt.Sprintf("%d:%v", s.JobID, nodes)})
	}
	for _, d := range p.Pending {
		rows = append(rows, row{d.JobID, fmt.Sprintf("%d:%s", d.JobID, d.Reason)})
	}
	slices.SortFunc(rows, func(a, b row) int { return int(a.id) - int(b.id) })
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.txt
	}
	return out
}

// job is a pending 1-node job with priority from id (lower id = higher
// priority), gpus GPUs, 1 CPU per GPU and a time limit.
func job(id uint64, gpus int, limit int64) *st.JobWrapper {
	return st.MakeJob().ID(id).Priority(uint32(1000 - id)).GPUs(gpus).CPUsPerGPU(1).TimeLimit(limit)
}

func TestPolicies(t *testing.T) {
	// busy is an 8-GPU node with GPUs 0-3 held by a job that ends 100s
	// from now.
	busy := func(name string) sched.NodeInfo {
		n := st.MakeNode(name).CPUs(64).GPUs(8).UsedGPUs(0, 1, 2, 3).UsedCPUs(4).Obj()
		n.Releases = []sched.Release{release(100, 4, 0, 1, 2, 3)}
		return n
	}
	// stuck is busy without a known end (a job without a time limit).
	stuck := func(name string) sched.NodeInfo {
		return st.MakeNode(name).CPUs(64).GPUs(8).UsedGPUs(0, 1, 2, 3).UsedCPUs(4).Obj()
	}
	free := func(name string, gpus int) sched.NodeInfo {
		return st.MakeNode(name).CPUs(64).GPUs(gpus).Obj()
	}
	snap := func(nodes []sched.NodeInfo, jobs ...*api.Job) *sched.Snapshot {
		names := make([]string, len(nodes))
		for i, n := range nodes {
			names[i] = n.Name
		}
		return st.MakeSnapshot().Nodes(nodes...).Partitions(st.MakePartition("gpu", names...).Obj()).Jobs(jobs...).Obj()
	}

	tests := []struct {
		name   string
		snap   *sched.Snapshot
		policy sched.Policy
		want   []string
	}{
		{
			name:   "priority: a blocked job holds the nodes it could use",
			snap:   snap([]sched.NodeInfo{busy("n1")}, job(1, 8, 1000).Obj(), job(2, 1, 50).Obj()),
			policy: sched.PolicyPriority,
			want:   []string{"1:Resources", "2:Priority"},
		},
		{
			name: "priority: a job that fits on nodes the blocked job cannot use starts",
			snap: snap([]sched.NodeInfo{busy("n1"), free("n2", 4)},
				job(1, 8, 1000).Obj(), job(2, 1, 5000).Obj()),
			policy: sched.PolicyPriority,
			want:   []string{"1:Resources", "2:[n2]"},
		},
		{
			name: "fifo: nothing passes the first job that does not fit",
			snap: snap([]sched.NodeInfo{busy("n1"), free("n2", 4)},
				job(1, 8, 1000).Obj(), job(2, 1, 5000).Obj(), job(3, 1, 10).Obj()),
			policy: sched.PolicyFIFO,
			want:   []string{"1:Resources", "2:Priority", "3:Priority"},
		},
		{
			name: "fifo: jobs ahead of the blocked one start",
			snap: snap([]sched.NodeInfo{busy("n1")},
				job(1, 2, 1000).Obj(), job(2, 8, 1000).Obj(), job(3, 1, 10).Obj()),
			policy: sched.PolicyFIFO,
			want:   []string{"1:[n1]", "2:Resources", "3:Priority"},
		},
		{
			name: "fifo: held and impossible jobs block nothing",
			snap: snap([]sched.NodeInfo{busy("n1")},
				job(1, 8, 1000).Hold(api.HoldUser).Obj(), job(2, 16, 1000).Obj(), job(3, 1, 10).Obj()),
			policy: sched.PolicyFIFO,
			want:   []string{"1:JobHeldUser", "2:BadConstraints", "3:[n1]"},
		},
		{
			name: "backfill: a job ending before the reservation starts on the reserved node",
			snap: snap([]sched.NodeInfo{busy("n1")},
				job(1, 8, 1000).Obj(), job(2, 2, 100).Obj(), job(3, 2, 101).Obj()),
			policy: sched.PolicyBackfill,
			want:   []string{"1:Resources", "2:[n1]", "3:Priority"},
		},
		{
			name: "backfill: a long job starts on nodes the reservation does not hold",
			snap: snap([]sched.NodeInfo{busy("n1"), free("n2", 2)},
				job(1, 8, 1000).Obj(), job(2, 2, 5000).Obj(), job(3, 1, 5000).Obj()),
			policy: sched.PolicyBackfill,
			want:   []string{"1:Resources", "2:[n2]", "3:Priority"},
		},
		{
			name: "easy: only the first blocked job is protected",
			snap: snap([]sched.NodeInfo{busy("n1"), busy("n2")},
				job(1, 8, 1000).Obj(), job(2, 8, 1000).Obj(), job(3, 4, 5000).Obj()),
			policy: sched.PolicyEASY,
			want:   []string{"1:Resources", "2:Resources", "3:[n2]"},
		},
		{
			name: "backfill: every blocked job is protected",
			snap: snap([]sched.NodeInfo{busy("n1"), busy("n2")},
				job(1, 8, 1000).Obj(), job(2, 8, 1000).Obj(), job(3, 4, 5000).Obj()),
			policy: sched.PolicyBackfill,
			want:   []string{"1:Resources", "2:Resources", "3:Priority"},
		},
		{
			name: "easy: a job ending before the reservation starts on the reserved node",
			snap: snap([]sched.NodeInfo{busy("n1")},
				job(1, 8, 1000).Obj(), job(2, 2, 100).Obj(), job(3, 2, 101).Obj()),
			policy: sched.PolicyEASY,
			want:   []string{"1:Resources", "2:[n1]", "3:Priority"},
		},
		{
			name: "backfill: jobs started earlier in the pass count as releases",
			snap: snap([]sched.NodeInfo{free("n1", 8)},
				job(1, 4, 100).Obj(), job(2, 8, 1000).Obj(), job(3, 4, 100).Obj(), job(4, 4, 101).Obj()),
			policy: sched.PolicyBackfill,
			// 4 would run past 2's reservation at 100s, and nothing
			// is free now anyway.
			want: []string{"1:[n1]", "2:Resources", "3:[n1]", "4:Resources"},
		},
		{
			name: "easy: without known ends it holds nodes like priority",
			snap: snap([]sched.NodeInfo{stuck("n1"), free("n2", 2)},
				job(1, 8, 1000).Obj(), job(2, 2, 10).Obj(), job(3, 1, 10).Obj()),
			policy: sched.PolicyEASY,
			want:   []string{"1:Resources", "2:[n2]", "3:Priority"},
		},
		{
			name: "backfill: without known ends it holds nodes like priority",
			snap: snap([]sched.NodeInfo{stuck("n1"), free("n2", 2)},
				job(1, 8, 1000).Obj(), job(2, 2, 10).Obj(), job(3, 1, 10).Obj()),
			policy: sched.PolicyBackfill,
			want:   []string{"1:Resources", "2:[n2]", "3:Priority"},
		},
		{
			name: "backfill: an unlimited job never ends before the reservation",
			snap: snap([]sched.NodeInfo{busy("n1")},
				job(1, 8, 1000).Obj(), job(2, 1, api.Infinite).Obj()),
			policy: sched.PolicyBackfill,
			want:   []string{"1:Resources", "2:Priority"},
		},
		{
			name: "backfill: overdue releases count as ending now",
			snap: func() *sched.Snapshot {
				n := busy("n1")
				n.Releases[0].At = now.Add(-time.Hour)
				return snap([]sched.NodeInfo{n}, job(1, 8, 1000).Obj(), job(2, 1, 1).Obj())
			}(),
			policy: sched.PolicyBackfill,
			want:   []string{"1:Resources", "2:Priority"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sched.Config{Policy: tc.policy, Backfill: exact}
			plan := sched.Schedule(tc.snap, now, cfg)
			if diff := cmp.Diff(tc.want, outcome(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			again := sched.Schedule(tc.snap, now, cfg)
			if diff := cmp.Diff(plan, again); diff != "" {
				t.Errorf("second pass differs (-first +second):\n%s", diff)
			}
		})
	}
}

// TestBackfillKeepsSnapshot checks that the reservation's replay of
// releases works on copies: the snapshot's free GPU lists stay as given.
func TestBackfillKeepsSnapshot(t *testing.T) {
	n := st.MakeNode("n1").CPUs(64).GPUs(8).UsedGPUs(0, 1, 2, 3).UsedCPUs(4).Obj()
	n.Releases = []sched.Release{release(100, 4, 0, 1, 2, 3)}
	s := st.MakeSnapshot().Nodes(n).Partitions(st.MakePartition("gpu", "n1").Obj()).
		Jobs(job(1, 8, 1000).Obj(), job(2, 2, 50).Obj()).Obj()
	before := fmt.Sprintf("%+v", *s)
	sched.Schedule(s, now, sched.Config{Policy: sched.PolicyBackfill})
	if after := fmt.Sprintf("%+v", *s); after != before {
		t.Errorf("Schedule modified the snapshot:\nbefore %s\nafter  %s", before, after)
	}
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want sched.Policy
		err  bool
	}{
		{name: "empty is the default", in: "", want: sched.PolicyTide},
		{name: "priority", in: "priority", want: sched.PolicyPriority},
		{name: "default", in: "Default", want: sched.PolicyTide},
		{name: "tide", in: "tide", want: sched.PolicyTide},
		{name: "fifo", in: "FIFO", want: sched.PolicyFIFO},
		{name: "backfill", in: " backfill ", want: sched.PolicyBackfill},
		{name: "easy", in: "EASY", want: sched.PolicyEASY},
		{name: "unknown", in: "lottery", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sched.ParsePolicy(tc.in)
			if tc.err {
				if !errors.Is(err, api.ErrInvalidArgument) {
					t.Fatalf("ParsePolicy(%q) error = %v, want ErrInvalidArgument", tc.in, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParsePolicy(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			if round, _ := sched.ParsePolicy(got.String()); round != got {
				t.Errorf("String %q does not parse back", got.String())
			}
		})
	}
}

// TestClosedPrefix checks Plan.Closed's promise on random queues: when a
// pass over the first k jobs closes the partition, the pass over all
// jobs starts exactly the same jobs in the same places.
func TestClosedPrefix(t *testing.T) {
	for _, pol := range []sched.Policy{sched.PolicyPriority, sched.PolicyFIFO, sched.PolicyBackfill, sched.PolicyEASY} {
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("%s/seed=%d", pol, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 11))
				w := benchCluster(rng, 16, 8)
				s := w.Obj()
				for i := range s.Nodes {
					n := &s.Nodes[i]
					var held []int
					for g := range n.GPUs {
						if !slices.Contains(n.FreeGPUs, g) {
							held = append(held, g)
						}
					}
					if len(held) > 0 {
						n.Releases = []sched.Release{{At: now.Add(time.Duration(60+rng.IntN(3600)) * time.Second),
							CPUs: n.CPUs - n.FreeCPUs, MemMB: n.MemoryMB - n.FreeMemMB, GPUs: held}}
					}
				}
				jobs := benchJobs(rng, 200)
				for _, j := range jobs {
					j.TimeLimit = int64(60 * (1 + rng.IntN(120)))
				}
				// A test limit below the queue, so that backfill's prefixes
				// close once it is reached.
				cfg := sched.Config{DefMemPerCPUMB: 1000, Policy: pol, Backfill: sched.BackfillConfig{MaxJobTest: 40}}
				full := sched.Schedule(w.Jobs(jobs...).Obj(), now, cfg)
				ordered := slices.Clone(jobs)
				slices.SortStableFunc(ordered, func(a, b *api.Job) int { return int(b.EffPriority) - int(a.EffPriority) })
				closedOnce := false
				for k := 1; k < len(ordered); k++ {
					s.Pending = ordered[:k]
					plan := sched.Schedule(s, now, cfg)
					if !slices.Contains(plan.Closed, "gpu") {
						continue
					}
					closedOnce = true
					if diff := cmp.Diff(full.Starts, plan.Starts); diff != "" {
						t.Fatalf("prefix %d closed the partition but starts differ (-full +prefix):\n%s", k, diff)
					}
				}
				if pol != sched.PolicyEASY && !closedOnce {
					t.Logf("no prefix closed the partition")
				}
			})
		}
	}
}

// TestPlanReservations checks what Plan.Reservations reports: each
// reserved job, the instant it fits and the nodes it gets then (EASY:
// the first blocked job only), and nothing under the other policies or
// when no job is blocked.
func TestPlanReservations(t *testing.T) {
	busy := func(name string, secs int) sched.NodeInfo {
		n := st.MakeNode(name).CPUs(64).GPUs(8).UsedGPUs(0, 1, 2, 3, 4, 5).UsedCPUs(6).Obj()
		n.Releases = []sched.Release{release(secs, 6, 0, 1, 2, 3, 4, 5)}
		return n
	}
	tests := []struct {
		name   string
		policy sched.Policy
		jobs   []*api.Job
		want   []sched.Reservation
	}{
		{name: "4 GPUs fit on the node freed first, 8 then on the other", policy: sched.PolicyBackfill,
			jobs: []*api.Job{job(1, 4, 600).Obj(), job(2, 8, 600).Obj()},
			want: []sched.Reservation{{JobID: 1, At: now.Add(100 * time.Second), Nodes: []string{"n2"}},
				{JobID: 2, At: now.Add(300 * time.Second), Nodes: []string{"n1"}}}},
		{name: "easy reserves for the first only", policy: sched.PolicyEASY,
			jobs: []*api.Job{job(1, 4, 600).Obj(), job(2, 8, 600).Obj()},
			want: []sched.Reservation{{JobID: 1, At: now.Add(100 * time.Second), Nodes: []string{"n2"}}}},
		{name: "8 GPUs wait for the end of the 4-GPU reservation", policy: sched.PolicyBackfill,
			jobs: []*api.Job{job(1, 4, 600).Obj(), job(2, 8, 600).NodeList("n2").Obj()},
			want: []sched.Reservation{{JobID: 1, At: now.Add(100 * time.Second), Nodes: []string{"n2"}},
				{JobID: 2, At: now.Add(700 * time.Second), Nodes: []string{"n2"}}}},
		{name: "16 GPUs wait for both", policy: sched.PolicyBackfill,
			jobs: []*api.Job{st.MakeJob().ID(3).Nodes(2).GPUs(16).CPUsPerGPU(1).TimeLimit(600).Obj()},
			want: []sched.Reservation{{JobID: 3, At: now.Add(300 * time.Second), Nodes: []string{"n1", "n2"}}}},
		{name: "nothing blocked", policy: sched.PolicyBackfill, jobs: []*api.Job{job(4, 2, 600).Obj()}},
		{name: "priority reserves no time", policy: sched.PolicyPriority, jobs: []*api.Job{job(5, 4, 600).Obj()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := st.MakeSnapshot().Nodes(busy("n1", 300), busy("n2", 100)).
				Partitions(st.MakePartition("gpu", "n1", "n2").Obj()).Jobs(tc.jobs...).Obj()
			plan := sched.Schedule(s, now, sched.Config{Policy: tc.policy, Backfill: exact})
			if diff := cmp.Diff(tc.want, plan.Reservations); diff != "" {
				t.Errorf("reservations (-want +got):\n%s", diff)
			}
		})
	}
}
