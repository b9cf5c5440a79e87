package ctld

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

// Job arrays. An array is one record, the meta record, whose
// ArrayPending holds every task that has not started: the scheduler sees
// it as a few candidate tasks per pass however many tasks wait, and the
// store writes one row for it. A task gets a record of its own (a new job
// id, as in Slurm) when it starts or is held, cancelled or updated alone;
// the last task takes over the meta record and its id.

// maxInstancesPerPass bounds the candidate tasks one array offers a
// pass: enough to fill a large cluster in a few passes, few enough that
// a full cluster costs little.
const maxInstancesPerPass = 256

// prepareArray parses the submission's --array into j's meta record
// fields. Called without mu.
func (s *Server) prepareArray(j *api.Job) error {
	if j.Array == "" {
		return nil
	}
	spec, err := api.ParseArraySpec(j.Array, s.cl.MaxArraySize)
	if err != nil {
		return api.Invalid("Batch job submission failed: %s", api.ErrInvalidArray)
	}
	j.Array = spec.String()
	j.ArrayPending, j.ArrayThrottle = spec.Tasks, spec.Throttle
	if j.Stdout == "" {
		j.Stdout = api.ArrayDefaultStdout
	}
	return nil
}

// jobIndex is what one pass needs to know about all jobs at once, built
// in one scan: the records of each array, how many tasks of each array
// are active, and who holds a name for singleton dependencies.
type jobIndex struct {
	arrays      map[uint64][]*api.Job
	activeTasks map[uint64]int
	busyNames   map[nameKey]bool
	// firstSingleton is, per user and name, the lowest pending job id
	// with a singleton dependency: pending singletons start one at a
	// time in submit order.
	firstSingleton map[nameKey]uint64
}

type nameKey struct {
	uid  uint32
	name string
}

// addLive notes a job that has not ended (see Server.live). Called
// with mu held.
func (s *Server) addLive(j *api.Job) {
	if !j.State.Terminal() {
		s.live.add(j)
	}
}

// index scans every job once. Called with mu held.
func (s *Server) index() *jobIndex {
	ix := &jobIndex{arrays: map[uint64][]*api.Job{}, activeTasks: map[uint64]int{},
		busyNames: map[nameKey]bool{}, firstSingleton: map[nameKey]uint64{}}
	for _, j := range s.jobs {
		ix.add(j)
	}
	return ix
}

func (ix *jobIndex) add(j *api.Job) {
	if j.ArrayJobID != 0 {
		ix.arrays[j.ArrayJobID] = append(ix.arrays[j.ArrayJobID], j)
		if j.State.Active() {
			ix.activeTasks[j.ArrayJobID]++
		}
	}
	if j.State.Active() {
		ix.busyNames[nameKey{j.UserID, j.Name}] = true
	}
	if j.State == api.StatePending && j.Dependency != "" && hasSingleton(j.Dependency) {
		k := nameKey{j.UserID, j.Name}
		if cur, ok := ix.firstSingleton[k]; !ok || j.ID < cur {
			ix.firstSingleton[k] = j.ID
		}
	}
}

// addPending adds the pending jobs that may start to snap: held jobs,
// jobs whose dependency is not satisfied and array tasks over their
// throttle are left out with their reason set; an array's meta record
// becomes up to as many candidate tasks as could start. Called with mu
// held from snapshot.
func (s *Server) addPending(snap *sched.Snapshot) {
	now := s.now()
	cands := make([]*api.Job, 0, s.live.len())
	ordered := false
	s.live.walk(func(j *api.Job) bool {
		if j.State.Terminal() || s.jobs[j.ID] != j {
			return false
		}
		// Held jobs carry their reason from the hold itself; leaving them
		// out keeps passes cheap when thousands wait on a hold.
		// Buffered submissions wait for their turn (buffer.go).
		if j.State == api.StatePending && j.HoldKind == api.HoldNone && !j.Hold && j.Reason != api.ReasonBuffered {
			cands = append(cands, j)
			ordered = ordered || j.ArrayJobID != 0 || j.Dependency != ""
		}
		return true
	})
	if !ordered {
		// Plain jobs only: no array or dependency bookkeeping, whose
		// index costs a walk over every job the controller keeps.
		if snap.Pending == nil {
			snap.Pending = cands
		} else {
			snap.Pending = append(snap.Pending, cands...)
		}
		return
	}
	ix := s.index()
	// Map order must not decide which array task or singleton goes
	// first (the scheduler orders plain jobs itself).
	sort.Slice(cands, func(a, b int) bool { return cands[a].ID < cands[b].ID })
	var caps *capacity
	var splits []corrFailure
	for _, j := range cands {
		ready, corr := s.depsReady(j, ix, now)
		if !ready || j.State != api.StatePending {
			continue
		}
		if j.ArrayJobID == 0 {
			snap.Pending = append(snap.Pending, j)
			continue
		}
		room := math.MaxInt
		if j.ArrayThrottle > 0 {
			room = j.ArrayThrottle - ix.activeTasks[j.ArrayJobID]
			if room <= 0 {
				s.setPendingReason(j, api.ReasonJobArrayTaskLimit, fmt.Sprintf("%d of %d tasks running", ix.activeTasks[j.ArrayJobID], j.ArrayThrottle))
				continue
			}
		}
		if !j.IsArrayMeta() {
			// A task with a record of its own (requeued, released).
			ix.activeTasks[j.ArrayJobID]++
			snap.Pending = append(snap.Pending, j)
			continue
		}
		if caps == nil {
			caps = newCapacity(snap)
		}
		k := min(room, j.ArrayPending.Len(), caps.fits(j), maxInstancesPerPass)
		if s.cl.Scheduler.MaxStarts > 0 {
			k = min(k, s.cl.Scheduler.MaxStarts)
		}
		tasks, failed := s.readyTasks(j, ix, corr, max(k, 1), now)
		splits = append(splits, failed...)
		if len(tasks) == 0 {
			if corr != nil {
				s.setPendingReason(j, api.ReasonDependency, "")
			}
			continue
		}
		// Tasks offered now count against the throttle of later records
		// of the same array in this pass.
		ix.activeTasks[j.ArrayJobID] += len(tasks)
		for n, t := range tasks {
			c := *j
			c.ArrayTaskID = t
			if n > 0 {
				// Ids the controller never assigns (it stores ids up to
				// MaxInt64), rising with the task so that equal
				// priorities start tasks in order; arrayInstances maps
				// them back.
				c.ID = 1<<63 + uint64(len(snap.Pending))
			}
			snap.Pending = append(snap.Pending, &c)
		}
	}
	for _, f := range splits {
		s.failCorrTask(f, now)
	}
}

