package scontrol

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmjson"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// stepLister is implemented by clients that list srun steps
// (*client.Client, from the controller's step records).
type stepLister interface {
	Steps(ctx context.Context, ids []uint64) ([]api.StepRecord, error)
}

// shownStep is one step show steps prints: a running job's batch step,
// or one of its srun steps that has not ended.
type shownStep struct {
	job   *api.Job
	id    string // "batch", "0", ...
	name  string
	start time.Time
	nodes []string
	tasks int
	cpus  int
	gpus  int
}

// stepArg parses show steps' argument: JOB, JOB.STEP or JOB_TASK.
func stepArg(s string) (job uint64, step string, task int, err error) {
	task = -1
	head, step, _ := strings.Cut(s, ".")
	if j, t, ok := strings.Cut(head, "_"); ok {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 {
			return 0, "", 0, fmt.Errorf("invalid job step id: %s", s)
		}
		head, task = j, n
	}
	job, err = strconv.ParseUint(head, 10, 64)
	if err != nil || job == 0 {
		return 0, "", 0, fmt.Errorf("invalid job step id: %s", s)
	}
	return job, step, task, nil
}

// loadSteps lists the running steps, of one job or step when arg names it.
func (o *Options) loadSteps(ctx context.Context, c cmdutil.API, arg string) ([]shownStep, time.Time, error) {
	var wantJob uint64
	wantStep, wantTask := "", -1
	if arg != "" {
		var err error
		if wantJob, wantStep, wantTask, err = stepArg(arg); err != nil {
			return nil, time.Time{}, err
		}
	}
	list, err := c.Jobs(ctx, api.JobFilter{States: []api.JobState{api.StateRunning}})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("slurm_get_job_steps error: %w", err)
	}
	var jobs []*api.Job
	var ids []uint64
	for i := range list.Jobs {
		j := &list.Jobs[i]
		if j.State != api.StateRunning || len(j.Alloc) == 0 {
			continue
		}
		if wantJob != 0 && j.ID != wantJob && (j.ArrayJobID != wantJob || wantTask < 0 || j.ArrayTaskID != wantTask) {
			continue
		}
		jobs = append(jobs, j)
		ids = append(ids, j.ID)
	}
	byJob := map[uint64][]api.StepRecord{}
	if sl, ok := c.(stepLister); ok && len(ids) > 0 {
		recs, err := sl.Steps(ctx, ids)
		switch {
		case errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrUnavailable):
			// A controller without step records: batch steps only.
		case err != nil:
			return nil, time.Time{}, fmt.Errorf("slurm_get_job_steps error: %w", err)
		}
		for _, r := range recs {
			byJob[r.JobID] = append(byJob[r.JobID], r)
		}
	}
	var out []shownStep
	for _, j := range jobs {
		if !j.Allocation {
			a := j.Alloc[0]
			out = append(out, shownStep{job: j, id: "batch", name: "batch", start: j.StartTime,
				nodes: []string{a.Node}, tasks: 1, cpus: a.CPUs, gpus: len(a.GPUs)})
		}
		recs := byJob[j.ID]
		sort.Slice(recs, func(a, b int) bool { return recs[a].StepID < recs[b].StepID })
		for _, r := range recs {
			if !r.End.IsZero() || r.State.Terminal() {
				continue
			}
			out = append(out, shownStep{job: j, id: strconv.FormatUint(uint64(r.StepID), 10), name: r.Name,
				start: r.Start, nodes: r.Nodes, tasks: r.NTasks, cpus: r.CPUs, gpus: r.GPUs})
		}
	}
	if wantStep != "" {
		var keep []shownStep
		for _, s := range out {
			if s.id == wantStep {
				keep = append(keep, s)
			}
		}
		out = keep
	}
	return out, list.Now, nil
}

// stepID is the step's id as Slurm prints it: "7.0", or "7_3.0" for a
// task of an array.
func (s *shownStep) stepID() string {
	if s.job.ArrayJobID != 0 && !s.job.IsArrayMeta() {
		return fmt.Sprintf("%d_%d.%s", s.job.ArrayJobID, s.job.ArrayTaskID, s.id)
	}
	return fmt.Sprintf("%d.%s", s.job.ID, s.id)
}

func (s *shownStep) tres() string {
	t := fmt.Sprintf("cpu=%d,node=%d", s.cpus, len(s.nodes))
	if s.gpus > 0 {
		t += fmt.Sprintf(",gres/gpu=%d", s.gpus)
	}
	return t
}

// stepRecord lays out one step as Slurm 22.05 (slurm_sprint_job_step_info).
// Steps have no time limit of their own in Tide; srun's host and pid are
// not recorded.
func (o *Options) stepRecord(s *shownStep) *record {
	r := &record{}
	r.add("StepId=%s UserId=%d StartTime=%s TimeLimit=UNLIMITED", s.stepID(), s.job.UserID, fmtTime(s.start, o.Loc))
	r.add("State=RUNNING Partition=%s NodeList=%s", orNull(s.job.Partition), orNull(hostlist.Compress(s.nodes)))
	r.add("Nodes=%d CPUs=%d Tasks=%d Name=%s Network=(null)", len(s.nodes), s.cpus, s.tasks, s.name)
	r.add("TRES=%s", s.tres())
	r.add("ResvPorts=(null)")
	r.add("CPUFreqReq=Default Dist=Block")
	r.add("SrunHost:Pid=(null):0")
	return r
}

