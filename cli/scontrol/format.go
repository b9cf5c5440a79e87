package scontrol

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// timeLayout is Slurm's ISO 8601 local time without zone.
const timeLayout = "2006-01-02T15:04:05"

// record collects the Key=Value lines of one scontrol block. Slurm joins
// them with "\n   " (or " " with -o) and ends a block with "\n   \n\n"
// (or " \n"); keeping the lines apart lets both layouts share one builder.
type record struct {
	lines []string
}

func (r *record) add(format string, args ...any) {
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

// render lays the record out as Slurm does.
func (r *record) render(oneLiner bool) string {
	if oneLiner {
		return strings.Join(r.lines, " ") + " \n"
	}
	return strings.Join(r.lines, "\n   ") + "\n   \n\n"
}

// fmtTime prints t as Slurm does, "Unknown" when unset.
func fmtTime(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "Unknown"
	}
	return t.In(loc).Format(timeLayout)
}

// fmtTimeOr prints t, or none when unset (Slurm's "None" for boot times).
func fmtTimeOr(t time.Time, loc *time.Location, none string) string {
	if t.IsZero() {
		return none
	}
	return t.In(loc).Format(timeLayout)
}

// orNull is Slurm's "(null)" for unset strings.
func orNull(s string) string {
	if s == "" {
		return "(null)"
	}
	return s
}

// memUnits prints a size in MB the way Slurm's convert_num_unit does with
// CONVERT_NUM_UNIT_EXACT: the largest unit that divides it exactly
// (16000 → "16000M", 65536 → "64G"), and a bare 0.
func memUnits(mb int64) string {
	if mb == 0 {
		return "0"
	}
	units := []string{"M", "G", "T", "P"}
	u := 0
	for mb >= 1024 && mb%1024 == 0 && u < len(units)-1 {
		mb /= 1024
		u++
	}
	return strconv.FormatInt(mb, 10) + units[u]
}

// limitStr prints a job time limit as scontrol and sacct do.
func limitStr(secs int64) string {
	switch {
	case secs == api.Infinite:
		return "UNLIMITED"
	case secs <= 0:
		return "Partition_Limit"
	}
	return api.FormatElapsedLong(secs)
}

// idxRanges prints GPU indices as Slurm's IDX list: "0-1,4".
func idxRanges(idx []int) string {
	if len(idx) == 0 {
		return "N/A"
	}
	s := append([]int(nil), idx...)
	sort.Ints(s)
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(s[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", s[i], s[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// tres holds trackable resource counts, printed in Slurm's TRES id order
// (cpu, mem, node, billing, then gres/gpu); zero counts are left out, as
// Slurm leaves them out of AllocTRES.
type tres struct {
	cpu, node, billing, gpus int
	memMB                    int64
}

func (t tres) String() string {
	var parts []string
	add := func(k string, v int) {
		if v > 0 {
			parts = append(parts, k+"="+strconv.Itoa(v))
		}
	}
	add("cpu", t.cpu)
	if t.memMB > 0 {
		parts = append(parts, "mem="+memUnits(t.memMB))
	}
	add("node", t.node)
	add("billing", t.billing)
	add("gres/gpu", t.gpus)
	return strings.Join(parts, ",")
}

// gresString prints a GPU count with its model, as Slurm's Gres=
// fields do: "gpu:h100:2", or "gpu:2" without a model.
func gresString(model string, n int) string {
	if model == "" {
		return fmt.Sprintf("gpu:%d", n)
	}
	return fmt.Sprintf("gpu:%s:%d", model, n)
}
