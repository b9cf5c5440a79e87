package jobfmt

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
)

// TimeLayout is Slurm's local ISO 8601 time without a zone.
const TimeLayout = "2006-01-02T15:04:05"

// Time prints t in loc, or "Unknown" when unset, as Slurm does.
func Time(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "Unknown"
	}
	return t.In(loc).Format(TimeLayout)
}

// Mem prints a size in MB the way Slurm's convert_num_unit does with
// CONVERT_NUM_UNIT_EXACT: the largest unit that divides it exactly
// (16000 → "16000M", 65536 → "64G"), and a bare "0" for none.
func Mem(mb int64) string {
	if mb <= 0 {
		return "0"
	}
	return api.FormatMemMB(mb)
}

// Limit prints a job time limit: UNLIMITED, Partition_Limit when the job
// has none of its own, else [D-]HH:MM:SS.
func Limit(secs int64) string {
	switch {
	case secs == api.Infinite:
		return "UNLIMITED"
	case secs <= 0:
		return "Partition_Limit"
	}
	return api.FormatElapsedLong(secs)
}

// LimitMinutes is sacct's TimelimitRaw: whole minutes, rounded up since
// Tide limits may name seconds.
func LimitMinutes(secs int64) string {
	switch {
	case secs == api.Infinite:
		return "UNLIMITED"
	case secs <= 0:
		return "Partition_Limit"
	}
	return strconv.FormatInt((secs+59)/60, 10)
}

// NameOr is a user or group name, or its number when the name is unknown.
func NameOr(name string, id uint32) string {
	if name != "" {
		return name
	}
	return strconv.FormatUint(uint64(id), 10)
}

// Reason is the Reason word: None while the job holds resources or when
// the controller stored none.
func Reason(j *api.Job) string {
	if j.State.Active() || j.Reason == "" {
		return string(api.ReasonNone)
	}
	return string(j.Reason)
}

// ReqCPUs is the CPU count a job's request implies (api.JobSpec.ReqCPUs:
// --overcommit and --mincpus included).
func ReqCPUs(j *api.Job) int { return j.ReqCPUs() }

// ReqMemMB is the memory a job asks for over all its nodes (0 = none).
func ReqMemMB(j *api.Job) int64 {
	switch {
	case j.MemPerNodeMB == api.MemWholeNode:
		// --mem=0: the whole of nodes not chosen yet; unknown until
		// the allocation says.
		return 0
	case j.MemPerNodeMB > 0:
		return j.MemPerNodeMB * int64(j.ReqNodes())
	case j.MemPerCPUMB > 0:
		return j.MemPerCPUMB * int64(ReqCPUs(j))
	case j.MemPerGPUMB > 0:
		return j.MemPerGPUMB * int64(j.ReqGPUs())
	}
	return 0
}

// StdPaths expands a job's output patterns as Slurm shows them (see
// api.Job.StdPaths, which the dashboard shares).
func StdPaths(j *api.Job) (stdout, stderr, stdin string) { return j.StdPaths() }

// IdxRanges prints GPU indices as Slurm's IDX list ("0-1,4"), N/A when
// there are none.
func IdxRanges(idx []int) string {
	if len(idx) == 0 {
		return "N/A"
	}
	s := append([]int(nil), idx...)
	sort.Ints(s)
	return string(slurmfmt.AppendRanges(nil, s))
}

// SharedGPUs describes a node's GPUs shared by slices, for scontrol
// show node and sinfo's GPUShared (Tide):
// "3(slices:3,mem:24G/80G,compute:30%),5(slices:1,mem:8G/80G)", the
// memory committed over the GPU's physical memory (it may pass it where
// the partition oversubscribes); "" without shared GPUs.
func SharedGPUs(n *api.Node) string {
	var b strings.Builder
	for i, g := range n.SharedGPUs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d(slices:%d", g.Index, g.Slices)
		if g.MemMB > 0 {
			b.WriteString(",mem:" + api.FormatMemMB(g.MemMB))
			if total := n.GPUMemoryMB(g.Index); total > 0 {
				b.WriteString("/" + api.FormatMemMB(total))
			}
		}
		if g.ComputePct > 0 {
			fmt.Fprintf(&b, ",compute:%d%%", g.ComputePct)
		}
		b.WriteByte(')')
	}
	return b.String()
}
