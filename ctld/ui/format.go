package ui

import (
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Formats shared by the pages. Durations are Slurm's ([D-]HH:MM:SS),
// as squeue prints them; times are the controller's local time.

// fmtSecs is a duration in seconds as Slurm prints it.
func fmtSecs(s int64) string {
	if s < 0 {
		s = 0
	}
	d, s := s/86400, s%86400
	hms := pad2(s/3600) + ":" + pad2(s%3600/60) + ":" + pad2(s%60)
	if d > 0 {
		return strconv.FormatInt(d, 10) + "-" + hms
	}
	return hms
}

func pad2(n int64) string {
	if n < 10 {
		return "0" + strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(n, 10)
}

// fmtLimit is a time limit (UNLIMITED, NOT_SET or a duration).
func fmtLimit(s int64) string {
	switch {
	case s == api.Infinite:
		return "UNLIMITED"
	case s <= 0:
		return "NOT_SET"
	}
	return fmtSecs(s)
}

// fmtTime is a timestamp ("" for the zero time).
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// fmtMB is a size in MiB, in the largest unit that keeps it readable.
func fmtMB(mb int64) string {
	switch {
	case mb >= 1<<20:
		return trimFloat(float64(mb)/(1<<20)) + " TiB"
	case mb >= 1<<10:
		return trimFloat(float64(mb)/(1<<10)) + " GiB"
	}
	return strconv.FormatInt(mb, 10) + " MiB"
}

// fmtBytes is a size in bytes, as fmtMB.
func fmtBytes(b uint64) string {
	if b < 1<<20 {
		return trimFloat(float64(b)/(1<<10)) + " KiB"
	}
	return fmtMB(int64(b >> 20))
}

// trimFloat prints v with one decimal, dropping ".0".
func trimFloat(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0")
}

// pct is part/whole in whole percent (0 for an empty whole).
func pct(part, whole int64) int {
	if whole <= 0 {
		return 0
	}
	return int((part*100 + whole/2) / whole)
}

// stateClass is the CSS class of a job state's badge.
func stateClass(s api.JobState) string {
	switch {
	case s == api.StatePending:
		return "st-pd"
	case s == api.StateRunning:
		return "st-r"
	case s == api.StateCompleting || s == api.StateSuspended:
		return "st-cg"
	case s == api.StateCompleted:
		return "st-cd"
	case s.Terminal():
		return "st-f"
	}
	return ""
}

// gpuRequest describes what GPUs a job asks for: "4 × a100",
// "2 per node", "1 slice (20 GiB, 50 %)"; "" for none.
func gpuRequest(j *api.Job) string {
	n := j.ReqGPUs()
	if n == 0 && !j.Sliced() {
		return ""
	}
	var b strings.Builder
	switch {
	case j.GPUsPerNode > 0:
		b.WriteString(strconv.Itoa(j.GPUsPerNode) + " per node")
	case j.GPUsPerTask > 0:
		b.WriteString(strconv.Itoa(j.GPUsPerTask) + " per task")
	default:
		b.WriteString(strconv.Itoa(max(n, 1)))
	}
	if j.GPUType != "" {
		b.WriteString(" × " + j.GPUType)
	}
	if j.Sliced() {
		b.WriteString(" slice")
		var parts []string
		if j.GPUMemMB > 0 {
			parts = append(parts, fmtMB(j.GPUMemMB))
		}
		if j.GPUComputePct > 0 {
			parts = append(parts, strconv.Itoa(j.GPUComputePct)+" % compute")
		}
		if len(parts) > 0 {
			b.WriteString(" (" + strings.Join(parts, ", ") + ")")
		}
	}
	return b.String()
}

// jobCount is how many jobs a record stands for: an array's meta
// record holds its pending tasks.
func jobCount(j *api.Job) int {
	if j.IsArrayMeta() {
		return j.ArrayPending.Len()
	}
	return 1
}

// reasonText is a job's reason with its detail, and the reason's help
// for a tooltip.
func reasonText(j *api.Job) (reason, help string) {
	if j.Reason == "" || j.Reason == api.ReasonNone {
		return "", ""
	}
	return string(j.Reason), j.Reason.Info().Help
}
