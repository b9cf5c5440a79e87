package squeue

import (
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/scontrol/jobfmt"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// env is what field values depend on besides the job: the controller's
// clock and the zone times print in.
type env struct {
	now     time.Time
	nowUnix int64
	loc     *time.Location
	// tf is SLURM_TIME_FORMAT's format for time stamps.
	tf slurmfmt.TimeFormat
}

func (e *env) setNow(ctl time.Time, local func() time.Time) {
	if ctl.IsZero() && local != nil {
		ctl = local()
	}
	e.now, e.nowUnix = ctl, ctl.Unix()
	if e.loc == nil {
		e.loc = time.Local
	}
}

// jobField is one squeue field: its -o letter (0 for -O only), its -O
// names, its header and how to print it.
type jobField struct {
	letter      byte
	names       []string
	header      string
	noCut       bool
	headerNoCut bool
	value       func(e *env, dst []byte, j *api.Job) []byte
}

func str(f func(j *api.Job) string) func(*env, []byte, *api.Job) []byte {
	return func(_ *env, dst []byte, j *api.Job) []byte { return append(dst, f(j)...) }
}

func constant(s string) func(*env, []byte, *api.Job) []byte {
	return func(_ *env, dst []byte, _ *api.Job) []byte { return append(dst, s...) }
}

func num(f func(j *api.Job) int64) func(*env, []byte, *api.Job) []byte {
	return func(_ *env, dst []byte, j *api.Job) []byte { return strconv.AppendInt(dst, f(j), 10) }
}

func stamp(f func(e *env, j *api.Job) time.Time) func(*env, []byte, *api.Job) []byte {
	return func(e *env, dst []byte, j *api.Job) []byte { return e.tf.AppendTimestamp(dst, f(e, j), e.loc) }
}

func appendID(_ *env, dst []byte, j *api.Job) []byte { return strconv.AppendUint(dst, j.ID, 10) }

// appendArrayID is %i: "N_I" for array tasks, "N_[10-99%8]" for an
// array's pending tasks, the job id otherwise.
func appendArrayID(_ *env, dst []byte, j *api.Job) []byte {
	if j.ArrayJobID == 0 {
		return strconv.AppendUint(dst, j.ID, 10)
	}
	return append(dst, j.ArrayID()...)
}

// appendArrayJobID is %F: the array's id, or the job id.
func appendArrayJobID(_ *env, dst []byte, j *api.Job) []byte {
	if j.ArrayJobID != 0 {
		return strconv.AppendUint(dst, j.ArrayJobID, 10)
	}
	return strconv.AppendUint(dst, j.ID, 10)
}

// jobFields finds squeue's fields by letter and name.
var jobFields = slurmfmt.Index[jobField]{Build: jobFieldList, Keys: func(f *jobField) (byte, []string) { return f.letter, f.names }}

// jobFieldList lists every field, in Slurm's letter order; long-only
// fields follow.
func jobFieldList() []jobField {
	return []jobField{
		{letter: 'a', names: []string{"Account"}, header: "ACCOUNT", value: str(func(j *api.Job) string { return slurmfmt.OrNull(j.Account) })},
		{letter: 'A', names: []string{"JobId"}, header: "JOBID", value: appendID},
		{letter: 'b', names: []string{"tres-per-node", "Gres"}, header: "TRES_PER_NODE", value: tresPerNode},
		{letter: 'B', names: []string{"BatchHost"}, header: "EXEC_HOST", value: str(batchHost)},
		{letter: 'c', names: []string{"MinCPUs"}, header: "MIN_CPUS", value: num(minCPUsPerNode)},
		{letter: 'C', names: []string{"NumCPUs"}, header: "CPUS", value: num(func(j *api.Job) int64 { return int64(numCPUs(j)) })},
		{letter: 'd', names: []string{"MinTmpDisk"}, header: "MIN_TMP_DISK", value: minTmpDisk},
		{letter: 'D', names: []string{"NumNodes"}, header: "NODES", value: num(func(j *api.Job) int64 { return int64(numNodes(j)) })},
		{letter: 'e', names: []string{"EndTime"}, header: "END_TIME", value: endTime},
		{letter: 'E', names: []string{"Dependency"}, header: "DEPENDENCY", value: str(func(j *api.Job) string { return slurmfmt.OrNull(j.Dependency) })},
		{letter: 'f', names: []string{"Feature"}, header: "FEATURES", value: str(func(j *api.Job) string { return slurmfmt.OrNull(j.Constraint) })},
		{letter: 'F', names: []string{"ArrayJobId"}, header: "ARRAY_JOB_ID", value: appendArrayJobID},
		{letter: 'g', names: []string{"GroupName"}, header: "GROUP", value: groupName},
		{letter: 'G', names: []string{"GroupId"}, header: "GROUP", value: num(func(j *api.Job) int64 { return int64(j.GroupID) })},
		{letter: 'h', names: []string{"OverSubscribe", "Shared"}, header: "OVER_SUBSCRIBE", value: str(overSubscribe)},
		{letter: 'H', names: []string{"Sockets"}, header: "SOCKETS_PER_NODE", value: constant("*")},
		{letter: 'i', names: []string{"JobArrayId"}, header: "JOBID", value: appendArrayID},
		{letter: 'I', names: []string{"Cores"}, header: "CORES_PER_SOCKET", value: constant("*")},
		{letter: 'j', names: []string{"Name"}, header: "NAME", value: str(func(j *api.Job) string { return j.Name })},
		{letter: 'J', names: []string{"Threads"}, header: "THREADS_PER_CORE", value: constant("*")},
		{letter: 'k', names: []string{"Comment"}, header: "COMMENT", value: str(func(j *api.Job) string { return slurmfmt.OrNull(j.Comment) })},
		{letter: 'K', names: []string{"ArrayTaskId"}, header: "ARRAY_TASK_ID", value: str(func(j *api.Job) string { return j.ArrayTaskString() })},
		{letter: 'l', names: []string{"TimeLimit"}, header: "TIME_LIMIT", noCut: true, value: timeLimit},
		{letter: 'L', names: []string{"TimeLeft"}, header: "TIME_LEFT", noCut: true, value: timeLeft},
		{letter: 'm', names: []string{"MinMemory"}, header: "MIN_MEMORY", value: minMemory},
		{letter: 'M', names: []string{"TimeUsed"}, header: "TIME", noCut: true, value: func(e *env, dst []byte, j *api.Job) []byte {
			return slurmfmt.AppendSecs(dst, e.used(j))
		}},
		{letter: 'n', names: []string{"ReqNodes"}, header: "REQ_NODES", noCut: true, value: str(func(j *api.Job) string { return hostlist.Compress(j.NodeList) })},
		{letter: 'N', names: []string{"NodeList"}, header: "NODELIST", noCut: true, headerNoCut: true, value: appendNodes},
		{letter: 'o', names: []string{"Command"}, header: "COMMAND", value: constant(slurmfmt.Null)},
		{letter: 'O', names: []string{"Contiguous"}, header: "CONTIGUOUS", value: constant("0")},
		{letter: 'p', names: []string{"Priority"}, header: "PRIORITY", value: priorityFloat},
		{letter: 'P', names: []string{"Partition"}, header: "PARTITION", value: str(func(j *api.Job) string { return j.ShownPartition() })},
		{letter: 'q', names: []string{"QOS"}, header: "QOS", value: str(func(j *api.Job) string { return slurmfmt.OrNull(j.QOS) })},
		{letter: 'Q', names: []string{"PriorityLong"}, header: "PRIORITY", value: num(func(j *api.Job) int64 { return int64(j.EffPriority) })},
		{letter: 'r', names: []string{"Reason"}, header: "REASON", value: str(reason)},
		{letter: 'R', names: []string{"ReasonList"}, header: "NODELIST(REASON)", noCut: true, headerNoCut: true, value: reasonList},
		{letter: 'S', names: []string{"StartTime"}, header: "START_TIME", value: stamp(startTime)},
		{letter: 't', names: []string{"StateCompact"}, header: "ST", value: str(func(j *api.Job) string { return j.State.Short() })},
		{letter: 'T', names: []string{"State"}, header: "STATE", value: str(func(j *api.Job) string { return string(j.State) })},
		{letter: 'u', names: []string{"UserName"}, header: "USER", value: userName},
		{letter: 'U', names: []string{"UserId"}, header: "UID", value: num(func(j *api.Job) int64 { return int64(j.UserID) })},
		{letter: 'v', names: []string{"Reservation"}, header: "RESERVATION", value: constant(slurmfmt.Null)},
		{letter: 'V', names: []string{"SubmitTime"}, header: "SUBMIT_TIME", value: stamp(func(_ *env, j *api.Job) time.Time { return j.SubmitTime })},
		{letter: 'w', names: []string{"WCKey"}, header: "WCKEY", value: constant(slurmfmt.Null)},
		{letter: 'W', names: []string{"Licenses"}, header: "LICENSES", value: constant(slurmfmt.Null)},
		{letter: 'x', names: []string{"ExcNodes"}, header: "EXC_NODES", noCut: true, value: str(func(j *api.Job) string { return hostlist.Compress(j.Exclude) })},
		{letter: 'X', names: []string{"CoreSpec"}, header: "CORE_SPEC", value: constant("N/A")},
		{letter: 'y', names: []string{"Nice"}, header: "NICE", value: num(func(j *api.Job) int64 { return int64(j.Nice) })},
		{letter: 'Y', names: []string{"SchedNodes"}, header: "SCHEDNODES", noCut: true, headerNoCut: true, value: constant(slurmfmt.Null)},
		{letter: 'z', names: []string{"SCT"}, header: "S:C:T", value: constant("*:*:*")},
		{letter: 'Z', names: []string{"WorkDir"}, header: "WORK_DIR", value: str(func(j *api.Job) string { return j.WorkDir })},

		{names: []string{"NumTasks"}, header: "TASKS", value: num(func(j *api.Job) int64 { return int64(numTasks(j)) })},
		{names: []string{"tres-per-job"}, header: "TRES_PER_JOB", value: tresPerJob},
		{names: []string{"tres-per-task"}, header: "TRES_PER_TASK", value: tresPerTask},
		{names: []string{"tres-alloc", "Tres"}, header: "TRES_ALLOC", value: func(_ *env, dst []byte, j *api.Job) []byte { return appendTRESAlloc(dst, j) }},
		{names: []string{"cpus-per-tres"}, header: "CPUS_PER_TRES", value: perGPU(func(j *api.Job) int64 { return int64(j.CPUsPerGPU) })},
		{names: []string{"mem-per-tres"}, header: "MEM_PER_TRES", value: perGPU(func(j *api.Job) int64 { return j.MemPerGPUMB })},
		{names: []string{"EligibleTime"}, header: "ELIGIBLE_TIME", value: stamp(func(_ *env, j *api.Job) time.Time { return j.EligibleTime })},
		{names: []string{"AccrueTime"}, header: "ACCRUE_TIME", value: stamp(func(_ *env, j *api.Job) time.Time { return j.EligibleTime })},
		{names: []string{"LastSchedEval"}, header: "LAST_SCHED_EVAL", value: stamp(func(_ *env, j *api.Job) time.Time { return j.LastSchedEval })},
		{names: []string{"PendingTime"}, header: "PENDING_TIME", value: pendingTime},
		{names: []string{"Deadline"}, header: "DEADLINE", value: constant("N/A")},
		{names: []string{"MinTime"}, header: "TIME_MIN", value: func(_ *env, dst []byte, j *api.Job) []byte { return slurmfmt.AppendSecs(dst, j.TimeMin) }},
		{names: []string{"StdOut"}, header: "STDOUT", value: str(stdoutPath)},
		{names: []string{"StdErr"}, header: "STDERR", value: str(stderrPath)},
		{names: []string{"StdIn"}, header: "STDIN", value: str(stdinPath)},
		{names: []string{"exit_code"}, header: "EXIT_CODE", value: num(rawExit)},
		{names: []string{"DerivedEC"}, header: "DERIVED_EC", value: num(rawExit)},
		{names: []string{"RestartCnt"}, header: "RESTART_COUNT", value: num(func(j *api.Job) int64 { return int64(j.Restarts) })},
		{names: []string{"Requeue"}, header: "REQUEUE", value: num(func(j *api.Job) int64 { return b2i(requeue(j)) })},
		{names: []string{"BatchFlag"}, header: "BATCH_FLAG", value: constant("1")},
		{names: []string{"Cluster"}, header: "CLUSTER", value: str(func(j *api.Job) string { return slurmfmt.OrNull(j.Cluster) })},
		{names: []string{"Reboot"}, header: "REBOOT", value: constant("0")},
		{names: []string{"CPUsPerTask", "cpus-per-task"}, header: "CPUS_PER_TASK", value: naIfZero(func(j *api.Job) int64 { return int64(j.CPUsPerTask) })},
		{names: []string{"NTPerNode"}, header: "NTASKS_PER_NODE", value: naIfZero(func(j *api.Job) int64 { return int64(j.TasksPerNode) })},
		{names: []string{"MaxNodes"}, header: "MAX_NODES", value: num(func(j *api.Job) int64 {
			if j.MaxNodes > 0 {
				return int64(j.MaxNodes)
			}
			return int64(numNodes(j))
		})},
		{names: []string{"MaxCPUs"}, header: "MAX_CPUS", value: num(func(j *api.Job) int64 { return int64(numCPUs(j)) })},
	}
}

// compileFormat compiles an -o (long=false) or -O (long=true) format.
// "%all" prints every letter, as Slurm does.
func compileFormat(format string, long bool, e *env) (*slurmfmt.Table[*api.Job], error) {
	var f slurmfmt.Format
	var err error
	if long {
		f, err = slurmfmt.ParseLong(format)
	} else if strings.EqualFold(format, "%all") {
		f = allFormat()
	} else {
		f, err = slurmfmt.ParseShort(format)
	}
	if err != nil {
		return nil, err
	}
	return slurmfmt.Compile(f, "job", func(name string) (slurmfmt.Field[*api.Job], bool) {
		jf, ok := jobFields.Lookup(name, long)
		if !ok {
			return slurmfmt.Field[*api.Job]{}, false
		}
		return slurmfmt.Field[*api.Job]{
			Header:      jf.header,
			NoCut:       jf.noCut,
			HeaderNoCut: jf.headerNoCut,
			Value:       func(dst []byte, j *api.Job) []byte { return jf.value(e, dst, j) },
		}, true
	})
}

func allFormat() slurmfmt.Format {
	var f slurmfmt.Format
	for _, c := range "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" {
		if _, ok := jobFields.ByLetter(string(c)); ok {
			f.Specs = append(f.Specs, slurmfmt.Spec{Name: string(c), Suffix: "|"})
		}
	}
	f.Specs[len(f.Specs)-1].Suffix = ""
	return f
}

// --- values ---

// used is the TIME column: zero while pending, now−start while running,
// end−start once ended.
func (e *env) used(j *api.Job) int64 {
	if j.StartTime.IsZero() || j.State == api.StatePending {
		return 0
	}
	if j.State == api.StateRunning || j.EndTime.IsZero() {
		return e.nowUnix - j.StartTime.Unix()
	}
	return j.EndTime.Unix() - j.StartTime.Unix()
}

func timeLimit(_ *env, dst []byte, j *api.Job) []byte {
	switch {
	case j.TimeLimit == api.Infinite:
		return append(dst, "UNLIMITED"...)
	case j.TimeLimit <= 0:
		return append(dst, "NOT_SET"...)
	}
	return slurmfmt.AppendSecs(dst, j.TimeLimit)
}

func timeLeft(e *env, dst []byte, j *api.Job) []byte {
	switch {
	case j.TimeLimit == api.Infinite:
		return append(dst, "UNLIMITED"...)
	case j.TimeLimit <= 0:
		return append(dst, "NOT_SET"...)
	}
	return slurmfmt.AppendSecs(dst, j.TimeLimit-e.used(j))
}

// startTime is when the job started, or for a pending job the expected
// start the controller's backfill estimated (squeue --start), else its
// --begin time.
func startTime(e *env, j *api.Job) time.Time {
	if j.State != api.StatePending {
		return j.StartTime
	}
	if !j.ExpectedStart.IsZero() {
		return j.ExpectedStart
	}
	return j.BeginTime
}

func endTime(e *env, dst []byte, j *api.Job) []byte {
	switch {
	case j.State.Terminal() || j.State == api.StateCompleting:
		return e.tf.AppendTimestamp(dst, j.EndTime, e.loc)
	case j.State == api.StateRunning && j.TimeLimit == api.Infinite:
		return append(dst, "NONE"...)
	case j.State == api.StateRunning && j.TimeLimit > 0 && !j.StartTime.IsZero():
		return e.tf.AppendTimestamp(dst, j.StartTime.Add(time.Duration(j.TimeLimit)*time.Second), e.loc)
	}
	return append(dst, "N/A"...)
}

func pendingTime(e *env, dst []byte, j *api.Job) []byte {
	if !j.StartTime.IsZero() && j.StartTime.Unix() < e.nowUnix {
		return strconv.AppendInt(dst, j.StartTime.Unix()-j.SubmitTime.Unix(), 10)
	}
	return strconv.AppendInt(dst, e.nowUnix-j.SubmitTime.Unix(), 10)
}

// reason is the Slurm reason word; held jobs without one get JobHeld*.
func reason(j *api.Job) string {
	if j.Reason != "" {
		return string(j.Reason)
	}
	if j.State == api.StatePending {
		switch j.HoldKind {
		case api.HoldUser:
			return string(api.ReasonJobHeldUser)
		case api.HoldAdmin:
			return string(api.ReasonJobHeldAdmin)
		}
	}
	return string(api.ReasonNone)
}

// showsReason reports whether %R prints "(Reason)" rather than nodes.
func showsReason(s api.JobState) bool {
	switch s {
	case api.StatePending, api.StateFailed, api.StateTimeout, api.StateOOM:
		return true
	}
	return false
}

// reasonList is %R: the nodes, or "(Reason)" for a job without them.
// A pending job held back by the sharing machinery also shows its
// decisive detail, as Slurm shows a job's state description there:
// "(QuotaExceeded: queue moba 48/48 GPUs)".
func reasonList(e *env, dst []byte, j *api.Job) []byte {
	if showsReason(j.State) {
		dst = append(dst, '(')
		dst = append(dst, reason(j)...)
		if d := jobfmt.DecisiveDetail(j.ReasonDetail); d != "" && j.State == api.StatePending && j.Reason.Sharing() {
			dst = append(dst, ": "...)
			dst = append(dst, d...)
		}
		return append(dst, ')')
	}
	return appendNodes(e, dst, j)
}

func appendNodes(_ *env, dst []byte, j *api.Job) []byte {
	switch len(j.Alloc) {
	case 0:
		return dst
	case 1:
		return append(dst, j.Alloc[0].Node...)
	}
	return append(dst, hostlist.Compress(j.NodeNames())...)
}

func batchHost(j *api.Job) string {
	if h := j.BatchHost(); h != "" {
		return h
	}
	return "n/a"
}

func userName(_ *env, dst []byte, j *api.Job) []byte {
	if j.User == "" {
		return strconv.AppendUint(dst, uint64(j.UserID), 10)
	}
	return append(dst, j.User...)
}

func groupName(_ *env, dst []byte, j *api.Job) []byte {
	if j.Group == "" {
		return strconv.AppendUint(dst, uint64(j.GroupID), 10)
	}
	return append(dst, j.Group...)
}

func overSubscribe(j *api.Job) string {
	if j.Exclusive {
		return "NO"
	}
	return "OK"
}

func priorityFloat(_ *env, dst []byte, j *api.Job) []byte {
	// C's "%16.14f" of the priority scaled to [0,1].
	var buf [32]byte
	v := strconv.AppendFloat(buf[:0], float64(j.EffPriority)/float64(uint32(0xffffffff)), 'f', 14, 64)
	for n := len(v); n < 16; n++ {
		dst = append(dst, ' ')
	}
	return append(dst, v...)
}

// reqCPUs is the CPU count a job asks for.
func reqCPUs(j *api.Job) int { return j.ReqCPUs() }

func numCPUs(j *api.Job) int {
	if len(j.Alloc) > 0 {
		return j.AllocCPUs()
	}
	return reqCPUs(j)
}

func numNodes(j *api.Job) int {
	if len(j.Alloc) > 0 {
		return len(j.Alloc)
	}
	return j.ReqNodes()
}

func numTasks(j *api.Job) int {
	if len(j.Alloc) > 0 {
		n := 0
		for _, a := range j.Alloc {
			n += a.Tasks
		}
		if n > 0 {
			return n
		}
	}
	return j.ReqTasks()
}

func minCPUsPerNode(j *api.Job) int64 { return int64(j.MinCPUsPerNode()) }

// minTmpDisk is %d: --tmp as Slurm's convert_num_unit writes MB ("0",
// "500M", "10G").
func minTmpDisk(_ *env, dst []byte, j *api.Job) []byte {
	if j.TmpDiskMB <= 0 {
		return append(dst, '0')
	}
	return slurmfmt.AppendMB(dst, j.TmpDiskMB)
}

func minMemory(_ *env, dst []byte, j *api.Job) []byte {
	mb := j.MemPerNodeMB
	if mb == 0 {
		mb = j.MemPerCPUMB
	}
	if mb <= 0 {
		return append(dst, '0')
	}
	return slurmfmt.AppendMB(dst, mb)
}

func rawExit(j *api.Job) int64 { return int64(j.Exit.Code)<<8 | int64(j.Exit.Signal&0x7f) }

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func requeue(j *api.Job) bool { return j.Requeue == nil || *j.Requeue }

// --- GPU and TRES strings ---

// appendGres appends Slurm 22.05's request form "gres:gpu[:type]:N".
func appendGres(dst []byte, j *api.Job, n int) []byte {
	dst = append(dst, "gres:gpu:"...)
	if j.GPUType != "" {
		dst = append(dst, j.GPUType...)
		dst = append(dst, ':')
	}
	return strconv.AppendInt(dst, int64(n), 10)
}

// appendGresOrNA appends a TRES field of count c: the GRES and slice
// size, or N/A for none.
func appendGresOrNA(dst []byte, j *api.Job, c int) []byte {
	if c > 0 {
		return appendSlice(appendGres(dst, j, c), j)
	}
	return append(dst, "N/A"...)
}

// appendSlice appends a sliced job's slice size (Tide):
// ",gpumem:8G,gpucompute:10", or ",shard:2" for --gres=shard.
func appendSlice(dst []byte, j *api.Job) []byte {
	if j.GPUShards > 0 {
		dst = append(dst, ",shard:"...)
		dst = strconv.AppendInt(dst, int64(j.GPUShards), 10)
	} else if j.GPUMemMB > 0 {
		dst = append(dst, ",gpumem:"...)
		dst = append(dst, api.FormatMemMB(j.GPUMemMB)...)
	}
	if j.GPUComputePct > 0 {
		dst = append(dst, ",gpucompute:"...)
		dst = strconv.AppendInt(dst, int64(j.GPUComputePct), 10)
	}
	return dst
}

// The TRES fields are functions rather than variables holding closures,
// which every CLI command would build in its package initialisation.

func tresPerJob(_ *env, dst []byte, j *api.Job) []byte {
	return appendGresOrNA(dst, j, j.GPUs)
}

func tresPerNode(_ *env, dst []byte, j *api.Job) []byte {
	n := j.GPUsPerNode
	if j.GPUsPerNode == 0 && j.GPUs == 0 && j.GPUsPerTask == 0 && j.Sliced() {
		n = 1 // a slice without a count is one per node
	}
	return appendGresOrNA(dst, j, n)
}

func tresPerTask(_ *env, dst []byte, j *api.Job) []byte {
	return appendGresOrNA(dst, j, j.GPUsPerTask)
}

func perGPU(f func(j *api.Job) int64) func(*env, []byte, *api.Job) []byte {
	return func(_ *env, dst []byte, j *api.Job) []byte {
		if v := f(j); v > 0 {
			dst = append(dst, "gres:gpu:"...)
			return strconv.AppendInt(dst, v, 10)
		}
		return append(dst, "N/A"...)
	}
}

func naIfZero(f func(j *api.Job) int64) func(*env, []byte, *api.Job) []byte {
	return func(_ *env, dst []byte, j *api.Job) []byte {
		if v := f(j); v > 0 {
			return strconv.AppendInt(dst, v, 10)
		}
		return append(dst, "N/A"...)
	}
}

// appendTRES appends "cpu=C[,mem=M],node=N,billing=C[,gres/gpu=G]".
func appendTRES(dst []byte, cpus int, memMB int64, nodes, gpus int) []byte {
	dst = append(dst, "cpu="...)
	dst = strconv.AppendInt(dst, int64(cpus), 10)
	if memMB > 0 {
		dst = append(dst, ",mem="...)
		dst = slurmfmt.AppendMB(dst, memMB)
	}
	dst = append(dst, ",node="...)
	dst = strconv.AppendInt(dst, int64(nodes), 10)
	dst = append(dst, ",billing="...)
	dst = strconv.AppendInt(dst, int64(cpus), 10)
	if gpus > 0 {
		dst = append(dst, ",gres/gpu="...)
		dst = strconv.AppendInt(dst, int64(gpus), 10)
	}
	return dst
}

// appendTRESReq appends what the job asks for (Slurm's tres_req_str).
func appendTRESReq(dst []byte, j *api.Job) []byte {
	cpus, nodes, gpus := reqCPUs(j), j.ReqNodes(), j.ReqGPUs()
	var mem int64
	switch {
	case j.MemPerNodeMB > 0:
		mem = j.MemPerNodeMB * int64(nodes)
	case j.MemPerCPUMB > 0:
		mem = j.MemPerCPUMB * int64(cpus)
	case j.MemPerGPUMB > 0:
		mem = j.MemPerGPUMB * int64(gpus)
	}
	return appendTRES(dst, cpus, mem, nodes, gpus)
}

// appendTRESAlloc appends what the job holds, or what it asks for when
// it holds nothing yet (squeue's TRES_ALLOC falls back the same way).
func appendTRESAlloc(dst []byte, j *api.Job) []byte {
	if len(j.Alloc) == 0 {
		return appendTRESReq(dst, j)
	}
	var mem int64
	for _, a := range j.Alloc {
		mem += a.MemoryMB
	}
	return appendTRES(dst, j.AllocCPUs(), mem, len(j.Alloc), j.AllocGPUs())
}

// --- output files ---

func patternVars(j *api.Job) api.PatternVars {
	node := ""
	if len(j.Alloc) > 0 {
		node = j.Alloc[0].Node
	}
	return j.PatternVars(node)
}

func outPath(j *api.Job, pattern string) string {
	p := api.ExpandPattern(pattern, patternVars(j))
	if strings.HasPrefix(p, "/") || j.WorkDir == "" {
		return p
	}
	return strings.TrimSuffix(j.WorkDir, "/") + "/" + p
}

func stdoutPath(j *api.Job) string {
	p := j.Stdout
	if p == "" {
		p = api.DefaultStdout
	}
	return outPath(j, p)
}

func stderrPath(j *api.Job) string {
	if j.Stderr == "" {
		return stdoutPath(j)
	}
	return outPath(j, j.Stderr)
}

func stdinPath(j *api.Job) string {
	if j.Stdin == "" {
		return "/dev/null"
	}
	return outPath(j, j.Stdin)
}
