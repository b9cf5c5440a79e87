package sacct

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/jobfmt"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// kind says how a column is padded and truncated, after Slurm's
// print_fields_* routines.
type kind int

const (
	// kStr truncates to the width with a trailing '+'.
	kStr kind = iota
	// kDate truncates plainly.
	kDate
	// kNum and elapsed times never truncate.
	kNum
)

// row is one output line: a job, or one of its steps: the batch step
// (Slurm's N.batch) or, with rec set, an srun step (N.0, N.1…) whose j
// is a copy of the job carrying the step's state, exit and times.
type row struct {
	j    *api.Job
	step bool
	rec  *api.StepRecord
	// derived is the highest exit of the job's srun steps (job rows).
	derived api.ExitStatus
	now     time.Time
	loc     *time.Location
	cluster string
	// tf is SLURM_TIME_FORMAT's format for dates.
	tf slurmfmt.TimeFormat
	// usage is what the step of a step row used (nil: nothing
	// measured); jobUser and jobSys are a job row's CPU time, summed
	// over its ended steps (usage.go).
	usage           *api.StepUsage
	jobUser, jobSys uint64
}

// fieldDef is one sacct field. Width is Slurm's default: negative means
// left-justified. A nil value means Tide keeps no such data (CPU
// frequencies, wckeys, reservations…); the column prints blank, which is
// what Slurm prints when it has none either.
type fieldDef struct {
	name  string
	width int
	kind  kind
	value func(r *row) string
}

// jobOnly wraps a value that Slurm prints on job rows only.
func jobOnly(f func(r *row) string) func(r *row) string {
	return func(r *row) string {
		if r.step {
			return ""
		}
		return f(r)
	}
}

// fieldDefs lists Slurm 22.05's sacct fields in its order (which decides
// what an abbreviation such as "start" or "node" selects), plus Restarts
// and StdErr/StdIn/StdOut from later releases. It is built on first use:
// every CLI command is this binary, and sbatch should not build sacct's
// table each time it starts.
func fieldDefs() []fieldDef { return fieldDefTable.Get() }

