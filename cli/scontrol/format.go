package scontrol

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/scontrol/jobfmt"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// record collects the Key=Value lines of one scontrol block. Slurm joins
// them with "\n   " (or " " with -o) and ends a block with "\n   \n\n"
// (or " \n"); keeping the lines apart lets both layouts share one builder.
type record struct {
	lines []string
}

// add appends a line. It is escaped (termsafe) as a whole: its values
// (names, comments, paths, reasons) are other users' text, and a
// newline or escape sequence in one must neither drive the reader's
// terminal nor forge Key=Value lines that scripts parse.
func (r *record) add(format string, args ...any) {
	r.lines = append(r.lines, termsafe.Escape(fmt.Sprintf(format, args...)))
}

// render lays the record out as Slurm does.
func (r *record) render(oneLiner bool) string {
	if oneLiner {
		return strings.Join(r.lines, " ") + " \n"
	}
	return strings.Join(r.lines, "\n   ") + "\n   \n\n"
}

// fmtTimeOr prints t, or none when unset (Slurm's "None" for boot times).
func fmtTimeOr(t time.Time, loc *time.Location, none string) string {
	if t.IsZero() {
		return none
	}
	return jobfmt.Time(t, loc)
}

// fmtTime prints t as Slurm does, "Unknown" when unset.
func fmtTime(t time.Time, loc *time.Location) string { return jobfmt.Time(t, loc) }

// orNull is Slurm's "(null)" for unset strings.
func orNull(s string) string {
	if s == "" {
		return "(null)"
	}
	return s
}

// tres holds trackable resource counts, printed in Slurm's TRES id order
// (cpu, mem, node, billing, then gres/gpu); zero counts are left out, as
// Slurm leaves them out of AllocTRES.
type tres struct {
	cpu, node, billing, gpus int
	memMB                    int64
	// gpuMemMB is the GPU memory of a sliced job's slices (Tide's
	// gres/gpumem), 0 for whole GPUs.
	gpuMemMB int64
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
		parts = append(parts, "mem="+jobfmt.Mem(t.memMB))
	}
	add("node", t.node)
	add("billing", t.billing)
	add("gres/gpu", t.gpus)
	if t.gpuMemMB > 0 {
		parts = append(parts, "gres/gpumem="+jobfmt.Mem(t.gpuMemMB))
	}
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
