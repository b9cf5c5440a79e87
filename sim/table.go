package sim

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/sim/trace"
)

// table is a trace as the replays read it: its jobs in arrival order
// (submit time, equal times shuffled by the seed), job i+1 at index i.
// It is built once and shared, read-only, by the replays of every
// policy, and it holds no pointer per job (the IDs are one string, the
// queues an interned list), so that it costs the garbage collector
// nothing to keep: the scheduling core allocates briskly, and with the
// default GOGC a collection runs every few passes.
type table struct {
	jobs []tableJob
	// queues are the trace's queue names, parts the partitions the jobs
	// go to; tableJob.queue and tableJob.part index them.
	queues []string
	parts  []string
	// ids holds the trace's job IDs, one after the other; job i's ends
	// at idEnd[i].
	ids   string
	idEnd []uint32
	// est says where the jobs' limits came from.
	est EstimateSummary
}

// tableJob is one trace job (see trace.Job).
type tableJob struct {
	submit   int64
	duration int64 // -1: unknown
	// limit is the time limit the job asks for (see EstimateMode).
	limit int64
	share float64
	gpus  int32
	// cpus is the trace's CPU count (0: unknown).
	cpus     int32
	queue    int32
	part     int32
	censored bool
}

// newTable orders jobs for a replay on c with seed: by submit time,
// keeping the trace's order among equal times, then a seeded shuffle of
// each such group (trace files list them by job id, which carries no
// meaning). Each job goes to its partition (trace.Job.Partition, else
// the partition named like its queue, else c's default) and gets its
// time limit from est (with seed).
func newTable(jobs []trace.Job, seed uint64, c *Cluster, est EstimateMode) (*table, error) {
	if c == nil {
		return nil, api.Invalid("no cluster")
	}
	if est == "" {
		est = EstimatesModel
	}
	if len(jobs) > math.MaxInt32 {
		return nil, api.Invalid("trace has %d jobs, more than the simulator takes (%d)", len(jobs), math.MaxInt32)
	}
	order := make([]int32, len(jobs))
	for i := range order {
		order[i] = int32(i)
	}
	// Stable, as trace.SortBySubmit: the file's order among equal times.
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(jobs[a].Submit, jobs[b].Submit) })
	rng := rand.New(rand.NewPCG(seed, 0x7469646573696d)) // "tidesim"
	for i := 0; i < len(order); {
		k := i + 1
		for k < len(order) && jobs[order[k]].Submit == jobs[order[i]].Submit {
			k++
		}
		if k-i > 1 {
			g := order[i:k]
			rng.Shuffle(len(g), func(a, b int) { g[a], g[b] = g[b], g[a] })
		}
		i = k
	}
	size := 0
	for i := range jobs {
		size += len(jobs[i].ID)
	}
	if size > math.MaxUint32 {
		return nil, api.Invalid("trace job IDs take %d bytes, more than the simulator takes (%d)", size, uint32(math.MaxUint32))
	}
	t := &table{jobs: make([]tableJob, len(jobs)), idEnd: make([]uint32, len(jobs)), est: EstimateSummary{Mode: est}}
	queues := map[string]int32{}
	type route struct{ queue, part string }
	parts := map[route]int32{}
	partIdx := map[string]int32{}
	models := map[string]*limitModel{}
	var ids strings.Builder
	ids.Grow(size)
	for i, oi := range order {
		j := &jobs[oi]
		if j.GPUs > math.MaxInt32 || j.CPUs > math.MaxInt32 {
			return nil, api.Invalid("job %s asks for %d GPUs and %d CPUs, more than the simulator takes", j.ID, j.GPUs, j.CPUs)
		}
		q, ok := queues[j.Queue]
		if !ok {
			q = int32(len(t.queues))
			queues[j.Queue] = q
			t.queues = append(t.queues, j.Queue)
		}
		p, ok := parts[route{j.Queue, j.Partition}]
		if !ok {
			name := c.partitionOf(j.Queue, j.Partition)
			if p, ok = partIdx[name]; !ok {
				p = int32(len(t.parts))
				partIdx[name] = p
				t.parts = append(t.parts, name)
			}
			parts[route{j.Queue, j.Partition}] = p
		}
		tj := tableJob{submit: j.Submit, duration: j.Duration, share: j.Share, gpus: int32(j.GPUs),
			cpus: int32(j.CPUs), queue: q, part: p, censored: j.Censored}
		switch {
		case est == EstimatesExact:
			tj.limit = limitOf(max(j.Duration, 0))
		case est == EstimatesLimit && j.TimeLimit > 0:
			tj.limit = j.TimeLimit
			if j.Duration >= 0 {
				t.est.FromTrace++
			}
		default:
			name := t.parts[p]
			m := models[name]
			if m == nil {
				m = newLimitModel(seed, c.maxTime(name))
				models[name] = m
			}
			tj.limit = m.limit(j.ID, j.Duration)
			if j.Duration >= 0 {
				t.est.Modelled++
			}
		}
		t.jobs[i] = tj
		ids.WriteString(j.ID)
		t.idEnd[i] = uint32(ids.Len())
	}
	t.ids = ids.String()
	return t, nil
}

// id is job i's trace ID.
func (t *table) id(i int) string {
	from := uint32(0)
	if i > 0 {
		from = t.idEnd[i-1]
	}
	return t.ids[from:t.idEnd[i]]
}