var fieldDefTable = cmdutil.Lazy[[]fieldDef]{Build: func() []fieldDef {
	return []fieldDef{
		{"Account", 10, kStr, func(r *row) string { return r.j.Account }},
		{"AdminComment", 15, kStr, nil},
		{"AllocCPUS", 10, kNum, func(r *row) string { return strconv.Itoa(r.cpus()) }},
		{"AllocNodes", 10, kStr, func(r *row) string { return strconv.Itoa(r.allocNodes()) }},
		{"AllocTRES", 10, kStr, func(r *row) string { return r.allocTRES() }},
		{"AssocID", 7, kNum, nil},
		{"AveCPU", 10, kStr, usageField(func(_ *row, u *api.StepUsage) string { return slurmfmt.CPUSecs(u.CPU.Ave(u.Tasks)) })},
		{"AveCPUFreq", 10, kStr, nil},
		{"AveDiskRead", 14, kStr, usageField(func(_ *row, u *api.StepUsage) string { return slurmfmt.DiskMB(u.DiskRead.Ave(u.Tasks)) })},
		{"AveDiskWrite", 14, kStr, usageField(func(_ *row, u *api.StepUsage) string { return slurmfmt.DiskMB(u.DiskWrite.Ave(u.Tasks)) })},
		{"AvePages", 10, kStr, usageField(func(_ *row, u *api.StepUsage) string { return slurmfmt.BytesSize(u.Pages.Ave(u.Tasks)) })},
		{"AveRSS", 10, kStr, usageField(func(_ *row, u *api.StepUsage) string { return slurmfmt.BytesSize(u.RSS.Ave(u.Tasks)) })},
		{"AveVMSize", 10, kStr, usageField(func(_ *row, u *api.StepUsage) string { return slurmfmt.BytesSize(u.VMSize.Ave(u.Tasks)) })},
		{"BlockID", 16, kStr, nil},
		{"Cluster", 10, kStr, func(r *row) string { return r.clusterName() }},
		{"Comment", 14, kStr, jobOnly(func(r *row) string { return r.j.Comment })},
		{"Constraints", 19, kStr, jobOnly(func(r *row) string { return r.j.Constraint })},
		// Tide reads no energy: Slurm without an energy plugin prints 0.
		{"ConsumedEnergy", 14, kStr, func(r *row) string { return "0" }},
		{"ConsumedEnergyRaw", 17, kNum, func(r *row) string { return "0" }},
		{"Container", 19, kStr, nil},
		{"CPUTime", 10, kNum, func(r *row) string { return api.FormatElapsedLong(r.elapsed() * int64(r.cpus())) }},
		{"CPUTimeRAW", 10, kNum, func(r *row) string { return strconv.FormatInt(r.elapsed()*int64(r.cpus()), 10) }},
		{"DBIndex", -21, kNum, nil},
		// The highest exit of the job's srun steps (0:0 without any).
		{"DerivedExitCode", 15, kStr, jobOnly(func(r *row) string { return r.derived.String() })},
		{"Elapsed", 10, kNum, func(r *row) string { return api.FormatElapsedLong(r.elapsed()) }},
		{"ElapsedRaw", 10, kNum, func(r *row) string { return strconv.FormatInt(r.elapsed(), 10) }},
		{"Eligible", 19, kDate, func(r *row) string {
			if r.step {
				return r.date(r.j.StartTime)
			}
			return r.date(r.j.EligibleTime)
		}},
		{"End", 19, kDate, func(r *row) string { return r.date(r.j.EndTime) }},
		{"ExitCode", 8, kStr, func(r *row) string { return exitString(r.exit()) }},
		{"Flags", 19, kStr, nil},
		{"GID", 6, kNum, jobOnly(func(r *row) string { return strconv.FormatUint(uint64(r.j.GroupID), 10) })},
		{"Group", 9, kStr, jobOnly(func(r *row) string { return jobfmt.NameOr(r.j.Group, r.j.GroupID) })},
		{"JobID", -12, kStr, func(r *row) string { return r.jobID() }},
		{"JobIDRaw", -12, kStr, func(r *row) string { return r.jobIDRaw() }},
		{"JobName", 10, kStr, func(r *row) string {
			if r.rec != nil {
				return r.rec.Name
			}
			if r.step {
				return "batch"
			}
			return r.j.Name
		}},
		{"Layout", 9, kStr, nil},
		{"MaxDiskRead", 12, kStr, usageField(func(_ *row, u *api.StepUsage) string { return slurmfmt.DiskMB(u.DiskRead.Max) })},
		{"MaxDiskReadNode", 15, kStr, usageField(func(_ *row, u *api.StepUsage) string { return u.DiskRead.MaxNode })},
		{"MaxDiskReadTask", 15, kNum, usageField(func(_ *row, u *api.StepUsage) string { return taskOf(u.DiskRead.MaxTask) })},
		{"MaxDiskWrite", 12, kStr, usageField(func(_ *row, u *api.StepUsage) string { return slurmfmt.DiskMB(u.DiskWrite.Max) })},
		{"MaxDiskWriteNode", 16, kStr, usageField(func(_ *row, u *api.StepUsage) string { return u.DiskWrite.MaxNode })},
		{"MaxDiskWriteTask", 16, kNum, usageField(func(_ *row, u *api.StepUsage) string { return taskOf(u.DiskWrite.MaxTask) })},
		{"MaxPages", 8, kStr, usageField(func(_ *row, u *api.StepUsage) string { return slurmfmt.BytesSize(u.Pages.Max) })},
		{"MaxPagesNode", 12, kStr, usageField(func(_ *row, u *api.StepUsage) string { return u.Pages.MaxNode })},
		{"MaxPagesTask", 14, kNum, usageField(func(_ *row, u *api.StepUsage) string { return taskOf(u.Pages.MaxTask) })},
		{"MaxRSS", 10, kStr, usageField(func(_ *row, u *api.StepUsage) string { return slurmfmt.BytesSize(u.RSS.Max) })},
		{"MaxRSSNode", 10, kStr, usageField(func(_ *row, u *api.StepUsage) string { return u.RSS.MaxNode })},
		{"MaxRSSTask", 10, kNum, usageField(func(_ *row, u *api.StepUsage) string { return taskOf(u.RSS.MaxTask) })},
		{"MaxVMSize", 10, kStr, usageField(func(_ *row, u *api.StepUsage) string { return slurmfmt.BytesSize(u.VMSize.Max) })},
		{"MaxVMSizeNode", 14, kStr, usageField(func(_ *row, u *api.StepUsage) string { return u.VMSize.MaxNode })},
		{"MaxVMSizeTask", 14, kNum, usageField(func(_ *row, u *api.StepUsage) string { return taskOf(u.VMSize.MaxTask) })},
		{"McsLabel", 12, kStr, nil},
		{"MinCPU", 10, kStr, usageField(func(_ *row, u *api.StepUsage) string { return slurmfmt.CPUSecs(u.CPU.Min) })},
		{"MinCPUNode", 10, kStr, usageField(func(_ *row, u *api.StepUsage) string { return u.CPU.MinNode })},
		{"MinCPUTask", 10, kNum, usageField(func(_ *row, u *api.StepUsage) string { return taskOf(u.CPU.MinTask) })},
		{"NCPUS", 10, kNum, func(r *row) string { return strconv.Itoa(r.cpus()) }},
		{"NNodes", 8, kNum, func(r *row) string { return strconv.Itoa(r.nnodes()) }},
		{"NodeList", 15, kStr, func(r *row) string { return r.nodeList() }},
		{"NTasks", 8, kNum, func(r *row) string {
			if r.rec != nil {
				return strconv.Itoa(r.rec.NTasks)
			}
			if r.step {
				return "1"
			}
			return ""
		}},
		{"Partition", 10, kStr, jobOnly(func(r *row) string { return r.j.Partition })},
		{"Priority", 10, kNum, jobOnly(func(r *row) string { return strconv.FormatUint(uint64(r.j.EffPriority), 10) })},
		{"QOS", 10, kStr, jobOnly(func(r *row) string { return r.j.QOS })},
		{"QOSRAW", 6, kNum, nil},
		{"Reason", 22, kStr, jobOnly(func(r *row) string { return jobfmt.Reason(r.j) })},
		{"ReqCPUFreq", 10, kStr, nil},
		{"ReqCPUFreqGov", 13, kStr, nil},
		{"ReqCPUFreqMax", 13, kStr, nil},
		{"ReqCPUFreqMin", 13, kStr, nil},
		{"ReqCPUS", 8, kNum, func(r *row) string {
			if r.step {
				return strconv.Itoa(r.cpus())
			}
			return strconv.Itoa(jobfmt.ReqCPUs(r.j))
		}},
		{"ReqMem", 10, kStr, jobOnly(func(r *row) string { return jobfmt.Mem(jobfmt.ReqMemMB(r.j)) })},
		{"ReqNodes", 8, kStr, func(r *row) string {
			if r.rec != nil {
				return strconv.Itoa(len(r.rec.Nodes))
			}
			if r.step {
				return "1"
			}
			return strconv.Itoa(r.j.ReqNodes())
		}},
		{"ReqTRES", 10, kStr, jobOnly(func(r *row) string { return reqTRES(r.j) })},
		{"Reservation", 20, kStr, nil},
		{"ReservationId", 8, kNum, nil},
		{"Reserved", 10, kNum, nil},
		{"Restarts", 8, kNum, jobOnly(func(r *row) string { return strconv.Itoa(r.j.Restarts) })},
		{"ResvCPU", 10, kNum, nil},
		{"ResvCPURAW", 10, kNum, nil},
		{"Start", 19, kDate, func(r *row) string { return r.date(r.j.StartTime) }},
		{"State", 10, kStr, func(r *row) string {
			if r.step {
				return string(r.stepState())
			}
			return stateString(r.j)
		}},
		{"StdErr", 20, kStr, jobOnly(func(r *row) string { _, e, _ := jobfmt.StdPaths(r.j); return e })},
		{"StdIn", 20, kStr, jobOnly(func(r *row) string { _, _, i := jobfmt.StdPaths(r.j); return i })},
		{"StdOut", 20, kStr, jobOnly(func(r *row) string { o, _, _ := jobfmt.StdPaths(r.j); return o })},
		{"Submit", 19, kDate, func(r *row) string {
			if r.step {
				return r.date(r.j.StartTime)
			}
			return r.date(r.j.SubmitTime)
		}},
		{"SubmitLine", 20, kStr, nil},
		{"Suspended", 10, kNum, func(r *row) string { return "00:00:00" }},
		{"SystemComment", 15, kStr, nil},
		{"SystemCPU", 10, kStr, cpuField(func(_, sys uint64) uint64 { return sys })},
		{"Timelimit", 10, kStr, jobOnly(func(r *row) string { return jobfmt.Limit(r.j.TimeLimit) })},
		{"TimelimitRaw", 10, kStr, jobOnly(func(r *row) string { return jobfmt.LimitMinutes(r.j.TimeLimit) })},
		{"TotalCPU", 10, kStr, cpuField(func(user, sys uint64) uint64 { return user + sys })},
		{"TRESUsageInAve", 14, kStr, tresUsage(slurmfmt.TRESIn, slurmfmt.TRESAve)},
		{"TRESUsageInMax", 14, kStr, tresUsage(slurmfmt.TRESIn, slurmfmt.TRESMax)},
		{"TRESUsageInMaxNode", 18, kStr, tresUsage(slurmfmt.TRESIn, slurmfmt.TRESMaxNode)},
		{"TRESUsageInMaxTask", 18, kStr, tresUsage(slurmfmt.TRESIn, slurmfmt.TRESMaxTask)},
		{"TRESUsageInMin", 14, kStr, tresUsage(slurmfmt.TRESIn, slurmfmt.TRESMin)},
		{"TRESUsageInMinNode", 18, kStr, tresUsage(slurmfmt.TRESIn, slurmfmt.TRESMinNode)},
		{"TRESUsageInMinTask", 18, kStr, tresUsage(slurmfmt.TRESIn, slurmfmt.TRESMinTask)},
		{"TRESUsageInTot", 14, kStr, tresUsage(slurmfmt.TRESIn, slurmfmt.TRESTot)},
		{"TRESUsageOutAve", 15, kStr, tresUsage(slurmfmt.TRESOut, slurmfmt.TRESAve)},
		{"TRESUsageOutMax", 15, kStr, tresUsage(slurmfmt.TRESOut, slurmfmt.TRESMax)},
		{"TRESUsageOutMaxNode", 19, kStr, tresUsage(slurmfmt.TRESOut, slurmfmt.TRESMaxNode)},
		{"TRESUsageOutMaxTask", 19, kStr, tresUsage(slurmfmt.TRESOut, slurmfmt.TRESMaxTask)},
		{"TRESUsageOutMin", 15, kStr, tresUsage(slurmfmt.TRESOut, slurmfmt.TRESMin)},
		{"TRESUsageOutMinNode", 19, kStr, tresUsage(slurmfmt.TRESOut, slurmfmt.TRESMinNode)},
		{"TRESUsageOutMinTask", 19, kStr, tresUsage(slurmfmt.TRESOut, slurmfmt.TRESMinTask)},
		{"TRESUsageOutTot", 15, kStr, tresUsage(slurmfmt.TRESOut, slurmfmt.TRESTot)},
		{"UID", 6, kNum, jobOnly(func(r *row) string { return strconv.FormatUint(uint64(r.j.UserID), 10) })},
		{"User", 9, kStr, jobOnly(func(r *row) string { return jobfmt.NameOr(r.j.User, r.j.UserID) })},
		{"UserCPU", 10, kStr, cpuField(func(user, _ uint64) uint64 { return user })},
		{"WCKey", 10, kStr, nil},
		{"WCKeyID", 10, kNum, nil},
		{"WorkDir", 20, kStr, jobOnly(func(r *row) string { return r.j.WorkDir })},
	}
}}

