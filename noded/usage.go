package noded

// Usage accounting (issue 22): what the node's part of each step used,
// for sacct's usage fields and sstat. A unit is the batch step of a job
// this node runs the script of, or an srun step's part on this node;
// each task of a unit (the batch script, an srun rank) is measured on
// its own.
//
//   - Sampling: every acct_gather_frequency (and once about a second
//     after a unit appears, so that short steps get a sample) tided
//     reads the process table once and charges every process to the
//     task whose tree it is in (usageproc.go): CPU time, the peak
//     resident and virtual sizes the kernel keeps per process (VmHWM,
//     VmPeak), major faults, storage I/O, and with NVML the GPU memory
//     and utilisation of the task's processes. Peaks are kept; each
//     sample also goes to the controller as the unit's running values
//     (sstat). Memory is known from samples only: a task's rusage
//     counts in its peak the memory of the daemon that forked it
//     (until the exec, the child shares its parent's pages), so it is
//     not used for memory.
//   - End: an srun task's rusage from its wait (exact CPU time, faults,
//     block I/O) is merged into its samples, and the totals of the
//     cgroup tided made for the step (it holds whatever left the
//     tasks' trees) are added; the step's final report is queued for
//     the next sync and resent until one is answered. The batch script's rusage and its job cgroup's
//     totals come from the supervisor (stepd.Status.Usage) and go with
//     the job's finished report, which the controller acknowledges.
//     Where srun steps ran inside the batch script's job cgroup, its
//     totals hold theirs too and are left out.
//
// Container jobs are not measured (their processes run under runc).
//
// GPU use comes from NVML, or from the fake GPUs' simulated load (the
// local cluster and tests): the fake lists each job's batch script as
// the process on the job's GPUs, so the batch step is charged with it
// (srun steps' tasks are not).

import (
	"cmp"
	"context"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/noded/cgroup"
	"github.com/tide-hpc/tide/noded/steps"
)

// DefaultAcctGatherFrequency is acct_gather_frequency's default, as
// Slurm's JobAcctGatherFrequency.
const DefaultAcctGatherFrequency = 30 * time.Second

// usageState is the node's usage accounting, guarded by its own lock
// (taken after Daemon.mu and the step server's locks, never before).
type usageState struct {
	mu    sync.Mutex
	units map[usageUnit]*unitUsage
	// final holds srun steps' final reports until a sync that carried
	// them is answered.
	final  []finalUsage
	nextID uint64
	// joined marks jobs whose srun steps ran inside the batch script's
	// job cgroup here: its totals are not the script's alone.
	joined map[uint64]bool
}

// usageUnit names a unit: a job incarnation's step.
type usageUnit struct {
	job     uint64
	restart int
	step    uint32
}

// unitUsage is what the samples of a unit found so far.
type unitUsage struct {
	tasks   map[int]*api.TaskUsage
	samples int
	gpu     bool
	// seen is when the sampler first met the unit, last its latest
	// sample; fresh: sampled since its running values were sent.
	seen, last time.Time
	fresh      bool
}

type finalUsage struct {
	id uint64
	u  api.NodeUsage
}

// usageSentToken says what one sync carried (usageSent forgets it).
type usageSentToken []uint64

// sampleUsage samples the running units until ctx ends; it returns at
// once when acct_gather_frequency is 0 (only the ends are measured).
func (d *Daemon) sampleUsage(ctx context.Context) {
	freq := d.cfg.AcctGatherFrequency
	if freq <= 0 {
		return
	}
	t := time.NewTicker(min(time.Second, freq))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			d.sampleDue(now, freq)
		}
	}
}

