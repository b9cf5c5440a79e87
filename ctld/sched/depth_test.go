package sched_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
	"github.com/tide-hpc/tide/topology/topotest"
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
		if strings.HasPrefix(d.Detail, "not tested") {
			txt += " untested"
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

// exact is a backfill configuration without rounding, so that cases
// read in plain seconds.
var exact = sched.BackfillConfig{Resolution: time.Second}

// halfBusyNode is an 8-GPU node with GPUs 0-3 (and 4 CPUs) busy until
// secs: the cluster of TestBackfillReservations and TestProbes.
func halfBusyNode(name string, secs int) sched.NodeInfo {
	n := st.MakeNode(name).CPUs(64).GPUs(8).UsedGPUs(0, 1, 2, 3).UsedCPUs(4).Obj()
	n.Releases = []sched.Release{release(secs, 4, 0, 1, 2, 3)}
	return n
}

// halfBusyQueue is their queue: two whole-node jobs and two half-node
// jobs (a long one of alice's, a short one of bob's).
func halfBusyQueue() []*api.Job {
	return []*api.Job{job(1, 8, 1000).User("alice").Obj(), job(2, 8, 1000).User("alice").Obj(),
		job(3, 4, 3600).User("alice").Obj(), job(4, 4, 60).User("bob").Obj()}
}

// TestBackfillReservations: two 8-GPU nodes with 4 GPUs busy until 100s
// (n1) and 300s (n2). EASY reserves for the first blocked job only;
// backfill for every job it tests, up to its limits and window.
func TestBackfillReservations(t *testing.T) {
	half, jobs := halfBusyNode, halfBusyQueue()
	tests := []struct {
		name   string
		policy sched.Policy
		bf     sched.BackfillConfig
		want   []string
	}{
		{name: "EASY protects the first blocked job only", policy: sched.PolicyEASY, bf: exact,
			want: []string{"1 Resources +100s", "2 Resources", "3 n2 backfilled", "4 n1 backfilled"}},
		{name: "backfill reserves for every job it tests", policy: sched.PolicyBackfill, bf: exact,
			// 2 waits for n2 at 300s; 3 fits now but would delay 1
			// and 2, so it waits for n1 after 1's reservation.
			want: []string{"1 Resources +100s", "2 Resources +300s", "3 Priority +1100s", "4 n1 backfilled"}},
		{name: "default resolution rounds releases up to the minute", policy: sched.PolicyBackfill,
			want: []string{"1 Resources +120s", "2 Resources +300s", "3 Priority +1140s", "4 n1 backfilled"}},
		{name: "jobs beyond the test limit stay untested", policy: sched.PolicyBackfill,
			bf:   sched.BackfillConfig{Resolution: time.Second, MaxJobTest: 2},
			want: []string{"1 Resources +100s", "2 Resources +300s", "3 Priority untested", "4 Priority untested"}},
		{name: "per-user limit: bob is still tested", policy: sched.PolicyBackfill,
			bf:   sched.BackfillConfig{Resolution: time.Second, MaxJobUser: 1},
			want: []string{"1 Resources +100s", "2 Priority untested", "3 Priority untested", "4 n1 backfilled"}},
		{name: "per-partition limit", policy: sched.PolicyBackfill,
			bf:   sched.BackfillConfig{Resolution: time.Second, MaxJobPart: 3},
			want: []string{"1 Resources +100s", "2 Resources +300s", "3 Priority +1100s", "4 Priority untested"}},
		{name: "no reservation beyond the window", policy: sched.PolicyBackfill,
			bf: sched.BackfillConfig{Resolution: time.Second, Window: 200 * time.Second},
			// 2 would start at 300s: no reservation, so 3 takes n2 now.
			want: []string{"1 Resources +100s", "2 Resources", "3 n2 backfilled", "4 n1 backfilled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := st.MakeSnapshot().Nodes(half("n1", 100), half("n2", 300)).
				Partitions(st.MakePartition("gpu", "n1", "n2").Obj()).Jobs(jobs...).Obj()
			plan := sched.Schedule(s, now, sched.Config{Policy: tt.policy, Backfill: tt.bf})
			if diff := cmp.Diff(tt.want, bfOutcome(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			for _, r := range plan.Reservations {
				d, _ := decision(t, plan, r.JobID)
				if !d.ExpectedStart.Equal(r.At) {
					t.Errorf("job %d: ExpectedStart %v, reservation %v", r.JobID, d.ExpectedStart, r.At)
				}
			}
		})
	}
}

// TestBackfillLimitsCloseThePartition: once the test limit is reached in
// a partition where a job could not start, a job after every job of the
// pass would be untested, so the plan closes the partition.
func TestBackfillLimitsCloseThePartition(t *testing.T) {
	n := st.MakeNode("n1").CPUs(64).GPUs(8).UsedGPUs(0, 1, 2, 3).UsedCPUs(4).Obj()
	n.Releases = []sched.Release{release(100, 4, 0, 1, 2, 3)}
	for _, tt := range []struct {
		name   string
		bf     sched.BackfillConfig
		closed bool
	}{
		{name: "within the limit", bf: sched.BackfillConfig{MaxJobTest: 3}},
		{name: "limit reached", bf: sched.BackfillConfig{MaxJobTest: 2}, closed: true},
		{name: "partition limit reached", bf: sched.BackfillConfig{MaxJobPart: 2}, closed: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := st.MakeSnapshot().Nodes(n).Partitions(st.MakePartition("gpu", "n1").Obj()).
				Jobs(job(1, 8, 1000).Obj(), job(2, 8, 1000).Obj()).Obj()
			plan := sched.Schedule(s, now, sched.Config{Policy: sched.PolicyBackfill, Backfill: tt.bf})
			if got := slices.Contains(plan.Closed, "gpu"); got != tt.closed {
				t.Errorf("closed %v, want %v (plan %v)", got, tt.closed, bfOutcome(plan))
			}
		})
	}
}

// TestBackfillCachedShapesReserve: identical jobs share the failed-shape
// cache, and each still gets its own reservation, one after the other.
func TestBackfillCachedShapesReserve(t *testing.T) {
	n := st.MakeNode("n1").CPUs(64).GPUs(8).UsedGPUs(0, 1, 2, 3, 4, 5, 6, 7).UsedCPUs(8).Obj()
	n.Releases = []sched.Release{release(100, 8, 0, 1, 2, 3, 4, 5, 6, 7)}
	s := st.MakeSnapshot().Nodes(n).Partitions(st.MakePartition("gpu", "n1").Obj()).
		Jobs(job(1, 8, 100).Obj(), job(2, 8, 100).Obj(), job(3, 8, 100).Obj(), job(4, 8, 100).Obj()).Obj()
	plan := sched.Schedule(s, now, sched.Config{Policy: sched.PolicyBackfill, Backfill: exact})
	want := []string{"1 Resources +100s", "2 Resources +200s", "3 Resources +300s", "4 Resources +400s"}
	if diff := cmp.Diff(want, bfOutcome(plan)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestBackfillReservesIslandsAndSlices: a --comm=model job waits for a
// whole NVLink island (GPU indices matter: at 100s six GPUs are free but
// no island of four), and a slice job reserves a whole GPU, which the
// next job then waits for.
func TestBackfillReservesIslandsAndSlices(t *testing.T) {
	t.Run("island", func(t *testing.T) {
		n := st.MakeNode("n1").CPUs(64).GPUs(8).UsedGPUs(0, 1, 4, 5).UsedCPUs(4).Matrix(topotest.TwoIslands().Matrix).Obj()
		n.Releases = []sched.Release{release(100, 2, 0, 4), release(300, 2, 1, 5)}
		model := job(1, 4, 600).Obj()
		model.Comm = "model"
		s := st.MakeSnapshot().Nodes(n).Partitions(st.MakePartition("gpu", "n1").Obj()).Jobs(model).Obj()
		plan := sched.Schedule(s, now, sched.Config{Policy: sched.PolicyBackfill, Backfill: exact})
		if diff := cmp.Diff([]string{"1 Resources +300s"}, bfOutcome(plan)); diff != "" {
			t.Errorf("plan (-want +got):\n%s", diff)
		}
	})
	t.Run("slices", func(t *testing.T) {
		n := st.MakeNode("n1").CPUs(64).GPUs(8).GPUMem(80000).UsedGPUs(0, 1, 2, 3, 4, 5, 6, 7).UsedCPUs(8).Obj()
		n.Releases = []sched.Release{release(100, 8, 0, 1, 2, 3, 4, 5, 6, 7)}
		s := st.MakeSnapshot().Nodes(n).Partitions(st.MakePartition("gpu", "n1").Obj()).
			Jobs(st.MakeJob().ID(1).Priority(999).GPUs(1).GPUMem(10000).TimeLimit(600).Obj(), job(2, 8, 1000).Obj()).Obj()
		plan := sched.Schedule(s, now, sched.Config{Policy: sched.PolicyBackfill, Backfill: exact})
		if diff := cmp.Diff([]string{"1 Resources +100s", "2 Resources +700s"}, bfOutcome(plan)); diff != "" {
			t.Errorf("plan (-want +got):\n%s", diff)
		}
	})
}

// randomBackfill is a cluster whose busy resources end at random times
// (some never: jobs without a time limit), with jobs of unique
// priorities and random shapes, users and time limits: 1–8 GPUs with
// 1–4 CPUs and 0 or 10 GB per GPU, two-node jobs, CPU-only jobs,
// exclusive ones and a few without a limit.
func randomBackfill(seed uint64) *sched.Snapshot {
	rng := rand.New(rand.NewPCG(seed, 0xbf))
	nodes := 2 + rng.IntN(10)
	w := st.MakeSnapshot()
	var names []string
	for i := range nodes {
		name := fmt.Sprintf("n%02d", i+1)
		names = append(names, name)
		n := st.MakeNode(name).CPUs(32).Mem(256000).GPUs(8).Obj()
		for g := 0; g < 8; {
			if rng.IntN(3) == 0 {
				g++
				continue
			}
			k := min(1+rng.IntN(4), 8-g)
			held := gpuRange(g, g+k-1)
			mem := int64(rng.IntN(3)) * 20000
			n.FreeGPUs = slices.DeleteFunc(n.FreeGPUs, func(x int) bool { return slices.Contains(held, x) })
			n.FreeCPUs -= 2 * k
			n.FreeMemMB -= mem
			n.Idle = false
			if rng.IntN(12) > 0 {
				// Overdue ones included.
				at := now.Add(time.Duration(rng.IntN(3700)-100) * time.Second)
				n.Releases = append(n.Releases, sched.Release{At: at, CPUs: 2 * k, MemMB: mem, GPUs: held})
			}
			g += k
		}
		w.Nodes(n)
	}
	w.Partitions(st.MakePartition("gpu", names...).Obj())
	users := []string{"alice", "bob", "carol"}
	for i := range 5 + rng.IntN(40) {
		id := uint64(i + 1)
		limit := int64(60 * (1 + rng.IntN(120)))
		if rng.IntN(15) == 0 {
			limit = api.Infinite
		}
		var jw *st.JobWrapper
		switch r := rng.IntN(10); {
		case r < 6:
			jw = job(id, []int{1, 2, 4, 8}[rng.IntN(4)], limit).CPUsPerGPU(1 + rng.IntN(4)).MemPerGPU(int64(rng.IntN(2)) * 10000)
		case r < 8:
			jw = job(id, 16, limit).Nodes(2)
		case r < 9:
			jw = st.MakeJob().ID(id).Priority(uint32(1000 - id)).Tasks(1 + rng.IntN(16)).MemPerCPU(2000).TimeLimit(limit)
		default:
			jw = job(id, 1, limit).Exclusive()
		}
		w.Jobs(jw.User(users[rng.IntN(len(users))]).Obj())
	}
	return w.Obj()
}

// usage is what one job holds on one node over [from, to).
type usage struct {
	job      uint64
	from, to time.Time
	cpus     int
	mem      int64
	gpus     int
}

// reservedUse is what a reserved job will hold on each of its nodes:
// the request's slot (these jobs' slots are all alike), or all of the
// node for an exclusive job.
func reservedUse(snap *sched.Snapshot, r sched.Reservation) []usage {
	j := jobByID(snap, r.JobID)
	to := time.Unix(1<<40, 0)
	if j.TimeLimit != api.Infinite {
		to = r.At.Add(time.Duration(j.TimeLimit) * time.Second)
	}
	out := make([]usage, len(r.Nodes))
	for k, name := range r.Nodes {
		var n *sched.NodeInfo
		for i := range snap.Nodes {
			if snap.Nodes[i].Name == name {
				n = &snap.Nodes[i]
			}
		}
		u := usage{job: j.ID, from: r.At, to: to}
		switch {
		case j.Exclusive:
			u.cpus, u.mem, u.gpus = n.CPUs, n.MemoryMB, n.GPUs
		case j.GPUs > 0:
			g := j.GPUs / len(r.Nodes)
			u.gpus, u.cpus, u.mem = g, g*max(j.CPUsPerGPU, 1), int64(g)*j.MemPerGPUMB
		default:
			u.cpus = j.Tasks
			u.mem = int64(u.cpus) * j.MemPerCPUMB
		}
		out[k] = u
	}
	return out
}

// checkTimeline replays the plan in time on every node: the running
// jobs until their releases (never without one), the pass's starts over
// their limits and every reservation over its job's limit from its
// start. At no instant from now on may they need more CPUs, memory or
// GPUs than the node has: then every reserved job can still start at
// its planned start whatever backfill started before it.
func checkTimeline(t *testing.T, snap *sched.Snapshot, plan sched.Plan) {
	t.Helper()
	far := time.Unix(1<<40, 0)
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		var uses []usage
		// What running jobs hold now, less what their releases give back.
		run := usage{from: now, to: far, cpus: n.CPUs - n.FreeCPUs, mem: n.MemoryMB - n.FreeMemMB, gpus: n.GPUs - len(n.FreeGPUs)}
		for _, r := range n.Releases {
			run.cpus -= r.CPUs
			run.mem -= r.MemMB
			run.gpus -= len(r.GPUs)
			if r.At.After(now) {
				uses = append(uses, usage{from: now, to: r.At, cpus: r.CPUs, mem: r.MemMB, gpus: len(r.GPUs)})
			}
		}
		uses = append(uses, run)
		for _, s := range plan.Starts {
			to := far
			if s.TimeLimit != api.Infinite {
				to = now.Add(time.Duration(s.TimeLimit) * time.Second)
			}
			for _, a := range s.Alloc {
				if a.Node == n.Name {
					uses = append(uses, usage{job: s.JobID, from: now, to: to, cpus: a.CPUs, mem: a.MemoryMB, gpus: len(a.GPUs)})
				}
			}
		}
		for _, r := range plan.Reservations {
			for k, u := range reservedUse(snap, r) {
				if r.Nodes[k] == n.Name {
					uses = append(uses, u)
				}
			}
		}
		instants := []time.Time{now}
		for _, u := range uses {
			if u.from.After(now) {
				instants = append(instants, u.from)
			}
		}
		for _, at := range instants {
			var cpus, gpus int
			var mem int64
			var who []uint64
			for _, u := range uses {
				if !at.Before(u.from) && at.Before(u.to) {
					cpus, mem, gpus = cpus+u.cpus, mem+u.mem, gpus+u.gpus
					if u.job != 0 {
						who = append(who, u.job)
					}
				}
			}
			if cpus > n.CPUs || mem > n.MemoryMB || gpus > n.GPUs {
				t.Errorf("node %s at +%s: %d/%d CPUs, %d/%d MB, %d/%d GPUs held by running jobs and jobs %v",
					n.Name, at.Sub(now), cpus, n.CPUs, mem, n.MemoryMB, gpus, n.GPUs, who)
			}
		}
	}
}

// TestBackfillNeverDelaysReserved is the property of multi-reservation
// backfill (and, every fifth seed, of EASY's one reservation) on random
// clusters and queues: the pass's starts (over their
// limits), the running jobs (until their releases) and all reservations
// never need more than a node has at any instant, so no reserved job is
// delayed past its planned start, with and without a reservation depth; no GPU is given twice (checkPlan);
// every reserved job's ExpectedStart is its reservation, within the
// window; and every job the pass tested that neither started nor was
// reserved is one that fits only beyond the window or never.
func TestBackfillNeverDelaysReserved(t *testing.T) {
	seeds := 400
	if testing.Short() {
		seeds = 60
	}
	reservations, backfilled, untested := 0, 0, 0
	for seed := range seeds {
		snap := randomBackfill(uint64(seed))
		if seed%2 == 1 {
			// Share mode: every job has the same level and submit time,
			// so the order is still by id.
			snap.QOS, snap.DefaultQOS = sched.DefaultQOS(), api.QOSBatch
		}
		bf := sched.BackfillConfig{Resolution: []time.Duration{time.Second, 0, 5 * time.Minute}[seed%3],
			MaxJobTest: []int{0, 3, 10}[seed%3], MaxJobUser: seed % 4, Window: []time.Duration{0, 30 * time.Minute}[seed/3%2],
			// A reservation depth (policy tide's rule) must hold its
			// reservations the same way.
			ReserveDepth: []int{0, 0, 1, 2, 0, 3, 0}[seed%7]}
		pol := sched.PolicyBackfill
		if seed%5 == 4 {
			// EASY's one reservation must hold as well.
			pol = sched.PolicyEASY
		}
		plan := sched.Schedule(snap, now, sched.Config{Policy: pol, Backfill: bf})
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			checkPlan(t, snap, plan)
			checkTimeline(t, snap, plan)
			window := bf.Window
			switch {
			case pol == sched.PolicyEASY:
				window = 1 << 60
			case window == 0:
				window = sched.DefaultBackfillWindow
			}
			if pol == sched.PolicyEASY && len(plan.Reservations) > 1 {
				t.Errorf("EASY made %d reservations", len(plan.Reservations))
			}
			if d := bf.ReserveDepth; pol == sched.PolicyBackfill && d > 0 && len(plan.Reservations) > d {
				t.Errorf("%d reservations beyond the depth %d", len(plan.Reservations), d)
			}
			reserved := map[uint64]bool{}
			for _, r := range plan.Reservations {
				if reserved[r.JobID] {
					t.Errorf("job %d reserved twice", r.JobID)
				}
				reserved[r.JobID] = true
				d, ok := decision(t, plan, r.JobID)
				if !ok || !d.ExpectedStart.Equal(r.At) {
					t.Errorf("job %d: ExpectedStart %v, reservation %v", r.JobID, d.ExpectedStart, r.At)
				}
				if r.At.Before(now) || r.At.After(now.Add(window)) {
					t.Errorf("job %d reserved at %v, outside [now, now+%s]", r.JobID, r.At, window)
				}
			}
			for _, s := range plan.Starts {
				want := len(plan.Reservations) > 0 && s.JobID > plan.Reservations[0].JobID
				if s.Backfilled != want {
					t.Errorf("job %d: Backfilled %v, want %v", s.JobID, s.Backfilled, want)
				}
			}
			for _, d := range plan.Pending {
				if !reserved[d.JobID] && !d.ExpectedStart.IsZero() {
					t.Errorf("job %d: ExpectedStart %v without a reservation", d.JobID, d.ExpectedStart)
				}
			}
		})
		reservations += len(plan.Reservations)
		for _, s := range plan.Starts {
			if s.Backfilled {
				backfilled++
			}
		}
		for _, d := range plan.Pending {
			if strings.HasPrefix(d.Detail, "not tested") {
				untested++
			}
		}
	}
	if reservations < 2*seeds || backfilled < seeds/4 || untested == 0 {
		t.Errorf("property not exercised: %d reservations, %d backfilled starts, %d untested jobs over %d seeds",
			reservations, backfilled, untested, seeds)
	}
	t.Logf("%d reservations, %d backfilled starts, %d untested jobs over %d seeds", reservations, backfilled, untested, seeds)
}

// TestBackfillNewJobMovesNoReservation: a second pass over the same
// cluster with one more job of the lowest priority submitted reserves
// every earlier job at the same instant or sooner (here: the same), and
// starts what the first pass started.
func TestBackfillNewJobMovesNoReservation(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 40
	}
	for seed := range seeds {
		snap := randomBackfill(uint64(seed))
		cfg := sched.Config{Policy: sched.PolicyBackfill, Backfill: sched.BackfillConfig{Resolution: []time.Duration{time.Second, 0}[seed%2]}}
		first := sched.Schedule(snap, now, cfg)
		rng := rand.New(rand.NewPCG(uint64(seed), 0x2e))
		last := uint64(len(snap.Pending) + 1)
		snap.Pending = append(snap.Pending, st.MakeJob().ID(last).Priority(1).GPUs([]int{1, 4, 8, 16}[rng.IntN(4)]).
			CPUsPerGPU(1).TimeLimit(int64(60*(1+rng.IntN(60)))).Obj())
		second := sched.Schedule(snap, now, cfg)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			at := map[uint64]time.Time{}
			for _, r := range second.Reservations {
				at[r.JobID] = r.At
			}
			for _, r := range first.Reservations {
				got, ok := at[r.JobID]
				if !ok || got.After(r.At) {
					t.Errorf("job %d reserved at %v, then at %v (reserved: %v) once job %d was submitted", r.JobID, r.At, got, ok, last)
				}
			}
			var starts []sched.Start
			for _, s := range second.Starts {
				if s.JobID != last {
					starts = append(starts, s)
				}
			}
			if diff := cmp.Diff(first.Starts, starts); diff != "" {
				t.Errorf("starts differ (-first +second):\n%s", diff)
			}
		})
	}
}