// Slurm's field lists (sacct.h).
const (
	defaultFields = "jobid,jobname,partition,account,alloccpus,state,exitcode"
	briefFields   = "jobid,state,exitcode"
	longFields    = "jobid,jobidraw,jobname,partition,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,maxrssnode,maxrsstask,averss,maxpages,maxpagesnode,maxpagestask,avepages,mincpu,mincpunode,mincputask,avecpu,ntasks,alloccpus,elapsed,state,exitcode,avecpufreq,reqcpufreqmin,reqcpufreqmax,reqcpufreqgov,reqmem,consumedenergy,maxdiskread,maxdiskreadnode,maxdiskreadtask,avediskread,maxdiskwrite,maxdiskwritenode,maxdiskwritetask,avediskwrite,reqtres,alloctres,tresusageinave,tresusageinmax,tresusageinmaxn,tresusageinmaxt,tresusageinmin,tresusageinminn,tresusageinmint,tresusageintot,tresusageoutmax,tresusageoutmaxn,tresusageoutmaxt,tresusageoutave,tresusageouttot"
)

// column is a selected field with its effective width.
type column struct {
	def   *fieldDef
	width int
}

// parseFormat reads a --format list as Slurm does: comma-separated,
// case-insensitive names or prefixes (the first field in Slurm's order
// wins), "%N" sets the width (negative left-justifies) and a prefix of
// "ALL" selects every field.
func parseFormat(list string) ([]column, error) {
	var cols []column
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, width, hasWidth := item, 0, false
		if i := strings.IndexByte(item, '%'); i >= 0 {
			name = item[:i]
			w, err := strconv.Atoi(item[i+1:])
			if err != nil {
				return nil, fmt.Errorf("invalid field width in %q", item)
			}
			// Bounded as squeue's and sinfo's widths are: a typo must
			// not pad every cell to gigabytes (or, at MinInt, to a
			// negative width).
			if w > slurmfmt.MaxWidth || w < -slurmfmt.MaxWidth {
				return nil, api.Invalid("field width %d in %q exceeds %d", w, item, slurmfmt.MaxWidth)
			}
			width, hasWidth = w, w != 0
		}
		lname := strings.ToLower(name)
		if lname != "" && strings.HasPrefix("all", lname) {
			defs := fieldDefs()
			for i := range defs {
				cols = append(cols, newColumn(&defs[i], width, hasWidth))
			}
			continue
		}
		def := lookupField(lname)
		if def == nil {
			return nil, api.Invalid("Invalid field requested: %q", name)
		}
		cols = append(cols, newColumn(def, width, hasWidth))
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("no fields requested")
	}
	return cols, nil
}

