package slurmfmt

// Usage values (issue 22) as Slurm 22.05's sacct and sstat print a
// step's statistics (src/sacct/print.c, src/sstat/print.c): sizes are
// bytes with Slurm's exact unit conversion ("4772K", "1.50G"), CPU
// times "[D-]HH:MM:SS" or, below an hour with a fraction, "MM:SS.mmm",
// and the TRES usage strings "cpu=00:00:01,energy=0,…". sacct and sstat
// share them so that both print a step the same way.

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
)

// ElapsedUsec prints a CPU time as Slurm's sacct and sstat do: days as
// "D-HH:MM:SS", hours as "HH:MM:SS", less with a fraction of a second
// as "MM:SS.mmm", else "00:MM:SS".
func ElapsedUsec(usec uint64) string {
	secs, sub := usec/1e6, usec%1e6/1000
	s, m, h, d := secs%60, secs/60%60, secs/3600%24, secs/86400
	switch {
	case d > 0:
		return fmt.Sprintf("%d-%02d:%02d:%02d", d, h, m, s)
	case h > 0:
		return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	case sub > 0:
		return fmt.Sprintf("%02d:%02d.%03d", m, s, sub)
	}
	return fmt.Sprintf("00:%02d:%02d", m, s)
}

// CPUSecs prints a per-task CPU statistic (AveCPU, MinCPU): Slurm keeps
// those in whole seconds, so the fraction is dropped before ElapsedUsec.
func CPUSecs(usec uint64) string { return ElapsedUsec(usec / 1e6 * 1e6) }

// tresTime prints a TRES usage CPU time: whole seconds, "HH:MM:SS" or
// "D-HH:MM:SS".
func tresTime(usec uint64) string { return api.FormatElapsedLong(int64(usec / 1e6)) }

// unitSuffix are Slurm's unit letters, none for plain numbers.
var unitSuffix = []string{"", "K", "M", "G", "T", "P"}

// Unit indices of ConvertExact and SmallDouble.
const (
	UnitNone = 0
	UnitMega = 2
)

// ConvertExact prints n (in the unit of index unit: UnitNone plain, 1
// K…) as Slurm's convert_num_unit with CONVERT_NUM_UNIT_EXACT: divided
// by 1024 while that loses nothing (halves still count as exact), an
// integer with its unit letter, else two decimals.
func ConvertExact(n float64, unit int) string {
	if int64(n) == 0 {
		return "0"
	}
	for n >= 1024 && uint64(n)%512 == 0 {
		n /= 1024
		unit++
	}
	suffix := "?"
	if unit >= 0 && unit < len(unitSuffix) {
		suffix = unitSuffix[unit]
	}
	if n == math.Trunc(n) {
		return strconv.FormatUint(uint64(n), 10) + suffix
	}
	return strconv.FormatFloat(n, 'f', 2, 64) + suffix
}

// BytesSize prints a byte count as MaxRSS, AvePages and the TRES usage
// sizes are printed.
func BytesSize(b uint64) string { return ConvertExact(float64(b), UnitNone) }

// SmallDouble prints v (in the unit of index unit) as Slurm's
// _print_small_double: ConvertExact above one, "0.xxM" from zero to
// one, "0" for none.
func SmallDouble(v float64, unit int) string {
	switch {
	case v > 1:
		return ConvertExact(v, unit)
	case v > 0:
		return fmt.Sprintf("%.2fM", v)
	}
	return "0"
}

// DiskMB prints a byte count as sacct prints disk usage: megabytes,
// "0.xxM" below one, "0" for none. (sstat prints SmallDouble of the
// bytes themselves.)
func DiskMB(b uint64) string { return SmallDouble(float64(b)/(1<<20), UnitMega) }

// TRESSide is the in (read, resident…) or out (written) side of the TRES
// usage strings.
type TRESSide int

// The sides of the TRES usage strings.
const (
	TRESIn TRESSide = iota
	TRESOut
)

// TRESWhich is which value of a statistic a TRES usage string shows.
type TRESWhich int

// The values of TRESUsage{In,Out}{Tot,Ave,Max,MaxNode,MaxTask,Min,
// MinNode,MinTask}.
const (
	TRESTot TRESWhich = iota
	TRESAve
	TRESMax
	TRESMaxNode
	TRESMaxTask
	TRESMin
	TRESMinNode
	TRESMinTask
)

// tresStat names one TRES of the usage strings and its statistic.
type tresStat struct {
	name string
	stat func(u *api.StepUsage) api.UsageStat
	// time prints as a CPU time, not a size.
	time bool
}

// tresStats lists the TRES of each side, in Slurm's (sorted) order;
// energy, which Tide does not measure, prints as 0 where Slurm's would
// without an energy plugin, and the GPU entries appear only where the
// node read them (NVML).
func tresStats(side TRESSide, u *api.StepUsage) []tresStat {
	if side == TRESOut {
		return []tresStat{{name: "energy"}, {name: "fs/disk", stat: func(u *api.StepUsage) api.UsageStat { return u.DiskWrite }}}
	}
	out := []tresStat{
		{name: "cpu", stat: func(u *api.StepUsage) api.UsageStat { return u.CPU }, time: true},
		{name: "energy"},
		{name: "fs/disk", stat: func(u *api.StepUsage) api.UsageStat { return u.DiskRead }},
	}
	if u.GPU {
		out = append(out,
			tresStat{name: "gres/gpumem", stat: func(u *api.StepUsage) api.UsageStat { return u.GPUMem }},
			tresStat{name: "gres/gpuutil", stat: func(u *api.StepUsage) api.UsageStat { return u.GPUUtil }})
	}
	return append(out,
		tresStat{name: "mem", stat: func(u *api.StepUsage) api.UsageStat { return u.RSS }},
		tresStat{name: "pages", stat: func(u *api.StepUsage) api.UsageStat { return u.Pages }},
		tresStat{name: "vmem", stat: func(u *api.StepUsage) api.UsageStat { return u.VMSize }})
}

// TRESUsage prints a step's TRESUsage* field: "cpu=00:00:01,energy=0,…"
// (u must not be nil).
func TRESUsage(side TRESSide, which TRESWhich, u *api.StepUsage) string {
	return tresUsage(side, which, u, BytesSize)
}

// TRESUsageNoConvert is TRESUsage with sizes in plain bytes
// (--noconvert).
func TRESUsageNoConvert(side TRESSide, which TRESWhich, u *api.StepUsage) string {
	return tresUsage(side, which, u, func(b uint64) string { return strconv.FormatUint(b, 10) })
}

func tresUsage(side TRESSide, which TRESWhich, u *api.StepUsage, size func(uint64) string) string {
	var parts []string
	for _, t := range tresStats(side, u) {
		var s api.UsageStat
		if t.stat != nil {
			s = t.stat(u)
		} else if which == TRESMaxNode || which == TRESMaxTask || which == TRESMinNode || which == TRESMinTask {
			continue // no energy readings: no node or task has the most
		}
		var v string
		switch which {
		case TRESMaxNode:
			v = s.MaxNode
		case TRESMinNode:
			v = s.MinNode
		case TRESMaxTask:
			v = strconv.Itoa(s.MaxTask)
		case TRESMinTask:
			v = strconv.Itoa(s.MinTask)
		default:
			n := s.Tot
			switch which {
			case TRESAve:
				n = s.Ave(u.Tasks)
			case TRESMax:
				n = s.Max
			case TRESMin:
				n = s.Min
			}
			if t.time {
				v = tresTime(n)
			} else {
				v = size(n)
			}
		}
		parts = append(parts, t.name+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