func (o *Options) showSteps(ctx context.Context, args []string) error {
	if len(args) > 1 {
		return fmt.Errorf("too many arguments for keyword: show steps")
	}
	c, err := o.API()
	if err != nil {
		return err
	}
	arg := ""
	if len(args) == 1 {
		arg = args[0]
	}
	steps, _, err := o.loadSteps(ctx, c, arg)
	if err != nil {
		return err
	}
	if len(steps) == 0 {
		if arg != "" {
			fmt.Fprintf(o.IO.Out, "Job step %s not found\n", arg)
			return &cmdutil.SilentError{Code: cmdutil.ExitError}
		}
		fmt.Fprintln(o.IO.Out, "No job steps in the system")
		return nil
	}
	var b strings.Builder
	for i := range steps {
		b.WriteString(o.stepRecord(&steps[i]).renderBlock(o.OneLiner))
	}
	_, err = fmt.Fprint(o.IO.Out, b.String())
	return err
}

// jsonStep is one step in the data_parser/v0.0.40 layout (STEP_INFO).
type jsonStep struct {
	Array struct {
		JobID  uint64           `json:"job_id"`
		TaskID slurmjson.Number `json:"task_id"`
	} `json:"array"`
	Cluster     string `json:"cluster"`
	Container   string `json:"container"`
	ContainerID string `json:"container_id"`
	CPU         struct {
		Frequency struct {
			Min      slurmjson.Number `json:"min"`
			Max      slurmjson.Number `json:"max"`
			Governor slurmjson.Number `json:"governor"`
		} `json:"frequency"`
	} `json:"cpu"`
	TRES struct {
		Per struct {
			CPU    string `json:"cpu"`
			Memory string `json:"memory"`
			Step   string `json:"step"`
			Node   string `json:"node"`
			Socket string `json:"socket"`
			Task   string `json:"task"`
		} `json:"per"`
		Allocation string `json:"allocation"`
		Binding    string `json:"binding"`
		Frequency  string `json:"frequency"`
	} `json:"tres"`
	Name          string `json:"name"`
	Network       string `json:"network"`
	Nodes         string `json:"nodes"`
	NumberCPUs    int    `json:"number_cpus"`
	NumberTasks   int    `json:"number_tasks"`
	Partition     string `json:"partition"`
	ReservedPorts string `json:"reserved_ports"`
	Time          struct {
		Running slurmjson.Number `json:"running"`
		Start   slurmjson.Number `json:"start"`
		Limit   slurmjson.Number `json:"limit"`
	} `json:"time"`
	Srun struct {
		Host string `json:"host"`
		PID  int    `json:"pid"`
	} `json:"srun"`
	State      []string `json:"state"`
	ID         string   `json:"id"`
	SubmitLine string   `json:"submit_line"`
	Task       struct {
		Distribution string `json:"distribution"`
	} `json:"task"`
	User string `json:"user"`
}

func (o *Options) showStepsJSON(ctx context.Context, c cmdutil.API, args []string) error {
	info, err := c.Cluster(ctx)
	if err != nil {
		return fmt.Errorf("slurm_get_job_steps error: %w", err)
	}
	e := o.envelope(info.Name)
	arg := ""
	if len(args) == 1 {
		arg = args[0]
	}
	steps, now, err := o.loadSteps(ctx, c, arg)
	if err != nil {
		return err
	}
	if now.IsZero() {
		now = info.Now
	}
	list := make([]jsonStep, 0, len(steps))
	for i := range steps {
		s := &steps[i]
		var js jsonStep
		js.Array.TaskID = slurmjson.Unset()
		if s.job.ArrayJobID != 0 && !s.job.IsArrayMeta() {
			js.Array.JobID, js.Array.TaskID = s.job.ArrayJobID, slurmjson.Num(s.job.ArrayTaskID)
		}
		js.Cluster = info.Name
		js.CPU.Frequency.Min, js.CPU.Frequency.Max, js.CPU.Frequency.Governor = slurmjson.Unset(), slurmjson.Unset(), slurmjson.Unset()
		js.TRES.Allocation = s.tres()
		js.Name, js.Nodes = s.name, hostlist.Compress(s.nodes)
		js.NumberCPUs, js.NumberTasks, js.Partition = s.cpus, s.tasks, s.job.Partition
		js.Time.Start, js.Time.Limit = slurmjson.Time(s.start), slurmjson.Infinite()
		js.Time.Running = slurmjson.Num(int64(now.Sub(s.start) / time.Second))
		js.State, js.ID = []string{"RUNNING"}, s.stepID()
		js.Task.Distribution = "block"
		js.User = s.job.User
		list = append(list, js)
	}
	e.Steps = &list
	lu := slurmjson.Time(now)
	e.LastUpdate = &lu
	fail := ""
	if arg != "" && len(steps) == 0 {
		fail = fmt.Sprintf("Job step %s not found", arg)
	}
	return o.writeEnvelope(e, fail)
}