func newColumn(def *fieldDef, width int, hasWidth bool) column {
	if !hasWidth {
		width = def.width
	}
	return column{def: def, width: width}
}

func lookupField(lname string) *fieldDef {
	if lname == "" {
		return nil
	}
	defs := fieldDefs()
	for i := range defs {
		if strings.ToLower(defs[i].name) == lname {
			return &defs[i]
		}
	}
	for i := range defs {
		if strings.HasPrefix(strings.ToLower(defs[i].name), lname) {
			return &defs[i]
		}
	}
	return nil
}

// --- row values ---

// clusterName is the job's cluster, or the controller's for records that
// do not carry one.
func (r *row) clusterName() string {
	if r.j.Cluster != "" {
		return r.j.Cluster
	}
	return r.cluster
}

// jobID is JobID: "N", or for arrays "N_I" and "N_[pending tasks]".
func (r *row) jobID() string {
	id := r.j.ArrayID()
	if r.rec != nil {
		return id + "." + strconv.FormatUint(uint64(r.rec.StepID), 10)
	}
	if r.step {
		return id + ".batch"
	}
	return id
}

// jobIDRaw is JobIDRaw: the record's own job id.
func (r *row) jobIDRaw() string {
	id := strconv.FormatUint(r.j.ID, 10)
	if r.rec != nil {
		return id + "." + strconv.FormatUint(uint64(r.rec.StepID), 10)
	}
	if r.step {
		return id + ".batch"
	}
	return id
}

