package sstat

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/livesteps"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
)

// Options are sstat's parsed command line.
type Options struct {
	IO  *cmdutil.IOStreams
	API func() (cmdutil.API, error)
	// Getenv reads POSIXLY_CORRECT.
	Getenv func(string) string
	// UID is the caller's user id: as in Slurm, only root may see
	// another user's steps.
	UID func() int

	// Jobs are the -j items (and the first operand), without repeats.
	Jobs []sel
	// AllSteps (-a) takes every running step of a job named without a
	// step, its batch step included.
	AllSteps bool
	// Fields are the -o lists, in order.
	Fields    []string
	NoHeader  bool
	NoConvert bool
	Layout    slurmfmt.FieldsLayout
	Verbose   int

	help int
}

// NewCmd returns the sstat command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return newCmd(f, run)
}

// newCmd builds sstat around runF. Cobra only dispatches: sstat reads
// its own arguments with Slurm's option table (options.go).
func newCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO, API: f.API, Getenv: f.Getenv, UID: f.UID}
	return cmdutil.RawCommand("sstat [OPTIONS] -j job[.step]", "Show what running job steps use so far",
		func(ctx context.Context, args []string) error {
			if done, err := o.parseArgs(args); done || err != nil {
				return err
			}
			return runF(ctx, o)
		})
}

// liveUsager is implemented by clients that report the running steps'
// usage (*client.Client); without it every usage field prints blank.
type liveUsager interface {
	LiveUsage(ctx context.Context, ids []uint64) ([]api.StepUsage, error)
}

type stepKey struct {
	job  uint64
	step uint32
}

