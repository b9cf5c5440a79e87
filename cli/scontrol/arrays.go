package scontrol

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
)

// jobIDLine is the start of show job's first line: Slurm adds the array
// fields after JobId for array jobs ("JobId=7 ArrayJobId=7
// ArrayTaskId=4-9%2 ArrayTaskThrottle=2 JobName=arr" for the pending
// tasks, "JobId=13 ArrayJobId=7 ArrayTaskId=1 JobName=arr" for a task).
func jobIDLine(j *api.Job) string {
	if j.ArrayJobID == 0 {
		return fmt.Sprintf("JobId=%d JobName=%s", j.ID, orNull(j.Name))
	}
	s := fmt.Sprintf("JobId=%d ArrayJobId=%d ArrayTaskId=%s", j.ID, j.ArrayJobID, j.ArrayTaskString())
	if j.ArrayThrottle > 0 && j.IsArrayMeta() {
		// Slurm keeps the throttle with the pending tasks only.
		s += fmt.Sprintf(" ArrayTaskThrottle=%d", j.ArrayThrottle)
	}
	return s + " JobName=" + orNull(j.Name)
}

// loadShownJobs resolves show job's argument: "N_I" (or "N_[…]") shows
// those array tasks; "N" shows the job, and every record of the array
// when N is an array, the meta record first and then the tasks newest
// first, as Slurm lists them.
// The listing's clock comes back with it (zero for a single job).
func (o *Options) loadShownJobs(ctx context.Context, c cmdutil.API, arg string) ([]api.Job, time.Time, error) {
	words := api.SplitJobIDList(arg)
	if len(words) != 1 {
		return nil, time.Time{}, o.loadJobsError(errInvalidJob)
	}
	ids, tasks, err := api.ParseJobIDs(words[0])
	if err != nil {
		return nil, time.Time{}, o.loadJobsError(errInvalidJob)
	}
	if len(tasks) > 0 {
		list, err := c.Jobs(ctx, api.JobFilter{Tasks: tasks, All: true})
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("slurm_load_jobs error: %w", err)
		}
		// A task cancelled before it started is gone for Slurm: it only
		// leaves the array's pending set, and show job N_I no longer
		// finds it. Tide keeps a record of it (squeue -t all, sacct),
		// which show job leaves out.
		jobs := slices.DeleteFunc(list.Jobs, func(j api.Job) bool {
			// Never allocated: Slurm's cancel gives it a start time too.
			return !j.IsArrayMeta() && j.State == api.StateCancelled && len(j.Alloc) == 0
		})
		if len(jobs) == 0 {
			return nil, time.Time{}, o.loadJobsError(errInvalidJob)
		}
		return jobs, list.Now, nil
	}
	j, err := c.Job(ctx, ids[0])
	if errors.Is(err, api.ErrNotFound) {
		return nil, time.Time{}, o.loadJobsError(errInvalidJob)
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("slurm_load_jobs error: %w", err)
	}
	if j.ArrayJobID != ids[0] {
		return []api.Job{j}, time.Time{}, nil
	}
	list, err := c.Jobs(ctx, api.JobFilter{IDs: ids, All: true})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("slurm_load_jobs error: %w", err)
	}
	if len(list.Jobs) == 0 {
		return []api.Job{j}, time.Time{}, nil
	}
	jobs := list.Jobs
	sort.SliceStable(jobs, func(a, b int) bool {
		if (jobs[a].ID == ids[0]) != (jobs[b].ID == ids[0]) {
			return jobs[a].ID == ids[0]
		}
		return jobs[a].ID > jobs[b].ID
	})
	return jobs, list.Now, nil
}

// parseJobIDs reads job lists as Slurm's hold/release and update JobId=
// take them: ids and array tasks ("7_3", "7_[1-4]") separated by commas
// and/or given as separate words.
func parseJobIDs(words []string) ([]uint64, []api.TaskRef, error) {
	var ids []uint64
	var tasks []api.TaskRef
	for _, w := range words {
		for _, s := range api.SplitJobIDList(w) {
			i, t, err := api.ParseJobIDs(s)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %s", errInvalidJob, s)
			}
			ids, tasks = append(ids, i...), append(tasks, t...)
		}
	}
	if len(ids) == 0 && len(tasks) == 0 {
		return nil, nil, fmt.Errorf("no job id given")
	}
	return ids, tasks, nil
}

// joinIDs writes ids and tasks back as a list ("12,7_3").
func joinIDs(ids []uint64, tasks []api.TaskRef) string {
	s := make([]string, 0, len(ids)+len(tasks))
	for _, id := range ids {
		s = append(s, fmt.Sprint(id))
	}
	for _, t := range tasks {
		s = append(s, t.String())
	}
	return strings.Join(s, ",")
}