// sampleDue samples the units whose last sample is freq old (or that
// have none yet and were met a tick ago), and forgets the units that
// are gone.
func (d *Daemon) sampleDue(now time.Time, freq time.Duration) {
	specs, keep := d.usageUnits()
	us := &d.usage
	us.mu.Lock()
	if us.units == nil {
		us.units = map[usageUnit]*unitUsage{}
	}
	var due []unitSpec
	for _, sp := range specs {
		u := us.units[sp.key]
		if u == nil {
			us.units[sp.key] = &unitUsage{tasks: map[int]*api.TaskUsage{}, seen: now}
			continue
		}
		if u.last.IsZero() || now.Sub(u.last) >= freq {
			due = append(due, sp)
		}
	}
	for k := range us.units {
		if !keep[k] {
			delete(us.units, k)
		}
	}
	for id := range us.joined {
		if !keepsJob(keep, id) {
			delete(us.joined, id)
		}
	}
	us.mu.Unlock()
	if len(due) == 0 {
		return
	}
	procs := readProcTable()
	got := attribute(procs, due, readProcDetail)
	gpu, hasGPU := d.gpuUse(procs)
	us.mu.Lock()
	defer us.mu.Unlock()
	for _, sp := range due {
		u := us.units[sp.key]
		if u == nil {
			continue
		}
		u.samples++
		u.last, u.fresh = now, true
		for task, t := range got[sp.key] {
			if hasGPU {
				t.GPUMem, t.GPUUtil = gpu.of(sp, task)
				u.gpu = true
			}
			if old := u.tasks[task]; old != nil {
				*old = maxUsage(*old, *t)
			} else {
				u.tasks[task] = t
			}
		}
	}
}

func keepsJob(keep map[usageUnit]bool, job uint64) bool {
	for k := range keep {
		if k.job == job {
			return true
		}
	}
	return false
}

// usageUnits lists the units running now with their tasks' processes,
// and the units whose samples must be kept (those, and the batch steps
// of finished jobs the controller has not acknowledged yet).
func (d *Daemon) usageUnits() ([]unitSpec, map[usageUnit]bool) {
	keep := map[usageUnit]bool{}
	type batchJob struct {
		j   *job
		ref api.JobRef
		pid procIdentity
		dir string
	}
	var batch []batchJob
	d.mu.Lock()
	for _, j := range d.jobs {
		keep[usageUnit{j.ref.JobID, j.ref.Restart, api.BatchStepID}] = true
		if j.finished() || !j.hasSpec || j.spec.ContainerImage != "" || j.launching != nil {
			continue
		}
		batch = append(batch, batchJob{j, j.ref, j.pid, j.dir})
	}
	d.mu.Unlock()
	var specs []unitSpec
	var h *cgroup.Hierarchy
	if d.cfg.Cgroups != CgroupsOff && d.cgroups != "" && d.cgroups != "off" {
		h, _ = cgroup.Detect(cgroupRoot)
	}
	for _, b := range batch {
		pid := b.pid
		if pid.PID == 0 {
			var err error
			if pid, err = readIdentity(filepath.Join(b.dir, filePID)); err != nil || pid.PID <= 0 {
				continue // not started yet
			}
			d.mu.Lock()
			b.j.pid = pid
			d.mu.Unlock()
		}
		sp := unitSpec{key: usageUnit{b.ref.JobID, b.ref.Restart, api.BatchStepID}, roots: map[int]int{pid.PID: 0}, session: pid.PID}
		if h != nil {
			sp.cgroupPids, _ = h.Open(d.cfg.CgroupParent, cgroup.JobName(b.ref.JobID)).Procs()
		}
		specs = append(specs, sp)
	}
	if s := d.steps; s != nil {
		for _, u := range s.Units() {
			key := usageUnit{u.Ref.JobID, u.Ref.Restart, u.Step}
			keep[key] = true
			if len(u.Tasks) > 0 {
				specs = append(specs, unitSpec{key: key, roots: u.Tasks})
			}
		}
	}
	return specs, keep
}

// stepUsageEnd records the final usage of a step's part on this node
// (steps.Host.StepEnded): once every task of the step has been reaped
// and before the step's cgroup is removed.
func (d *Daemon) stepUsageEnd(su steps.StepUsage) {
	key := usageUnit{su.Ref.JobID, su.Ref.Restart, su.Step}
	us := &d.usage
	us.mu.Lock()
	u := us.mergeLocked(key, su.Tasks)
	u.Cgroup = su.Cgroup
	if su.InJobCgroup {
		if us.joined == nil {
			us.joined = map[uint64]bool{}
		}
		us.joined[su.Ref.JobID] = true
	}
	delete(us.units, key)
	us.nextID++
	us.final = append(us.final, finalUsage{id: us.nextID, u: u})
	if len(us.final) > maxPendingUsage {
		// A controller unreachable for long: keep the newest.
		us.final = slices.Delete(us.final, 0, len(us.final)-maxPendingUsage)
	}
	us.mu.Unlock()
	d.wake()
}

