package sim

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	"github.com/tide-hpc/tide/ctld/state"
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
	// such group. It also seeds the estimates model.
	Seed uint64
	// Estimates chooses the jobs' time limits ("": EstimatesModel).
	Estimates EstimateMode
	// Progress, when set, is called now and then with the jobs finished
	// (or rejected) so far and the total.
	Progress func(done, total int)
	// FullPasses hands every pass the whole queue. By default a pass
	// hands sched.Schedule a prefix of the queue (in the scheduler's own
	// order) and grows it until the plan closes the partitions of the
	// jobs left out (sched.Plan.Closed), which gives the same starts at a
	// fraction of the cost on deep, blocked queues. Tests compare both.
	FullPasses bool
	// prefix is the queue prefix a pass starts with (0: firstPrefix);
	// tests make it small to exercise the shortcut.
	prefix int
}

// firstPrefix is the queue prefix a pass starts with: most passes over
// a deep queue are decided by its first jobs (on Philly 96 × 8, 16 cut
// the CPU time of FIFO and priority replays by a third against 256).
// Under multi-reservation backfill (sched.PolicyBackfill) a pass tests
// up to bf_max_job_test jobs, each against the plan, so a short prefix
// saves more there; the shortcut holds as long as no representative
// (a probe) starts. On Philly 96 × 8 (seed 1) a first prefix of 16 took
// a backfill replay from 31 s of CPU to 12 s against 256 (64: 18 s, 8:
// 13 s); firstPrefixBackfill stays apart to be tuned on its own.
const (
	firstPrefix         = 16
	firstPrefixBackfill = 16
)

// Job outcomes.
const (
	OutcomeDone      = "done"
	OutcomeTimeout   = "timeout"    // killed at a time limit below its duration
	OutcomeRejected  = "rejected"   // can never fit the cluster
	OutcomeSkipped   = "skipped"    // the trace has no duration
	OutcomeUnstarted = "unfinished" // still pending or running when the replay stopped
)

// JobResult is what happened to one trace job.
type JobResult struct {
	ID      uint64
	TraceID string
	// Queue is the trace's queue.
	Queue string
	GPUs  int
	// SlicePct is the compute percent of a job that ran as a slice of
	// one GPU (0 for whole GPUs).
	SlicePct int
	// Submit, Start and End are trace seconds (Start and End -1 unless
	// the job ran); Duration is the trace's run time and Limit the time
	// limit the job asked for.
	Submit, Start, End, Duration, Limit int64
	// Censored marks a job the trace caught unfinished: it ran at least
	// Duration, and the replay runs it that long.
	Censored bool
	Outcome  string
	// Why says why a job was rejected.
	Why string
}

// Sample is the cluster after the scheduling pass of one instant; it
// holds until the next sample. A replay records one per instant with
// events (hundreds of thousands for a trace of months), hence the
// 32-bit counts: the loader refuses traces of more jobs than that.
type Sample struct {
	T         int64
	UsedGPUs  int32
	Pending   int32
	Running   int32
	FragGPUs  int32
	StartedAt int32 // jobs started by this instant's pass
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
	// guarantees are the cluster's queue guarantees (Cluster.Guarantees).
	guarantees map[string]float64
}

// simJob is what the engine keeps of every trace job for the whole
// replay (the job itself is in the table at the same index). It holds
// no pointer: a trace has tens of thousands of jobs, and a replay's
// garbage collections should not have to scan them. The request and the
// allocation of a job are kept only while it is pending or running, in
// a liveJob (the cluster holds a few hundred at a time, and an api.Job
// is over a kilobyte).
type simJob struct {
	// start and end are trace seconds, -1 until the job starts or ends.
	start, end int64
	// shape numbers the job's (partition, GPUs, slice, CPUs of a CPU-only
	// job): jobs of one shape ask the same of the scheduler but for their
	// time limits.
	shape   int32
	outcome outcome
}

// outcome is a job's Outcome as a small number (0: none yet).
type outcome uint8

const (
	outcomeNone outcome = iota
	outcomeDone
	outcomeTimeout
	outcomeRejected
	outcomeSkipped
	outcomeUnstarted
)

var outcomeNames = [...]string{outcomeDone: OutcomeDone, outcomeTimeout: OutcomeTimeout, outcomeRejected: OutcomeRejected,
	outcomeSkipped: OutcomeSkipped, outcomeUnstarted: OutcomeUnstarted}

// liveJob is a pending or running job: what the scheduler sees, and
// what it was given. The engine reuses them (see release).
type liveJob struct {
	job   api.Job
	alloc []api.NodeAlloc
}

