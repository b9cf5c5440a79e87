package sim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	"github.com/tide-hpc/tide/sim/trace"
)

// Epoch is the virtual time of the trace's zero: job submit, start and
// end times the scheduler sees are Epoch plus trace seconds. It is fixed
// so that runs are reproducible.
var Epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// Options configures one replay.
type Options struct {
	Cluster *Cluster
	Policy  PolicySpec
	// Seed orders jobs submitted in the same second (trace files list
	// them by job id, which carries no meaning): a seeded shuffle of each
	// such group.
	Seed uint64
	// Progress, when set, is called now and then with the jobs finished
	// (or rejected) so far and the total.
	Progress func(done, total int)
	// FullPasses hands every pass the whole queue. By default a pass
	// hands sched.Schedule a prefix of the queue (in the scheduler's own
	// order) and grows it until the plan closes the partitions of the
	// jobs left out (sched.Plan.Closed), which gives the same starts at a
	// fraction of the cost on deep, blocked queues. Tests compare both.
	FullPasses bool
}

// firstPrefix is the queue prefix a pass starts with.
const firstPrefix = 256

// Job outcomes.
const (
	OutcomeDone      = "done"
	OutcomeRejected  = "rejected"   // can never fit the cluster
	OutcomeSkipped   = "skipped"    // the trace has no duration
	OutcomeUnstarted = "unfinished" // still pending or running when the replay stopped
)

// JobResult is what happened to one trace job.
type JobResult struct {
	ID      uint64
	TraceID string
	GPUs    int
	// SlicePct is the compute percent of a job that ran as a slice of
	// one GPU (0 for whole GPUs).
	SlicePct int
	// Submit, Start and End are trace seconds (Start and End -1 unless
	// the job ran); Duration is the trace's run time.
	Submit, Start, End, Duration int64
	Outcome                      string
	// Why says why a job was rejected.
	Why string
}

// Sample is the cluster after the scheduling pass of one instant; it
// holds until the next sample.
type Sample struct {
	T         int64
	UsedGPUs  int
	Pending   int
	Running   int
	FragGPUs  int
	StartedAt int // jobs started by this instant's pass
	// WorkFrag is the free GPU capacity a job drawn from the trace's
	// request mix could not use, in GPUs (see workload).
	WorkFrag float64
}

// Result is one replay.
type Result struct {
	Policy    string
	TotalGPUs int
	Jobs      []JobResult
	Samples   []Sample
	// Passes counts scheduling passes; PassTimes holds the wall time of
	// each (not deterministic: reported apart).
	Passes    int
	PassTimes []time.Duration
	// repPasses counts passes that a prefix plus representatives
	// decided (tests check that the shortcut is exercised).
	repPasses int
}

// simJob is a trace job inside the engine.
type simJob struct {
	job   api.Job
	res   *JobResult
	limit int64
	// minNodeGPUs is the GPUs its smallest per-node slot needs (0 for
	// CPU-only jobs): the fragmentation measure's job shape.
	minNodeGPUs int
	alloc       []api.NodeAlloc
	// shape numbers the job's (partition, GPUs): jobs of one shape ask
	// the same of the scheduler but for their time limits.
	shape int
}

// engine is the replay state.
type engine struct {
	opts    Options
	cfg     sched.Config
	nodes   []sched.NodeInfo
	nodeIdx map[string]int
	// relJob[i][k] is the job of nodes[i].Releases[k] (backfill only).
	relJob   [][]uint64
	backfill bool
	snap     sched.Snapshot

	jobs    []*simJob
	pending []*api.Job
	// pendMeta runs parallel to pending: what representatives reads,
	// without touching the jobs.
	pendMeta []jobMeta
	byID     map[uint64]*simJob
	running  completions
	// needs counts pending jobs by minNodeGPUs (fragmentation).
	needs []int
	// parts counts pending jobs by partition.
	parts map[string]int

	usedGPUs int
	done     int
	// wl is the trace's GPU request mix; nodeFrag[i] is node i's share
	// of the workload fragmentation and fragSum their total, updated on
	// every start and end; pctCap is a shared GPU's compute cap.
	wl       workload
	nodeFrag []float64
	fragSum  float64
	pctCap   int
	res      *Result

	// Scratch of pass, reused: the queue handed to the scheduler and
	// the representatives of left-out jobs.
	passBuf []*api.Job
	reps    []shapeRep // by simJob.shape
	repGen  int
	repJobs []*api.Job
	// shapes counts the distinct (partition, GPUs) of the trace's jobs.
	shapes int
}

