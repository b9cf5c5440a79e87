package sacct

import (
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/jobfmt"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// layout is how rows are laid out, after Slurm's print_fields_parsable_print.
type layout int

const (
	fixedWidth    layout = iota
	parsableEnd          // -p: every field followed by the delimiter
	parsableNoEnd        // -P: no delimiter after the last field
)

// writeTable prints the header (unless suppressed) and one line per row.
// Fixed-width cells end with a space, as Slurm's do, and the header is
// right-justified whatever the column's justification. Values are
// escaped (termsafe) before they are fitted, in every layout: names,
// comments and paths are other users' text and must not drive the
// reader's terminal or forge rows. The delimiter is the caller's and is
// printed as given.
func writeTable(w io.Writer, cols []column, rows []row, mode layout, delim string, header bool) error {
	var b strings.Builder
	sep := func(i int) string {
		if mode == parsableNoEnd && i == len(cols)-1 {
			return ""
		}
		return delim
	}
	if header {
		for i, c := range cols {
			if mode == fixedWidth {
				abs := absInt(c.width)
				b.WriteString(pad(clip(c.def.name, abs), abs, false))
				b.WriteByte(' ')
			} else {
				b.WriteString(c.def.name + sep(i))
			}
		}
		b.WriteByte('\n')
		if mode == fixedWidth {
			for _, c := range cols {
				b.WriteString(strings.Repeat("-", absInt(c.width)))
				b.WriteByte(' ')
			}
			b.WriteByte('\n')
		}
	}
	for i := range rows {
		r := &rows[i]
		for ci, c := range cols {
			v := ""
			if c.def.value != nil {
				v = termsafe.Escape(c.def.value(r))
			}
			if mode != fixedWidth {
				b.WriteString(v + sep(ci))
				continue
			}
			b.WriteString(fixedCell(c, v))
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fixedCell pads (and for text, truncates with '+') a value to its
// column, followed by the separating space.
func fixedCell(c column, v string) string {
	abs := absInt(c.width)
	switch c.def.kind {
	case kStr:
		if len(v) > abs && abs > 0 {
			v = v[:slurmfmt.CutLen(v, abs-1)] + "+"
		}
	case kDate:
		v = clip(v, abs)
	}
	return pad(v, abs, c.width < 0) + " "
}

// clip cuts s to at most n bytes, never inside a UTF-8 sequence.
func clip(s string, n int) string {
	return s[:slurmfmt.CutLen(s, n)]
}

func pad(s string, n int, left bool) string {
	if len(s) >= n {
		return s
	}
	fill := strings.Repeat(" ", n-len(s))
	if left {
		return s + fill
	}
	return fill + s
}

func absInt(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// --- JSON: a subset of Slurm 22.05's `sacct --json` (slurmdbd
// v0.0.38) shape, so that programs reading the common fields work. ---

type jsonDoc struct {
	Meta   jsonMeta  `json:"meta"`
	Errors []string  `json:"errors"`
	Jobs   []jsonJob `json:"jobs"`
}

type jsonMeta struct {
	Plugin struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"plugin"`
	Slurm struct {
		Version struct {
			Major int `json:"major"`
			Micro int `json:"micro"`
			Minor int `json:"minor"`
		} `json:"version"`
		Release string `json:"release"`
	} `json:"Slurm"`
}

type jsonExit struct {
	Status     string      `json:"status"`
	ReturnCode int         `json:"return_code"`
	Signal     *jsonSignal `json:"signal,omitempty"`
}

type jsonSignal struct {
	ID   int    `json:"signal_id"`
	Name string `json:"name"`
}

type jsonTime struct {
	Elapsed    int64 `json:"elapsed"`
	Eligible   int64 `json:"eligible"`
	End        int64 `json:"end"`
	Start      int64 `json:"start"`
	Submission int64 `json:"submission"`
	Suspended  int64 `json:"suspended"`
	// Limit is in minutes, 0 for none of the job's own, -1 for
	// UNLIMITED.
	Limit int64 `json:"limit"`
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

type jsonStep struct {
	Step struct {
		JobID uint64 `json:"job_id"`
		ID    string `json:"id"`
		Name  string `json:"name"`
	} `json:"step"`
	State    string   `json:"state"`
	ExitCode jsonExit `json:"exit_code"`
	Time     jsonTime `json:"time"`
	Nodes    struct {
		Count int    `json:"count"`
		Range string `json:"range"`
	} `json:"nodes"`
	Tasks struct {
		Count int `json:"count"`
	} `json:"tasks"`
	TRES jsonTRESSet `json:"tres"`
}

type jsonJob struct {
	Account         string `json:"account"`
	AllocationNodes int    `json:"allocation_nodes"`
	Cluster         string `json:"cluster"`
	Comment         struct {
		Administrator string `json:"administrator"`
		Job           string `json:"job"`
		System        string `json:"system"`
	} `json:"comment"`
	Constraints     string   `json:"constraints"`
	DerivedExitCode jsonExit `json:"derived_exit_code"`
	ExitCode        jsonExit `json:"exit_code"`
	Group           string   `json:"group"`
	JobID           uint64   `json:"job_id"`
	Name            string   `json:"name"`
	Nodes           string   `json:"nodes"`
	Partition       string   `json:"partition"`
	Priority        uint32   `json:"priority"`
	QOS             string   `json:"qos"`
	Required        struct {
		CPUs   int   `json:"CPUs"`
		Memory int64 `json:"memory"`
	} `json:"required"`
	Restarts int `json:"restart_cnt"`
	State    struct {
		Current string `json:"current"`
		Reason  string `json:"reason"`
	} `json:"state"`
	Steps            []jsonStep  `json:"steps"`
	Time             jsonTime    `json:"time"`
	TRES             jsonTRESSet `json:"tres"`
	User             string      `json:"user"`
	WorkingDirectory string      `json:"working_directory"`
}

func writeJSON(w io.Writer, jobs []api.Job, steps map[uint64][]api.StepRecord, now time.Time, loc *time.Location, cluster string, noSteps bool) error {
	doc := jsonDoc{Errors: []string{}, Jobs: []jsonJob{}}
	doc.Meta.Plugin.Type = "openapi/dbv0.0.38"
	doc.Meta.Plugin.Name = "Slurm OpenAPI slurmdbd v0.0.38 (Tide)"
	doc.Meta.Slurm.Version.Major, doc.Meta.Slurm.Version.Minor, doc.Meta.Slurm.Version.Micro = 22, 5, 8
	doc.Meta.Slurm.Release = "22.05.8"
	for i := range jobs {
		r := row{j: &jobs[i], now: now, loc: loc, cluster: cluster, derived: derivedExit(steps[jobs[i].ID])}
		jj := jobJSON(&r, noSteps)
		for k := range steps[jobs[i].ID] {
			if !noSteps {
				jj.Steps = append(jj.Steps, stepJSON(&jobs[i], &steps[jobs[i].ID][k], now, loc))
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
	out.AllocationNodes = len(j.Alloc)
	out.Cluster = r.clusterName()
	out.Comment.Job = j.Comment
	out.Constraints = j.Constraint
	out.DerivedExitCode = exitJSON(r.derived)
	out.ExitCode = exitJSON(j.Exit)
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
	out.Restarts = j.Restarts
	out.State.Current = string(j.State)
	out.State.Reason = jobfmt.Reason(j)
	out.Time = timeJSON(r)
	out.Time.Eligible = unix(j.EligibleTime)
	out.Time.Submission = unix(j.SubmitTime)
	switch {
	case j.TimeLimit == api.Infinite:
		out.Time.Limit = -1
	case j.TimeLimit > 0:
		out.Time.Limit = (j.TimeLimit + 59) / 60
	}
	var mem int64
	for _, a := range j.Alloc {
		mem += a.MemoryMB
	}
	if len(j.Alloc) > 0 {
		out.TRES.Allocated = tresJSON(j.AllocCPUs(), mem, len(j.Alloc), j.AllocCPUs(), j.AllocGPUs())
	} else {
		out.TRES.Allocated = []jsonTRES{}
	}
	cpus := jobfmt.ReqCPUs(j)
	out.TRES.Requested = tresJSON(cpus, jobfmt.ReqMemMB(j), j.ReqNodes(), cpus, j.ReqGPUs())
	out.User = jobfmt.NameOr(j.User, j.UserID)
	out.WorkingDirectory = j.WorkDir
	out.Steps = []jsonStep{}
	if !noSteps && !j.StartTime.IsZero() && len(j.Alloc) > 0 && !j.Allocation {
		var s jsonStep
		s.Step.JobID = j.ID
		s.Step.ID = strconv.FormatUint(j.ID, 10) + ".batch"
		s.Step.Name = "batch"
		s.State = string(j.State)
		s.ExitCode = exitJSON(j.Exit)
		s.Time = timeJSON(r)
		s.Time.Eligible, s.Time.Submission = unix(j.StartTime), unix(j.StartTime)
		a := j.Alloc[0]
		s.Nodes.Count, s.Nodes.Range = 1, a.Node
		s.Tasks.Count = 1
		s.TRES.Allocated = tresJSON(a.CPUs, a.MemoryMB, 1, 0, len(a.GPUs))
		s.TRES.Requested = []jsonTRES{}
		out.Steps = append(out.Steps, s)
	}
	return out
}

func timeJSON(r *row) jsonTime {
	return jsonTime{Elapsed: r.elapsed(), Start: unix(r.j.StartTime), End: unix(r.j.EndTime)}
}

func unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
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

func exitJSON(e api.ExitStatus) jsonExit {
	out := jsonExit{Status: "SUCCESS", ReturnCode: e.Code}
	switch {
	case e.Signal != 0:
		out.Status = "SIGNALED"
		out.Signal = &jsonSignal{ID: e.Signal, Name: signalName(e.Signal)}
	case e.Code != 0:
		out.Status = "FAILED"
	}
	return out
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
	var s jsonStep
	s.Step.JobID = j.ID
	s.Step.ID = r.jobIDRaw()
	s.Step.Name = st.Name
	s.State = string(st.State)
	s.ExitCode = exitJSON(st.Exit)
	s.Time = timeJSON(&r)
	s.Time.Eligible, s.Time.Submission = unix(st.Start), unix(st.Start)
	s.Nodes.Count, s.Nodes.Range = len(st.Nodes), hostlist.Compress(st.Nodes)
	s.Tasks.Count = st.NTasks
	s.TRES.Allocated = tresJSON(st.CPUs, 0, len(st.Nodes), 0, st.GPUs)
	s.TRES.Requested = []jsonTRES{}
	return s
}