// arrayInstances maps the ids of the candidate tasks in snap (copies of
// meta records, see addPending) to the copy, which names the task.
func arrayInstances(snap *sched.Snapshot) map[uint64]*api.Job {
	var inst map[uint64]*api.Job
	for _, j := range snap.Pending {
		if j.IsArrayMeta() {
			if inst == nil {
				inst = map[uint64]*api.Job{}
			}
			inst[j.ID] = j
		}
	}
	return inst
}

// planJob is the live record a plan's job id stands for: the meta
// record for an array's candidate task. Called with mu held.
func (s *Server) planJob(inst map[uint64]*api.Job, id uint64) *api.Job {
	if c, ok := inst[id]; ok {
		return s.jobs[c.ArrayJobID]
	}
	return s.jobs[id]
}

// startRecord is the record that starts for plan job id, whose live
// record is j: for an array candidate the task is split off the meta
// record first. Called with mu held.
func (s *Server) startRecord(inst map[uint64]*api.Job, id uint64, j *api.Job) *api.Job {
	c, ok := inst[id]
	if !ok || j == nil || !j.IsArrayMeta() {
		return j
	}
	return s.splitTask(j, c.ArrayTaskID)
}

// startRecordOK reports whether startRecord finds a record for plan
// job id, whose live record is j: an array candidate's task must still
// be pending in its meta record. Called with mu held.
func (s *Server) startRecordOK(inst map[uint64]*api.Job, id uint64, j *api.Job) bool {
	c, ok := inst[id]
	if !ok || j == nil || !j.IsArrayMeta() {
		return true
	}
	return j.ArrayPending.Contains(c.ArrayTaskID)
}

// splitTask gives task t of meta record m a record of its own and
// returns it (nil when m does not hold t). The last task takes over the
// meta record. Called with mu held.
func (s *Server) splitTask(m *api.Job, t int) *api.Job {
	if !m.ArrayPending.Contains(t) {
		return nil
	}
	rest := m.ArrayPending.Remove(t)
	if len(rest) == 0 {
		m.ArrayPending, m.ArrayTaskID = nil, t
		s.markDirty(m)
		return m
	}
	c := *m
	c.ID = s.newJobID()
	c.ArrayPending, c.ArrayTaskID = nil, t
	c.CancelledBy = nil
	m.ArrayPending = rest
	task := &c
	s.jobs[task.ID] = task
	s.addLive(task)
	s.markDirty(m)
	s.markDirty(task)
	return task
}

// setPendingReason changes a pending job's reason, with a trail entry
// when it changes. Called with mu held.
func (s *Server) setPendingReason(j *api.Job, r api.ReasonCode, detail string) {
	if j.Reason == r && j.ReasonDetail == detail {
		return
	}
	j.Reason, j.ReasonDetail = r, detail
	s.markDirty(j)
	s.event(j, api.EventPending, string(r), detail, "")
}

// capacity estimates, per partition, how many more copies of a job
// could start now, to size an array's candidates: free CPUs and GPUs of
// usable nodes divided by what one task needs on one node.
type capacity struct {
	snap   *sched.Snapshot
	byName map[string]*sched.NodeInfo
}