// Run replays jobs (any order) on opts.Cluster under opts.Policy.
func Run(jobs []trace.Job, opts Options) (*Result, error) {
	if opts.Cluster == nil {
		return nil, api.Invalid("no cluster")
	}
	e := newEngine(opts)
	if err := e.load(jobs); err != nil {
		return nil, err
	}
	if err := e.loop(); err != nil {
		return nil, err
	}
	return e.res, nil
}

func newEngine(opts Options) *engine {
	c := opts.Cluster
	e := &engine{
		opts:     opts,
		cfg:      opts.Policy.Sched,
		nodes:    make([]sched.NodeInfo, len(c.Nodes)),
		nodeIdx:  make(map[string]int, len(c.Nodes)),
		relJob:   make([][]uint64, len(c.Nodes)),
		backfill: opts.Policy.Sched.Policy == sched.PolicyBackfill,
		byID:     map[uint64]*simJob{},
		parts:    map[string]int{},
		needs:    make([]int, c.GPUsPerNode+2),
		nodeFrag: make([]float64, len(c.Nodes)),
		pctCap:   100,
		res:      &Result{Policy: opts.Policy.Name, TotalGPUs: c.TotalGPUs()},
	}
	for i, n := range c.Nodes {
		n.FreeGPUs = slices.Clone(n.FreeGPUs)
		n.Releases = nil
		e.nodes[i] = n
		e.nodeIdx[n.Name] = i
	}
	if p := c.Partitions[c.DefaultPartition]; p != nil && p.GPUComputeRatio > 0 {
		e.pctCap = int(math.Round(100 * p.GPUComputeRatio))
	}
	e.snap = sched.Snapshot{Nodes: e.nodes, Partitions: c.Partitions}
	if opts.Policy.Topology {
		e.snap.Tree = c.Tree
	}
	return e
}

// jobSpec is the request of a trace job: its whole GPUs, spread over as
// few nodes as can hold them, with the node's share of CPUs and memory
// per GPU; CPU-only jobs ask one CPU and its share of memory. A
// fractional share becomes a slice in load (see slices.go).
func jobSpec(c *Cluster, gpus int, part string, limit int64) api.JobSpec {
	s := api.JobSpec{Partition: part, TimeLimit: limit}
	if gpus == 0 {
		s.Tasks, s.CPUsPerTask = 1, 1
		s.MemPerCPUMB = c.MemPerNodeMB / int64(c.CPUsPerNode)
		return s
	}
	gpn := c.GPUsPerNode
	s.GPUs = gpus
	if gpus > gpn {
		s.Nodes = (gpus + gpn - 1) / gpn
	}
	s.CPUsPerGPU = max(1, c.CPUsPerNode/gpn)
	s.MemPerGPUMB = c.MemPerNodeMB / int64(gpn)
	return s
}

// limitOf is a duration rounded up to whole minutes (at least one), as
// a user would ask for it.
func limitOf(dur int64) int64 {
	return max(1, (dur+59)/60) * 60
}

// load turns trace jobs into engine jobs: ordered by submit time (equal
// times shuffled by the seed), numbered from 1, with rejected and
// skipped ones marked.
func (e *engine) load(in []trace.Job) error {
	c := e.opts.Cluster
	jobs := slices.Clone(in)
	trace.SortBySubmit(jobs)
	rng := rand.New(rand.NewPCG(e.opts.Seed, 0x7469646573696d)) // "tidesim"
	for i := 0; i < len(jobs); {
		k := i + 1
		for k < len(jobs) && jobs[k].Submit == jobs[i].Submit {
			k++
		}
		if k-i > 1 {
			g := jobs[i:k]
			rng.Shuffle(len(g), func(a, b int) { g[a], g[b] = g[b], g[a] })
		}
		i = k
	}
	type shape struct {
		part string
		gpus int
		pct  int
	}
	var wlWhole, wlSlice []int
	feasible := map[shape]string{}
	shapeIDs := map[shape]int{}
	e.jobs = make([]*simJob, len(jobs))
	results := make([]JobResult, len(jobs))
	for i, tj := range jobs {
		id := uint64(i + 1)
		gpus := tj.GPUs
		res := &results[i]
		*res = JobResult{ID: id, TraceID: tj.ID, GPUs: gpus, Submit: tj.Submit, Start: -1, End: -1, Duration: tj.Duration}
		part := c.DefaultPartition
		if _, ok := c.Partitions[tj.Queue]; ok {
			part = tj.Queue
		}
		limit := limitOf(max(tj.Duration, 0))
		spec := jobSpec(c, gpus, part, limit)
		pct := slicePct(gpus, tj.Share, c.Partitions[part])
		if pct > 0 {
			sliceSpec(&spec, pct)
			res.SlicePct = pct
		}
		key := shape{part, gpus, pct}
		sid, ok := shapeIDs[key]
		if !ok {
			sid = len(shapeIDs)
			shapeIDs[key] = sid
		}
		sj := &simJob{res: res, limit: limit, shape: sid}
		sj.job = api.Job{ID: id, JobSpec: spec, State: api.StatePending, SubmitTime: Epoch.Add(time.Duration(tj.Submit) * time.Second)}
		sj.job.Name = tj.ID
		if gpus > 0 {
			n := spec.ReqNodes()
			sj.minNodeGPUs = gpus / n
		}
		e.jobs[i] = sj
		e.byID[id] = sj
		if tj.Duration < 0 {
			res.Outcome = OutcomeSkipped
			continue
		}
		why, seen := feasible[key]
		if !seen {
			ok, w := sched.CheckFeasible(&spec, c.Partitions[part], c.Nodes, e.cfg)
			if !ok {
				why = w
				if why == "" {
					why = "does not fit"
				}
			}
			feasible[key] = why
		}
		if why != "" {
			res.Outcome, res.Why = OutcomeRejected, why
			continue
		}
		switch {
		case pct > 0:
			wlSlice = append(wlSlice, pct)
		case gpus > 0:
			wlWhole = append(wlWhole, sj.minNodeGPUs)
		}
	}
	e.wl = newWorkload(wlWhole, wlSlice)
	e.res.Jobs = results
	e.shapes = len(shapeIDs)
	return nil
}

