package scontrol

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/jobfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// errInvalidJob is Slurm's message for an unknown or malformed job id;
// scontrol prints it after "slurm_load_jobs error: ".
const errInvalidJob = "Invalid job id specified"

func (o *Options) showJob(ctx context.Context, args []string) error {
	if len(args) > 1 {
		return fmt.Errorf("too many arguments for keyword: show job")
	}
	c, err := o.API()
	if err != nil {
		return err
	}
	var jobs []api.Job
	var now time.Time
	if len(args) == 1 {
		jobs, now, err = o.loadShownJobs(ctx, c, args[0])
		if err != nil {
			return err
		}
		if j := jobs[0]; now.IsZero() && !j.StartTime.IsZero() && j.EndTime.IsZero() {
			// A single job carries no clock: RunTime of a running job
			// needs the controller's, so that it agrees with squeue.
			info, err := c.Cluster(ctx)
			if err != nil {
				return fmt.Errorf("slurm_load_jobs error: %w", err)
			}
			now = info.Now
		}
	} else {
		// As Slurm, finished jobs are listed until MinJobAge: the
		// controller keeps them that long.
		list, err := c.Jobs(ctx, api.JobFilter{All: true})
		if err != nil {
			return fmt.Errorf("slurm_load_jobs error: %w", err)
		}
		jobs, now = list.Jobs, list.Now
	}
	if len(jobs) == 0 {
		fmt.Fprintln(o.IO.Out, "No jobs in the system")
		return nil
	}
	models := map[string]string{}
	if o.Details && anyGPUs(jobs) {
		nl, err := c.Nodes(ctx)
		switch {
		case errors.Is(err, api.ErrPermissionDenied):
			// Nodes are private (private_data: nodes): GRES
			// without the model.
		case err != nil:
			return fmt.Errorf("load nodes for GPU models: %w", err)
		}
		for _, n := range nl.Nodes {
			models[n.Name] = n.GPUModel()
		}
	}
	share, now := o.loadSharing(ctx, c, jobs, now)
	var usage map[uint64]*api.JobUsage
	if o.Details {
		usage = loadJobUsage(ctx, c, jobs, len(args) == 0) // usage.go
	}
	var b strings.Builder
	for i := range jobs {
		r := o.jobRecord(&jobs[i], now, models)
		o.shareLines(r, &jobs[i], now, share)
		o.usageLine(r, &jobs[i], usage[jobs[i].ID])
		b.WriteString(r.render(o.OneLiner))
	}
	_, err = fmt.Fprint(o.IO.Out, b.String())
	return err
}

// loadJobsError prints Slurm's exact message (no "scontrol: error:"
// prefix, as Slurm's slurm_perror) and fails with exit code 1.
func (o *Options) loadJobsError(msg string) error {
	fmt.Fprintf(o.IO.ErrOut, "slurm_load_jobs error: %s\n", msg)
	return &cmdutil.SilentError{Code: cmdutil.ExitError}
}

func anyGPUs(jobs []api.Job) bool {
	for i := range jobs {
		if jobs[i].AllocGPUs() > 0 {
			return true
		}
	}
	return false
}