func (r *row) date(t time.Time) string {
	if r.tf.Standard() {
		return jobfmt.Time(t, r.loc)
	}
	if t.IsZero() {
		return "Unknown"
	}
	return r.tf.Format(t, r.loc)
}

// elapsed is the run time so far: to the end, or to now while running.
func (r *row) elapsed() int64 {
	if r.j.StartTime.IsZero() {
		return 0
	}
	end := r.j.EndTime
	if end.IsZero() {
		end = r.now
	}
	if end.Before(r.j.StartTime) {
		return 0
	}
	return int64(end.Sub(r.j.StartTime) / time.Second)
}

// cpus is AllocCPUS: the job's allocation (0 before it has one), or for
// the batch step the CPUs of the node the script runs on.
func (r *row) cpus() int {
	if r.rec != nil {
		return r.rec.CPUs
	}
	if r.step {
		if len(r.j.Alloc) == 0 {
			return 0
		}
		return r.j.Alloc[0].CPUs
	}
	return r.j.AllocCPUs()
}

func (r *row) allocNodes() int {
	if r.rec != nil {
		return len(r.rec.Nodes)
	}
	if r.step {
		return 1
	}
	return len(r.j.Alloc)
}

// nnodes is the allocated node count, or the requested one before the
// job has an allocation (as Slurm reads it from the requested TRES).
func (r *row) nnodes() int {
	if r.rec != nil {
		return len(r.rec.Nodes)
	}
	if r.step {
		return 1
	}
	if len(r.j.Alloc) > 0 {
		return len(r.j.Alloc)
	}
	return r.j.ReqNodes()
}