// loop runs the replay to its end.
func (e *engine) loop() error {
	next := 0 // next job to arrive
	total := len(e.jobs)
	step := max(1, total/200)
	lastReport := -step
	for next < len(e.jobs) || e.running.Len() > 0 {
		t := int64(math.MaxInt64)
		if next < len(e.jobs) {
			t = e.jobs[next].res.Submit
		}
		if e.running.Len() > 0 && e.running[0].end < t {
			t = e.running[0].end
		}
		changed := false
		for e.running.Len() > 0 && e.running[0].end == t {
			c := heap.Pop(&e.running).(completion)
			e.finish(e.byID[c.id], t)
			changed = true
		}
		for next < len(e.jobs) && e.jobs[next].res.Submit == t {
			sj := e.jobs[next]
			next++
			if sj.res.Outcome != "" {
				e.done++
				continue
			}
			e.pending = append(e.pending, &sj.job)
			e.pendMeta = append(e.pendMeta, jobMeta{shape: int32(sj.shape), limit: sj.limit})
			e.needs[min(sj.minNodeGPUs, len(e.needs)-1)]++
			e.parts[sj.job.Partition]++
			changed = true
		}
		started := 0
		if changed && len(e.pending) > 0 {
			var err error
			if started, err = e.pass(t); err != nil {
				return err
			}
		}
		e.sample(t, started)
		if p := e.opts.Progress; p != nil && e.done-lastReport >= step {
			lastReport = e.done
			p(e.done, total)
		}
	}
	for _, j := range e.pending {
		e.byID[j.ID].res.Outcome = OutcomeUnstarted
	}
	if p := e.opts.Progress; p != nil {
		p(total, total)
	}
	return nil
}

// pass runs one scheduling pass at trace second t and applies its
// starts. e.pending is in the scheduler's order already (equal
// priorities, then submit time, then id = arrival order), so a prefix of
// it is what the scheduler would consider first.
//
// A prefix pass is enough when the jobs it leaves out could not have
// started. Under priority blocking and FIFO, Plan.Closed says so. Under
// backfill a short job can pass a blocked partition, so the pass also
// hands the scheduler one representative per shape of the left-out jobs
// (representatives): when the prefix made the timed reservation and no
// representative starts, no left-out job could have started either.
func (e *engine) pass(t int64) (int, error) {
	now := Epoch.Add(time.Duration(t) * time.Second)
	begin := time.Now()
	k := len(e.pending)
	if !e.opts.FullPasses {
		k = min(k, firstPrefix)
	}
	var plan sched.Plan
	for {
		e.snap.Pending = e.pending[:k]
		var reps []*api.Job
		if e.backfill && k < len(e.pending) {
			reps = e.representatives(k)
			e.passBuf = append(append(e.passBuf[:0], e.pending[:k]...), reps...)
			e.snap.Pending = e.passBuf
		}
		plan = sched.Schedule(&e.snap, now, e.cfg)
		if k == len(e.pending) {
			break
		}
		if reps != nil {
			if e.repsHold(&plan, reps) {
				e.res.repPasses++
				break
			}
		} else if e.closes(&plan) {
			break
		}
		k = min(len(e.pending), 4*k)
	}
	e.snap.Pending = nil
	e.res.PassTimes = append(e.res.PassTimes, time.Since(begin))
	e.res.Passes++
	if len(plan.Starts) == 0 {
		return 0, nil
	}
	for i := range plan.Starts {
		if err := e.start(&plan.Starts[i], t); err != nil {
			return 0, err
		}
	}
	// Only the jobs handed to the scheduler can have started.
	n := 0
	for i, j := range e.pending[:k] {
		if j.State == api.StatePending {
			e.pending[n], e.pendMeta[n] = j, e.pendMeta[i]
			n++
		}
	}
	m := n + copy(e.pending[n:], e.pending[k:])
	copy(e.pendMeta[n:], e.pendMeta[k:])
	clear(e.pending[m:])
	e.pending, e.pendMeta = e.pending[:m], e.pendMeta[:m]
	return len(plan.Starts), nil
}

