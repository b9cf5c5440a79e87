package sim

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Multi-seed comparisons. The seed orders the jobs submitted in the same
// second and draws the modelled time limits, and one seed's luck moves
// a policy's mean wait by tens of percent on a real trace: a comparison
// over several seeds reports, per policy and metric, the median over
// the seeds and their range (min to max: with the handful of seeds a
// comparison affords, percentiles such as p10-p90 would be the extremes
// anyway).

// SeedRun is the replays of one seed, in policy order.
type SeedRun struct {
	Seed     uint64         `json:"seed"`
	Policies []PolicyReport `json:"policies"`
}

// PolicySpread is one policy's metrics over all seeds.
type PolicySpread struct {
	Policy  string         `json:"policy"`
	Metrics []MetricSpread `json:"metrics"`
}

// MetricSpread is one metric over the seeds: Values in Report.Seeds
// order, their median (the mean of the middle two for an even count)
// and range. Metric is the number's path in a PolicyReport's JSON
// ("queue_delay_s.p99", "by_size.9-32.queue_delay_s.max",
// "queues.vision.share").
type MetricSpread struct {
	Metric string    `json:"metric"`
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Values []float64 `json:"values"`
}

// maxSeeds bounds a --seeds list.
const maxSeeds = 1000

// ParseSeeds reads --seeds: seeds and ranges, "1-5", "3,7,9", "1-3,10".
// A seed may come only once.
func ParseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(strings.TrimSpace(lo), 10, 64)
		if err != nil {
			return nil, api.Invalid("--seeds: %q is not a seed or a range like 1-5", part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(strings.TrimSpace(hi), 10, 64); err != nil || b < a {
				return nil, api.Invalid("--seeds: %q is not a range like 1-5", part)
			}
		}
		if b-a >= maxSeeds || len(out)+int(b-a) >= maxSeeds {
			return nil, api.Invalid("--seeds: more than %d seeds", maxSeeds)
		}
		for v := a; ; v++ {
			if slices.Contains(out, v) {
				return nil, api.Invalid("--seeds names seed %d twice", v)
			}
			out = append(out, v)
			if v == b {
				break
			}
		}
	}
	return out, nil
}

// spread computes every metric of the report's rows (metrics of the
// first seed's first policy) over runs: runs[s][i] is seed s's replay
// of policy i.
func spread(runs [][]PolicyReport, starveAfter int64) []PolicySpread {
	if len(runs) == 0 || len(runs[0]) == 0 {
		return nil
	}
	ms := metrics(&runs[0][0], starveAfter)
	out := make([]PolicySpread, len(runs[0]))
	for i := range out {
		out[i].Policy = runs[0][i].Policy
		for _, m := range ms {
			sp := MetricSpread{Metric: m.key, Values: make([]float64, len(runs))}
			for s := range runs {
				sp.Values[s] = round6(m.get(&runs[s][i]))
			}
			sorted := slices.Sorted(slices.Values(sp.Values))
			n := len(sorted)
			sp.Min, sp.Max = sorted[0], sorted[n-1]
			sp.Median = sorted[n/2]
			if n%2 == 0 {
				sp.Median = round6((sorted[n/2-1] + sorted[n/2]) / 2)
			}
			out[i].Metrics = append(out[i].Metrics, sp)
		}
	}
	return out
}

// spreadIndex maps each policy's metrics by key (nil maps with one
// seed).
func (r *Report) spreadIndex() []map[string]*MetricSpread {
	out := make([]map[string]*MetricSpread, len(r.Policies))
	for i := range r.Spread {
		if i >= len(out) {
			break
		}
		out[i] = map[string]*MetricSpread{}
		for k := range r.Spread[i].Metrics {
			out[i][r.Spread[i].Metrics[k].Metric] = &r.Spread[i].Metrics[k]
		}
	}
	return out
}

// medianWall combines one policy's wall times over seeds: the median of
// each figure.
func medianWall(ws []WallTimes) WallTimes {
	if len(ws) == 1 {
		return ws[0]
	}
	pick := func(f func(WallTimes) int64) int64 {
		v := make([]int64, len(ws))
		for i, w := range ws {
			v[i] = f(w)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	out := WallTimes{Passes: int(pick(func(w WallTimes) int64 { return int64(w.Passes) }))}
	out.P50 = time.Duration(pick(func(w WallTimes) int64 { return int64(w.P50) }))
	out.P99 = time.Duration(pick(func(w WallTimes) int64 { return int64(w.P99) }))
	out.Max = time.Duration(pick(func(w WallTimes) int64 { return int64(w.Max) }))
	out.Total = time.Duration(pick(func(w WallTimes) int64 { return int64(w.Total) }))
	return out
}