func (r *row) nodeList() string {
	if r.rec != nil {
		return hostlist.Compress(r.rec.Nodes)
	}
	if len(r.j.Alloc) == 0 {
		return "None assigned"
	}
	if r.step {
		return r.j.Alloc[0].Node
	}
	return hostlist.Compress(r.j.NodeNames())
}

func (r *row) allocTRES() string {
	if r.rec != nil {
		return sortedTRES(map[string]string{"cpu": itoaPos(r.rec.CPUs), "node": itoaPos(len(r.rec.Nodes)),
			"gres/gpu": itoaPos(r.rec.GPUs)})
	}
	if len(r.j.Alloc) == 0 {
		return ""
	}
	if r.step {
		a := r.j.Alloc[0]
		return sortedTRES(map[string]string{
			"cpu": itoaPos(a.CPUs), "mem": memPos(a.MemoryMB), "node": "1", "gres/gpu": itoaPos(len(a.GPUs)),
			"gres/gpumem": gpuMemPos(a.GPUMemMB * int64(len(a.GPUs))),
		})
	}
	var mem, gpuMem int64
	for _, a := range r.j.Alloc {
		mem += a.MemoryMB
		gpuMem += a.GPUMemMB * int64(len(a.GPUs))
	}
	cpus := r.j.AllocCPUs()
	return sortedTRES(map[string]string{
		"billing": itoaPos(cpus), "cpu": itoaPos(cpus), "mem": memPos(mem),
		"node": itoaPos(len(r.j.Alloc)), "gres/gpu": itoaPos(r.j.AllocGPUs()), "gres/gpumem": gpuMemPos(gpuMem),
	})
}

