package squeue

import (
	"bufio"
	"fmt"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// jsonOutput is squeue --json: Slurm's openapi layout, {"jobs": [...]},
// carrying the fields scripts read most. Times are unix seconds (0 when
// unknown) and time_limit is minutes (null when unlimited or unset).
type jsonOutput struct {
	Errors []string  `json:"errors"`
	Jobs   []jsonJob `json:"jobs"`
}

type jsonJob struct {
	Account                 string   `json:"account"`
	ArrayJobID              uint64   `json:"array_job_id"`
	ArrayMaxTasks           int      `json:"array_max_tasks"`
	ArrayTaskID             *int     `json:"array_task_id"`
	ArrayTaskString         string   `json:"array_task_string"`
	BatchHost               string   `json:"batch_host"`
	Cluster                 string   `json:"cluster"`
	Command                 string   `json:"command"`
	Comment                 string   `json:"comment"`
	CPUs                    int      `json:"cpus"`
	CPUsPerTask             *int     `json:"cpus_per_task"`
	CurrentWorkingDirectory string   `json:"current_working_directory"`
	Dependency              string   `json:"dependency"`
	EligibleTime            int64    `json:"eligible_time"`
	EndTime                 int64    `json:"end_time"`
	ExcludedNodes           string   `json:"excluded_nodes"`
	ExitCode                int      `json:"exit_code"`
	Features                string   `json:"features"`
	GresDetail              []string `json:"gres_detail"`
	GroupID                 uint32   `json:"group_id"`
	GroupName               string   `json:"group_name"`
	JobID                   uint64   `json:"job_id"`
	JobState                string   `json:"job_state"`
	LastSchedEvaluation     int64    `json:"last_sched_evaluation"`
	MaxNodes                int      `json:"max_nodes"`
	MemoryPerCPU            *int64   `json:"memory_per_cpu"`
	MemoryPerNode           *int64   `json:"memory_per_node"`
	MinimumCPUsPerNode      int64    `json:"minimum_cpus_per_node"`
	Name                    string   `json:"name"`
	Nice                    int      `json:"nice"`
	NodeCount               int      `json:"node_count"`
	Nodes                   string   `json:"nodes"`
	Partition               string   `json:"partition"`
	Priority                uint32   `json:"priority"`
	QOS                     string   `json:"qos"`
	Requeue                 bool     `json:"requeue"`
	RequiredNodes           string   `json:"required_nodes"`
	RestartCnt              int      `json:"restart_cnt"`
	Shared                  *string  `json:"shared"`
	StandardError           string   `json:"standard_error"`
	StandardInput           string   `json:"standard_input"`
	StandardOutput          string   `json:"standard_output"`
	StartTime               int64    `json:"start_time"`
	StateDescription        string   `json:"state_description"`
	StateReason             string   `json:"state_reason"`
	SubmitTime              int64    `json:"submit_time"`
	Tasks                   int      `json:"tasks"`
	TasksPerNode            int      `json:"tasks_per_node"`
	TimeLimit               *int64   `json:"time_limit"`
	TimeMinimum             int64    `json:"time_minimum"`
	TresAllocStr            string   `json:"tres_alloc_str"`
	TresPerJob              string   `json:"tres_per_job"`
	TresPerNode             string   `json:"tres_per_node"`
	TresPerTask             string   `json:"tres_per_task"`
	TresReqStr              string   `json:"tres_req_str"`
	UserID                  uint32   `json:"user_id"`
	UserName                string   `json:"user_name"`
}

func unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// minutes converts a limit in seconds to Slurm's minutes, rounding up.
func minutes(secs int64) *int64 {
	if secs <= 0 {
		return nil
	}
	m := (secs + 59) / 60
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
	out := jsonJob{
		ArrayTaskID:             task,
		ArrayMaxTasks:           maxTasks,
		ArrayTaskString:         taskStr,
		Account:                 j.Account,
		ArrayJobID:              j.ArrayJobID,
		BatchHost:               j.BatchHost(),
		Cluster:                 j.Cluster,
		Comment:                 j.Comment,
		CPUs:                    numCPUs(j),
		CPUsPerTask:             positive(j.CPUsPerTask),
		CurrentWorkingDirectory: j.WorkDir,
		Dependency:              j.Dependency,
		EligibleTime:            unix(j.EligibleTime),
		EndTime:                 unix(j.EndTime),
		ExitCode:                j.Exit.Code,
		Features:                j.Constraint,
		GresDetail:              gresDetail(j),
		GroupID:                 j.GroupID,
		GroupName:               j.Group,
		JobID:                   j.ID,
		JobState:                string(j.State),
		LastSchedEvaluation:     unix(j.LastSchedEval),
		MaxNodes:                j.MaxNodes,
		MemoryPerCPU:            positive(j.MemPerCPUMB),
		MemoryPerNode:           positive(j.MemPerNodeMB),
		MinimumCPUsPerNode:      minCPUsPerNode(j),
		Name:                    j.Name,
		Nice:                    j.Nice,
		NodeCount:               numNodes(j),
		Nodes:                   string(appendNodes(e, nil, j)),
		Partition:               j.Partition,
		Priority:                j.EffPriority,
		QOS:                     j.QOS,
		Requeue:                 requeue(j),
		RestartCnt:              j.Restarts,
		StandardError:           stderrPath(j),
		StandardInput:           stdinPath(j),
		StandardOutput:          stdoutPath(j),
		StartTime:               unix(startTime(e, j)),
		StateDescription:        j.ReasonDetail,
		StateReason:             reason(j),
		SubmitTime:              unix(j.SubmitTime),
		Tasks:                   numTasks(j),
		TasksPerNode:            j.TasksPerNode,
		TimeLimit:               minutes(j.TimeLimit),
		TimeMinimum:             j.TimeMin / 60,
		TresAllocStr:            string(appendTRESAlloc(nil, j)),
		TresPerJob:              gres(j, j.GPUs),
		TresPerNode:             gres(j, j.GPUsPerNode),
		TresPerTask:             gres(j, j.GPUsPerTask),
		TresReqStr:              string(appendTRESReq(nil, j)),
		UserID:                  j.UserID,
		UserName:                j.User,
	}
	if len(j.Alloc) == 0 {
		// Slurm reports what it would allocate only once it has.
		out.TresAllocStr = ""
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
	return out
}

func writeJSON(w *bufio.Writer, jobs []*api.Job, e *env) error {
	out := jsonOutput{Errors: []string{}, Jobs: make([]jsonJob, len(jobs))}
	for i, j := range jobs {
		out.Jobs[i] = toJSON(j, e)
	}
	return cmdutil.WriteJSON(w, out)
}
