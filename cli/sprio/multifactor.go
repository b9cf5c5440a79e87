package sprio

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/jobfmt"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
)

// Under policy tide (when its multifactor priority orders the passes)
// sprio prints Slurm's multifactor layout: the weighted factors, or
// with -n the factors in [0, 1], of the columns whose weight is not
// zero, as Slurm's sprio leaves out the factors a site does not use.
// Tide's factors map onto Slurm's AGE, FAIRSHARE and JOBSIZE; LENGTH
// (how short the time limit is) is Tide's own; SITE is 0, as in Slurm
// without a site factor.

// priorityAPI is the controller call behind the multifactor layout
// (client.Client.Priority). It is separate from cmdutil.API so that
// fakes need not implement it: without it sprio prints Tide's levels.
type priorityAPI interface {
	Priority(ctx context.Context, f api.JobFilter) (api.PriorityList, error)
}

// multifactor fetches the factors of the jobs flt selects; nil when the
// controller's passes are not ordered by multifactor priority (another
// policy, share mode, or a controller without the call).
func multifactor(ctx context.Context, c cmdutil.API, flt api.JobFilter) (*api.PriorityList, error) {
	pc, ok := c.(priorityAPI)
	if !ok {
		return nil, nil
	}
	pl, err := pc.Priority(ctx, flt)
	switch {
	case errors.Is(err, api.ErrNotFound):
		// A controller from before the call.
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("Couldn't get priority factors from controller: %w", err)
	case pl.Weights == nil || !pl.Orders:
		return nil, nil
	}
	return &pl, nil
}

// mfRow is one line of the multifactor layout: a job and its factors;
// weights marks the weights line (-w), whose job is nil.
type mfRow struct {
	job     *api.Job
	f       *api.JobPriority
	weights bool
}

// mfEnv is what the multifactor columns depend on besides the row.
type mfEnv struct {
	w    *api.PriorityWeights
	norm bool
}

// mfFormat is the multifactor layout's format for the options, in
// Slurm 22.05 sprio's letters (L, l: Tide's length factor).
func mfFormat(w *api.PriorityWeights, long, norm, user bool) string {
	if long {
		if norm {
			return "%.15i %9r %.8u %10y %10a %10f %10j %10l"
		}
		return "%.15i %9r %.8u %.10Y %.10S %.10A %.10F %.10J %.10L %.11N"
	}
	f := "%.15i %9r"
	if user {
		f += " %.8u"
	}
	cols := []struct {
		weight float64
		letter byte
	}{{w.Age, 'a'}, {w.Fairshare, 'f'}, {w.JobSize, 'j'}, {w.Length, 'l'}}
	if norm {
		f += " %10y"
	} else {
		f += " %.10Y %.10S"
	}
	for _, c := range cols {
		if c.weight == 0 {
			continue
		}
		if norm {
			f += " %10" + string(c.letter)
		} else {
			f += " %.10" + string(c.letter-'a'+'A')
		}
	}
	return f
}

// mfFactor is one factor column: its header, weight and factor.
type mfFactor struct {
	header string
	weight func(*api.PriorityWeights) float64
	factor func(*api.JobPriority) float64
}

var mfFactors = map[byte]mfFactor{
	'a': {"AGE", func(w *api.PriorityWeights) float64 { return w.Age }, func(f *api.JobPriority) float64 { return f.Age }},
	'f': {"FAIRSHARE", func(w *api.PriorityWeights) float64 { return w.Fairshare }, func(f *api.JobPriority) float64 { return f.Fairshare }},
	'j': {"JOBSIZE", func(w *api.PriorityWeights) float64 { return w.JobSize }, func(f *api.JobPriority) float64 { return f.JobSize }},
	'l': {"LENGTH", func(w *api.PriorityWeights) float64 { return w.Length }, func(f *api.JobPriority) float64 { return f.Length }},
}

