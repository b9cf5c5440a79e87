package scontrol

import (
	"context"
	"fmt"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/jobfmt"
	"github.com/tide-hpc/tide/cli/slurmjson"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// scontrol --json prints Slurm's data_parser/v0.0.40 layout (see package
// slurmjson for why not 22.05's: scontrol had no --json then).

// jsonEnvelope is every --json answer: meta, errors and warnings come
// first, then the objects of the command (one of the pointer fields).
type jsonEnvelope struct {
	Meta         slurmjson.Meta      `json:"meta"`
	Errors       []slurmjson.Error   `json:"errors"`
	Warnings     []slurmjson.Warning `json:"warnings"`
	Jobs         *[]jsonJob          `json:"jobs,omitempty"`
	Nodes        *[]jsonNode         `json:"nodes,omitempty"`
	Partitions   *[]jsonPartition    `json:"partitions,omitempty"`
	Steps        *[]jsonStep         `json:"steps,omitempty"`
	Pings        *[]jsonPing         `json:"pings,omitempty"`
	Licenses     *[]struct{}         `json:"licenses,omitempty"`
	Reservations *[]struct{}         `json:"reservations,omitempty"`
	LastBackfill *slurmjson.Number   `json:"last_backfill,omitempty"`
	LastUpdate   *slurmjson.Number   `json:"last_update,omitempty"`
}

func (o *Options) envelope(cluster string) *jsonEnvelope {
	user, group := callerNames()
	return &jsonEnvelope{
		Meta:   slurmjson.NewMeta(o.Argv, user, group, cluster),
		Errors: []slurmjson.Error{}, Warnings: []slurmjson.Warning{},
	}
}

// callerNames names the user and group running the command, as the
// data_parser's meta.client does (numbers when they have no name);
// tests replace it.
var callerNames = func() (string, string) {
	uid, gid := strconv.Itoa(syscall.Getuid()), strconv.Itoa(syscall.Getgid())
	u, g := uid, gid
	if x, err := user.LookupId(uid); err == nil {
		u = x.Username
	}
	if x, err := user.LookupGroupId(gid); err == nil {
		g = x.Name
	}
	return u, g
}

// writeEnvelope prints e; a non-empty fail is reported in errors and
// makes the command exit 1 after printing (tools read the JSON either way).
func (o *Options) writeEnvelope(e *jsonEnvelope, fail string) error {
	if fail != "" {
		e.Errors = append(e.Errors, slurmjson.Error{Description: fail, Error: fail, Source: "scontrol"})
	}
	if err := cmdutil.WriteJSON(o.IO.Out, e); err != nil {
		return err
	}
	if fail != "" {
		return &cmdutil.SilentError{Code: cmdutil.ExitError}
	}
	return nil
}

// --- jobs ---

type jsonJob struct {
	Account               string             `json:"account"`
	AccrueTime            slurmjson.Number   `json:"accrue_time"`
	AdminComment          string             `json:"admin_comment"`
	AllocatingNode        string             `json:"allocating_node"`
	ArrayJobID            slurmjson.Number   `json:"array_job_id"`
	ArrayTaskID           slurmjson.Number   `json:"array_task_id"`
	ArrayMaxTasks         slurmjson.Number   `json:"array_max_tasks"`
	ArrayTaskString       string             `json:"array_task_string"`
	AssociationID         int                `json:"association_id"`
	BatchFeatures         string             `json:"batch_features"`
	BatchFlag             bool               `json:"batch_flag"`
	BatchHost             string             `json:"batch_host"`
	Flags                 []string           `json:"flags"`
	BurstBuffer           string             `json:"burst_buffer"`
	BurstBufferState      string             `json:"burst_buffer_state"`
	Cluster               string             `json:"cluster"`
	ClusterFeatures       string             `json:"cluster_features"`
	Command               string             `json:"command"`
	Comment               string             `json:"comment"`
	Container             string             `json:"container"`
	ContainerID           string             `json:"container_id"`
	Contiguous            bool               `json:"contiguous"`
	CoreSpec              int                `json:"core_spec"`
	ThreadSpec            int                `json:"thread_spec"`
	CoresPerSocket        slurmjson.Number   `json:"cores_per_socket"`
	BillableTRES          slurmjson.Float    `json:"billable_tres"`
	CPUsPerTask           slurmjson.Number   `json:"cpus_per_task"`
	CPUFrequencyMinimum   slurmjson.Number   `json:"cpu_frequency_minimum"`
	CPUFrequencyMaximum   slurmjson.Number   `json:"cpu_frequency_maximum"`
	CPUFrequencyGovernor  slurmjson.Number   `json:"cpu_frequency_governor"`
	CPUsPerTRES           string             `json:"cpus_per_tres"`
	Cron                  string             `json:"cron"`
	Deadline              slurmjson.Number   `json:"deadline"`
	DelayBoot             slurmjson.Number   `json:"delay_boot"`
	Dependency            string             `json:"dependency"`
	DerivedExitCode       slurmjson.ExitCode `json:"derived_exit_code"`
	EligibleTime          slurmjson.Number   `json:"eligible_time"`
	EndTime               slurmjson.Number   `json:"end_time"`
	ExcludedNodes         string             `json:"excluded_nodes"`
	ExitCode              slurmjson.ExitCode `json:"exit_code"`
	Extra                 string             `json:"extra"`
	FailedNode            string             `json:"failed_node"`
	Features              string             `json:"features"`
	FederationOrigin      string             `json:"federation_origin"`
	FederationActive      string             `json:"federation_siblings_active"`
	FederationViable      string             `json:"federation_siblings_viable"`
	GresDetail            []string           `json:"gres_detail"`
	GroupID               uint32             `json:"group_id"`
	GroupName             string             `json:"group_name"`
	HetJobID              slurmjson.Number   `json:"het_job_id"`
	HetJobIDSet           string             `json:"het_job_id_set"`
	HetJobOffset          slurmjson.Number   `json:"het_job_offset"`
	JobID                 uint64             `json:"job_id"`
	JobResources          *jsonJobResources  `json:"job_resources,omitempty"`
	JobSizeStr            []string           `json:"job_size_str"`
	JobState              []string           `json:"job_state"`
	LastSchedEvaluation   slurmjson.Number   `json:"last_sched_evaluation"`
	Licenses              string             `json:"licenses"`
	MailType              []string           `json:"mail_type"`
	MailUser              string             `json:"mail_user"`
	MaxCPUs               slurmjson.Number   `json:"max_cpus"`
	MaxNodes              slurmjson.Number   `json:"max_nodes"`
	MCSLabel              string             `json:"mcs_label"`
	MemoryPerTRES         string             `json:"memory_per_tres"`
	Name                  string             `json:"name"`
	Network               string             `json:"network"`
	Nodes                 string             `json:"nodes"`
	Nice                  int                `json:"nice"`
	TasksPerCore          slurmjson.Number   `json:"tasks_per_core"`
	TasksPerTRES          slurmjson.Number   `json:"tasks_per_tres"`
	TasksPerNode          slurmjson.Number   `json:"tasks_per_node"`
	TasksPerSocket        slurmjson.Number   `json:"tasks_per_socket"`
	TasksPerBoard         slurmjson.Number   `json:"tasks_per_board"`
	CPUs                  slurmjson.Number   `json:"cpus"`
	NodeCount             slurmjson.Number   `json:"node_count"`
	Tasks                 slurmjson.Number   `json:"tasks"`
	Partition             string             `json:"partition"`
	Prefer                string             `json:"prefer"`
	MemoryPerCPU          slurmjson.Number   `json:"memory_per_cpu"`
	MemoryPerNode         slurmjson.Number   `json:"memory_per_node"`
	MinimumCPUsPerNode    slurmjson.Number   `json:"minimum_cpus_per_node"`
	MinimumTmpDiskPerNode slurmjson.Number   `json:"minimum_tmp_disk_per_node"`
	Power                 struct {
		Flags []string `json:"flags"`
	} `json:"power"`
	PreemptTime             slurmjson.Number `json:"preempt_time"`
	PreemptableTime         slurmjson.Number `json:"preemptable_time"`
	PreSusTime              slurmjson.Number `json:"pre_sus_time"`
	Priority                slurmjson.Number `json:"priority"`
	Profile                 []string         `json:"profile"`
	QOS                     string           `json:"qos"`
	Reboot                  bool             `json:"reboot"`
	RequiredNodes           string           `json:"required_nodes"`
	MinimumSwitches         int              `json:"minimum_switches"`
	Requeue                 bool             `json:"requeue"`
	ResizeTime              slurmjson.Number `json:"resize_time"`
	RestartCnt              int              `json:"restart_cnt"`
	ResvName                string           `json:"resv_name"`
	ScheduledNodes          string           `json:"scheduled_nodes"`
	SELinuxContext          string           `json:"selinux_context"`
	Shared                  []string         `json:"shared"`
	Exclusive               []string         `json:"exclusive"`
	Oversubscribe           bool             `json:"oversubscribe"`
	ShowFlags               []string         `json:"show_flags"`
	SocketsPerBoard         int              `json:"sockets_per_board"`
	SocketsPerNode          slurmjson.Number `json:"sockets_per_node"`
	StartTime               slurmjson.Number `json:"start_time"`
	StateDescription        string           `json:"state_description"`
	StateReason             string           `json:"state_reason"`
	StandardError           string           `json:"standard_error"`
	StandardInput           string           `json:"standard_input"`
	StandardOutput          string           `json:"standard_output"`
	SubmitTime              slurmjson.Number `json:"submit_time"`
	SuspendTime             slurmjson.Number `json:"suspend_time"`
	SystemComment           string           `json:"system_comment"`
	TimeLimit               slurmjson.Number `json:"time_limit"`
	TimeMinimum             slurmjson.Number `json:"time_minimum"`
	ThreadsPerCore          slurmjson.Number `json:"threads_per_core"`
	TRESBind                string           `json:"tres_bind"`
	TRESFreq                string           `json:"tres_freq"`
	TRESPerJob              string           `json:"tres_per_job"`
	TRESPerNode             string           `json:"tres_per_node"`
	TRESPerSocket           string           `json:"tres_per_socket"`
	TRESPerTask             string           `json:"tres_per_task"`
	TRESReqStr              string           `json:"tres_req_str"`
	TRESAllocStr            string           `json:"tres_alloc_str"`
	UserID                  uint32           `json:"user_id"`
	UserName                string           `json:"user_name"`
	MaximumSwitchWaitTime   int64            `json:"maximum_switch_wait_time"`
	WCKey                   string           `json:"wckey"`
	CurrentWorkingDirectory string           `json:"current_working_directory"`
}

type jsonJobResources struct {
	Nodes          string          `json:"nodes"`
	AllocatedCores int             `json:"allocated_cores"`
	AllocatedCPUs  int             `json:"allocated_cpus"`
	AllocatedHosts int             `json:"allocated_hosts"`
	AllocatedNodes []jsonAllocNode `json:"allocated_nodes"`
}

type jsonAllocNode struct {
	Nodename        string `json:"nodename"`
	CPUsUsed        int    `json:"cpus_used"`
	MemoryUsed      int64  `json:"memory_used"`
	MemoryAllocated int64  `json:"memory_allocated"`
}

// jobJSON is one job in the data_parser layout.
func jobJSON(j *api.Job) jsonJob {
	stdout, stderr, stdin := jobfmt.StdPaths(j)
	requeue := j.Requeue == nil || *j.Requeue
	out := jsonJob{
		Account: j.Account, AccrueTime: slurmjson.Time(j.EligibleTime),
		AllocatingNode: j.SubmitHost,
		ArrayJobID:     slurmjson.Num(j.ArrayJobID), ArrayTaskID: slurmjson.Unset(), ArrayMaxTasks: slurmjson.Num(0),
		BatchFlag: true, BatchHost: j.BatchHost(), Flags: []string{},
		Cluster: j.Cluster, Comment: j.Comment,
		CoresPerSocket: slurmjson.Unset(), BillableTRES: slurmjson.Float{},
		CPUsPerTask:         slurmjson.Num(j.ReqCPUsPerTask()),
		CPUFrequencyMinimum: slurmjson.Unset(), CPUFrequencyMaximum: slurmjson.Unset(), CPUFrequencyGovernor: slurmjson.Unset(),
		Deadline: slurmjson.Num(0), DelayBoot: slurmjson.Num(0), Dependency: j.Dependency,
		DerivedExitCode: exitJSON(j, api.ExitStatus{}),
		EligibleTime:    slurmjson.Time(j.EligibleTime), EndTime: slurmjson.Time(endTime(j)),
		ExitCode: exitJSON(j, j.Exit), Features: j.Constraint,
		GresDetail: gresDetail(j), GroupID: j.GroupID, GroupName: jobfmt.NameOr(j.Group, j.GroupID),
		HetJobID: slurmjson.Num(0), HetJobOffset: slurmjson.Unset(),
		JobID: j.ID, JobSizeStr: []string{}, JobState: []string{string(j.State)},
		LastSchedEvaluation: slurmjson.Time(j.LastSchedEval),
		MailType:            mailTypes(j.MailType), MailUser: j.MailUser,
		MaxCPUs: slurmjson.Num(0), MaxNodes: slurmjson.Num(j.MaxNodes),
		Name: j.Name, Nodes: hostlist.Compress(j.NodeNames()), Nice: j.Nice,
		TasksPerCore: slurmjson.Unset(), TasksPerTRES: slurmjson.Unset(),
		TasksPerNode: slurmjson.Num(j.TasksPerNode), TasksPerSocket: slurmjson.Unset(), TasksPerBoard: slurmjson.Num(0),
		CPUs: slurmjson.Num(numCPUs(j)), Tasks: slurmjson.Num(j.ReqTasks()),
		Partition: j.Partition, MemoryPerCPU: slurmjson.Unset(), MemoryPerNode: slurmjson.Unset(),
		MinimumCPUsPerNode: slurmjson.Num(minCPUsNode(j)), MinimumTmpDiskPerNode: slurmjson.Num(j.TmpDiskMB),
		PreemptTime: slurmjson.Num(0), PreemptableTime: slurmjson.Num(0), PreSusTime: slurmjson.Num(0),
		Priority: slurmjson.Num(priority(j)), Profile: []string{"NOT_SET"}, QOS: j.QOS,
		RequiredNodes: hostlist.Compress(j.NodeList), Requeue: requeue,
		ResizeTime: slurmjson.Num(0), RestartCnt: j.Restarts,
		Shared: []string{}, Exclusive: []string{"false"}, ShowFlags: []string{"DETAIL", "LOCAL"},
		SocketsPerNode: slurmjson.Unset(), StartTime: slurmjson.Time(startTime(j)),
		StateDescription: j.ReasonDetail, StateReason: jobfmt.Reason(j),
		StandardError: stderr, StandardInput: stdin, StandardOutput: stdout,
		SubmitTime: slurmjson.Time(j.SubmitTime), SuspendTime: slurmjson.Num(0),
		TimeLimit: limitMinutes(j.TimeLimit), TimeMinimum: slurmjson.Num(j.TimeMin / 60),
		ThreadsPerCore: slurmjson.Unset(),
		TRESReqStr:     reqTRES(j), UserID: j.UserID, UserName: jobfmt.NameOr(j.User, j.UserID),
		CurrentWorkingDirectory: j.WorkDir,
	}
	out.Power.Flags = []string{}
	out.ExcludedNodes = hostlist.Compress(j.Exclude)
	if j.Exclusive {
		out.Shared, out.Exclusive = []string{"none"}, []string{"true"}
	}
	switch {
	case j.IsArrayMeta():
		out.ArrayTaskString, out.ArrayMaxTasks = j.ArrayPending.String(), slurmjson.Num(j.ArrayThrottle)
	case j.ArrayJobID != 0:
		out.ArrayTaskID = slurmjson.Num(j.ArrayTaskID)
	}
	if j.MemPerCPUMB > 0 {
		out.MemoryPerCPU = slurmjson.Num(j.MemPerCPUMB)
	} else {
		out.MemoryPerNode = slurmjson.Num(j.MemPerNodeMB)
	}
	out.NodeCount = slurmjson.Num(j.ReqNodes())
	if len(j.Alloc) > 0 {
		out.NodeCount = slurmjson.Num(len(j.Alloc))
		out.TRESAllocStr = jobTRES(j)
		out.BillableTRES = slurmjson.Float{Set: true, Number: float64(j.AllocCPUs())}
		res := &jsonJobResources{Nodes: out.Nodes, AllocatedCores: j.AllocCPUs(), AllocatedCPUs: j.AllocCPUs(),
			AllocatedHosts: len(j.Alloc), AllocatedNodes: []jsonAllocNode{}}
		for _, a := range j.Alloc {
			res.AllocatedNodes = append(res.AllocatedNodes, jsonAllocNode{Nodename: a.Node, CPUsUsed: a.CPUs,
				MemoryUsed: a.MemoryMB, MemoryAllocated: a.MemoryMB})
		}
		out.JobResources = res
	}
	if j.CPUsPerGPU > 0 {
		out.CPUsPerTRES = fmt.Sprintf("gres:gpu:%d", j.CPUsPerGPU)
	}
	if j.MemPerGPUMB > 0 {
		out.MemoryPerTRES = fmt.Sprintf("gres:gpu:%d", j.MemPerGPUMB)
	}
	gpus := func(n int) string {
		if n <= 0 {
			return ""
		}
		if j.GPUType != "" {
			return fmt.Sprintf("gres:gpu:%s:%d", j.GPUType, n)
		}
		return fmt.Sprintf("gres:gpu:%d", n)
	}
	out.TRESPerJob, out.TRESPerNode, out.TRESPerTask = gpus(j.GPUs), gpus(j.GPUsPerNode), gpus(j.GPUsPerTask)
	if j.Hold || j.HoldKind != "" {
		out.Priority = slurmjson.Num(0)
	}
	return out
}

// limitMinutes is a time limit in Slurm's minutes: infinite when
// unlimited, unset when none was given.
func limitMinutes(secs int64) slurmjson.Number {
	if secs == api.Infinite {
		return slurmjson.Infinite()
	}
	if m, ok := slurmjson.Minutes(secs); ok {
		return slurmjson.Num(m)
	}
	return slurmjson.Unset()
}

// exitJSON is the data_parser exit code of job j ended with e; a job
// that has not ended has none.
func exitJSON(j *api.Job, e api.ExitStatus) slurmjson.ExitCode {
	done := !j.State.Active() && j.State != api.StatePending
	return slurmjson.Exit(done, e.Code, e.Signal, signalName(e.Signal))
}

// signalName is a signal's name without SIG, as Slurm prints it.
func signalName(sig int) string {
	if name, ok := signalNames[sig]; ok {
		return name
	}
	if sig <= 0 {
		return ""
	}
	return strconv.Itoa(sig)
}

var signalNames = map[int]string{
	int(syscall.SIGHUP): "HUP", int(syscall.SIGINT): "INT", int(syscall.SIGQUIT): "QUIT",
	int(syscall.SIGABRT): "ABRT", int(syscall.SIGKILL): "KILL", int(syscall.SIGUSR1): "USR1",
	int(syscall.SIGSEGV): "SEGV", int(syscall.SIGUSR2): "USR2", int(syscall.SIGPIPE): "PIPE",
	int(syscall.SIGALRM): "ALRM", int(syscall.SIGTERM): "TERM", int(syscall.SIGCONT): "CONT",
	int(syscall.SIGSTOP): "STOP", int(syscall.SIGTSTP): "TSTP", int(syscall.SIGXCPU): "XCPU",
	int(syscall.SIGBUS): "BUS",
}

// mailTypes splits --mail-type into the data_parser's flag list.
func mailTypes(s string) []string {
	if s == "" || strings.EqualFold(s, "NONE") {
		return []string{}
	}
	return slurmjson.CSV(strings.ToUpper(s))
}

// reqTRES is the requested TRES string, as tres_req_str prints it.
func reqTRES(j *api.Job) string {
	cpus := jobfmt.ReqCPUs(j)
	return tres{cpu: cpus, memMB: jobfmt.ReqMemMB(j), node: j.ReqNodes(), billing: cpus, gpus: j.ReqGPUs()}.String()
}

// gresDetail lists the GPUs held on each node: "gpu:2(IDX:0-1)".
func gresDetail(j *api.Job) []string {
	out := []string{}
	for _, a := range j.Alloc {
		if len(a.GPUs) == 0 {
			continue
		}
		t := ""
		if j.GPUType != "" {
			t = j.GPUType + ":"
		}
		out = append(out, fmt.Sprintf("gpu:%s%d(IDX:%s)", t, len(a.GPUs), jobfmt.IdxRanges(a.GPUs)))
	}
	return out
}

func (o *Options) showJobJSON(ctx context.Context, c cmdutil.API, args []string) error {
	var jobs []api.Job
	var now time.Time
	info, err := c.Cluster(ctx)
	if err != nil {
		return fmt.Errorf("slurm_load_jobs error: %w", err)
	}
	e := o.envelope(info.Name)
	if len(args) == 1 {
		jobs, now, err = o.loadShownJobs(ctx, c, args[0])
		if err != nil {
			list := []jsonJob{}
			e.Jobs = &list
			return o.writeEnvelope(e, errInvalidJob)
		}
	} else {
		// As Slurm, finished jobs are listed until MinJobAge: the
		// controller keeps them that long.
		list, err := c.Jobs(ctx, api.JobFilter{All: true})
		if err != nil {
			return fmt.Errorf("slurm_load_jobs error: %w", err)
		}
		jobs, now = list.Jobs, list.Now
	}
	if now.IsZero() {
		now = info.Now
	}
	list := make([]jsonJob, 0, len(jobs))
	for i := range jobs {
		list = append(list, jobJSON(&jobs[i]))
	}
	e.Jobs = &list
	lb, lu := slurmjson.Time(now), slurmjson.Time(now)
	e.LastBackfill, e.LastUpdate = &lb, &lu
	return o.writeEnvelope(e, "")
}

// --- nodes ---

type jsonNode struct {
	Architecture     string           `json:"architecture"`
	BurstBufferAddr  string           `json:"burstbuffer_network_address"`
	Boards           int              `json:"boards"`
	BootTime         slurmjson.Number `json:"boot_time"`
	ClusterName      string           `json:"cluster_name"`
	Cores            int              `json:"cores"`
	SpecializedCores int              `json:"specialized_cores"`
	CPUBinding       int              `json:"cpu_binding"`
	CPULoad          int64            `json:"cpu_load"`
	FreeMem          slurmjson.Number `json:"free_mem"`
	CPUs             int              `json:"cpus"`
	EffectiveCPUs    int              `json:"effective_cpus"`
	SpecializedCPUs  string           `json:"specialized_cpus"`
	Extra            string           `json:"extra"`
	Features         []string         `json:"features"`
	ActiveFeatures   []string         `json:"active_features"`
	Gres             string           `json:"gres"`
	GresDrained      string           `json:"gres_drained"`
	GresUsed         string           `json:"gres_used"`
	InstanceID       string           `json:"instance_id"`
	InstanceType     string           `json:"instance_type"`
	LastBusy         slurmjson.Number `json:"last_busy"`
	MCSLabel         string           `json:"mcs_label"`
	SpecializedMem   int64            `json:"specialized_memory"`
	Name             string           `json:"name"`
	NextState        []string         `json:"next_state_after_reboot"`
	Address          string           `json:"address"`
	Hostname         string           `json:"hostname"`
	State            []string         `json:"state"`
	OperatingSystem  string           `json:"operating_system"`
	Owner            string           `json:"owner"`
	Partitions       []string         `json:"partitions"`
	Port             int              `json:"port"`
	RealMemory       int64            `json:"real_memory"`
	Comment          string           `json:"comment"`
	Reason           string           `json:"reason"`
	ReasonChangedAt  slurmjson.Number `json:"reason_changed_at"`
	ReasonSetByUser  string           `json:"reason_set_by_user"`
	ResumeAfter      slurmjson.Number `json:"resume_after"`
	Reservation      string           `json:"reservation"`
	AllocMemory      int64            `json:"alloc_memory"`
	AllocCPUs        int              `json:"alloc_cpus"`
	AllocIdleCPUs    int              `json:"alloc_idle_cpus"`
	TRESUsed         string           `json:"tres_used"`
	TRESWeighted     float64          `json:"tres_weighted"`
	SlurmdStartTime  slurmjson.Number `json:"slurmd_start_time"`
	Sockets          int              `json:"sockets"`
	Threads          int              `json:"threads"`
	TemporaryDisk    int64            `json:"temporary_disk"`
	Weight           int              `json:"weight"`
	TRES             string           `json:"tres"`
	Version          string           `json:"version"`
}

// nodeJSON is one node in the data_parser layout. As in show node, each
// CPU is a single-core socket: Tide models no cores.
func nodeJSON(n *api.Node, cluster string) jsonNode {
	addr := nodeAddr(n)
	model := n.GPUModel()
	out := jsonNode{
		Architecture: n.Arch, Boards: 1, BootTime: slurmjson.Time(n.BootTime), ClusterName: cluster,
		Cores: 1, CPUs: n.CPUs, EffectiveCPUs: n.CPUs,
		FreeMem: slurmjson.Unset(), Features: slices.Clone(n.Features), ActiveFeatures: slices.Clone(n.Features),
		LastBusy: slurmjson.Unset(), Name: n.Name, NextState: []string{}, Address: addr, Hostname: n.Hostname,
		State: strings.Split(n.LongState(), "+"), OperatingSystem: n.OS,
		Partitions: slices.Clone(n.Partitions), RealMemory: n.MemoryMB,
		Reason: n.Reason, ReasonChangedAt: slurmjson.Time(n.ReasonTime), ReasonSetByUser: n.ReasonUser,
		ResumeAfter: slurmjson.Unset(), AllocMemory: n.AllocMemMB, AllocCPUs: n.AllocCPUs,
		AllocIdleCPUs: n.CPUs - n.AllocCPUs, SlurmdStartTime: slurmjson.Time(n.Registered),
		Sockets: n.CPUs, Threads: 1, TemporaryDisk: n.TmpDiskMB, Weight: 1,
		TRES:     tres{cpu: n.CPUs, memMB: n.MemoryMB, billing: n.CPUs, gpus: len(n.GPUs)}.String(),
		TRESUsed: tres{cpu: n.AllocCPUs, memMB: n.AllocMemMB, gpus: n.GPUsInUse()}.String(),
		Version:  n.Version,
	}
	if out.Features == nil {
		out.Features, out.ActiveFeatures = []string{}, []string{}
	}
	if out.Partitions == nil {
		out.Partitions = []string{}
	}
	if !n.LastSeen.IsZero() && n.Responding {
		out.CPULoad = int64(n.CPULoad * 100)
		out.FreeMem = slurmjson.Num(n.FreeMemMB)
	}
	if len(n.GPUs) > 0 {
		out.Gres = gresString(model, len(n.GPUs))
		used := slices.Compact(slices.Sorted(slices.Values(n.AllocGPUs)))
		out.GresUsed = fmt.Sprintf("%s(IDX:%s)", gresString(model, len(used)), orDefault(jobfmt.IdxRanges(used), "N/A"))
	}
	return out
}

func (o *Options) showNodeJSON(ctx context.Context, c cmdutil.API, args []string) error {
	info, err := c.Cluster(ctx)
	if err != nil {
		return fmt.Errorf("slurm_load_node error: %w", err)
	}
	e := o.envelope(info.Name)
	nl, err := c.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("slurm_load_node error: %w", err)
	}
	nodes, fail := selectNodes(nl.Nodes, args)
	list := make([]jsonNode, 0, len(nodes))
	for i := range nodes {
		list = append(list, nodeJSON(&nodes[i], info.Name))
	}
	e.Nodes = &list
	lu := slurmjson.Time(nl.Now)
	e.LastUpdate = &lu
	return o.writeEnvelope(e, fail)
}