func newCapacity(snap *sched.Snapshot) *capacity {
	c := &capacity{snap: snap, byName: make(map[string]*sched.NodeInfo, len(snap.Nodes))}
	for i := range snap.Nodes {
		c.byName[snap.Nodes[i].Name] = &snap.Nodes[i]
	}
	return c
}

func (c *capacity) fits(j *api.Job) int {
	total := 0
	for _, name := range api.PartitionNames(j.ReqPartition()) {
		total += c.fitsIn(j, c.snap.Partitions[name])
	}
	return max(total, 1)
}

// fitsIn is fits in one partition p (nil: none).
func (c *capacity) fitsIn(j *api.Job, p *sched.PartitionInfo) int {
	if p == nil {
		return 0
	}
	nodes := j.ReqNodes()
	cpus := max(1, j.ReqTasks()*j.ReqCPUsPerTask()/nodes)
	gpus := 0
	if !j.Sliced() {
		gpus = j.ReqGPUs() / nodes
	}
	total := 0
	for _, name := range p.Nodes {
		n := c.byName[name]
		if n == nil || !n.Usable {
			continue
		}
		f := n.FreeCPUs / cpus
		if gpus > 0 {
			f = min(f, len(n.FreeGPUs)/gpus)
		}
		if j.Exclusive && !n.Idle {
			f = 0
		}
		total += f
	}
	return total / nodes
}

// readyTasks lists up to k of meta record m's pending tasks, lowest
// first, that may start: with an aftercorr dependency (corr non-nil)
// only those whose corresponding task succeeded, and those whose
// corresponding task failed are returned apart to be split off. The
// scan stops after corrScanLimit tasks, so that a pass never walks a
// huge array.
func (s *Server) readyTasks(m *api.Job, ix *jobIndex, corr *api.Dependency, k int, now time.Time) (tasks []int, failed []corrFailure) {
	n := 0
	m.ArrayPending.Each(func(t int) bool {
		if len(tasks) >= k || n >= corrScanLimit {
			return false
		}
		n++
		if corr == nil {
			tasks = append(tasks, t)
			return true
		}
		d := s.evalDeps(corr, m, t, ix, now)
		switch d.State() {
		case api.DepFulfilled:
			tasks = append(tasks, t)
		case api.DepFailed:
			failed = append(failed, corrFailure{meta: m, task: t, dep: d.String()})
		}
		return true
	})
	return tasks, failed
}

// corrScanLimit bounds how many pending tasks of one array an aftercorr
// check looks at per pass.
const corrScanLimit = 1024

// corrFailure is a task whose aftercorr dependency failed: it leaves
// the meta record to wait (or be cancelled) on its own.
type corrFailure struct {
	meta *api.Job
	task int
	dep  string
}

func (s *Server) failCorrTask(f corrFailure, now time.Time) {
	t := s.splitTask(f.meta, f.task)
	if t == nil {
		return
	}
	t.Dependency = f.dep
	s.dependencyFailed(t, now)
}

// taskTargets resolves a request's ids to live records: for an id, the
// job and, when it names an array, every record of the array; for a
// task, its record, split off the meta record when split is true (so
// that an action on the task touches it alone). Each target carries the
// result entry to report under. Called with mu held.
func (s *Server) taskTargets(ids []uint64, tasks []api.TaskRef, split bool) []target {
	var ix map[uint64][]*api.Job
	arrays := func() map[uint64][]*api.Job {
		if ix == nil {
			ix = map[uint64][]*api.Job{}
			for _, j := range s.jobs {
				if j.ArrayJobID != 0 {
					ix[j.ArrayJobID] = append(ix[j.ArrayJobID], j)
				}
			}
			for _, recs := range ix {
				sort.Slice(recs, func(a, b int) bool { return recs[a].ID < recs[b].ID })
			}
		}
		return ix
	}
	var out []target
	for _, id := range ids {
		t := target{res: api.JobResult{JobID: id}}
		if j := s.jobs[id]; j != nil && (j.ArrayJobID == 0 || j.ArrayJobID != id) {
			t.jobs = []*api.Job{j}
		} else {
			t.jobs = arrays()[id]
		}
		out = append(out, t)
	}
	for _, ref := range tasks {
		t := target{res: api.JobResult{JobID: ref.JobID, ID: ref.String()}}
		for _, j := range arrays()[ref.JobID] {
			switch {
			case j.IsArrayMeta() && j.ArrayPending.Contains(ref.Task):
				if split && !j.State.Terminal() {
					if task := s.splitTask(j, ref.Task); task != nil {
						j = task
						ix[ref.JobID] = append(ix[ref.JobID], task)
					}
				}
				t.jobs = append(t.jobs, j)
			case !j.IsArrayMeta() && j.ArrayTaskID == ref.Task:
				t.jobs = append(t.jobs, j)
			}
		}
		out = append(out, t)
	}
	return out
}

// target is what one id of a request resolved to.
type target struct {
	res  api.JobResult
	jobs []*api.Job
}