// representatives picks, among the jobs a prefix pass leaves out, the
// one with the shortest time limit of each shape (partition and GPUs:
// jobSpec makes every other field of the request follow from them).
// Under a timed backfill reservation a job's outcome depends only on its
// shape and on whether it ends by the reservation, and a shorter limit
// only widens what it may use: if the shortest job of a shape cannot
// start after the prefix, no job of that shape can.
func (e *engine) representatives(k int) []*api.Job {
	if len(e.reps) < e.shapes {
		e.reps = make([]shapeRep, e.shapes)
	}
	e.repGen++
	out := e.repJobs[:0]
	for i, m := range e.pendMeta[k:] {
		r := &e.reps[m.shape]
		if r.gen != e.repGen {
			*r = shapeRep{gen: e.repGen, limit: m.limit, slot: len(out)}
			out = append(out, e.pending[k+i])
		} else if m.limit < r.limit {
			r.limit = m.limit
			out[r.slot] = e.pending[k+i]
		}
	}
	e.repJobs = out
	return out
}

// repsHold reports whether a pass over a prefix plus representatives
// stands for the whole queue: the prefix made the backfill reservation
// (so the representatives, and the jobs they stand for, met a state
// that nothing after the prefix changes) and no representative started.
func (e *engine) repsHold(plan *sched.Plan, reps []*api.Job) bool {
	isRep := func(id uint64) bool {
		return slices.ContainsFunc(reps, func(j *api.Job) bool { return j.ID == id })
	}
	if len(plan.Reservations) == 0 || isRep(plan.Reservations[0].JobID) {
		return false
	}
	for i := range plan.Starts {
		if isRep(plan.Starts[i].JobID) {
			return false
		}
	}
	return true
}

// jobMeta is a pending job's shape (simJob.shape) and time limit.
type jobMeta struct {
	shape int32
	limit int64
}

// shapeRep is the representative of one shape among left-out jobs:
// its limit and its place in the list handed to the scheduler, valid
// while gen is the engine's repGen.
type shapeRep struct {
	gen   int
	limit int64
	slot  int
}

// closes reports whether plan closed every partition that pending jobs
// ask for, so that the jobs it did not see could not have started.
func (e *engine) closes(plan *sched.Plan) bool {
	for part, n := range e.parts {
		if n > 0 && !slices.Contains(plan.Closed, part) {
			return false
		}
	}
	return true
}