// selectNodes picks the nodes named by args[0] (a hostlist), or all; a
// name not found is reported, the others still listed.
func selectNodes(all []api.Node, args []string) ([]api.Node, string) {
	if len(args) == 0 {
		return all, ""
	}
	want, err := hostlist.Expand(args[0])
	if err != nil {
		return nil, fmt.Sprintf("invalid node list %q: %v", args[0], err)
	}
	byName := map[string]*api.Node{}
	for i := range all {
		byName[all[i].Name] = &all[i]
	}
	var out []api.Node
	for _, w := range want {
		n, ok := byName[w]
		if !ok {
			return out, fmt.Sprintf("Node %s not found", w)
		}
		out = append(out, *n)
	}
	return out, ""
}

// --- partitions ---

type jsonPartition struct {
	Nodes struct {
		AllowedAllocation string `json:"allowed_allocation"`
		Configured        string `json:"configured"`
		Total             int    `json:"total"`
	} `json:"nodes"`
	Accounts struct {
		Allowed string `json:"allowed"`
		Deny    string `json:"deny"`
	} `json:"accounts"`
	Groups struct {
		Allowed string `json:"allowed"`
	} `json:"groups"`
	QOS struct {
		Allowed  string `json:"allowed"`
		Deny     string `json:"deny"`
		Assigned string `json:"assigned"`
	} `json:"qos"`
	Alternate string `json:"alternate"`
	TRES      struct {
		BillingWeights string `json:"billing_weights"`
		Configured     string `json:"configured"`
	} `json:"tres"`
	Cluster string `json:"cluster"`
	CPUs    struct {
		TaskBinding int `json:"task_binding"`
		Total       int `json:"total"`
	} `json:"cpus"`
	Defaults struct {
		MemoryPerCPU int64            `json:"memory_per_cpu"`
		Time         slurmjson.Number `json:"time"`
		Job          string           `json:"job"`
	} `json:"defaults"`
	GraceTime int `json:"grace_time"`
	Maximums  struct {
		CPUsPerNode   slurmjson.Number `json:"cpus_per_node"`
		CPUsPerSocket slurmjson.Number `json:"cpus_per_socket"`
		MemoryPerCPU  int64            `json:"memory_per_cpu"`
		Nodes         slurmjson.Number `json:"nodes"`
		Shares        int              `json:"shares"`
		Time          slurmjson.Number `json:"time"`
		OverTimeLimit slurmjson.Number `json:"over_time_limit"`
	} `json:"maximums"`
	Minimums struct {
		Nodes int `json:"nodes"`
	} `json:"minimums"`
	Name     string `json:"name"`
	NodeSets string `json:"node_sets"`
	Priority struct {
		JobFactor int `json:"job_factor"`
		Tier      int `json:"tier"`
	} `json:"priority"`
	Timeouts struct {
		Resume  slurmjson.Number `json:"resume"`
		Suspend slurmjson.Number `json:"suspend"`
	} `json:"timeouts"`
	Partition struct {
		State []string `json:"state"`
	} `json:"partition"`
	SuspendTime slurmjson.Number `json:"suspend_time"`
}

