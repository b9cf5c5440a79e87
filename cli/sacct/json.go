package sacct

import (
	"io"
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

// sacct --json prints Slurm 22.05's slurmdbd answer (openapi/dbv0.0.38):
// meta, errors, then the jobs with the keys of dbv0.0.38's job and step
// in the order its parser writes them, plus the "warnings" list of
// later releases. Times are unix seconds (0 when unknown), the time
// limit minutes (-1 for UNLIMITED). Usage Tide does not record (CPU
// seconds, statistics) is 0.

type jsonDoc struct {
	Meta     slurmjson.Legacy    `json:"meta"`
	Errors   []slurmjson.Error   `json:"errors"`
	Warnings []slurmjson.Warning `json:"warnings"`
	Jobs     []jsonJob           `json:"jobs"`
}

// jsonExit is dbv0.0.38's exit code: status, return code, and the
// signal (with its strsignal text) when one ended the process.
type jsonExit struct {
	Status     string      `json:"status"`
	ReturnCode *int        `json:"return_code"`
	Signal     *jsonSignal `json:"signal,omitempty"`
}

type jsonSignal struct {
	ID   int    `json:"signal_id"`
	Name string `json:"name"`
}

type jsonSeconds struct {
	Seconds      int64 `json:"seconds"`
	Microseconds int64 `json:"microseconds"`
}

type jsonJobTime struct {
	Elapsed    int64       `json:"elapsed"`
	Eligible   int64       `json:"eligible"`
	End        int64       `json:"end"`
	Start      int64       `json:"start"`
	Submission int64       `json:"submission"`
	Suspended  int64       `json:"suspended"`
	System     jsonSeconds `json:"system"`
	// Limit is in minutes, 0 for none of the job's own, -1 for
	// UNLIMITED.
	Limit int64       `json:"limit"`
	Total jsonSeconds `json:"total"`
	User  jsonSeconds `json:"user"`
}

type jsonStepTime struct {
	Elapsed   int64       `json:"elapsed"`
	End       int64       `json:"end"`
	Start     int64       `json:"start"`
	Suspended int64       `json:"suspended"`
	System    jsonSeconds `json:"system"`
	Total     jsonSeconds `json:"total"`
	User      jsonSeconds `json:"user"`
}

type jsonTRES struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	ID    int    `json:"id"`
	Count int64  `json:"count"`
}

type jsonTRESSet struct {
	Allocated []jsonTRES `json:"allocated"`
	Requested []jsonTRES `json:"requested"`
}

type jsonTRESStats struct {
	Average []jsonTRES `json:"average"`
	Total   []jsonTRES `json:"total"`
}

