package sched

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

func mfJob(id uint64, submit time.Time, limit int64, gpus int) *api.Job {
	j := &api.Job{ID: id, JobSpec: api.JobSpec{TimeLimit: limit, GPUs: gpus}}
	j.SubmitTime = submit
	return j
}

func TestMultifactorFactors(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	m := DefaultMultifactor
	m.SizeWeight = 100
	lengthOf := func(limit time.Duration) float64 {
		return 1 - math.Log(limit.Minutes())/math.Log(m.LengthRef.Minutes())
	}
	week := int64(7 * 24 * 3600)
	asMax := lengthOf(m.MaxLimitAs)
	sizeOf := func(gpus float64) float64 { return 1 - (gpus-1)/float64(m.SizeRef-1) }
	parts := map[string]*PartitionInfo{
		"short": {Name: "short", MaxTime: 3600},
		"long":  {Name: "long", MaxTime: 2 * 86400},
		"open":  {Name: "open", MaxTime: api.Infinite},
	}
	inPart := func(j *api.Job, part string) *api.Job { j.Partition = part; return j }
	cpus := func(j *api.Job, n int) *api.Job { j.GPUs, j.Tasks, j.CPUsPerTask = 0, n, 1; return j }
	tests := []struct {
		name                  string
		job                   *api.Job
		age, length, size     float64
		higherThan, lowerThan *api.Job
	}{
		{name: "fresh one-minute one-GPU job", job: mfJob(1, now, 60, 1), age: 0, length: 1, size: 1},
		{name: "half aged", job: mfJob(2, now.Add(-m.MaxAge/2), 60, 1), age: 0.5, length: 1, size: 1},
		{name: "age past the maximum grows at AgeAfterMax", job: mfJob(3, now.Add(-48*time.Hour), 60, 1), age: 1 + 3*m.AgeAfterMax, length: 1, size: 1},
		{name: "limit at the reference", job: mfJob(4, now, int64(m.LengthRef/time.Second), 1), length: 0, size: 1},
		{name: "limit at the reference, 2 GPUs", job: mfJob(4, now, int64(m.LengthRef/time.Second), 2), length: 0, size: sizeOf(2)},
		{name: "no limit, one GPU: as MaxLimitAs", job: mfJob(5, now, api.Infinite, 1), length: asMax, size: 1},
		{name: "no limit, 8 GPUs", job: mfJob(5, now, api.Infinite, 8), length: 0, size: sizeOf(8)},
		{name: "one GPU at MaxLimit", job: mfJob(11, now, week, 1), length: asMax, size: 1},
		{name: "a one-CPU job at MaxLimit", job: mfJob(11, now, week, 0), length: asMax, size: 1},
		{name: "8 CPUs at MaxLimit", job: cpus(mfJob(11, now, week, 0), 8), length: asMax, size: 1},
		{name: "16 CPUs at MaxLimit", job: cpus(mfJob(11, now, week, 0), 16), length: lengthOf(7 * 24 * time.Hour), size: sizeOf(2)},
		{name: "one GPU a second short of MaxLimit", job: mfJob(12, now, week-1, 1), length: lengthOf(7*24*time.Hour - time.Second), size: 1},
		{name: "2 GPUs at MaxLimit", job: mfJob(13, now, week, 2), length: lengthOf(7 * 24 * time.Hour), size: sizeOf(2)},
		{name: "one GPU at a partition's MaxTime", job: inPart(mfJob(14, now, 2*86400, 1), "long"), length: asMax, size: 1},
		{name: "one GPU at MaxLimit below a partition's MaxTime", job: inPart(mfJob(15, now, week, 1), "long"), length: lengthOf(7 * 24 * time.Hour), size: 1},
		{name: "a MaxTime shorter than MaxLimitAs keeps its length", job: inPart(mfJob(16, now, 3600, 1), "short"), length: lengthOf(time.Hour), size: 1},
		{name: "an unlimited partition uses MaxLimit", job: inPart(mfJob(17, now, week, 1), "open"), length: asMax, size: 1},
		{name: "64 GPUs", job: mfJob(6, now, 60, 64), length: 1, size: 0},
		{name: "8 GPUs", job: mfJob(7, now, 60, 8), length: 1, size: sizeOf(8)},
		{name: "SizeRef GPUs", job: mfJob(7, now, 60, m.SizeRef), length: 1, size: 0},
		{name: "submitted in the future", job: mfJob(8, now.Add(time.Hour), 60, 1), age: 0, length: 1, size: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := m.Factors(tc.job, now, nil, parts)
			for _, c := range []struct {
				what      string
				got, want float64
			}{{"age", f.Age, tc.age}, {"length", f.Length, tc.length}, {"size", f.Size, tc.size}, {"fairshare", f.Fairshare, 0.5}} {
				if math.Abs(c.got-c.want) > 1e-9 {
					t.Errorf("%s factor %v, want %v", c.what, c.got, c.want)
				}
			}
			want := m.AgeWeight*tc.age + m.LengthWeight*tc.length + m.SizeWeight*tc.size + m.FairshareWeight*0.5
			if math.Abs(f.Priority-want) > 1e-6 {
				t.Errorf("priority %v, want %v", f.Priority, want)
			}
		})
	}
	// Without AgeAfterMax the age stops at 1 (Slurm's rule); without
	// MaxLimitAs the maximum is taken at its word.
	capped := m
	capped.AgeAfterMax, capped.MaxLimitAs = 0, 0
	if f := capped.Factors(mfJob(3, now.Add(-48*time.Hour), week, 1), now, nil, nil); f.Age != 1 || math.Abs(f.Length-lengthOf(7*24*time.Hour)) > 1e-9 {
		t.Errorf("capped age %v, length %v", f.Age, f.Length)
	}
	// Nice lowers the priority point for point.
	j := mfJob(9, now, 60, 1)
	j.Nice = 100
	if d := m.Factors(mfJob(10, now, 60, 1), now, nil, nil).Priority - m.Factors(j, now, nil, nil).Priority; math.Abs(d-100) > 1e-9 {
		t.Errorf("nice 100 lowered the priority by %v", d)
	}
}