// jobShape is what the jobs of one shape share.
type jobShape struct {
	// spec is the request, but for TimeLimit (each job's own limit).
	spec api.JobSpec
	// minNodeGPUs is the GPUs its smallest per-node slot needs (0 for
	// CPU-only jobs): the fragmentation measure's job shape.
	minNodeGPUs int
	// slicePct is the compute percent of a slice of one GPU (0: whole
	// GPUs).
	slicePct int
	// checked says whether why is known; why says why the shape can
	// never fit the cluster ("" when it can).
	checked bool
	why     string
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

	// tab is the trace; jobs[i] is what became of tab.jobs[i], the job
	// with ID i+1.
	tab       *table
	jobs      []simJob
	jobShapes []jobShape
	// live holds the pending and running jobs by ID; free holds
	// liveJobs of ended jobs for reuse.
	live    map[uint64]*liveJob
	free    []*liveJob
	pending []*api.Job
	// pendMeta runs parallel to pending: what representatives reads,
	// without touching the jobs.
	pendMeta []jobMeta
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
	// ledger is the controller's account of the nodes, which plans are
	// applied to (ctld/state); nodes mirrors it for the core.
	wl       workload
	nodeFrag []float64
	fragSum  float64
	pctCap   int
	ledger   *state.Ledger
	res      *Result

	// Scratch of pass, reused: the queue handed to the scheduler and
	// the representatives of left-out jobs.
	passBuf []*api.Job
	reps    []shapeRep // by simJob.shape
	repGen  int
	repJobs []*api.Job
	// probes names the representatives to the scheduler
	// (sched.Snapshot.Probes).
	probes map[uint64]bool
}

// Run replays jobs (any order) on opts.Cluster under opts.Policy.
func Run(jobs []trace.Job, opts Options) (*Result, error) {
	t, err := newTable(jobs, opts.Seed, opts.Cluster, opts.Estimates)
	if err != nil {
		return nil, err
	}
	return run(t, opts)
}

// run replays the jobs of t (ordered with opts.Seed).
func run(t *table, opts Options) (*Result, error) {
	if opts.Cluster == nil {
		return nil, api.Invalid("no cluster")
	}
	e := newEngine(opts)
	e.load(t)
	if err := e.loop(); err != nil {
		return nil, err
	}
	e.res.Jobs = e.results()
	return e.res, nil
}

func newEngine(opts Options) *engine {
	c := opts.Cluster
	e := &engine{
		opts:    opts,
		cfg:     opts.Policy.Sched.Resolved(),
		nodes:   make([]sched.NodeInfo, len(c.Nodes)),
		nodeIdx: make(map[string]int, len(c.Nodes)),
		relJob:  make([][]uint64, len(c.Nodes)),
		// Every policy but priority blocking and FIFO plans with the
		// running jobs' releases (backfill, EASY).
		backfill: opts.Policy.Sched.Policy != sched.PolicyPriority && opts.Policy.Sched.Policy != sched.PolicyFIFO,
		live:     map[uint64]*liveJob{},
		parts:    map[string]int{},
		needs:    make([]int, c.GPUsPerNode+2),
		nodeFrag: make([]float64, len(c.Nodes)),
		pctCap:   100,
		res:      &Result{Policy: opts.Policy.Name, TotalGPUs: c.TotalGPUs(), guarantees: c.Guarantees},
	}
	lim := state.DefaultLimits
	if p := c.Partitions[c.DefaultPartition]; p != nil {
		if p.GPUComputeRatio > 0 {
			e.pctCap = int(math.Round(100 * p.GPUComputeRatio))
			lim.ComputePct = e.pctCap
		}
		if p.GPUMemRatio > 0 {
			lim.MemRatio = p.GPUMemRatio
		}
	}
	// The ledger is the controller's (ctld/state): plans are applied and
	// checked exactly as tidectld applies them.
	e.ledger = state.New(lim)
	for i, n := range c.Nodes {
		n.FreeGPUs = slices.Clone(n.FreeGPUs)
		n.Releases = nil
		e.nodes[i] = n
		e.nodeIdx[n.Name] = i
		// Generated nodes start empty (Generate): the ledger starts so too.
		e.ledger.SetCapacity(n.Name, state.Capacity{CPUs: n.CPUs, MemoryMB: n.MemoryMB, GPUs: n.GPUs, GPUMemMB: n.GPUMemMB})
	}
	e.snap = sched.Snapshot{Nodes: e.nodes, Partitions: c.Partitions}
	if opts.Policy.Topology {
		e.snap.Tree = c.Tree
	}
	return e
}