// maxPendingUsage bounds the final reports kept for a controller that
// does not answer.
const maxPendingUsage = 10000

// mergeLocked makes the final report of unit key from its samples and
// ended, the tasks' usage at their end. Called with us.mu held.
func (us *usageState) mergeLocked(key usageUnit, ended map[int]api.TaskUsage) api.NodeUsage {
	u := api.NodeUsage{JobID: key.job, StepID: key.step, Restart: key.restart, Final: true, Tasks: []api.TaskUsage{}}
	acc := us.units[key]
	tasks := map[int]api.TaskUsage{}
	if acc != nil {
		u.Samples, u.GPU = acc.samples, acc.gpu
		for k, t := range acc.tasks {
			tasks[k] = *t
		}
	}
	for k, t := range ended {
		tasks[k] = maxUsage(tasks[k], t)
	}
	for _, k := range slices.Sorted(maps.Keys(tasks)) {
		t := tasks[k]
		t.Task = k
		u.Tasks = append(u.Tasks, t)
	}
	return u
}

// maxUsage is the larger reading of each field: totals only grow, and
// peaks are peaks.
func maxUsage(a, b api.TaskUsage) api.TaskUsage {
	return api.TaskUsage{Task: a.Task,
		UserUsec: max(a.UserUsec, b.UserUsec), SystemUsec: max(a.SystemUsec, b.SystemUsec),
		RSS: max(a.RSS, b.RSS), VMSize: max(a.VMSize, b.VMSize), Pages: max(a.Pages, b.Pages),
		ReadBytes: max(a.ReadBytes, b.ReadBytes), WriteBytes: max(a.WriteBytes, b.WriteBytes),
		GPUMem: max(a.GPUMem, b.GPUMem), GPUUtil: max(a.GPUUtil, b.GPUUtil)}
}

// addUsage puts into req what the controller should hear of usage: the
// batch step's totals with each finished job report, the srun steps'
// final reports, and the running values sampled since the last sync.
// The token names the final reports it carried, for usageSent.
func (d *Daemon) addUsage(req *api.NodeSyncRequest) usageSentToken {
	req.Jobs = d.withJobUsage(req.Jobs)
	us := &d.usage
	us.mu.Lock()
	defer us.mu.Unlock()
	var tok usageSentToken
	for _, f := range us.final {
		if len(req.Usage) >= maxSyncUsage {
			return tok
		}
		req.Usage = append(req.Usage, f.u)
		tok = append(tok, f.id)
	}
	for _, k := range slices.SortedFunc(maps.Keys(us.units), compareUnits) {
		u := us.units[k]
		if !u.fresh || len(u.tasks) == 0 || len(req.Usage) >= maxSyncUsage {
			continue
		}
		u.fresh = false
		req.Usage = append(req.Usage, us.runningLocked(k, u))
	}
	return tok
}

// maxSyncUsage bounds the usage reports of one sync (the controller's
// bound: ctld/stepacct.go).
const maxSyncUsage = 4096

func compareUnits(a, b usageUnit) int {
	return cmp.Or(cmp.Compare(a.job, b.job), cmp.Compare(a.step, b.step), cmp.Compare(a.restart, b.restart))
}

// runningLocked is unit k's running report.
func (us *usageState) runningLocked(k usageUnit, u *unitUsage) api.NodeUsage {
	out := api.NodeUsage{JobID: k.job, StepID: k.step, Restart: k.restart, GPU: u.gpu, Samples: u.samples, Tasks: []api.TaskUsage{}}
	for _, task := range slices.Sorted(maps.Keys(u.tasks)) {
		t := *u.tasks[task]
		t.Task = task
		out.Tasks = append(out.Tasks, t)
	}
	return out
}

// usageSent forgets the final reports a sync carried once the
// controller answered it.
func (d *Daemon) usageSent(tok usageSentToken) {
	if len(tok) == 0 {
		return
	}
	us := &d.usage
	us.mu.Lock()
	us.final = slices.DeleteFunc(us.final, func(f finalUsage) bool { return slices.Contains(tok, f.id) })
	us.mu.Unlock()
}

