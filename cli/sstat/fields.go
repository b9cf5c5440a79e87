package sstat

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/livesteps"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// row is one step's line: the step, and what its tasks used so far
// (nil: no node has sampled it yet, and the usage fields print blank,
// as Slurm's do for a step without accounting data).
type row struct {
	step  *livesteps.Step
	usage *api.StepUsage
	// raw is --noconvert: sizes in plain bytes.
	raw bool
}

// fieldDef is one sstat field; width is Slurm's default (negative:
// left-justified).
type fieldDef struct {
	name  string
	width int
	kind  slurmfmt.FieldKind
	value func(r *row) string
}

// usage wraps a value of the step's usage: blank without one.
func usage(f func(r *row, u *api.StepUsage) string) func(r *row) string {
	return func(r *row) string {
		if r.usage == nil {
			return ""
		}
		return f(r, r.usage)
	}
}

// size prints a byte count: with Slurm's exact unit conversion, or in
// bytes with --noconvert.
func (r *row) size(b uint64) string {
	if r.raw {
		return strconv.FormatUint(b, 10)
	}
	return slurmfmt.BytesSize(b)
}

// disk prints a disk byte count as sstat does (Slurm's
// _print_small_double of the bytes themselves).
func (r *row) disk(b uint64) string {
	if r.raw && b > 1 {
		return strconv.FormatUint(b, 10)
	}
	return slurmfmt.SmallDouble(float64(b), slurmfmt.UnitNone)
}

func (r *row) tres(side slurmfmt.TRESSide, which slurmfmt.TRESWhich) string {
	if r.usage == nil {
		return ""
	}
	if r.raw {
		return slurmfmt.TRESUsageNoConvert(side, which, r.usage)
	}
	return slurmfmt.TRESUsage(side, which, r.usage)
}

func tres(side slurmfmt.TRESSide, which slurmfmt.TRESWhich) func(r *row) string {
	return func(r *row) string { return r.tres(side, which) }
}

func task(f func(u *api.StepUsage) int) func(r *row) string {
	return usage(func(_ *row, u *api.StepUsage) string { return strconv.Itoa(f(u)) })
}

func node(f func(u *api.StepUsage) string) func(r *row) string {
	return usage(func(_ *row, u *api.StepUsage) string { return f(u) })
}

// constant is a value Tide does not measure, printed as Slurm prints it
// without the plugin that would (no energy or CPU frequency readings,
// no --cpu-freq request).
func constant(v string) func(r *row) string { return func(*row) string { return v } }

// fieldDefs lists Slurm 22.05's sstat fields in its order, which
// decides what an abbreviation selects and how --helpformat lists them.
func fieldDefs() []fieldDef { return fieldTable.Get() }

