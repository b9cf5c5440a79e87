package sacct

// sacct's usage fields (issue 22), printed as Slurm 22.05's sacct
// prints them (src/sacct/print.c): on step rows (N.batch, N.0…) the
// statistics of the step's tasks (MaxRSS, AveCPU, TRESUsageInTot…), on
// job rows only the CPU times, summed over the job's ended steps.
// Sizes are bytes with Slurm's exact unit conversion ("4772K",
// "1.50G"), disk sizes megabytes ("2.50M", "0.01M"), CPU times
// "[D-]HH:MM:SS" or, below an hour with a fraction, "MM:SS.mmm"; the
// formatting itself is cli/slurmfmt's (usage.go), which sstat shares.

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
)

// usageLister is implemented by clients that can list the steps' usage
// (*client.Client); without it the usage fields print as for steps
// nothing measured.
type usageLister interface {
	Usage(ctx context.Context, ids []uint64) ([]api.StepUsage, error)
}

// stepKey names a step of a job in the usage map.
type stepKey struct {
	job  uint64
	step uint32
}

// usageIndex holds the loaded usage by step and by job.
type usageIndex struct {
	step map[stepKey]*api.StepUsage
	job  map[uint64][]*api.StepUsage
}

// of returns the usage of step (nil: none); it accepts a nil index.
func (x *usageIndex) of(job uint64, step uint32) *api.StepUsage {
	if x == nil {
		return nil
	}
	return x.step[stepKey{job, step}]
}

// loadUsage fetches the usage of the steps of the jobs that started,
// jobs of the controller's own cluster.
func loadUsage(ctx context.Context, c cmdutil.API, jobs []api.Job) (*usageIndex, error) {
	ul, ok := c.(usageLister)
	if !ok {
		return nil, nil
	}
	var ids []uint64
	for i := range jobs {
		if !jobs[i].StartTime.IsZero() {
			ids = append(ids, jobs[i].ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	list, err := ul.Usage(ctx, ids)
	if err != nil {
		if errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrUnavailable) {
			return nil, nil // a controller without usage accounting
		}
		return nil, fmt.Errorf("load job usage: %w", err)
	}
	return newUsageIndex(list), nil
}

// newUsageIndex indexes the usage of one cluster's steps.
func newUsageIndex(list []api.StepUsage) *usageIndex {
	x := &usageIndex{step: make(map[stepKey]*api.StepUsage, len(list)), job: map[uint64][]*api.StepUsage{}}
	for i := range list {
		u := &list[i]
		x.step[stepKey{u.JobID, u.StepID}] = u
		x.job[u.JobID] = append(x.job[u.JobID], u)
	}
	return x
}

// jobCPU sums, for a job row, the CPU times of the job's ended steps,
// as sacct does: the batch step once the job has ended, an srun step
// once every node reported its end.
func (x *usageIndex) jobCPU(j *api.Job) (user, sys uint64) {
	if x == nil {
		return 0, 0
	}
	for _, u := range x.job[j.ID] {
		if u.StepID == api.BatchStepID && j.State.Terminal() || u.StepID != api.BatchStepID && u.Final {
			user, sys = user+u.UserUsec, sys+u.SystemUsec
		}
	}
	return user, sys
}

// usageField is a step row's value of u (nil: blank), blank on job
// rows and rows without usage.
func usageField(f func(r *row, u *api.StepUsage) string) func(r *row) string {
	return func(r *row) string {
		if !r.step || r.usage == nil {
			return ""
		}
		return f(r, r.usage)
	}
}

// cpuField prints a CPU time: a step row's own, a job row's summed
// over its ended steps; "00:00:00" where nothing was measured, as
// Slurm does.
func cpuField(pick func(user, sys uint64) uint64) func(r *row) string {
	return func(r *row) string {
		var user, sys uint64
		switch {
		case !r.step:
			user, sys = r.jobUser, r.jobSys
		case r.usage != nil:
			user, sys = r.usage.UserUsec, r.usage.SystemUsec
		}
		return slurmfmt.ElapsedUsec(pick(user, sys))
	}
}

// tresUsage prints a TRESUsage* field: "cpu=00:00:01,energy=0,…"
// (slurmfmt.TRESUsage).
func tresUsage(side slurmfmt.TRESSide, which slurmfmt.TRESWhich) func(r *row) string {
	return usageField(func(_ *row, u *api.StepUsage) string { return slurmfmt.TRESUsage(side, which, u) })
}

// taskOf prints the rank of a statistic's task.
func taskOf(rank int) string { return strconv.Itoa(rank) }