func TestFairshareFactor(t *testing.T) {
	snap := &Snapshot{Usage: map[string]float64{"a": 30, "b": 10, "c": 0}}
	fs := newFairshare(snap)
	// Equal shares of 1/3: a used 3/4 of everything, b 1/4, c nothing.
	for acct, want := range map[string]float64{"a": math.Exp2(-0.75 * 3), "b": math.Exp2(-0.25 * 3), "c": 1} {
		if got := fs.factor(acct); math.Abs(got-want) > 1e-9 {
			t.Errorf("account %s: factor %v, want %v", acct, got, want)
		}
	}
	// With guarantees the shares follow them.
	snap.Queues = map[string]*QueueInfo{"a": {Name: "a", Guaranteed: 30}, "b": {Name: "b", Guaranteed: 10}}
	fs = newFairshare(snap)
	if got, want := fs.factor("a"), math.Exp2(-1); math.Abs(got-want) > 1e-9 {
		t.Errorf("account a at its share: factor %v, want %v", got, want)
	}
	if got := fs.factor("c"); got != 0.5 {
		t.Errorf("account without a share or usage: factor %v, want 0.5", got)
	}
	if (*fairshare)(nil).factor("x") != 0.5 {
		t.Error("no usage: factor should be neutral")
	}
}

// TestResolvedTide: policy tide is backfill in the default multifactor
// order, and a caller's own weights win.
func TestResolvedTide(t *testing.T) {
	c := Config{Policy: PolicyTide}.Resolved()
	if c.Policy != PolicyBackfill || c.Priority == nil || *c.Priority != DefaultMultifactor {
		t.Fatalf("tide resolved to %v %+v", c.Policy, c.Priority)
	}
	own := Multifactor{AgeWeight: 1}
	if c := (Config{Policy: PolicyTide, Priority: &own}).Resolved(); c.Priority != &own {
		t.Error("tide replaced the caller's weights")
	}
	if c := (Config{Policy: PolicyEASY}).Resolved(); c.Priority != nil || c.Policy != PolicyEASY {
		t.Error("easy changed")
	}
	if p, err := ParsePolicy("Tide"); err != nil || p != PolicyTide || p.String() != "tide" || !p.Backfills() {
		t.Errorf("ParsePolicy(tide) = %v, %v", p, err)
	}
}

// TestSortPendingIsThePassOrder: the order SortPending gives is the order
// in which a pass decides the jobs (the simulator relies on it to cut
// the queue), for random queues under the multifactor order.
func TestSortPendingIsThePassOrder(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 7))
		// One node that fits nothing: every job stays pending and is
		// decided in order.
		snap := &Snapshot{
			Nodes:      []NodeInfo{{Name: "n1", Usable: true, CPUs: 1, FreeCPUs: 0, MemoryMB: 1, GPUs: 0}},
			Partitions: map[string]*PartitionInfo{"p": {Name: "p", Nodes: []string{"n1"}, Up: true}},
		}
		var jobs []*api.Job
		for i := range 30 {
			j := mfJob(uint64(i+1), now.Add(-time.Duration(r.IntN(20*3600))*time.Second), int64(60*(1+r.IntN(5000))), 0)
			j.Partition, j.State, j.Nice = "p", api.StatePending, r.IntN(3)*100
			j.EffPriority = 1
			jobs = append(jobs, j)
		}
		cfg := Config{Policy: PolicyTide}
		sorted := slices.Clone(jobs)
		SortPending(sorted, snap, now, cfg.Resolved())
		snap.Pending = jobs
		plan := Schedule(snap, now, cfg)
		if len(plan.Pending) != len(jobs) {
			t.Fatalf("seed %d: %d decisions for %d jobs", seed, len(plan.Pending), len(jobs))
		}
		for i, d := range plan.Pending {
			if d.JobID != sorted[i].ID {
				t.Fatalf("seed %d: decision %d is job %d, SortPending put job %d there", seed, i, d.JobID, sorted[i].ID)
			}
		}
		// Scores never increase along the order.
		m := DefaultMultifactor
		for i := 1; i < len(sorted); i++ {
			if a, b := m.Factors(sorted[i-1], now, nil, nil).Priority, m.Factors(sorted[i], now, nil, nil).Priority; a < b {
				t.Fatalf("seed %d: job %d (%v) before job %d (%v)", seed, sorted[i-1].ID, a, sorted[i].ID, b)
			}
		}
	}
}