type jsonStep struct {
	Time     jsonStepTime `json:"time"`
	ExitCode jsonExit     `json:"exit_code"`
	Nodes    struct {
		Count int    `json:"count"`
		Range string `json:"range"`
	} `json:"nodes"`
	Tasks struct {
		Count int `json:"count"`
	} `json:"tasks"`
	PID string `json:"pid"`
	CPU struct {
		RequestedFrequency struct {
			Min int `json:"min"`
			Max int `json:"max"`
		} `json:"requested_frequency"`
		Governor []string `json:"governor"`
	} `json:"CPU"`
	KillRequestUser *string `json:"kill_request_user"`
	State           string  `json:"state"`
	Statistics      struct {
		CPU struct {
			ActualFrequency int `json:"actual_frequency"`
		} `json:"CPU"`
		Energy struct {
			Consumed int `json:"consumed"`
		} `json:"energy"`
	} `json:"statistics"`
	Step struct {
		JobID uint64 `json:"job_id"`
		Het   struct {
			Component *int `json:"component"`
		} `json:"het"`
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"step"`
	Task struct {
		Distribution string `json:"distribution"`
	} `json:"task"`
	TRES struct {
		Requested jsonTRESStats `json:"requested"`
		Consumed  jsonTRESStats `json:"consumed"`
		Allocated []jsonTRES    `json:"allocated"`
	} `json:"tres"`
}

type jsonJob struct {
	Account string `json:"account"`
	Comment struct {
		Administrator string `json:"administrator"`
		Job           string `json:"job"`
		System        string `json:"system"`
	} `json:"comment"`
	AllocationNodes int `json:"allocation_nodes"`
	Array           struct {
		JobID  uint64 `json:"job_id"`
		Limits struct {
			Max struct {
				Running struct {
					Tasks int `json:"tasks"`
				} `json:"running"`
			} `json:"max"`
		} `json:"limits"`
		Task   string `json:"task"`
		TaskID *int   `json:"task_id"`
	} `json:"array"`
	Association struct {
		Account   string `json:"account"`
		Cluster   string `json:"cluster"`
		Partition string `json:"partition"`
		User      string `json:"user"`
	} `json:"association"`
	Cluster         string      `json:"cluster"`
	Constraints     string      `json:"constraints"`
	Container       string      `json:"container"`
	DerivedExitCode jsonExit    `json:"derived_exit_code"`
	Time            jsonJobTime `json:"time"`
	ExitCode        jsonExit    `json:"exit_code"`
	Flags           []string    `json:"flags"`
	Group           string      `json:"group"`
	Het             struct {
		JobID     uint64 `json:"job_id"`
		JobOffset *int   `json:"job_offset"`
	} `json:"het"`
	JobID uint64 `json:"job_id"`
	Name  string `json:"name"`
	MCS   struct {
		Label string `json:"label"`
	} `json:"mcs"`
	Nodes     string `json:"nodes"`
	Partition string `json:"partition"`
	Priority  uint32 `json:"priority"`
	QOS       string `json:"qos"`
	Required  struct {
		CPUs   int   `json:"CPUs"`
		Memory int64 `json:"memory"`
	} `json:"required"`
	KillRequestUser *string `json:"kill_request_user"`
	Reservation     struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	} `json:"reservation"`
	State struct {
		Current string `json:"current"`
		Reason  string `json:"reason"`
	} `json:"state"`
	Steps []jsonStep  `json:"steps"`
	TRES  jsonTRESSet `json:"tres"`
	User  string      `json:"user"`
	WCKey struct {
		WCKey string   `json:"wckey"`
		Flags []string `json:"flags"`
	} `json:"wckey"`
	WorkingDirectory string `json:"working_directory"`
}

// writeJSON writes sacct --json; stepsOf returns a job's srun steps.
func writeJSON(w io.Writer, jobs []api.Job, stepsOf func(*api.Job) []api.StepRecord, now time.Time, loc *time.Location, cluster string, noSteps bool) error {
	doc := jsonDoc{Meta: slurmjson.LegacyMeta("dbv0.0.38"), Errors: []slurmjson.Error{},
		Warnings: []slurmjson.Warning{}, Jobs: []jsonJob{}}
	for i := range jobs {
		steps := stepsOf(&jobs[i])
		r := row{j: &jobs[i], now: now, loc: loc, cluster: cluster, derived: derivedExit(steps)}
		jj := jobJSON(&r, noSteps)
		for k := range steps {
			if !noSteps {
				jj.Steps = append(jj.Steps, stepJSON(&jobs[i], &steps[k], now, loc))
			}
		}
		doc.Jobs = append(doc.Jobs, jj)
	}
	return cmdutil.WriteJSON(w, doc)
}

func jobJSON(r *row, noSteps bool) jsonJob {
	j := r.j
	var out jsonJob
	out.Account = j.Account
	out.Comment.Job = j.Comment
	out.AllocationNodes = len(j.Alloc)
	switch {
	case j.IsArrayMeta():
		out.Array.JobID, out.Array.Task = j.ArrayJobID, j.ArrayPending.String()
		out.Array.Limits.Max.Running.Tasks = j.ArrayThrottle
	case j.ArrayJobID != 0:
		out.Array.JobID = j.ArrayJobID
		id := j.ArrayTaskID
		out.Array.TaskID = &id
	}
	out.Cluster = r.clusterName()
	out.Association.Account, out.Association.Cluster = j.Account, out.Cluster
	out.Association.Partition, out.Association.User = j.Partition, jobfmt.NameOr(j.User, j.UserID)
	out.Constraints = j.Constraint
	out.DerivedExitCode = exitJSON(j, r.derived)
	out.Time = jsonJobTime{Elapsed: r.elapsed(), Eligible: slurmjson.Unix(j.EligibleTime),
		End: slurmjson.Unix(j.EndTime), Start: slurmjson.Unix(j.StartTime), Submission: slurmjson.Unix(j.SubmitTime)}
	switch {
	case j.TimeLimit == api.Infinite:
		out.Time.Limit = -1
	case j.TimeLimit > 0:
		out.Time.Limit = (j.TimeLimit + 59) / 60
	}
	out.ExitCode = exitJSON(j, j.Exit)
	out.Flags = []string{}
	out.Group = jobfmt.NameOr(j.Group, j.GroupID)
	out.JobID = j.ID
	out.Name = j.Name
	out.Nodes = hostlist.Compress(j.NodeNames())
	if out.Nodes == "" {
		out.Nodes = "None assigned"
	}
	out.Partition = j.Partition
	out.Priority = j.EffPriority
	out.QOS = j.QOS
	out.Required.CPUs = jobfmt.ReqCPUs(j)
	out.Required.Memory = jobfmt.ReqMemMB(j)
	out.State.Current = string(j.State)
	out.State.Reason = jobfmt.Reason(j)
	var mem int64
	for _, a := range j.Alloc {
		mem += a.MemoryMB
	}
	out.TRES.Allocated = []jsonTRES{}
	if len(j.Alloc) > 0 {
		out.TRES.Allocated = tresJSON(j.AllocCPUs(), mem, len(j.Alloc), j.AllocCPUs(), j.AllocGPUs())
	}
	cpus := jobfmt.ReqCPUs(j)
	out.TRES.Requested = tresJSON(cpus, jobfmt.ReqMemMB(j), j.ReqNodes(), cpus, j.ReqGPUs())
	out.User = jobfmt.NameOr(j.User, j.UserID)
	out.WCKey.Flags = []string{}
	out.WorkingDirectory = j.WorkDir
	out.Steps = []jsonStep{}
	if !noSteps && !j.StartTime.IsZero() && len(j.Alloc) > 0 && !j.Allocation {
		s := newStep(j.ID, strconv.FormatUint(j.ID, 10)+".batch", "batch")
		s.State = string(j.State)
		s.ExitCode = exitJSON(j, j.Exit)
		s.Time = jsonStepTime{Elapsed: r.elapsed(), Start: slurmjson.Unix(j.StartTime), End: slurmjson.Unix(j.EndTime)}
		a := j.Alloc[0]
		s.Nodes.Count, s.Nodes.Range = 1, a.Node
		s.Tasks.Count = 1
		s.TRES.Allocated = tresJSON(a.CPUs, a.MemoryMB, 1, 0, len(a.GPUs))
		out.Steps = append(out.Steps, s)
	}
	return out
}

func newStep(jobID uint64, id, name string) jsonStep {
	var s jsonStep
	s.Step.JobID, s.Step.ID, s.Step.Name = jobID, id, name
	s.CPU.Governor = []string{}
	s.TRES.Requested = jsonTRESStats{Average: []jsonTRES{}, Total: []jsonTRES{}}
	s.TRES.Consumed = jsonTRESStats{Average: []jsonTRES{}, Total: []jsonTRES{}}
	s.TRES.Allocated = []jsonTRES{}
	return s
}

// tresJSON lists TRES with Slurm's ids (cpu 1, mem 2, node 4, billing
// 5, gres/gpu 1001), leaving zero counts out.
func tresJSON(cpu int, memMB int64, node, billing, gpus int) []jsonTRES {
	out := []jsonTRES{}
	add := func(typ, name string, id int, n int64) {
		if n > 0 {
			out = append(out, jsonTRES{Type: typ, Name: name, ID: id, Count: n})
		}
	}
	add("cpu", "", 1, int64(cpu))
	add("mem", "", 2, memMB)
	add("node", "", 4, int64(node))
	add("billing", "", 5, int64(billing))
	add("gres", "gpu", 1001, int64(gpus))
	return out
}

// exitJSON is the exit code of job j as dbv0.0.38 prints it: PENDING
// before the job ends, SUCCESS or ERROR with the return code, SIGNALED
// with the signal and strsignal's text.
func exitJSON(j *api.Job, e api.ExitStatus) jsonExit {
	if j.State == api.StatePending || j.State.Active() {
		return jsonExit{Status: "PENDING"}
	}
	code := e.Code
	out := jsonExit{Status: "SUCCESS", ReturnCode: &code}
	switch {
	case e.Signal != 0:
		out = jsonExit{Status: "SIGNALED", Signal: &jsonSignal{ID: e.Signal, Name: strsignal(e.Signal)}}
	case e.Code != 0:
		out.Status = "ERROR"
	}
	return out
}

// strsignal is the C library's description of a signal ("Terminated"),
// which Slurm 22.05 prints as the signal's name.
func strsignal(sig int) string {
	s := syscall.Signal(sig).String()
	if s == "" || strings.HasPrefix(s, "signal ") {
		return "Unknown signal " + strconv.Itoa(sig)
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// signalNames are the short names Slurm prints ("TERM" for 15). An
// array, not a map: it needs no building when the program starts.
var signalNames = [...]string{1: "HUP", 2: "INT", 3: "QUIT", 4: "ILL", 5: "TRAP", 6: "ABRT",
	7: "BUS", 8: "FPE", 9: "KILL", 10: "USR1", 11: "SEGV", 12: "USR2", 13: "PIPE", 14: "ALRM",
	15: "TERM", 17: "CHLD", 18: "CONT", 19: "STOP", 20: "TSTP", 24: "XCPU", 25: "XFSZ"}

func signalName(sig int) string {
	if sig > 0 && sig < len(signalNames) && signalNames[sig] != "" {
		return signalNames[sig]
	}
	return strconv.Itoa(sig)
}

// stepJSON is an srun step of j in sacct --json.
func stepJSON(j *api.Job, st *api.StepRecord, now time.Time, loc *time.Location) jsonStep {
	r := row{j: stepJob(j, st), step: true, rec: st, now: now, loc: loc}
	s := newStep(j.ID, r.jobIDRaw(), st.Name)
	s.State = string(st.State)
	ended := *j
	ended.State = st.State
	s.ExitCode = exitJSON(&ended, st.Exit)
	s.Time = jsonStepTime{Elapsed: r.elapsed(), Start: slurmjson.Unix(r.j.StartTime), End: slurmjson.Unix(r.j.EndTime)}
	s.Nodes.Count, s.Nodes.Range = len(st.Nodes), hostlist.Compress(st.Nodes)
	s.Tasks.Count = st.NTasks
	s.TRES.Allocated = tresJSON(st.CPUs, 0, len(st.Nodes), 0, st.GPUs)
	return s
}