func partitionJSON(p *api.Partition, nodes map[string]*api.Node, cluster string) jsonPartition {
	var out jsonPartition
	var t tres
	for _, name := range p.Nodes {
		if n, ok := nodes[name]; ok {
			t.cpu += n.CPUs
			t.memMB += n.MemoryMB
			t.gpus += len(n.GPUs)
		}
	}
	t.node, t.billing = len(p.Nodes), t.cpu
	expr := p.NodesExpr
	if expr == "" {
		expr = hostlist.Compress(p.Nodes)
	}
	a := &p.Access
	out.Nodes.AllowedAllocation = ""
	out.Nodes.Configured, out.Nodes.Total = expr, len(p.Nodes)
	out.Accounts.Allowed, out.Accounts.Deny = strings.Join(a.AllowAccounts, ","), strings.Join(a.DenyAccounts, ",")
	out.Groups.Allowed = strings.Join(a.AllowGroups, ",")
	out.QOS.Allowed, out.QOS.Deny = strings.Join(a.AllowQOS, ","), strings.Join(a.DenyQOS, ",")
	out.TRES.Configured = t.String()
	out.Cluster = cluster
	out.CPUs.Total = t.cpu
	out.Defaults.Time = limitMinutes(p.DefaultTime)
	var defs []string
	if p.DefCPUsPerGPU > 0 {
		defs = append(defs, fmt.Sprintf("DefCpuPerGPU=%d", p.DefCPUsPerGPU))
	}
	if p.DefMemPerGPUMB > 0 {
		defs = append(defs, fmt.Sprintf("DefMemPerGPU=%d", p.DefMemPerGPUMB))
	}
	out.Defaults.Job = strings.Join(defs, ",")
	out.Maximums.CPUsPerNode, out.Maximums.CPUsPerSocket = slurmjson.Infinite(), slurmjson.Infinite()
	out.Maximums.Nodes = slurmjson.Infinite()
	if p.MaxNodes > 0 {
		out.Maximums.Nodes = slurmjson.Num(p.MaxNodes)
	}
	out.Maximums.Shares = 1
	out.Maximums.Time = limitMinutes(p.MaxTime)
	if p.MaxTime <= 0 {
		out.Maximums.Time = slurmjson.Infinite()
	}
	out.Maximums.OverTimeLimit = slurmjson.Unset()
	out.Name = p.Name
	out.Priority.JobFactor, out.Priority.Tier = 1, max(p.Priority, 1)
	out.Timeouts.Resume, out.Timeouts.Suspend = slurmjson.Unset(), slurmjson.Unset()
	out.Partition.State = []string{strings.ToUpper(orDefault(p.State, "UP"))}
	if p.Default {
		out.Partition.State = append(out.Partition.State, "DEFAULT")
	}
	out.SuspendTime = slurmjson.Unset()
	return out
}