// start applies one Start: takes its resources from the nodes (checking
// that the plan gives only what is free: the simulator doubles as an
// invariant check of the core) and schedules its completion.
func (e *engine) start(s *sched.Start, t int64) error {
	sj, ok := e.byID[s.JobID]
	if !ok || sj.job.State != api.StatePending {
		return fmt.Errorf("plan starts job %d, which is not pending", s.JobID)
	}
	at := Epoch.Add(time.Duration(t+sj.limit) * time.Second)
	for _, a := range s.Alloc {
		i, ok := e.nodeIdx[a.Node]
		if !ok {
			return fmt.Errorf("plan puts job %d on unknown node %s", s.JobID, a.Node)
		}
		n := &e.nodes[i]
		if a.CPUs > n.FreeCPUs || a.MemoryMB > n.FreeMemMB {
			return fmt.Errorf("plan gives job %d %d CPUs and %d MB on %s, which has %d and %d free",
				s.JobID, a.CPUs, a.MemoryMB, a.Node, n.FreeCPUs, n.FreeMemMB)
		}
		if a.Sliced() {
			for _, g := range a.GPUs {
				opened, err := takeSlice(n, &a, g, e.pctCap)
				if err != nil {
					return fmt.Errorf("plan gives job %d a slice: %w", s.JobID, err)
				}
				if opened {
					e.usedGPUs++
				}
			}
		} else {
			for _, g := range a.GPUs {
				k, found := slices.BinarySearch(n.FreeGPUs, g)
				if !found {
					return fmt.Errorf("plan gives job %d GPU %d on %s, which is not free", s.JobID, g, a.Node)
				}
				n.FreeGPUs = slices.Delete(n.FreeGPUs, k, k+1)
			}
			e.usedGPUs += len(a.GPUs)
		}
		n.FreeCPUs -= a.CPUs
		n.FreeMemMB -= a.MemoryMB
		n.Idle = false
		e.refrag(i)
		if e.backfill {
			// A slice's end frees no whole GPU for sure: its release
			// gives back CPUs and memory only.
			gpus := a.GPUs
			if a.Sliced() {
				gpus = nil
			}
			n.Releases = append(n.Releases, sched.Release{At: at, CPUs: a.CPUs, MemMB: a.MemoryMB, GPUs: gpus})
			e.relJob[i] = append(e.relJob[i], sj.job.ID)
		}
	}
	sj.alloc = s.Alloc
	sj.job.State = api.StateRunning
	sj.res.Start = t
	e.needs[min(sj.minNodeGPUs, len(e.needs)-1)]--
	e.parts[sj.job.Partition]--
	heap.Push(&e.running, completion{end: t + sj.res.Duration, id: sj.job.ID})
	return nil
}

// finish ends a running job at t and gives its resources back.
func (e *engine) finish(sj *simJob, t int64) {
	for _, a := range sj.alloc {
		i := e.nodeIdx[a.Node]
		n := &e.nodes[i]
		n.FreeCPUs += a.CPUs
		n.FreeMemMB += a.MemoryMB
		if a.Sliced() {
			for _, g := range a.GPUs {
				if dropSlice(n, &a, g) {
					e.usedGPUs--
				}
			}
		} else {
			for _, g := range a.GPUs {
				k, _ := slices.BinarySearch(n.FreeGPUs, g)
				n.FreeGPUs = slices.Insert(n.FreeGPUs, k, g)
			}
			e.usedGPUs -= len(a.GPUs)
		}
		n.Idle = n.FreeCPUs == n.CPUs && n.FreeMemMB == n.MemoryMB && len(n.FreeGPUs) == n.GPUs
		e.refrag(i)
		if e.backfill {
			if k := slices.Index(e.relJob[i], sj.job.ID); k >= 0 {
				e.relJob[i] = slices.Delete(e.relJob[i], k, k+1)
				n.Releases = slices.Delete(n.Releases, k, k+1)
			}
		}
	}
	sj.alloc = nil
	sj.job.State = api.StateCompleted
	sj.res.End = t
	sj.res.Outcome = OutcomeDone
	e.done++
}

// sample records the cluster after instant t. Fragmented GPUs are free
// GPUs on nodes with fewer free than the smallest per-node GPU need of
// any pending job: no waiting shape can use them.
func (e *engine) sample(t int64, started int) {
	frag := 0
	if len(e.pending) > 0 {
		minNeed := -1
		for g := 1; g < len(e.needs); g++ {
			if e.needs[g] > 0 {
				minNeed = g
				break
			}
		}
		if minNeed > 0 {
			for i := range e.nodes {
				if f := len(e.nodes[i].FreeGPUs); f > 0 && f < minNeed {
					frag += f
				}
			}
		}
	}
	s := Sample{T: t, UsedGPUs: e.usedGPUs, Pending: len(e.pending), Running: e.running.Len(), FragGPUs: frag,
		StartedAt: started, WorkFrag: max(0, e.fragSum)}
	if k := len(e.res.Samples); k > 0 && e.res.Samples[k-1].T == t {
		e.res.Samples[k-1] = s
		return
	}
	e.res.Samples = append(e.res.Samples, s)
}

// refrag recomputes node i's workload fragmentation after a change.
func (e *engine) refrag(i int) {
	f := e.wl.nodeFrag(&e.nodes[i], e.pctCap)
	e.fragSum += f - e.nodeFrag[i]
	e.nodeFrag[i] = f
}

// completion is a running job's end.
type completion struct {
	end int64
	id  uint64
}

// completions is a min-heap by end time, then job id (deterministic).
type completions []completion

func (h completions) Len() int { return len(h) }
func (h completions) Less(i, j int) bool {
	if h[i].end != h[j].end {
		return h[i].end < h[j].end
	}
	return h[i].id < h[j].id
}
func (h completions) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *completions) Push(x any)   { *h = append(*h, x.(completion)) }
func (h *completions) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
