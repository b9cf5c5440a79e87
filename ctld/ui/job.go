package ui

import (
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// The job page: what the job asked for, where it runs and why there
// (Tide:Placement), its whole trail (tide events), its output paths,
// and what it uses, over time where the controller keeps a series.

// jobView is the job page's data.
type jobView struct {
	ID, Name, State, StateClass string
	Reason, ReasonHelp, Detail  string
	Mine                        bool
	Request                     []kv
	Times                       []kv
	Placement                   string
	Alloc                       []allocRow
	Output                      []kv
	Events                      []eventRow
	EventsErr                   string
	Usage                       usageView
}

// kv is one labelled value.
type kv struct {
	K, V, Title string
}

// allocRow is the job's share of one node.
type allocRow struct {
	Node, CPUs, Memory, GPUs, Slice, NUMA, Tasks string
}

// eventRow is one entry of the trail.
type eventRow struct {
	Time, Kind, State, Reason, Message, Actor string
}

// usageView is the job's usage section.
type usageView struct {
	Hidden string
	GPUs   []gpuRow
	Steps  []stepRow
	Charts []template.HTML
	// NoSeries says why there is no chart.
	NoSeries string
}

// gpuRow is one of the job's GPUs now.
type gpuRow struct {
	Where, Model, Util, Memory, Slice string
	UtilBar, MemBar                   template.HTML
	Unhealthy                         bool
}

// stepRow is one step's usage.
type stepRow struct {
	Step, Tasks, CPU, MaxRSS, GPUUtil, GPUMem string
	Final                                     bool
}

func (h *Handler) serveJobSearch(w http.ResponseWriter, r *http.Request) {
	raw := strings.TrimSpace(r.URL.Query().Get("id"))
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || id == 0 {
		h.fail(w, r, errBadParam("job id", raw, "a job id (a number)"))
		return
	}
	http.Redirect(w, r, Prefix+"jobs/"+strconv.FormatUint(id, 10), http.StatusSeeOther)
}

func (h *Handler) serveJob(w http.ResponseWriter, r *http.Request) {
	h.page(w, r, "job", "", func(rq *request) (string, any, error) {
		raw := r.PathValue("id")
		id, err := strconv.ParseUint(raw, 10, 64)
		if err != nil || id == 0 {
			return "", nil, errBadParam("job id", raw, "a job id (a number)")
		}
		j, err := h.src.Job(r, id)
		if err != nil {
			return "", nil, err
		}
		v := jobViewOf(&j, rq.cl.Now, rq.who.User)
		ev, err := h.src.Events(r, id)
		if err != nil {
			v.EventsErr = err.Error()
		}
		for _, e := range ev {
			v.Events = append(v.Events, eventRow{Time: fmtTime(e.Time), Kind: e.Kind, State: string(e.State),
				Reason: e.Reason, Message: e.Message, Actor: e.Actor})
		}
		v.Usage = usageViewOf(&j, h.src.Usage(r, &j), rq.cl.Now)
		return "Job " + v.ID, v, nil
	})
}

// jobViewOf builds the page's request, times, placement and output
// sections from the job record.
func jobViewOf(j *api.Job, now time.Time, me string) jobView {
	v := jobView{ID: j.ArrayID(), Name: j.Name, State: string(j.State), StateClass: stateClass(j.State),
		Detail: j.ReasonDetail, Placement: j.Placement, Mine: j.User == me && me != ""}
	v.Reason, v.ReasonHelp = reasonText(j)
	add := func(list *[]kv, k, val, title string) {
		if val != "" {
			*list = append(*list, kv{K: k, V: val, Title: title})
		}
	}
	r := &v.Request
	add(r, "User", j.User+" ("+strconv.FormatUint(uint64(j.UserID), 10)+")", "")
	add(r, "Group", j.Group, "")
	add(r, "Queue", j.Account, "the queue (Slurm account) the job is charged to")
	add(r, "QOS", j.QOS, "the job class")
	if j.Level > 0 {
		add(r, "Level", strconv.Itoa(j.Level), "priority level, 1 to 10")
	}
	add(r, "Priority", strconv.FormatUint(uint64(j.EffPriority), 10), "the priority the scheduler orders by")
	part := j.Partition
	if j.PartitionList != "" {
		part = j.PartitionList
	}
	add(r, "Partition", part, "")
	add(r, "Nodes", strconv.Itoa(j.ReqNodes())+nodeRange(j), "")
	add(r, "Tasks", strconv.Itoa(j.ReqTasks()), "")
	add(r, "CPUs per task", strconv.Itoa(j.ReqCPUsPerTask()), "")
	add(r, "Memory", memRequest(j), "")
	add(r, "GPUs", gpuRequest(j), "")
	add(r, "Time limit", fmtLimit(j.TimeLimit), "")
	add(r, "Constraint", j.Constraint, "")
	add(r, "Communication", j.Comm, "--comm: model needs each node's GPUs in one NVLink domain")
	if j.Switches > 0 {
		add(r, "Switches", strconv.Itoa(j.Switches), "")
	}
	if len(j.NodeList) > 0 {
		add(r, "Required nodes", strings.Join(j.NodeList, ","), "")
	}
	if len(j.Exclude) > 0 {
		add(r, "Excluded nodes", strings.Join(j.Exclude, ","), "")
	}
	add(r, "Dependency", j.Dependency, "")
	add(r, "Array", j.Array, "")
	add(r, "Container", j.ContainerImage, "")
	if j.Exclusive {
		add(r, "Exclusive", "yes", "")
	}
	if j.Restarts > 0 {
		add(r, "Restarts", strconv.Itoa(j.Restarts), "")
	}
	if j.Preemptions > 0 {
		add(r, "Preemptions", strconv.Itoa(j.Preemptions), "")
	}
	if j.HoldKind != api.HoldNone {
		add(r, "Held", string(j.HoldKind)+" hold", "")
	}

	t := &v.Times
	add(t, "Submitted", fmtTime(j.SubmitTime), "")
	add(t, "Eligible", fmtTime(j.EligibleTime), "")
	if j.State == api.StatePending {
		switch {
		case !j.ExpectedStart.IsZero():
			add(t, "Planned start", fmtTime(j.ExpectedStart), "the scheduler's plan (squeue --start)")
		case !j.BeginTime.IsZero():
			add(t, "Not before", fmtTime(j.BeginTime), "--begin")
		default:
			add(t, "Planned start", "N/A", "the scheduler has no estimate yet")
		}
		add(t, "Waiting", fmtSecs(int64(now.Sub(j.SubmitTime)/time.Second)), "")
	}
	add(t, "Started", fmtTime(j.StartTime), "")
	if j.State.Active() && !j.StartTime.IsZero() {
		add(t, "Running", fmtSecs(int64(now.Sub(j.StartTime)/time.Second)), "")
		if j.TimeLimit > 0 && j.TimeLimit != api.Infinite {
			add(t, "Ends by", fmtTime(j.StartTime.Add(time.Duration(j.TimeLimit)*time.Second)), "start plus time limit")
		}
	}
	add(t, "Ended", fmtTime(j.EndTime), "")
	if j.State.Terminal() {
		add(t, "Exit", j.Exit.String(), "exit code:signal")
	}
	add(t, "Last evaluated", fmtTime(j.LastSchedEval), "when the scheduler last looked at the job")

	for _, a := range j.Alloc {
		row := allocRow{Node: a.Node, CPUs: strconv.Itoa(a.CPUs), Memory: fmtMB(a.MemoryMB), Tasks: strconv.Itoa(a.Tasks)}
		gs := make([]string, len(a.GPUs))
		for i, g := range a.GPUs {
			gs[i] = strconv.Itoa(g)
		}
		row.GPUs = strings.Join(gs, ",")
		if a.Sliced() {
			var p []string
			if a.GPUMemMB > 0 {
				p = append(p, fmtMB(a.GPUMemMB))
			}
			if a.GPUComputePct > 0 {
				p = append(p, strconv.Itoa(a.GPUComputePct)+" %")
			}
			row.Slice = strings.Join(p, ", ")
		}
		ns := make([]string, len(a.NUMA))
		for i, n := range a.NUMA {
			ns[i] = strconv.Itoa(n)
		}
		row.NUMA = strings.Join(ns, ",")
		v.Alloc = append(v.Alloc, row)
	}

	stdout, stderr, stdin := j.StdPaths()
	o := &v.Output
	add(o, "Work directory", j.WorkDir, "")
	add(o, "Standard output", stdout, "")
	add(o, "Standard error", stderr, "")
	add(o, "Standard input", stdin, "")
	return v
}

// nodeRange is "-N" of a node range request ("" otherwise).
func nodeRange(j *api.Job) string {
	if j.MaxNodes > j.Nodes && j.Nodes > 0 {
		return "-" + strconv.Itoa(j.MaxNodes)
	}
	return ""
}

// memRequest describes the job's memory request.
func memRequest(j *api.Job) string {
	switch {
	case j.MemPerNodeMB == api.MemWholeNode:
		return "all of each node"
	case j.MemPerNodeMB > 0:
		return fmtMB(j.MemPerNodeMB) + " per node"
	case j.MemPerCPUMB > 0:
		return fmtMB(j.MemPerCPUMB) + " per CPU"
	case j.MemPerGPUMB > 0:
		return fmtMB(j.MemPerGPUMB) + " per GPU"
	}
	return "partition default"
}

// usageViewOf builds the usage section: the GPUs now, the steps, and
// charts of the series when the controller keeps one.
func usageViewOf(j *api.Job, u JobUsage, now time.Time) usageView {
	v := usageView{Hidden: u.Hidden}
	if u.Hidden != "" {
		return v
	}
	for _, g := range u.GPUs {
		row := gpuRow{Where: g.Node + " GPU " + strconv.Itoa(g.Index), Model: g.Model, Unhealthy: !g.Healthy}
		if g.Slice {
			var p []string
			if g.SliceMemMB > 0 {
				p = append(p, fmtMB(g.SliceMemMB))
			}
			if g.SlicePct > 0 {
				p = append(p, strconv.Itoa(g.SlicePct)+" %")
			}
			row.Slice = "slice " + strings.Join(p, ", ")
		}
		if g.Known {
			row.Util = strconv.Itoa(g.UtilPct) + " %"
			row.UtilBar = bar(float64(g.UtilPct), 100)
			row.Memory = fmtMB(g.MemUsedMB)
			if g.MemoryMB > 0 {
				row.Memory += " of " + fmtMB(g.MemoryMB)
				row.MemBar = bar(float64(g.MemUsedMB), float64(g.MemoryMB))
			}
		} else {
			row.Util, row.Memory = "not reported", "not reported"
		}
		v.GPUs = append(v.GPUs, row)
	}
	for _, s := range u.Steps {
		row := stepRow{Step: strconv.FormatUint(uint64(s.StepID), 10), Tasks: strconv.Itoa(s.Tasks) + " on " + strconv.Itoa(s.Nodes),
			CPU: fmtSecs(int64((s.UserUsec + s.SystemUsec) / 1e6)), MaxRSS: fmtBytes(s.RSS.Max), Final: s.Final}
		if s.StepID == api.BatchStepID {
			row.Step = "batch"
		}
		if s.GPU {
			row.GPUUtil = strconv.FormatUint(s.GPUUtil.Max, 10) + " %"
			row.GPUMem = fmtBytes(s.GPUMem.Max)
		}
		v.Steps = append(v.Steps, row)
	}
	if len(u.Series) == 0 {
		switch {
		case j.State == api.StatePending:
			v.NoSeries = "The job has not started."
		default:
			v.NoSeries = "The controller keeps no usage history for this job; the values above are the latest reports."
		}
		return v
	}
	from, to := u.Series[0].Time, u.Series[len(u.Series)-1].Time
	if j.State.Active() {
		to = now
	}
	every := time.Duration(0)
	if len(u.Series) > 1 {
		every = u.Series[len(u.Series)-1].Time.Sub(u.Series[0].Time) / time.Duration(len(u.Series)-1)
	}
	pts := func(f func(UsagePoint) float64) []chartPoint {
		out := make([]chartPoint, len(u.Series))
		for i, p := range u.Series {
			out[i] = chartPoint{T: p.Time, V: f(p)}
		}
		return out
	}
	v.Charts = append(v.Charts,
		chart{Title: "GPU utilisation (mean of the job's GPUs)", Unit: "%", YMax: 100, From: from, To: to, Every: every,
			Series: []chartSeries{{Name: "GPU busy", Points: pts(func(p UsagePoint) float64 { return p.GPUUtilPct })}}}.render(),
		chart{Title: "Memory", Unit: " GiB", From: from, To: to, Every: every,
			Series: []chartSeries{
				{Name: "GPU memory", Points: pts(func(p UsagePoint) float64 { return gib(p.GPUMemMB) })},
				{Name: "resident memory (RSS)", Points: pts(func(p UsagePoint) float64 { return gib(p.RSSMB) })},
			}}.render(),
		chart{Title: "CPU", Unit: "%", From: from, To: to, Every: every,
			Series: []chartSeries{{Name: "CPU (100 % = one CPU)", Points: pts(func(p UsagePoint) float64 { return p.CPUPct })}}}.render(),
	)
	return v
}

// gib converts MiB to GiB, keeping unknown (negative) values negative.
func gib(mb float64) float64 {
	if mb < 0 {
		return -1
	}
	return mb / 1024
}

// bar is a small horizontal bar of v out of whole, as SVG (no inline
// style: the page's policy forbids it).
func bar(v, whole float64) template.HTML {
	w := 0.0
	if whole > 0 {
		w = min(max(v/whole, 0), 1) * 100
	}
	return template.HTML(`<svg class="bar" viewBox="0 0 100 8" preserveAspectRatio="none"><rect class="bg" width="100" height="8"/>` +
		`<rect class="fg" width="` + f1(w) + `" height="8"/></svg>`)
}