func (o *Options) showPartitionJSON(ctx context.Context, c cmdutil.API, args []string) error {
	info, err := c.Cluster(ctx)
	if err != nil {
		return fmt.Errorf("slurm_load_partitions error: %w", err)
	}
	e := o.envelope(info.Name)
	nl, err := c.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("slurm_load_partitions error: %w", err)
	}
	byName := map[string]*api.Node{}
	for i := range nl.Nodes {
		byName[nl.Nodes[i].Name] = &nl.Nodes[i]
	}
	list := []jsonPartition{}
	fail := ""
	for i := range nl.Partitions {
		if len(args) == 1 && nl.Partitions[i].Name != args[0] {
			continue
		}
		list = append(list, partitionJSON(&nl.Partitions[i], byName, info.Name))
	}
	if len(args) == 1 && len(list) == 0 {
		fail = fmt.Sprintf("Partition %s not found", args[0])
	}
	e.Partitions = &list
	lu := slurmjson.Time(nl.Now)
	e.LastUpdate = &lu
	return o.writeEnvelope(e, fail)
}

// --- ping, and what Tide has none of ---

type jsonPing struct {
	Hostname string `json:"hostname"`
	Pinged   string `json:"pinged"`
	Latency  int64  `json:"latency"`
	Mode     string `json:"mode"`
}

