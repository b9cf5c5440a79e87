// Package livesteps lists the running steps of running jobs as Slurm's
// step listings show them (squeue -s, sstat): each running batch job's
// batch step, and the srun steps whose end no srun reported yet, from
// the controller's step records (GET /api/v1/accounting/steps).
package livesteps

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
)

// Lister is implemented by clients that list srun steps
// (*client.Client); with a client without it only batch steps are
// listed.
type Lister interface {
	Steps(ctx context.Context, ids []uint64) ([]api.StepRecord, error)
}

// Step is one running step.
type Step struct {
	// Job is the step's job (running).
	Job *api.Job
	// ID is the step id, api.BatchStepID for the batch step.
	ID   uint32
	Name string
	// Start is when the step started; for the batch step, the job.
	Start time.Time
	// Nodes are the step's nodes in its layout's order.
	Nodes []string
	Tasks int
	CPUs  int
	GPUs  int
	// TimeLimit is the step's own limit in seconds (0: none, the job's).
	TimeLimit int64
	// Rec is the step's record (nil for the batch step).
	Rec *api.StepRecord
}

// Batch reports whether s is the job's batch step.
func (s *Step) Batch() bool { return s.ID == api.BatchStepID }

// StepName is the step part of an id: "0", "batch".
func StepName(id uint32) string {
	if id == api.BatchStepID {
		return "batch"
	}
	return strconv.FormatUint(uint64(id), 10)
}

// IDString is the step's id with its job's own id: "7.0", "7.batch" (sstat's
// JobID).
func (s *Step) IDString() string {
	return strconv.FormatUint(s.Job.ID, 10) + "." + StepName(s.ID)
}

// ArrayID is the step's id as squeue prints it: with the array job and
// task for a task of an array ("7_3.0"), else as IDString.
func (s *Step) ArrayID() string {
	j := s.Job
	if j.ArrayJobID != 0 && !j.IsArrayMeta() {
		return strconv.FormatUint(j.ArrayJobID, 10) + "_" + strconv.Itoa(j.ArrayTaskID) + "." + StepName(s.ID)
	}
	return s.IDString()
}

// Load returns the running steps of the running jobs f selects (f's
// States are replaced by RUNNING), job by job in the controller's
// order, each job's batch step first and then its srun steps by id;
// now is the controller's clock. An allocation-only job (salloc) has no
// batch step.
func Load(ctx context.Context, c cmdutil.API, f api.JobFilter) (steps []Step, now time.Time, err error) {
	f.States = []api.JobState{api.StateRunning}
	list, err := c.Jobs(ctx, f)
	if err != nil {
		return nil, time.Time{}, err
	}
	var jobs []*api.Job
	for i := range list.Jobs {
		if j := &list.Jobs[i]; j.State == api.StateRunning && len(j.Alloc) > 0 {
			jobs = append(jobs, j)
		}
	}
	byJob, err := ForJobs(ctx, c, jobs)
	if err != nil {
		return nil, time.Time{}, err
	}
	for _, j := range jobs {
		steps = append(steps, byJob[j.ID]...)
	}
	return steps, list.Now, nil
}

// ForJobs returns the running steps of jobs (Of), by job id; jobs that
// do not run have none.
func ForJobs(ctx context.Context, c cmdutil.API, jobs []*api.Job) (map[uint64][]Step, error) {
	var running []*api.Job
	for _, j := range jobs {
		if j.State == api.StateRunning && len(j.Alloc) > 0 {
			running = append(running, j)
		}
	}
	recs, err := records(ctx, c, running)
	if err != nil {
		return nil, err
	}
	out := make(map[uint64][]Step, len(running))
	for _, j := range running {
		out[j.ID] = Of(j, recs[j.ID])
	}
	return out, nil
}

// Of returns running job j's running steps among recs (its step
// records): its batch step first, then the srun steps that have not
// ended, by id. Records of an earlier run of a requeued job are left
// out.
func Of(j *api.Job, recs []api.StepRecord) []Step {
	var out []Step
	if !j.Allocation && len(j.Alloc) > 0 {
		a := j.Alloc[0]
		out = append(out, Step{Job: j, ID: api.BatchStepID, Name: "batch", Start: j.StartTime,
			Nodes: []string{a.Node}, Tasks: 1, CPUs: a.CPUs, GPUs: len(a.GPUs)})
	}
	recs = slices.Clone(recs)
	slices.SortStableFunc(recs, func(a, b api.StepRecord) int { return cmp.Compare(a.StepID, b.StepID) })
	for i := range recs {
		r := &recs[i]
		if r.JobID != j.ID || r.State != api.StateRunning || !r.End.IsZero() || r.Start.Before(j.StartTime) {
			continue
		}
		out = append(out, Step{Job: j, ID: r.StepID, Name: r.Name, Start: r.Start, Nodes: r.Nodes,
			Tasks: r.NTasks, CPUs: r.CPUs, GPUs: r.GPUs, TimeLimit: r.TimeLimit, Rec: r})
	}
	return out
}

// records fetches the step records of jobs, by job id. A controller
// that keeps none (not found, unavailable) leaves the batch steps.
func records(ctx context.Context, c cmdutil.API, jobs []*api.Job) (map[uint64][]api.StepRecord, error) {
	sl, ok := c.(Lister)
	if !ok || len(jobs) == 0 {
		return nil, nil
	}
	ids := make([]uint64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	recs, err := sl.Steps(ctx, ids)
	switch {
	case errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrUnavailable):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("load job steps: %w", err)
	}
	out := map[uint64][]api.StepRecord{}
	for _, r := range recs {
		out[r.JobID] = append(out[r.JobID], r)
	}
	return out, nil
}