// reqTRES is what the job asks for; a sliced job adds its slices' GPU
// memory as gres/gpumem, as AllocTRES and scontrol do.
func reqTRES(j *api.Job) string {
	cpus := jobfmt.ReqCPUs(j)
	return sortedTRES(map[string]string{
		"billing": itoaPos(cpus), "cpu": itoaPos(cpus), "mem": memPos(jobfmt.ReqMemMB(j)),
		"node": itoaPos(j.ReqNodes()), "gres/gpu": itoaPos(j.ReqGPUs()),
		"gres/gpumem": gpuMemPos(j.GPUMemMB * int64(j.ReqGPUs())),
	})
}

// gpuMemPos prints slice memory as scontrol's TRES do ("16G"), "" for
// none. A slice grown by GPU memory reclaim shows its grown size.
func gpuMemPos(mb int64) string {
	if mb <= 0 {
		return ""
	}
	return api.FormatMemMB(mb)
}

// sortedTRES prints TRES the way sacct does: keys sorted, zero counts
// (empty values) left out.
func sortedTRES(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func itoaPos(n int) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func memPos(mb int64) string {
	if mb <= 0 {
		return ""
	}
	return jobfmt.Mem(mb)
}

// exit is the ExitCode of the row: for a job, what Slurm records for it
// (a job that was cancelled, timed out, preempted or lost with its node
// keeps 0:0 whatever its script's end; one the OOM killer ended 0:125,
// Slurm's SIG_OOM); for its batch step the script's own exit (0:125
// after an OOM kill too); for an srun step the highest task exit.
func (r *row) exit() api.ExitStatus {
	switch {
	case r.rec != nil:
		return r.j.Exit
	case r.j.State == api.StateOOM:
		return api.ExitStatus{Signal: sigOOM}
	case r.step:
		return r.j.Exit
	}
	switch r.j.State {
	case api.StateCancelled, api.StateTimeout, api.StatePreempted, api.StateNodeFail:
		return api.ExitStatus{}
	}
	return r.j.Exit
}

// sigOOM is the signal number sacct shows for an OOM kill: Slurm
// records the exit as SIG_OOM (253), which reads as signal 125.
const sigOOM = 125

// exitString prints an exit as sacct does: "code:signal", a code of 128
// or more less 128.
func exitString(e api.ExitStatus) string {
	code := e.Code
	if code >= 128 {
		code -= 128
	}
	return strconv.Itoa(code) + ":" + strconv.Itoa(e.Signal)
}

// stepState is the State of a step row. A step that is still running,
// or whose state is recorded, shows it; Slurm records a step ended by a
// signal as CANCELLED and one the OOM killer ended as OUT_OF_MEMORY, so
// the batch step of a job that timed out or was cancelled is
// CANCELLED. The batch step's state follows from the script's exit.
func (r *row) stepState() api.JobState {
	st, e := r.j.State, r.j.Exit
	if r.rec == nil && st.Terminal() {
		switch {
		case st == api.StateOOM:
			return api.StateOOM
		case e.Signal != 0:
			return api.StateCancelled
		case e.Code != 0:
			return api.StateFailed
		}
		return api.StateCompleted
	}
	if st == api.StateFailed && e.Signal != 0 {
		return api.StateCancelled
	}
	return st
}

// stateString is the State column of a job row: Slurm names who
// cancelled a job ("CANCELLED by 1000") when it knows.
func stateString(j *api.Job) string {
	if j.State == api.StateCancelled && j.CancelledBy != nil {
		return fmt.Sprintf("%s by %d", j.State, *j.CancelledBy)
	}
	return string(j.State)
}