var fieldTable = cmdutil.Lazy[[]fieldDef]{Build: func() []fieldDef {
	const (
		str = slurmfmt.FieldStr
		num = slurmfmt.FieldNum
	)
	return []fieldDef{
		{"AveCPU", 10, str, usage(func(_ *row, u *api.StepUsage) string { return slurmfmt.CPUSecs(u.CPU.Ave(u.Tasks)) })},
		{"AveCPUFreq", 10, str, constant("0")},
		{"AveDiskRead", 12, str, usage(func(r *row, u *api.StepUsage) string { return r.disk(u.DiskRead.Ave(u.Tasks)) })},
		{"AveDiskWrite", 12, str, usage(func(r *row, u *api.StepUsage) string { return r.disk(u.DiskWrite.Ave(u.Tasks)) })},
		{"AvePages", 10, str, usage(func(r *row, u *api.StepUsage) string { return r.size(u.Pages.Ave(u.Tasks)) })},
		{"AveRSS", 10, str, usage(func(r *row, u *api.StepUsage) string { return r.size(u.RSS.Ave(u.Tasks)) })},
		{"AveVMSize", 10, str, usage(func(r *row, u *api.StepUsage) string { return r.size(u.VMSize.Ave(u.Tasks)) })},
		{"ConsumedEnergy", 14, str, constant("0")},
		{"ConsumedEnergyRaw", 17, num, constant("0")},
		{"JobID", -12, str, func(r *row) string { return r.step.IDString() }},
		{"MaxDiskRead", 12, str, usage(func(r *row, u *api.StepUsage) string { return r.disk(u.DiskRead.Max) })},
		{"MaxDiskReadNode", 15, str, node(func(u *api.StepUsage) string { return u.DiskRead.MaxNode })},
		{"MaxDiskReadTask", 15, num, task(func(u *api.StepUsage) int { return u.DiskRead.MaxTask })},
		{"MaxDiskWrite", 12, str, usage(func(r *row, u *api.StepUsage) string { return r.disk(u.DiskWrite.Max) })},
		{"MaxDiskWriteNode", 16, str, node(func(u *api.StepUsage) string { return u.DiskWrite.MaxNode })},
		{"MaxDiskWriteTask", 16, num, task(func(u *api.StepUsage) int { return u.DiskWrite.MaxTask })},
		{"MaxPages", 8, str, usage(func(r *row, u *api.StepUsage) string { return r.size(u.Pages.Max) })},
		{"MaxPagesNode", 12, str, node(func(u *api.StepUsage) string { return u.Pages.MaxNode })},
		{"MaxPagesTask", 14, num, task(func(u *api.StepUsage) int { return u.Pages.MaxTask })},
		{"MaxRSS", 10, str, usage(func(r *row, u *api.StepUsage) string { return r.size(u.RSS.Max) })},
		{"MaxRSSNode", 10, str, node(func(u *api.StepUsage) string { return u.RSS.MaxNode })},
		{"MaxRSSTask", 10, num, task(func(u *api.StepUsage) int { return u.RSS.MaxTask })},
		{"MaxVMSize", 10, str, usage(func(r *row, u *api.StepUsage) string { return r.size(u.VMSize.Max) })},
		{"MaxVMSizeNode", 14, str, node(func(u *api.StepUsage) string { return u.VMSize.MaxNode })},
		{"MaxVMSizeTask", 14, num, task(func(u *api.StepUsage) int { return u.VMSize.MaxTask })},
		{"MinCPU", 10, str, usage(func(_ *row, u *api.StepUsage) string { return slurmfmt.CPUSecs(u.CPU.Min) })},
		{"MinCPUNode", 10, str, node(func(u *api.StepUsage) string { return u.CPU.MinNode })},
		{"MinCPUTask", 10, num, task(func(u *api.StepUsage) int { return u.CPU.MinTask })},
		{"Nodelist", 20, str, func(r *row) string { return hostlist.Compress(r.step.Nodes) }},
		{"NTasks", 8, num, func(r *row) string {
			if r.usage != nil && r.usage.Tasks > 0 {
				return strconv.Itoa(r.usage.Tasks)
			}
			return strconv.Itoa(r.step.Tasks)
		}},
		// Tide's nodes report no process ids (sstat -i).
		{"Pids", 20, str, constant("")},
		{"ReqCPUFreq", 10, str, constant("Unknown")},
		{"ReqCPUFreqMin", 13, str, constant("Unknown")},
		{"ReqCPUFreqMax", 13, str, constant("Unknown")},
		{"ReqCPUFreqGov", 13, str, constant("Unknown")},
		{"TRESUsageInAve", 14, str, tres(slurmfmt.TRESIn, slurmfmt.TRESAve)},
		{"TRESUsageInMax", 14, str, tres(slurmfmt.TRESIn, slurmfmt.TRESMax)},
		{"TRESUsageInMaxNode", 18, str, tres(slurmfmt.TRESIn, slurmfmt.TRESMaxNode)},
		{"TRESUsageInMaxTask", 18, str, tres(slurmfmt.TRESIn, slurmfmt.TRESMaxTask)},
		{"TRESUsageInMin", 14, str, tres(slurmfmt.TRESIn, slurmfmt.TRESMin)},
		{"TRESUsageInMinNode", 18, str, tres(slurmfmt.TRESIn, slurmfmt.TRESMinNode)},
		{"TRESUsageInMinTask", 18, str, tres(slurmfmt.TRESIn, slurmfmt.TRESMinTask)},
		{"TRESUsageInTot", 14, str, tres(slurmfmt.TRESIn, slurmfmt.TRESTot)},
		{"TRESUsageOutAve", 15, str, tres(slurmfmt.TRESOut, slurmfmt.TRESAve)},
		{"TRESUsageOutMax", 15, str, tres(slurmfmt.TRESOut, slurmfmt.TRESMax)},
		{"TRESUsageOutMaxNode", 19, str, tres(slurmfmt.TRESOut, slurmfmt.TRESMaxNode)},
		{"TRESUsageOutMaxTask", 19, str, tres(slurmfmt.TRESOut, slurmfmt.TRESMaxTask)},
		{"TRESUsageOutMin", 15, str, tres(slurmfmt.TRESOut, slurmfmt.TRESMin)},
		{"TRESUsageOutMinNode", 19, str, tres(slurmfmt.TRESOut, slurmfmt.TRESMinNode)},
		{"TRESUsageOutMinTask", 19, str, tres(slurmfmt.TRESOut, slurmfmt.TRESMinTask)},
		{"TRESUsageOutTot", 15, str, tres(slurmfmt.TRESOut, slurmfmt.TRESTot)},
	}
}}