// jobRecord lays out one job in Slurm 22.05's line order (see
// slurm_sprint_job_info); models maps node → GPU model for -d.
func (o *Options) jobRecord(j *api.Job, now time.Time, models map[string]string) *record {
	r := &record{}
	loc := o.Loc
	r.add("%s", jobIDLine(j))
	r.add("UserId=%s(%d) GroupId=%s(%d) MCS_label=N/A",
		jobfmt.NameOr(j.User, j.UserID), j.UserID, jobfmt.NameOr(j.Group, j.GroupID), j.GroupID)
	r.add("Priority=%d Nice=%d Account=%s QOS=%s", priority(j), j.Nice, orNull(j.Account), orNull(j.QOS))
	r.add("JobState=%s Reason=%s Dependency=%s", j.State, jobfmt.Reason(j), orNull(j.Dependency))
	requeue := 1
	if j.Requeue != nil && !*j.Requeue {
		requeue = 0
	}
	r.add("Requeue=%d Restarts=%d BatchFlag=1 Reboot=0 ExitCode=%s", requeue, j.Restarts, j.Exit)
	if o.Details {
		// Tide runs no job steps besides the batch script, so the highest
		// step exit code (Slurm's DerivedExitCode) is always 0:0.
		r.add("DerivedExitCode=0:0")
	}
	timeMin := "N/A"
	if j.TimeMin > 0 {
		timeMin = api.FormatElapsedLong(j.TimeMin)
	}
	r.add("RunTime=%s TimeLimit=%s TimeMin=%s", api.FormatElapsedLong(runTime(j, now)), jobfmt.Limit(j.TimeLimit), timeMin)
	r.add("SubmitTime=%s EligibleTime=%s", fmtTime(j.SubmitTime, loc), fmtTime(j.EligibleTime, loc))
	r.add("AccrueTime=%s", fmtTime(j.EligibleTime, loc))
	r.add("StartTime=%s EndTime=%s Deadline=N/A", fmtTime(startTime(j), loc), fmtTime(endTime(j), loc))
	r.add("SuspendTime=None SecsPreSuspend=0 LastSchedEval=%s Scheduler=Main", fmtTime(j.LastSchedEval, loc))
	r.add("Partition=%s AllocNode:Sid=%s:0", orNull(j.Partition), orNull(j.SubmitHost))
	r.add("ReqNodeList=%s ExcNodeList=%s", orNull(hostlist.Compress(j.NodeList)), orNull(hostlist.Compress(j.Exclude)))
	nodes := j.NodeNames()
	r.add("NodeList=%s", hostlist.Compress(nodes))
	if len(nodes) > 0 {
		r.add("BatchHost=%s", nodes[0])
	}
	r.add("NumNodes=%s NumCPUs=%d NumTasks=%d CPUs/Task=%d ReqB:S:C:T=0:0:*:*",
		numNodes(j), numCPUs(j), j.ReqTasks(), j.ReqCPUsPerTask())
	r.add("TRES=%s", jobTRES(j))
	r.add("Socks/Node=* NtasksPerN:B:S:C=%d:0:*:* CoreSpec=*", j.TasksPerNode)
	if o.Details && len(j.Alloc) > 0 {
		detailLines(r, j, models)
	}
	minMem := fmt.Sprintf("MinMemoryNode=%s", jobfmt.Mem(j.MemPerNodeMB))
	if j.MemPerCPUMB > 0 {
		minMem = fmt.Sprintf("MinMemoryCPU=%s", jobfmt.Mem(j.MemPerCPUMB))
	}
	r.add("MinCPUsNode=%d %s MinTmpDiskNode=%s", minCPUsNode(j), minMem, jobfmt.Mem(j.TmpDiskMB))
	r.add("Features=%s DelayBoot=00:00:00", orNull(j.Constraint))
	over := "OK"
	if j.Exclusive {
		over = "NO"
	}
	r.add("OverSubscribe=%s Contiguous=0 Licenses=(null) Network=(null)", over)
	r.add("Command=(null)")
	r.add("WorkDir=%s", orNull(j.WorkDir))
	if j.Comment != "" {
		r.add("Comment=%s", j.Comment)
	}
	stdout, stderr, stdin := jobfmt.StdPaths(j)
	r.add("StdErr=%s", stderr)
	r.add("StdIn=%s", stdin)
	r.add("StdOut=%s", stdout)
	r.add("Power=")
	if j.CPUsPerGPU > 0 {
		r.add("CpusPerTres=gres:gpu:%d", j.CPUsPerGPU)
	}
	if j.MemPerGPUMB > 0 {
		r.add("MemPerTres=gres:gpu:%d", j.MemPerGPUMB)
	}
	gpuType := ""
	if j.GPUType != "" {
		gpuType = j.GPUType + ":"
	}
	slice := sliceSuffix(j)
	switch {
	case j.GPUs > 0:
		r.add("TresPerJob=gres:gpu:%s%d%s", gpuType, j.GPUs, slice)
	case j.GPUsPerNode > 0:
		r.add("TresPerNode=gres:gpu:%s%d%s", gpuType, j.GPUsPerNode, slice)
	case j.GPUsPerTask > 0:
		r.add("TresPerTask=gres:gpu:%s%d%s", gpuType, j.GPUsPerTask, slice)
	case j.Sliced():
		r.add("TresPerNode=gres:gpu:%s1%s", gpuType, slice)
	}
	if j.MailUser != "" {
		r.add("MailUser=%s MailType=%s", j.MailUser, orDefault(j.MailType, "NONE"))
	}
	// Tide's own lines, last so that Slurm parsers reading fixed lines or
	// the first Reason= are not disturbed: why a pending job waits, or
	// why an allocated job went where it is.
	if j.State == api.StatePending && j.ReasonDetail != "" {
		r.add("Tide:Diagnosis=%s", o.tideText(j.ReasonDetail))
	}
	if len(j.Alloc) > 0 && j.Placement != "" {
		r.add("Tide:Placement=%s", o.tideText(j.Placement))
	}
	return r
}