// clock times the ping; tests replace it.
var clock = time.Now

func (o *Options) pingJSON(ctx context.Context, c cmdutil.API) error {
	if p, ok := severalControllers(c); ok { // ping.go
		return o.pingAllJSON(ctx, p)
	}
	start := clock()
	info, err := c.Cluster(ctx)
	p := jsonPing{Hostname: ctldHost(info.Config, info.Name), Pinged: "UP", Mode: "primary",
		Latency: clock().Sub(start).Microseconds()}
	e := o.envelope(info.Name)
	fail := ""
	if err != nil {
		p.Pinged, fail = "DOWN", fmt.Sprintf("ping controller: %v", err)
	}
	e.Pings = &[]jsonPing{p}
	return o.writeEnvelope(e, fail)
}

// showNoneJSON answers show licenses and show reservations: Tide has
// neither, so the list is empty, as Slurm's with none configured.
func (o *Options) showNoneJSON(ctx context.Context, c cmdutil.API, what string) error {
	info, err := c.Cluster(ctx)
	if err != nil {
		return fmt.Errorf("slurm_load_%s error: %w", what, err)
	}
	e := o.envelope(info.Name)
	none := []struct{}{}
	if what == "licenses" {
		e.Licenses = &none
	} else {
		e.Reservations = &none
	}
	lu := slurmjson.Time(info.Now)
	e.LastUpdate = &lu
	return o.writeEnvelope(e, "")
}