// jobSpec is the request of a trace job: its whole GPUs, spread over as
// few nodes as can hold them, with the node's share of CPUs and memory
// per GPU. A CPU-only job asks for its trace's CPU count (one when the
// trace has none), spread over as few nodes as can hold them, with the
// node's share of memory per CPU. A fractional share becomes a slice in
// load (see slices.go).
func jobSpec(c *Cluster, gpus, cpus int, part string, limit int64) api.JobSpec {
	s := api.JobSpec{Partition: part, TimeLimit: limit}
	if gpus == 0 {
		cpus = max(cpus, 1)
		nodes := (cpus + c.CPUsPerNode - 1) / c.CPUsPerNode
		if nodes > 1 {
			s.Nodes, s.TasksPerNode = nodes, 1
		} else {
			s.Tasks = 1
		}
		s.CPUsPerTask = (cpus + nodes - 1) / nodes
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

// load takes the jobs of t (in arrival order, numbered from 1) and
// marks the rejected and skipped ones.
func (e *engine) load(t *table) {
	c := e.opts.Cluster
	e.tab = t
	type shape struct {
		part string
		gpus int
		pct  int
		cpus int
	}
	var wlWhole, wlSlice []int
	shapeIDs := map[shape]int32{}
	e.jobs = make([]simJob, len(t.jobs))
	for i := range t.jobs {
		tj := &t.jobs[i]
		gpus := int(tj.gpus)
		part := t.parts[tj.part]
		pct := slicePct(gpus, tj.share, c.Partitions[part])
		key := shape{part: part, gpus: gpus, pct: pct}
		if gpus == 0 {
			key.cpus = int(tj.cpus)
		}
		sid, ok := shapeIDs[key]
		if !ok {
			sid = int32(len(e.jobShapes))
			shapeIDs[key] = sid
			spec := jobSpec(c, gpus, key.cpus, part, 0)
			if pct > 0 {
				sliceSpec(&spec, pct)
			}
			sh := jobShape{spec: spec, slicePct: pct}
			if gpus > 0 {
				sh.minNodeGPUs = gpus / spec.ReqNodes()
			}
			e.jobShapes = append(e.jobShapes, sh)
		}
		sj := &e.jobs[i]
		*sj = simJob{start: -1, end: -1, shape: sid}
		if tj.duration < 0 {
			sj.outcome = outcomeSkipped
			continue
		}
		sh := &e.jobShapes[sid]
		if !sh.checked {
			// A shape's first job with a duration decides for all (the
			// check leaves time limits to the scheduler: a job over its
			// partition's MaxTime stays pending, as in Slurm).
			spec := sh.spec
			spec.TimeLimit = tj.limit
			if ok, w := sched.CheckFeasible(&spec, c.Partitions[part], c.Nodes, e.cfg); !ok {
				sh.why = w
				if sh.why == "" {
					sh.why = "does not fit"
				}
			}
			sh.checked = true
		}
		if sh.why != "" {
			sj.outcome = outcomeRejected
			continue
		}
		switch {
		case pct > 0:
			wlSlice = append(wlSlice, pct)
		case gpus > 0:
			wlWhole = append(wlWhole, sh.minNodeGPUs)
		}
	}
	e.wl = newWorkload(wlWhole, wlSlice)
}

// results is what became of each job, in the table's order.
func (e *engine) results() []JobResult {
	out := make([]JobResult, len(e.jobs))
	for i := range e.jobs {
		sj, tj, sh := &e.jobs[i], &e.tab.jobs[i], &e.jobShapes[e.jobs[i].shape]
		out[i] = JobResult{ID: uint64(i + 1), TraceID: e.tab.id(i), Queue: e.tab.queues[tj.queue], GPUs: int(tj.gpus),
			SlicePct: sh.slicePct, Submit: tj.submit, Start: sj.start, End: sj.end, Duration: tj.duration, Limit: tj.limit,
			Censored: tj.censored, Outcome: outcomeNames[sj.outcome]}
		if sj.outcome == outcomeRejected {
			out[i].Why = sh.why
		}
	}
	return out
}

// arrive makes job i pending: its request, as the scheduler sees it.
func (e *engine) arrive(i int) *liveJob {
	tj := &e.tab.jobs[i]
	var lj *liveJob
	if n := len(e.free); n > 0 {
		lj, e.free = e.free[n-1], e.free[:n-1]
	} else {
		lj = new(liveJob)
	}
	id := uint64(i + 1)
	lj.job = api.Job{ID: id, JobSpec: e.jobShapes[e.jobs[i].shape].spec, State: api.StatePending,
		SubmitTime: Epoch.Add(time.Duration(tj.submit) * time.Second)}
	lj.job.TimeLimit = tj.limit
	lj.job.Name = e.tab.id(i)
	e.live[id] = lj
	return lj
}

// release forgets the request and allocation of job id once it has
// ended (or, packing, could not be placed), keeping the liveJob for the
// next arrival. Nothing may point to it any more: the job has left the
// pending queue.
func (e *engine) release(id uint64) {
	lj, ok := e.live[id]
	if !ok {
		return
	}
	delete(e.live, id)
	lj.alloc = nil
	e.free = append(e.free, lj)
}

// minNodeGPUs is job i's smallest per-node GPU need (see jobShape).
func (e *engine) minNodeGPUs(i int) int {
	return e.jobShapes[e.jobs[i].shape].minNodeGPUs
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
			t = e.tab.jobs[next].submit
		}
		if e.running.Len() > 0 && e.running[0].end < t {
			t = e.running[0].end
		}
		changed := false
		for e.running.Len() > 0 && e.running[0].end == t {
			c := heap.Pop(&e.running).(completion)
			e.finish(c.id, t)
			changed = true
		}
		for next < len(e.jobs) && e.tab.jobs[next].submit == t {
			i := next
			next++
			if e.jobs[i].outcome != outcomeNone {
				e.done++
				continue
			}
			lj := e.arrive(i)
			e.pending = append(e.pending, &lj.job)
			e.pendMeta = append(e.pendMeta, jobMeta{shape: e.jobs[i].shape, limit: lj.job.TimeLimit})
			e.needs[min(e.minNodeGPUs(i), len(e.needs)-1)]++
			e.parts[lj.job.Partition]++
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
		e.jobs[j.ID-1].outcome = outcomeUnstarted
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
// (representatives) as probes: when no representative starts, no
// left-out job could have started either (repsHold).
func (e *engine) pass(t int64) (int, error) {
	now := Epoch.Add(time.Duration(t) * time.Second)
	begin := time.Now()
	if e.cfg.Priority != nil {
		// A multifactor order changes with time (age) and is no longer
		// arrival order: sort the queue as the pass will, so that a
		// prefix is still what the pass considers first.
		sched.SortPending(e.pending, &e.snap, now, e.cfg)
		for i, j := range e.pending {
			e.pendMeta[i] = jobMeta{shape: e.jobs[j.ID-1].shape, limit: j.TimeLimit}
		}
	}
	k := len(e.pending)
	if !e.opts.FullPasses {
		first := e.opts.prefix
		switch {
		case first > 0:
		case e.cfg.Policy == sched.PolicyBackfill:
			first = firstPrefixBackfill
		default:
			first = firstPrefix
		}
		k = min(k, first)
	}
	var plan sched.Plan
	for {
		e.snap.Pending = e.pending[:k]
		var reps []*api.Job
		if e.backfill && k < len(e.pending) {
			reps = e.representatives(k)
			e.passBuf = append(append(e.passBuf[:0], e.pending[:k]...), reps...)
			e.snap.Pending = e.passBuf
			if e.probes == nil {
				e.probes = map[uint64]bool{}
			}
			clear(e.probes)
			for _, j := range reps {
				e.probes[j.ID] = true
			}
			e.snap.Probes = e.probes
		}
		plan = sched.Schedule(&e.snap, now, e.cfg)
		e.snap.Probes = nil
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
// Jobs of a shape ask the same but for their limits, and a shorter limit
// only widens what a job may use around reservations: if the shortest
// job of a shape cannot start after the prefix, no job of that shape
// can (see repsHold).
func (e *engine) representatives(k int) []*api.Job {
	if len(e.reps) < len(e.jobShapes) {
		e.reps = make([]shapeRep, len(e.jobShapes))
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
// stands for the whole queue: no representative started. The
// representatives are the scheduler's probes (sched.Snapshot.Probes): one
// that does not start changes nothing for the jobs after it, so each
// met the state the prefix left, and the jobs it stands for would have
// met that state restricted by whatever the jobs before them reserved,
// held or used of the test limits. A shorter limit and fewer
// restrictions only widen where a job fits, so if no representative
// starts, no left-out job could have.
func (e *engine) repsHold(plan *sched.Plan, reps []*api.Job) bool {
	for i := range plan.Starts {
		id := plan.Starts[i].JobID
		if slices.ContainsFunc(reps, func(j *api.Job) bool { return j.ID == id }) {
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
	sj, ok := e.live[s.JobID]
	if !ok || sj.job.State != api.StatePending {
		return fmt.Errorf("plan starts job %d, which is not pending", s.JobID)
	}
	ji := int(s.JobID - 1)
	at := Epoch.Add(time.Duration(t+sj.job.TimeLimit) * time.Second)
	// The controller's plan applier: the replay doubles as an invariant
	// check of the core, so a start the ledger refuses is an error.
	if err := e.ledger.Take(s.Alloc); err != nil {
		return fmt.Errorf("plan starts job %d: %w", s.JobID, err)
	}
	for _, a := range s.Alloc {
		i := e.nodeIdx[a.Node]
		e.sync(i)
		if e.backfill {
			// A slice's end frees no whole GPU for sure: its release
			// gives back CPUs and memory only.
			gpus := a.GPUs
			if a.Sliced() {
				gpus = nil
			}
			n := &e.nodes[i]
			n.Releases = append(n.Releases, sched.Release{At: at, CPUs: a.CPUs, MemMB: a.MemoryMB, GPUs: gpus})
			e.relJob[i] = append(e.relJob[i], sj.job.ID)
		}
	}
	sj.alloc = s.Alloc
	// The controller's lifecycle (ctld/state) moves the job, as tidectld
	// does when it applies the same start.
	if err := state.Transition(&sj.job, state.Change{To: api.StateRunning, At: Epoch.Add(time.Duration(t) * time.Second)}); err != nil {
		return fmt.Errorf("plan starts job %d: %w", s.JobID, err)
	}
	e.jobs[ji].start = t
	e.needs[min(e.minNodeGPUs(ji), len(e.needs)-1)]--
	e.parts[sj.job.Partition]--
	// The job runs its duration, unless its limit ends it first (the
	// node kills it, as a real cluster would).
	tj := &e.tab.jobs[ji]
	heap.Push(&e.running, completion{end: t + min(tj.duration, tj.limit), id: sj.job.ID})
	return nil
}

// finish ends running job id at t and gives its resources back.
func (e *engine) finish(id uint64, t int64) {
	sj := e.live[id]
	e.ledger.Release(sj.alloc)
	for _, a := range sj.alloc {
		i := e.nodeIdx[a.Node]
		e.sync(i)
		if e.backfill {
			n := &e.nodes[i]
			if k := slices.Index(e.relJob[i], sj.job.ID); k >= 0 {
				e.relJob[i] = slices.Delete(e.relJob[i], k, k+1)
				n.Releases = slices.Delete(n.Releases, k, k+1)
			}
		}
	}
	end := state.Change{To: api.StateCompleted, At: Epoch.Add(time.Duration(t) * time.Second)}
	e.jobs[id-1].end = t
	e.jobs[id-1].outcome = outcomeDone
	if tj := &e.tab.jobs[id-1]; tj.limit < tj.duration {
		end.To, end.Reason = api.StateTimeout, api.ReasonTimeLimit
		e.jobs[id-1].outcome = outcomeTimeout
	}
	if err := state.Transition(&sj.job, end); err != nil {
		// Only a job this engine started is finished: a refusal is a bug.
		panic(fmt.Sprintf("sim: finishing job %d: %v", id, err))
	}
	e.done++
	e.release(id)
}

// sync refreshes node i's view for the core from the ledger (free CPUs,
// memory, GPUs, shared GPUs, idle), keeps the count of GPUs in use and
// the node's fragmentation up to date.
func (e *engine) sync(i int) {
	n := &e.nodes[i]
	ln := e.ledger.At(i)
	before := n.GPUs - len(n.FreeGPUs)
	n.FreeCPUs, n.FreeMemMB = ln.FreeCPUs(), ln.FreeMemMB()
	n.FreeGPUs = ln.FreeGPUs(n.FreeGPUs[:0])
	n.Shared = append(n.Shared[:0], ln.Shared()...)
	n.Idle = ln.Idle()
	e.usedGPUs += n.GPUs - len(n.FreeGPUs) - before
	e.refrag(i)
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
	s := Sample{T: t, UsedGPUs: int32(e.usedGPUs), Pending: int32(len(e.pending)), Running: int32(e.running.Len()),
		FragGPUs: int32(frag), StartedAt: int32(started), WorkFrag: max(0, e.fragSum)}
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