// tideText is a Tide:… value: as is, or with its blanks turned into _
// for -o, where blanks separate the fields.
func (o *Options) tideText(s string) string {
	if o.OneLiner {
		return strings.Join(strings.Fields(s), "_")
	}
	return s
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// runTime is Slurm's RunTime: 0 until start, then up to now or the end.
func runTime(j *api.Job, now time.Time) int64 {
	if j.StartTime.IsZero() || j.State == api.StatePending {
		return 0
	}
	end := j.EndTime
	if end.IsZero() || j.State == api.StateRunning {
		end = now
	}
	return int64(end.Sub(j.StartTime) / time.Second)
}

// startTime is the start, or for a pending job the expected start:
// the backfill estimate, else its --begin time, as Slurm reports it.
func startTime(j *api.Job) time.Time {
	if j.State == api.StatePending {
		if !j.ExpectedStart.IsZero() {
			return j.ExpectedStart
		}
		return j.BeginTime
	}
	return j.StartTime
}

// endTime is the real end, or for a running job with a finite limit the
// time the limit runs out, as Slurm shows it.
func endTime(j *api.Job) time.Time {
	if !j.EndTime.IsZero() {
		return j.EndTime
	}
	if j.State.Active() && !j.StartTime.IsZero() && j.TimeLimit > 0 {
		return j.StartTime.Add(time.Duration(j.TimeLimit) * time.Second)
	}
	return time.Time{}
}

// numNodes is NumNodes=: the allocation, or for a pending job the
// requested range ("2-2" when -N was given, as Slurm prints it).
func numNodes(j *api.Job) string {
	if len(j.Alloc) > 0 {
		return strconv.Itoa(len(j.Alloc))
	}
	if j.Nodes > 0 && j.State == api.StatePending {
		max := j.MaxNodes
		if max < j.Nodes {
			max = j.Nodes
		}
		return fmt.Sprintf("%d-%d", j.Nodes, max)
	}
	return strconv.Itoa(j.ReqNodes())
}

// numCPUs is the allocated CPU count, or what the request implies.
func numCPUs(j *api.Job) int {
	if len(j.Alloc) > 0 {
		return j.AllocCPUs()
	}
	return jobfmt.ReqCPUs(j)
}

// jobTRES is the allocated TRES, or the requested one before allocation.
// A sliced job adds its slices' GPU memory as gres/gpumem.
func jobTRES(j *api.Job) string {
	if len(j.Alloc) > 0 {
		var mem, gpuMem int64
		for _, a := range j.Alloc {
			mem += a.MemoryMB
			gpuMem += a.GPUMemMB * int64(len(a.GPUs))
		}
		cpus := j.AllocCPUs()
		return tres{cpu: cpus, memMB: mem, node: len(j.Alloc), billing: cpus, gpus: j.AllocGPUs(), gpuMemMB: gpuMem}.String()
	}
	cpus := jobfmt.ReqCPUs(j)
	return tres{cpu: cpus, memMB: jobfmt.ReqMemMB(j), node: j.ReqNodes(), billing: cpus, gpus: j.ReqGPUs(),
		gpuMemMB: j.GPUMemMB * int64(j.ReqGPUs())}.String()
}

// sliceSuffix is a sliced job's slice size after its GPU count (Tide):
// ",gpumem:8G,gpucompute:10", or ",shard:2" for --gres=shard.
func sliceSuffix(j *api.Job) string {
	var b strings.Builder
	switch {
	case j.GPUShards > 0:
		fmt.Fprintf(&b, ",shard:%d", j.GPUShards)
	case j.GPUMemMB > 0:
		b.WriteString(",gpumem:" + api.FormatMemMB(j.GPUMemMB))
	}
	if j.GPUComputePct > 0 {
		fmt.Fprintf(&b, ",gpucompute:%d", j.GPUComputePct)
	}
	return b.String()
}

func minCPUsNode(j *api.Job) int { return j.MinCPUsPerNode() }

// detailLines adds -d's JOB_GRES line and one line per node. Tide does
// not bind CPUs to cores, so CPU_IDs counts the node's CPUs from 0.
func detailLines(r *record, j *api.Job, models map[string]string) {
	type agg struct {
		model string
		n     int
	}
	var total []agg
	for _, a := range j.Alloc {
		if len(a.GPUs) == 0 {
			continue
		}
		m := models[a.Node]
		found := false
		for i := range total {
			if total[i].model == m {
				total[i].n += len(a.GPUs)
				found = true
			}
		}
		if !found {
			total = append(total, agg{m, len(a.GPUs)})
		}
	}
	jobGres := "(null)"
	if len(total) > 0 {
		parts := make([]string, len(total))
		for i, t := range total {
			parts[i] = gresString(t.model, t.n)
		}
		jobGres = strings.Join(parts, ",")
	}
	r.add("JOB_GRES=%s", jobGres)
	for _, a := range j.Alloc {
		cpuIDs := "0"
		if a.CPUs > 1 {
			cpuIDs = fmt.Sprintf("0-%d", a.CPUs-1)
		}
		g := ""
		if len(a.GPUs) > 0 {
			g = fmt.Sprintf("%s(IDX:%s)", gresString(models[a.Node], len(a.GPUs)), jobfmt.IdxRanges(a.GPUs))
		}
		r.add("  Nodes=%s CPU_IDs=%s Mem=%d GRES=%s", a.Node, cpuIDs, a.MemoryMB, g)
	}
}
