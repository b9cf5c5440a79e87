package squeue

import (
	"bufio"
	"fmt"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/cli/slurmjson"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// jsonOutput is squeue --json: Slurm 22.05's openapi/v0.0.38 answer
// (meta, errors, then the jobs with every key of v0.0.38's job, in its
// order), plus the "warnings" list later Slurm releases add. Times are
// unix seconds (0 when unknown), time_limit is minutes; a value Tide
// does not know is null, as in Slurm's own output.
type jsonOutput struct {
	Meta     slurmjson.Legacy    `json:"meta"`
	Errors   []slurmjson.Error   `json:"errors"`
	Warnings []slurmjson.Warning `json:"warnings"`
	Jobs     []jsonJob           `json:"jobs"`
}

type jsonJob struct {
	Account                  string            `json:"account"`
	AccrueTime               int64             `json:"accrue_time"`
	AdminComment             string            `json:"admin_comment"`
	ArrayJobID               uint64            `json:"array_job_id"`
	ArrayTaskID              *int              `json:"array_task_id"`
	ArrayMaxTasks            int               `json:"array_max_tasks"`
	ArrayTaskString          string            `json:"array_task_string"`
	AssociationID            int               `json:"association_id"`
	BatchFeatures            string            `json:"batch_features"`
	BatchFlag                bool              `json:"batch_flag"`
	BatchHost                string            `json:"batch_host"`
	Flags                    []string          `json:"flags"`
	BurstBuffer              string            `json:"burst_buffer"`
	BurstBufferState         string            `json:"burst_buffer_state"`
	Cluster                  string            `json:"cluster"`
	ClusterFeatures          string            `json:"cluster_features"`
	Command                  string            `json:"command"`
	Comment                  string            `json:"comment"`
	Container                string            `json:"container"`
	Contiguous               bool              `json:"contiguous"`
	CoreSpec                 *int              `json:"core_spec"`
	ThreadSpec               *int              `json:"thread_spec"`
	CoresPerSocket           *int              `json:"cores_per_socket"`
	BillableTRES             *float64          `json:"billable_tres"`
	CPUsPerTask              *int              `json:"cpus_per_task"`
	CPUFrequencyMinimum      *int              `json:"cpu_frequency_minimum"`
	CPUFrequencyMaximum      *int              `json:"cpu_frequency_maximum"`
	CPUFrequencyGovernor     *int              `json:"cpu_frequency_governor"`
	CPUsPerTRES              string            `json:"cpus_per_tres"`
	Deadline                 int64             `json:"deadline"`
	DelayBoot                int64             `json:"delay_boot"`
	Dependency               string            `json:"dependency"`
	DerivedExitCode          int               `json:"derived_exit_code"`
	EligibleTime             int64             `json:"eligible_time"`
	EndTime                  int64             `json:"end_time"`
	ExcludedNodes            string            `json:"excluded_nodes"`
	ExitCode                 int               `json:"exit_code"`
	Features                 string            `json:"features"`
	FederationOrigin         string            `json:"federation_origin"`
	FederationSiblingsActive string            `json:"federation_siblings_active"`
	FederationSiblingsViable string            `json:"federation_siblings_viable"`
	GresDetail               []string          `json:"gres_detail"`
	GroupID                  uint32            `json:"group_id"`
	GroupName                string            `json:"group_name"`
	JobID                    uint64            `json:"job_id"`
	JobResources             *jsonJobResources `json:"job_resources,omitempty"`
	JobState                 string            `json:"job_state"`
	LastSchedEvaluation      int64             `json:"last_sched_evaluation"`
	Licenses                 string            `json:"licenses"`
	MaxCPUs                  int               `json:"max_cpus"`
	MaxNodes                 int               `json:"max_nodes"`
	MCSLabel                 string            `json:"mcs_label"`
	MemoryPerTRES            string            `json:"memory_per_tres"`
	Name                     string            `json:"name"`
	Nodes                    string            `json:"nodes"`
	Nice                     *int              `json:"nice"`
	TasksPerCore             *int              `json:"tasks_per_core"`
	TasksPerNode             int               `json:"tasks_per_node"`
	TasksPerSocket           *int              `json:"tasks_per_socket"`
	TasksPerBoard            int               `json:"tasks_per_board"`
	CPUs                     int               `json:"cpus"`
	NodeCount                int               `json:"node_count"`
	Tasks                    int               `json:"tasks"`
	HetJobID                 uint64            `json:"het_job_id"`
	HetJobIDSet              string            `json:"het_job_id_set"`
	HetJobOffset             int               `json:"het_job_offset"`
	Partition                string            `json:"partition"`
	Prefer                   string            `json:"prefer"`
	MemoryPerNode            *int64            `json:"memory_per_node"`
	MemoryPerCPU             *int64            `json:"memory_per_cpu"`
	MinimumCPUsPerNode       int64             `json:"minimum_cpus_per_node"`
	MinimumTmpDiskPerNode    int64             `json:"minimum_tmp_disk_per_node"`
	PreemptTime              int64             `json:"preempt_time"`
	PreSusTime               int64             `json:"pre_sus_time"`
	Priority                 uint32            `json:"priority"`
	Profile                  *string           `json:"profile"`
	QOS                      string            `json:"qos"`
	Reboot                   bool              `json:"reboot"`
	RequiredNodes            string            `json:"required_nodes"`
	Requeue                  bool              `json:"requeue"`
	ResizeTime               int64             `json:"resize_time"`
	RestartCnt               int               `json:"restart_cnt"`
	ResvName                 string            `json:"resv_name"`
	Shared                   *string           `json:"shared"`
	ShowFlags                []string          `json:"show_flags"`
	SocketsPerBoard          int               `json:"sockets_per_board"`
	SocketsPerNode           *int              `json:"sockets_per_node"`
	StartTime                int64             `json:"start_time"`
	StateDescription         string            `json:"state_description"`
	StateReason              string            `json:"state_reason"`
	StandardError            string            `json:"standard_error"`
	StandardInput            string            `json:"standard_input"`
	StandardOutput           string            `json:"standard_output"`
	SubmitTime               int64             `json:"submit_time"`
	SuspendTime              int64             `json:"suspend_time"`
	SystemComment            string            `json:"system_comment"`
	TimeLimit                *int64            `json:"time_limit"`
	TimeMinimum              int64             `json:"time_minimum"`
	ThreadsPerCore           *int              `json:"threads_per_core"`
	TRESBind                 string            `json:"tres_bind"`
	TRESFreq                 string            `json:"tres_freq"`
	TRESPerJob               string            `json:"tres_per_job"`
	TRESPerNode              string            `json:"tres_per_node"`
	TRESPerSocket            string            `json:"tres_per_socket"`
	TRESPerTask              string            `json:"tres_per_task"`
	TRESReqStr               string            `json:"tres_req_str"`
	TRESAllocStr             string            `json:"tres_alloc_str"`
	UserID                   uint32            `json:"user_id"`
	UserName                 string            `json:"user_name"`
	WCKey                    string            `json:"wckey"`
	CurrentWorkingDirectory  string            `json:"current_working_directory"`
}

// jsonJobResources is an allocated job's resources, as v0.0.38 prints
// them (a pending job has none). Tide models no sockets or cores: each
// node's CPUs are listed as its allocated cores of one socket.
type jsonJobResources struct {
	Nodes          string          `json:"nodes"`
	AllocatedCores int             `json:"allocated_cores"`
	AllocatedHosts int             `json:"allocated_hosts"`
	AllocatedNodes []jsonAllocNode `json:"allocated_nodes"`
}

type jsonAllocNode struct {
	Sockets         map[string]jsonSocket `json:"sockets"`
	Nodename        string                `json:"nodename"`
	CPUsUsed        int                   `json:"cpus_used"`
	MemoryUsed      int64                 `json:"memory_used"`
	MemoryAllocated int64                 `json:"memory_allocated"`
}

type jsonSocket struct {
	Cores map[string]string `json:"cores"`
}

// minutes converts a limit in seconds to Slurm's minutes, rounding up;
// none (nil) when unlimited or unset.
func minutes(secs int64) *int64 {
	m, ok := slurmjson.Minutes(secs)
	if !ok {
		return nil
	}
	return &m
}

func positive[T int | int64](v T) *T {
	if v <= 0 {
		return nil
	}
	return &v
}

// gres returns a request string ("gres:gpu:a100:2") or "" for none.
func gres(j *api.Job, n int) string {
	if n <= 0 {
		return ""
	}
	return string(appendGres(nil, j, n))
}

// gresDetail lists the GPUs held on each node: "gpu:2(IDX:0-1)".
func gresDetail(j *api.Job) []string {
	out := []string{}
	for _, a := range j.Alloc {
		if len(a.GPUs) == 0 {
			continue
		}
		b := []byte("gpu:")
		if j.GPUType != "" {
			b = append(append(b, j.GPUType...), ':')
		}
		b = fmt.Appendf(b, "%d(IDX:", len(a.GPUs))
		b = slurmfmt.AppendRanges(b, a.GPUs)
		out = append(out, string(append(b, ')')))
	}
	return out
}

func jobResources(j *api.Job, nodes string) *jsonJobResources {
	if len(j.Alloc) == 0 {
		return nil
	}
	r := &jsonJobResources{Nodes: nodes, AllocatedCores: j.AllocCPUs(), AllocatedHosts: len(j.Alloc),
		AllocatedNodes: make([]jsonAllocNode, 0, len(j.Alloc))}
	for _, a := range j.Alloc {
		cores := make(map[string]string, a.CPUs)
		for c := range a.CPUs {
			cores[fmt.Sprint(c)] = "allocated"
		}
		r.AllocatedNodes = append(r.AllocatedNodes, jsonAllocNode{
			Sockets: map[string]jsonSocket{"0": {Cores: cores}}, Nodename: a.Node,
			CPUsUsed: a.CPUs, MemoryAllocated: a.MemoryMB})
	}
	return r
}

func toJSON(j *api.Job, e *env) jsonJob {
	var task *int
	var taskStr string
	var maxTasks int
	switch {
	case j.IsArrayMeta():
		taskStr, maxTasks = j.ArrayPending.String(), j.ArrayThrottle
	case j.ArrayJobID != 0:
		task = &j.ArrayTaskID
	}
	nodes := string(appendNodes(e, nil, j))
	out := jsonJob{
		Account:                 j.Account,
		AccrueTime:              slurmjson.Unix(j.EligibleTime),
		ArrayJobID:              j.ArrayJobID,
		ArrayTaskID:             task,
		ArrayMaxTasks:           maxTasks,
		ArrayTaskString:         taskStr,
		BatchFlag:               true,
		BatchHost:               j.BatchHost(),
		Flags:                   []string{},
		Cluster:                 j.Cluster,
		Comment:                 j.Comment,
		CPUsPerTask:             positive(j.CPUsPerTask),
		Dependency:              j.Dependency,
		EligibleTime:            slurmjson.Unix(j.EligibleTime),
		EndTime:                 slurmjson.Unix(j.EndTime),
		ExitCode:                j.Exit.Code,
		Features:                j.Constraint,
		GresDetail:              gresDetail(j),
		GroupID:                 j.GroupID,
		GroupName:               j.Group,
		JobID:                   j.ID,
		JobResources:            jobResources(j, nodes),
		JobState:                string(j.State),
		LastSchedEvaluation:     slurmjson.Unix(j.LastSchedEval),
		MaxNodes:                j.MaxNodes,
		Name:                    j.Name,
		Nodes:                   nodes,
		Nice:                    &j.Nice,
		TasksPerNode:            j.TasksPerNode,
		CPUs:                    numCPUs(j),
		NodeCount:               numNodes(j),
		Tasks:                   numTasks(j),
		Partition:               j.Partition,
		MemoryPerNode:           positive(j.MemPerNodeMB),
		MemoryPerCPU:            positive(j.MemPerCPUMB),
		MinimumCPUsPerNode:      minCPUsPerNode(j),
		MinimumTmpDiskPerNode:   j.TmpDiskMB,
		Priority:                j.EffPriority,
		QOS:                     j.QOS,
		Requeue:                 requeue(j),
		RestartCnt:              j.Restarts,
		ShowFlags:               []string{"SHOW_ALL", "SHOW_DETAIL", "SHOW_LOCAL"},
		StartTime:               slurmjson.Unix(startTime(e, j)),
		StateDescription:        j.ReasonDetail,
		StateReason:             reason(j),
		StandardError:           stderrPath(j),
		StandardInput:           stdinPath(j),
		StandardOutput:          stdoutPath(j),
		SubmitTime:              slurmjson.Unix(j.SubmitTime),
		TimeLimit:               minutes(j.TimeLimit),
		TimeMinimum:             j.TimeMin / 60,
		TRESPerJob:              gres(j, j.GPUs),
		TRESPerNode:             gres(j, j.GPUsPerNode),
		TRESPerTask:             gres(j, j.GPUsPerTask),
		TRESReqStr:              string(appendTRESReq(nil, j)),
		TRESAllocStr:            string(appendTRESAlloc(nil, j)),
		UserID:                  j.UserID,
		UserName:                j.User,
		CurrentWorkingDirectory: j.WorkDir,
	}
	if len(j.Alloc) == 0 {
		// Slurm reports what it would allocate only once it has.
		out.TRESAllocStr = ""
	} else {
		b := float64(j.AllocCPUs())
		out.BillableTRES = &b
	}
	if len(j.NodeList) > 0 {
		out.RequiredNodes = hostlist.Compress(j.NodeList)
	}
	if len(j.Exclude) > 0 {
		out.ExcludedNodes = hostlist.Compress(j.Exclude)
	}
	if j.Exclusive {
		s := "none"
		out.Shared = &s
	}
	if j.CPUsPerGPU > 0 {
		out.CPUsPerTRES = fmt.Sprintf("gres:gpu:%d", j.CPUsPerGPU)
	}
	if j.MemPerGPUMB > 0 {
		out.MemoryPerTRES = fmt.Sprintf("gres:gpu:%d", j.MemPerGPUMB)
	}
	return out
}

func writeJSON(w *bufio.Writer, jobs []*api.Job, e *env) error {
	out := jsonOutput{Meta: slurmjson.LegacyMeta("v0.0.38"), Errors: []slurmjson.Error{},
		Warnings: []slurmjson.Warning{}, Jobs: make([]jsonJob, len(jobs))}
	for i, j := range jobs {
		out.Jobs[i] = toJSON(j, e)
	}
	return cmdutil.WriteJSON(w, out)
}