// mfField resolves a letter of mfFormat.
func (e *mfEnv) mfField(name string) (slurmfmt.Field[*mfRow], bool) {
	if len(name) != 1 {
		return slurmfmt.Field[*mfRow]{}, false
	}
	str := func(header string, v func(r *mfRow) string) (slurmfmt.Field[*mfRow], bool) {
		return slurmfmt.Field[*mfRow]{Header: header, HeaderNoCut: true,
			Value: func(dst []byte, r *mfRow) []byte { return append(dst, v(r)...) }}, true
	}
	num := func(header string, v func(dst []byte, r *mfRow) []byte) (slurmfmt.Field[*mfRow], bool) {
		return slurmfmt.Field[*mfRow]{Header: header, HeaderNoCut: true, NoCut: true, Value: v}, true
	}
	c := name[0]
	switch c {
	case 'i':
		return str("JOBID", func(r *mfRow) string {
			if r.weights {
				return "Weights"
			}
			return jobID(r.job)
		})
	case 'r':
		return str("PARTITION", func(r *mfRow) string {
			if r.weights {
				return ""
			}
			return r.job.Partition
		})
	case 'u':
		return str("USER", func(r *mfRow) string {
			if r.weights {
				return ""
			}
			return jobfmt.NameOr(r.job.User, r.job.UserID)
		})
	case 'Y', 'y':
		return num("PRIORITY", func(dst []byte, r *mfRow) []byte {
			switch {
			case r.weights:
				return dst
			case c == 'y':
				// Over the highest priority the weights allow, so that
				// 1 is every factor at 1 (Slurm divides by 2^32−1).
				if s := e.w.Sum(); s > 0 {
					return appendNorm(dst, r.f.Priority/s)
				}
				return appendNorm(dst, 0)
			}
			return strconv.AppendFloat(dst, r.f.Priority, 'f', 0, 64)
		})
	case 'S':
		return num("SITE", func(dst []byte, r *mfRow) []byte {
			if r.weights {
				return append(dst, '1')
			}
			return append(dst, '0')
		})
	case 'N':
		return num("NICE", func(dst []byte, r *mfRow) []byte {
			if r.weights {
				return dst
			}
			return strconv.AppendInt(dst, int64(r.f.Nice), 10)
		})
	}
	lower := c | 0x20
	fc, ok := mfFactors[lower]
	if !ok {
		return slurmfmt.Field[*mfRow]{}, false
	}
	weighted := c != lower
	return num(fc.header, func(dst []byte, r *mfRow) []byte {
		w := fc.weight(e.w)
		switch {
		case r.weights:
			return strconv.AppendFloat(dst, w, 'f', 0, 64)
		case weighted:
			return strconv.AppendFloat(dst, w*fc.factor(r.f), 'f', 0, 64)
		}
		return appendNorm(dst, fc.factor(r.f))
	})
}

// mfRows joins the listed jobs with their factors. A job the factors
// do not cover (it arrived between the two calls) is left out: the
// next sprio shows it.
func mfRows(jobs []*api.Job, pl *api.PriorityList) []*mfRow {
	byID := make(map[uint64]*api.JobPriority, len(pl.Jobs))
	for i := range pl.Jobs {
		byID[pl.Jobs[i].JobID] = &pl.Jobs[i]
	}
	rows := make([]*mfRow, 0, len(jobs))
	for _, j := range jobs {
		if f := byID[j.ID]; f != nil {
			rows = append(rows, &mfRow{job: j, f: f})
		}
	}
	return rows
}

// writeMultifactor prints the multifactor layout.
func (o *Options) writeMultifactor(jobs []*api.Job, pl *api.PriorityList, users bool) ([]byte, error) {
	e := &mfEnv{w: pl.Weights, norm: o.Norm}
	f, err := slurmfmt.ParseShort(mfFormat(pl.Weights, o.Long, o.Norm, users))
	if err != nil {
		return nil, err
	}
	tbl, err := slurmfmt.Compile(f, "priority", e.mfField)
	if err != nil {
		return nil, err
	}
	var line []byte
	if !o.NoHeader {
		line = tbl.AppendHeader(line)
	}
	if o.Weights {
		// Slurm's sprio -w: the header and the weights line only.
		return tbl.AppendRow(line, &mfRow{weights: true}), nil
	}
	for _, r := range mfRows(jobs, pl) {
		line = tbl.AppendRow(line, r)
	}
	return line, nil
}

// mfJSON is a job's multifactor factors in --json.
type mfJSON struct {
	Priority  float64 `json:"priority"`
	Age       float64 `json:"age"`
	Length    float64 `json:"length"`
	JobSize   float64 `json:"job_size"`
	Fairshare float64 `json:"fairshare"`
	Nice      int     `json:"nice"`
}

var _ priorityAPI = (*client.Client)(nil)
