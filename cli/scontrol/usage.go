package scontrol

import (
	"context"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
)

// jobUsager is implemented by clients that read the controller's usage
// series of jobs (issue 25); fakes without it show no usage line.
type jobUsager interface {
	JobUsages(ctx context.Context, ids []uint64) ([]api.JobUsage, error)
}

// loadJobUsage reads, for -d, the latest usage of jobs (every series
// the caller may see when all jobs are shown: one request, however many
// jobs). A controller without the series, or one that fails to answer,
// leaves the usage lines out: they are extra, and scontrol show job
// must not fail for them.
func loadJobUsage(ctx context.Context, c any, jobs []api.Job, all bool) map[uint64]*api.JobUsage {
	ju, ok := c.(jobUsager)
	if !ok || len(jobs) == 0 {
		return nil
	}
	var ids []uint64
	if !all {
		for i := range jobs {
			ids = append(ids, jobs[i].ID)
		}
	}
	list, err := ju.JobUsages(ctx, ids)
	if err != nil {
		return nil
	}
	out := make(map[uint64]*api.JobUsage, len(list))
	for i := range list {
		out[list[i].JobID] = &list[i]
	}
	return out
}

// usageLine adds -d's Tide:GPUUtil=… line: the job's latest sample
// (GPU utilisation in percent and memory, the CPUs it kept busy, its
// tasks' resident memory), the means and peaks of its series, and its
// idle-GPU flag. Nothing for a job without a sample, or a series of
// another incarnation.
func (o *Options) usageLine(r *record, j *api.Job, u *api.JobUsage) {
	if u == nil || u.Last == nil || u.Restart != j.Restarts {
		return
	}
	var kv []string
	add := func(k, v string) { kv = append(kv, k+"="+v) }
	pct := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	last := u.Last
	if last.GPU {
		add("GPUUtil", pct(last.GPUUtil))
		add("AveGPUUtil", pct(u.GPUUtilMean))
		add("GPUMem", slurmfmt.BytesSize(last.GPUMem))
		add("MaxGPUMem", slurmfmt.BytesSize(u.GPUMemMax))
	}
	if last.CPU {
		add("CPUs", strconv.FormatFloat(last.CPUs, 'f', 2, 64))
	}
	add("RSS", slurmfmt.BytesSize(last.RSS))
	add("MaxRSS", slurmfmt.BytesSize(u.RSSMax))
	add("UsageTime", fmtTime(last.Time, o.Loc))
	if !u.IdleSince.IsZero() {
		add("IdleGPUSince", fmtTime(u.IdleSince, o.Loc))
	}
	if !u.IdleFlagged.IsZero() {
		add("IdleGPUFlagged", fmtTime(u.IdleFlagged, o.Loc))
	}
	r.add("Tide:%s", strings.Join(kv, " "))
}