// run prints the header, then for each -j item in order the steps it
// names, as Slurm's sstat does: a step that does not run, or a job
// without running steps, is an error on stderr and the others still
// print; the exit code is 0 once the fields and jobs were understood.
func run(ctx context.Context, o *Options) error {
	lists := o.Fields
	if len(lists) == 0 {
		lists = []string{DefaultFields}
	}
	cols, err := parseFields(lists)
	if err != nil {
		return err
	}
	if len(o.Jobs) == 0 {
		return errors.New("You didn't give me any jobs to stat.")
	}
	if o.Verbose > 0 {
		// Slurm's debug lines, worded as Tide's.
		fmt.Fprintln(o.IO.ErrOut, "sstat: steps requested:")
		for _, s := range o.Jobs {
			if s.allSteps {
				fmt.Fprintf(o.IO.ErrOut, "sstat: \tthe running steps of job %d\n", s.job)
			} else {
				fmt.Fprintf(o.IO.ErrOut, "sstat: \t%s\n", stepIDString(s.job, s.step))
			}
		}
	}
	client, err := o.API()
	if err != nil {
		return fmt.Errorf("connect to controller: %w", err)
	}
	var f api.JobFilter
	f.All = true
	for _, s := range o.Jobs {
		if s.task >= 0 {
			f.Tasks = append(f.Tasks, api.TaskRef{JobID: s.job, Task: s.task})
		} else {
			f.IDs = append(f.IDs, s.job)
		}
	}
	list, err := client.Jobs(ctx, f)
	if err != nil {
		return fmt.Errorf("slurm_get_job_steps error: %w", err)
	}
	jobs := make([]*api.Job, len(list.Jobs))
	for i := range list.Jobs {
		jobs[i] = &list.Jobs[i]
	}
	steps, err := livesteps.ForJobs(ctx, client, jobs)
	if err != nil {
		return err
	}
	usage, err := liveUsage(ctx, client, steps)
	if err != nil {
		return err
	}

	var rows []row
	for _, s := range o.Jobs {
		j := findJob(jobs, s)
		if j == nil {
			cmdutil.Errorf(o.IO.ErrOut, "sstat", "couldn't get steps for job %d", s.job)
			continue
		}
		for _, st := range o.pick(s, steps[j.ID]) {
			if !o.mayStat(j) {
				// What Slurm's sstat prints when each node's slurmd
				// refuses another user's step.
				for _, n := range st.Nodes {
					cmdutil.Errorf(o.IO.ErrOut, "sstat", "slurm_job_step_stat: there was an error with the request to %s rc = Invalid user id", n)
				}
				cmdutil.Errorf(o.IO.ErrOut, "sstat", "problem getting step_layout for %s: Invalid user id", stepIDString(j.ID, st.ID))
				continue
			}
			rows = append(rows, row{step: st, usage: usage[stepKey{j.ID, st.ID}], raw: o.NoConvert})
		}
	}
	pcols := make([]slurmfmt.PrintColumn, len(cols))
	for i, c := range cols {
		pcols[i] = slurmfmt.PrintColumn{Name: c.def.name, Width: c.width, Kind: c.def.kind}
	}
	values := make([][]string, len(rows))
	for i := range rows {
		values[i] = make([]string, len(cols))
		for k, c := range cols {
			values[i][k] = c.def.value(&rows[i])
		}
	}
	var buf bytes.Buffer
	if err := slurmfmt.PrintFields(&buf, pcols, values, o.Layout, "", !o.NoHeader); err != nil {
		return err
	}
	if _, err := o.IO.Out.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// pick returns the steps -j item s names among its job's running steps,
// reporting on stderr when there are none: a named step, or without one
// the lowest numbered srun step (every step with -a). A job that runs
// only its batch script has no srun step, and without -a Slurm's sstat
// prints nothing for it and says nothing.
func (o *Options) pick(s sel, steps []livesteps.Step) []*livesteps.Step {
	var out []*livesteps.Step
	for i := range steps {
		st := &steps[i]
		switch {
		case !s.allSteps:
			if st.ID == s.step {
				out = append(out, st)
			}
		case o.AllSteps:
			out = append(out, st)
		case st.ID <= maxNormalStepID && len(out) == 0:
			out = append(out, st)
		}
	}
	switch {
	case len(steps) == 0 && s.allSteps:
		cmdutil.Errorf(o.IO.ErrOut, "sstat", "No steps running for job %d", s.job)
	case len(out) == 0 && !s.allSteps:
		cmdutil.Errorf(o.IO.ErrOut, "sstat", "%s not found running.", stepIDString(s.job, s.step))
	}
	return out
}

// mayStat reports whether the caller may see job j's steps: its owner
// and root may, as only they may ask Slurm's slurmd (the controller
// serves the usage of every job it shows; sacct prints it).
func (o *Options) mayStat(j *api.Job) bool {
	if o.UID == nil {
		return true
	}
	uid := o.UID()
	return uid == 0 || uint32(uid) == j.UserID
}

// findJob returns the job -j item s names: the job of that id, or the
// array's task.
func findJob(jobs []*api.Job, s sel) *api.Job {
	for _, j := range jobs {
		if s.task < 0 && j.ID == s.job ||
			s.task >= 0 && j.ArrayJobID == s.job && j.ArrayTaskID == s.task && !j.IsArrayMeta() {
			return j
		}
	}
	return nil
}

// liveUsage fetches the running usage of the jobs of steps, by step.
func liveUsage(ctx context.Context, c cmdutil.API, steps map[uint64][]livesteps.Step) (map[stepKey]*api.StepUsage, error) {
	lu, ok := c.(liveUsager)
	if !ok || len(steps) == 0 {
		return nil, nil
	}
	ids := make([]uint64, 0, len(steps))
	for id, ss := range steps {
		if len(ss) > 0 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	list, err := lu.LiveUsage(ctx, ids)
	if err != nil {
		if errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrUnavailable) {
			return nil, nil // a controller without usage accounting
		}
		return nil, fmt.Errorf("load step usage: %w", err)
	}
	out := make(map[stepKey]*api.StepUsage, len(list))
	for i := range list {
		out[stepKey{list[i].JobID, list[i].StepID}] = &list[i]
	}
	return out, nil
}