// withJobUsage returns reports with the batch step's usage added to each
// finished one: the supervisor's totals merged with tided's samples. The
// slice is copied before any change (callers keep theirs).
func (d *Daemon) withJobUsage(reports []api.NodeJobReport) []api.NodeJobReport {
	var ends map[api.JobRef]*api.NodeUsage
	d.mu.Lock()
	for _, r := range reports {
		ref := api.JobRef{JobID: r.JobID, Restart: r.Restart}
		if j := d.jobs[ref]; r.State == api.NodeJobFinished && j != nil && j.status != nil {
			if ends == nil {
				ends = map[api.JobRef]*api.NodeUsage{}
			}
			ends[ref] = j.status.Usage
		}
	}
	d.mu.Unlock()
	if len(ends) == 0 {
		return reports
	}
	out := slices.Clone(reports)
	us := &d.usage
	us.mu.Lock()
	defer us.mu.Unlock()
	for i := range out {
		ref := api.JobRef{JobID: out[i].JobID, Restart: out[i].Restart}
		end, ok := ends[ref]
		if !ok {
			continue
		}
		key := usageUnit{ref.JobID, ref.Restart, api.BatchStepID}
		if end == nil && us.units[key] == nil {
			continue // nothing measured (a container job, a lost one)
		}
		ended := map[int]api.TaskUsage{}
		if end != nil {
			for _, t := range end.Tasks {
				ended[t.Task] = t
			}
		}
		u := us.mergeLocked(key, ended)
		if end != nil && end.Cgroup != nil && !us.joined[ref.JobID] {
			c := *end.Cgroup
			u.Cgroup = &c
		}
		out[i].Usage = &u
	}
	return out
}

// gpuReading is the GPU use of the node's processes from the last GPU
// status (NVML): memory by pid, and the utilisation of each GPU with
// the pids on it.
type gpuReading struct {
	mem   map[int]uint64
	util  map[int]uint64 // GPU index → percent
	onGPU map[int][]int  // pid → GPU indices
	// procs is the process table of the sample, for the trees.
	procs map[int]*procInfo
}

// gpuUse returns the GPU reading to charge to tasks, and false where
// the node's GPUs do not measure use: NVML and the fake (whose
// simulated load lists each job's batch script as the process on its
// GPUs) do, a static GPU list does not.
func (d *Daemon) gpuUse(procs map[int]*procInfo) (*gpuReading, bool) {
	if _, fake := d.gpuSrc.(*gres.FakeSource); d.nvml == nil && !fake {
		return nil, false
	}
	st := d.gpuHeartbeat(false)
	g := &gpuReading{mem: map[int]uint64{}, util: map[int]uint64{}, onGPU: map[int][]int{}, procs: procs}
	for _, s := range st {
		g.util[s.Index] = uint64(max(s.UtilPct, 0))
		for _, p := range s.Processes {
			if p.MemMB > 0 {
				g.mem[p.PID] += uint64(p.MemMB) << 20
			}
			g.onGPU[p.PID] = append(g.onGPU[p.PID], s.Index)
		}
	}
	return g, true
}

// of sums the GPU memory of the processes of task (of unit sp) on the
// GPUs, and the utilisation of the GPUs they are on.
func (g *gpuReading) of(sp unitSpec, task int) (mem, util uint64) {
	gpus := map[int]bool{}
	for pid := range g.onGPU {
		if !inTask(g.procs, sp, pid, task) {
			continue
		}
		mem += g.mem[pid]
		for _, i := range g.onGPU[pid] {
			gpus[i] = true
		}
	}
	for i := range gpus {
		util += g.util[i]
	}
	return mem, util
}

// inTask reports whether pid is in the process tree of task's root in
// unit sp.
func inTask(procs map[int]*procInfo, sp unitSpec, pid, task int) bool {
	for depth := 0; pid > 1 && depth < 256; depth++ {
		if t, ok := sp.roots[pid]; ok {
			return t == task
		}
		p := procs[pid]
		if p == nil {
			return false
		}
		pid = p.ppid
	}
	return false
}