// DefaultFields is Slurm's sstat field list (sstat.h STAT_FIELDS).
const DefaultFields = "jobid,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,maxrssnode,maxrsstask,averss," +
	"maxpages,maxpagesnode,maxpagestask,avepages,mincpu,mincpunode,mincputask,avecpu,ntasks,avecpufreq," +
	"reqcpufreqmin,reqcpufreqmax,reqcpufreqgov,consumedenergy,maxdiskread,maxdiskreadnode,maxdiskreadtask," +
	"avediskread,maxdiskwrite,maxdiskwritenode,maxdiskwritetask,avediskwrite,tresusageinave,tresusageinmax," +
	"tresusageinmaxn,tresusageinmaxt,tresusageinmin,tresusageinminn,tresusageinmint,tresusageintot," +
	"tresusageoutave,tresusageoutmax,tresusageoutmaxn,tresusageoutmaxt,tresusageoutmin,tresusageoutminn," +
	"tresusageoutmint,tresusageouttot"

// column is a selected field with its effective width.
type column struct {
	def   *fieldDef
	width int
}

// parseFields reads the -o lists as Slurm's sstat does: comma separated
// names or their prefixes, in any case (the first field in Slurm's
// order wins), each with an optional %WIDTH (C's atoi; 0 keeps the
// default).
func parseFields(lists []string) ([]column, error) {
	var cols []column
	defs := fieldDefs()
	for _, list := range lists {
		for _, item := range strings.Split(list, ",") {
			item = strings.TrimLeft(item, " \t\n\v\f\r")
			if item == "" {
				continue
			}
			name, width := item, 0
			if i := strings.IndexByte(item, '%'); i >= 0 {
				name, width = item[:i], cmdutil.Atoi(item[i+1:])
				if width > slurmfmt.MaxWidth || width < -slurmfmt.MaxWidth {
					return nil, api.Invalid("field width %d in %q exceeds %d", width, item, slurmfmt.MaxWidth)
				}
			}
			var def *fieldDef
			for i := range defs {
				if len(name) <= len(defs[i].name) && strings.EqualFold(defs[i].name[:len(name)], name) {
					def = &defs[i]
					break
				}
			}
			if def == nil {
				return nil, api.Invalid("Invalid field requested: %q", name)
			}
			c := column{def: def, width: def.width}
			if width != 0 {
				c.width = width
			}
			cols = append(cols, c)
		}
	}
	return cols, nil
}

// writeFieldList is --helpformat: the field names four to a line.
func writeFieldList(w io.Writer) {
	var b strings.Builder
	for i, d := range fieldDefs() {
		switch {
		case i%4 != 0:
			b.WriteByte(' ')
		case i > 0:
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%-19s", d.name)
	}
	b.WriteByte('\n')
	io.WriteString(w, b.String())
}
