package sprio

import (
	"strconv"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/jobfmt"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
)

// env is what the columns depend on besides the job.
type env struct {
	now   time.Time
	loc   *time.Location
	share *jobfmt.Sharing
	// norm prints levels over 10 and the age over the starvation age.
	norm bool
}

type field struct {
	header string
	noCut  bool
	value  func(e *env, dst []byte, j *api.Job) []byte
}

// fields are sprio's columns by internal letter (Slurm's letters where
// Slurm has the column: i, r, u).
func fields() map[byte]field { return fieldTable.Get() }

var fieldTable = cmdutil.Lazy[map[byte]field]{Build: func() map[byte]field {
	return map[byte]field{
		'i': {header: "JOBID", value: func(_ *env, dst []byte, j *api.Job) []byte { return append(dst, jobID(j)...) }},
		'r': {header: "PARTITION", value: func(_ *env, dst []byte, j *api.Job) []byte { return append(dst, j.Partition...) }},
		'u': {header: "USER", value: func(_ *env, dst []byte, j *api.Job) []byte {
			return append(dst, jobfmt.NameOr(j.User, j.UserID)...)
		}},
		'a': {header: "QUEUE", value: func(_ *env, dst []byte, j *api.Job) []byte { return append(dst, orDash(j.Account)...) }},
		'q': {header: "QOS", value: func(e *env, dst []byte, j *api.Job) []byte { return append(dst, orDash(e.share.ClassName(j))...) }},
		'y': {header: "LEVEL", noCut: true, value: func(e *env, dst []byte, j *api.Job) []byte {
			lvl, _ := e.share.Level(j)
			return e.appendLevel(dst, lvl)
		}},
		'k': {header: "ASKED", value: func(_ *env, dst []byte, j *api.Job) []byte {
			if p := j.JobSpec.Priority; p >= api.MinLevel && p <= api.MaxLevel {
				return strconv.AppendInt(dst, int64(p), 10)
			}
			return append(dst, '-')
		}},
		'A': {header: "AGE", noCut: true, value: func(e *env, dst []byte, j *api.Job) []byte {
			w := jobfmt.Waited(j, e.now)
			if e.norm {
				age := e.share.StarvationAge()
				if age <= 0 {
					return append(dst, "0.0000000"...)
				}
				return appendNorm(dst, min(1, float64(w)/float64(age)))
			}
			return slurmfmt.AppendSecs(dst, int64(w/time.Second))
		}},
		'Y': {header: "AGED_LEVEL", noCut: true, value: func(e *env, dst []byte, j *api.Job) []byte {
			return e.appendLevel(dst, e.share.AgedLevel(j, e.now))
		}},
		'S': {header: "STARVING", value: func(e *env, dst []byte, j *api.Job) []byte {
			if j.Starving.IsZero() {
				return append(dst, '-')
			}
			return j.Starving.In(e.loc).AppendFormat(dst, slurmfmt.TimestampLayout)
		}},
		'H': {header: "QUEUE_SHARE", noCut: true, value: func(e *env, dst []byte, j *api.Job) []byte {
			q := e.share.Queue(j.Account)
			switch {
			case q == nil:
				return append(dst, '-')
			case e.norm && q.Guaranteed > 0:
				return appendNorm(dst, float64(q.UsedGPUs)/float64(q.Guaranteed))
			}
			dst = strconv.AppendInt(dst, int64(q.UsedGPUs), 10)
			dst = append(dst, '/')
			return strconv.AppendInt(dst, int64(q.Guaranteed), 10)
		}},
		'g': {header: "GPUS", value: func(_ *env, dst []byte, j *api.Job) []byte { return strconv.AppendInt(dst, int64(j.ReqGPUs()), 10) }},
		'R': {header: "REASON", noCut: true, value: func(_ *env, dst []byte, j *api.Job) []byte {
			return append(dst, jobfmt.ReasonWithDetail(j)...)
		}},
		'D': {header: "REASONS", noCut: true, value: func(_ *env, dst []byte, j *api.Job) []byte {
			dst = append(dst, jobfmt.Reason(j)...)
			if j.ReasonDetail != "" {
				dst = append(dst, ": "...)
				dst = append(dst, j.ReasonDetail...)
			}
			return dst
		}},
	}
}}

func (e *env) appendLevel(dst []byte, lvl int) []byte {
	if e.norm {
		return appendNorm(dst, float64(lvl)/api.MaxLevel)
	}
	return strconv.AppendInt(dst, int64(lvl), 10)
}

// appendNorm prints a normalized factor as Slurm's sprio -n does
// ("%.7f").
func appendNorm(dst []byte, v float64) []byte { return strconv.AppendFloat(dst, v, 'f', 7, 64) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// jobID is the job's id, "N_I" for an array task and "N_[…]" for an
// array's pending tasks, as squeue prints them.
func jobID(j *api.Job) string {
	if j.ArrayJobID == 0 {
		return strconv.FormatUint(j.ID, 10)
	}
	return j.ArrayID()
}

// compile compiles one of the formats above.
func compile(format string, e *env) (*slurmfmt.Table[*api.Job], error) {
	f, err := slurmfmt.ParseShort(format)
	if err != nil {
		return nil, err
	}
	return slurmfmt.Compile(f, "priority", func(name string) (slurmfmt.Field[*api.Job], bool) {
		if len(name) != 1 {
			return slurmfmt.Field[*api.Job]{}, false
		}
		fd, ok := fields()[name[0]]
		if !ok {
			return slurmfmt.Field[*api.Job]{}, false
		}
		return slurmfmt.Field[*api.Job]{
			Header: fd.header, NoCut: fd.noCut, HeaderNoCut: true,
			Value: func(dst []byte, j *api.Job) []byte { return fd.value(e, dst, j) },
		}, true
	})
}
