package sim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// DefaultStarveAfter is the queueing delay above which a job counts as
// starved: a day. A user who waits a day for a start has been failed,
// whatever the mean says; shorter bounds count the ordinary queueing of
// busy traces (Philly's p99 wait is hours under every policy).
const DefaultStarveAfter = 24 * 3600 // seconds

// seriesPoints is the resolution of the time series in reports.
const seriesPoints = 240

// Report compares replays of one trace. It is deterministic: the same
// inputs give the same JSON, byte for byte; wall-clock measurements live
// in Wall, which JSON leaves out.
type Report struct {
	Trace   string         `json:"trace"`
	Cluster ClusterSummary `json:"cluster"`
	// Seed is the (first) seed: Policies are its replays.
	Seed         uint64 `json:"seed"`
	StarveAfterS int64  `json:"starve_after_s"`
	// Estimates says which time limits the jobs asked for.
	Estimates EstimateSummary `json:"estimates"`
	Policies  []PolicyReport  `json:"policies"`
	// With several seeds, Seeds lists them all, MoreSeeds holds the
	// replays of the seeds after the first, and Spread the median and
	// range of every metric over all seeds, per policy (Policies'
	// order).
	Seeds     []uint64       `json:"seeds,omitempty"`
	MoreSeeds []SeedRun      `json:"more_seeds,omitempty"`
	Spread    []PolicySpread `json:"spread,omitempty"`
	// Wall holds each policy's scheduler time per pass (same order as
	// Policies; with several seeds, the medians over them); it varies
	// from run to run and is not part of JSON.
	Wall []WallTimes `json:"-"`
}

// ClusterSummary describes the simulated cluster.
type ClusterSummary struct {
	Nodes       int    `json:"nodes"`
	GPUs        int    `json:"gpus"`
	GPUsPerNode int    `json:"gpus_per_node"`
	CPUsPerNode int    `json:"cpus_per_node"`
	MemPerNode  int64  `json:"mem_per_node_mb"`
	Leaves      int    `json:"leaf_switches"`
	Partitions  string `json:"partitions"`
}

// Stats summarises a distribution (seconds, or a ratio for slowdown).
type Stats struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// SizeClass holds the delay and JCT of the jobs of one size class: GPU
// jobs of 1 (or a slice), 2-4, 5-8, 9-32 or more than 32 GPUs, and
// CPU-only jobs ("cpu").
type SizeClass struct {
	Class      string `json:"class"`
	QueueDelay Stats  `json:"queue_delay_s"`
	JCT        Stats  `json:"jct_s"`
}

// Point is one step of a time series: averages over [T, next T).
type Point struct {
	T           int64   `json:"t"`
	Utilisation float64 `json:"utilisation"`
	Queue       float64 `json:"queue"`
}

// PolicyReport is one replay's outcome.
type PolicyReport struct {
	Policy     string `json:"policy"`
	Jobs       int    `json:"jobs"`
	Completed  int    `json:"completed"`
	Rejected   int    `json:"rejected"`
	Skipped    int    `json:"skipped_no_duration"`
	Unfinished int    `json:"unfinished"`
	// TimedOut counts the completed jobs killed at a time limit below
	// their duration (estimates limit); Censored those the trace caught
	// unfinished (replayed for the time they had run).
	TimedOut int `json:"timed_out,omitempty"`
	Censored int `json:"censored,omitempty"`
	// Span is from the first submission to the last completion.
	SpanS             int64   `json:"span_s"`
	Utilisation       float64 `json:"utilisation"`
	AllocatedGPUHours float64 `json:"allocated_gpu_hours"`
	CapacityGPUHours  float64 `json:"capacity_gpu_hours"`
	// MakespanS is the end of the last job, in trace seconds.
	MakespanS  int64       `json:"makespan_s"`
	QueueDelay Stats       `json:"queue_delay_s"`
	JCT        Stats       `json:"jct_s"`
	Slowdown   Stats       `json:"bounded_slowdown"`
	BySize     []SizeClass `json:"by_size"`
	Starved    int         `json:"starved"`
	// FragmentedGPUs is the time-averaged count of free GPUs that no
	// pending job's per-node shape could use; FragmentedShare divides it
	// by the cluster's GPUs.
	FragmentedGPUs  float64 `json:"fragmented_gpus"`
	FragmentedShare float64 `json:"fragmented_share"`
	// WorkloadFragGPUs is the time-averaged free GPU capacity that a job
	// drawn from the trace's request mix could not use (the FGD paper's
	// fragmentation, GPU dimension; slices count by their share), and
	// WorkloadFragShare that over the cluster's GPUs. Slice jobs
	// (fractional gpu_share) run as GPU slices.
	WorkloadFragGPUs  float64 `json:"workload_frag_gpus"`
	WorkloadFragShare float64 `json:"workload_frag_share"`
	// SliceJobs counts the jobs that ran as slices of one GPU.
	SliceJobs    int     `json:"slice_jobs,omitempty"`
	MaxQueue     int     `json:"max_queue"`
	Preemptions  int     `json:"preemptions"`
	LostGPUHours float64 `json:"lost_gpu_hours"`
	Passes       int     `json:"passes"`
	Series       []Point `json:"series"`
	// JCTCDF holds the JCT at each percentile 0..100 (101 values).
	JCTCDF []float64 `json:"jct_cdf_s"`
	// Rejections counts rejected jobs by reason.
	Rejections map[string]int `json:"rejections,omitempty"`
	// Queues holds each trace queue's share of the cluster and waits,
	// largest queues (by the GPU time their jobs ask) first.
	Queues []QueueReport `json:"queues,omitempty"`
	// Charts holds the series the HTML charts draw (nil without
	// completed jobs); JSON leaves it out.
	Charts *ChartSeries `json:"-"`
}

// WallTimes is the scheduler's wall time per pass of one replay.
type WallTimes struct {
	Passes int
	P50    time.Duration
	P99    time.Duration
	Max    time.Duration
	Total  time.Duration
}

// Summarize computes the report of one replay; starveAfter is in seconds.
func Summarize(r *Result, starveAfter int64) (PolicyReport, WallTimes) {
	pr := PolicyReport{Policy: r.Policy, Jobs: len(r.Jobs), Passes: r.Passes}
	var delays, jcts, slow []float64
	cd := make([][]float64, len(sizeClasses))
	cj := make([][]float64, len(sizeClasses))
	first, last := int64(math.MaxInt64), int64(0)
	var gpuSec float64
	for i := range r.Jobs {
		j := &r.Jobs[i]
		switch j.Outcome {
		case OutcomeRejected:
			pr.Rejected++
			if pr.Rejections == nil {
				pr.Rejections = map[string]int{}
			}
			pr.Rejections[j.Why]++
			continue
		case OutcomeSkipped:
			pr.Skipped++
			continue
		case OutcomeUnstarted:
			pr.Unfinished++
			first = min(first, j.Submit)
			continue
		}
		pr.Completed++
		if j.Outcome == OutcomeTimeout {
			pr.TimedOut++
		}
		if j.Censored {
			pr.Censored++
		}
		first = min(first, j.Submit)
		last = max(last, j.End)
		d := float64(j.Start - j.Submit)
		jct := float64(j.End - j.Submit)
		delays = append(delays, d)
		jcts = append(jcts, jct)
		slow = append(slow, max(1, jct/math.Max(float64(j.Duration), 10)))
		if j.Start-j.Submit > starveAfter {
			pr.Starved++
		}
		gpus := float64(j.GPUs)
		if j.SlicePct > 0 {
			gpus = float64(j.SlicePct) / 100
			pr.SliceJobs++
		}
		gpuSec += gpus * float64(j.End-j.Start)
		k := sizeClass(j.GPUs)
		cd[k] = append(cd[k], d)
		cj[k] = append(cj[k], jct)
	}
	pr.QueueDelay, pr.JCT, pr.Slowdown = stats(delays), stats(jcts), stats(slow)
	for k, c := range sizeClasses {
		pr.BySize = append(pr.BySize, SizeClass{Class: c, QueueDelay: stats(cd[k]), JCT: stats(cj[k])})
	}
	if len(jcts) > 0 {
		slices.Sort(jcts)
		pr.JCTCDF = make([]float64, 101)
		for p := range pr.JCTCDF {
			pr.JCTCDF[p] = percentileSorted(jcts, float64(p))
		}
	}
	if pr.Completed > 0 {
		pr.SpanS = last - first
		pr.MakespanS = last
		pr.AllocatedGPUHours = round6(gpuSec / 3600)
		pr.CapacityGPUHours = round6(float64(r.TotalGPUs) * float64(pr.SpanS) / 3600)
		if pr.SpanS > 0 && r.TotalGPUs > 0 {
			pr.Utilisation = round6(gpuSec / (float64(r.TotalGPUs) * float64(pr.SpanS)))
		}
		pr.FragmentedGPUs, pr.Series = series(r, first, last)
		pr.Charts = newChartSeries(r, first, last)
		pr.WorkloadFragGPUs = round6(timeAverage(r.Samples, first, last, func(s *Sample) float64 { return s.WorkFrag }))
		if r.TotalGPUs > 0 {
			pr.FragmentedShare = round6(pr.FragmentedGPUs / float64(r.TotalGPUs))
			pr.WorkloadFragShare = round6(pr.WorkloadFragGPUs / float64(r.TotalGPUs))
		}
		pr.Queues = queueReports(r, first, last, r.guarantees)
	}
	for _, s := range r.Samples {
		pr.MaxQueue = max(pr.MaxQueue, int(s.Pending))
	}

	w := WallTimes{Passes: r.Passes}
	if len(r.PassTimes) > 0 {
		ts := slices.Clone(r.PassTimes)
		slices.Sort(ts)
		for _, t := range ts {
			w.Total += t
		}
		w.P50, w.P99, w.Max = ts[rank(len(ts), 50)], ts[rank(len(ts), 99)], ts[len(ts)-1]
	}
	return pr, w
}

// series integrates the piecewise-constant samples over [from, to]:
// the mean fragmented GPUs, and seriesPoints buckets of utilisation and
// queue length.
// timeAverage is the average of f over [from, to), each sample holding
// until the next.
func timeAverage(samples []Sample, from, to int64, f func(*Sample) float64) float64 {
	if to <= from {
		return 0
	}
	sum := 0.0
	for i := range samples {
		a := max(samples[i].T, from)
		b := to
		if i+1 < len(samples) {
			b = min(samples[i+1].T, to)
		}
		if b > a {
			sum += f(&samples[i]) * float64(b-a)
		}
	}
	return sum / float64(to-from)
}

func series(r *Result, from, to int64) (float64, []Point) {
	if to <= from || len(r.Samples) == 0 {
		return 0, nil
	}
	n := int64(seriesPoints)
	span := to - from
	// edge(k) is bucket k's start, in whole seconds (integer arithmetic,
	// so that buckets tile [from, to] exactly).
	edge := func(k int64) int64 { return from + span*k/n }
	util := make([]float64, n)
	queue := make([]float64, n)
	var frag float64
	for i, s := range r.Samples {
		a := max(s.T, from)
		b := to
		if i+1 < len(r.Samples) {
			b = min(r.Samples[i+1].T, to)
		}
		if b <= a {
			continue
		}
		frag += float64(s.FragGPUs) * float64(b-a)
		// Spread [a, b) over the buckets it covers.
		k := min((a-from)*n/span, n-1)
		for k > 0 && edge(k) > a {
			k--
		}
		for ; k < n && edge(k) < b; k++ {
			d := float64(min(b, edge(k+1)) - max(a, edge(k)))
			if d > 0 {
				util[k] += float64(s.UsedGPUs) * d
				queue[k] += float64(s.Pending) * d
			}
		}
	}
	pts := make([]Point, n)
	for k := range pts {
		width := float64(edge(int64(k)+1) - edge(int64(k)))
		pts[k] = Point{T: edge(int64(k))}
		if width <= 0 {
			continue
		}
		pts[k].Queue = round6(queue[k] / width)
		if r.TotalGPUs > 0 {
			pts[k].Utilisation = round6(util[k] / width / float64(r.TotalGPUs))
		}
	}
	return round6(frag / float64(span)), pts
}

// ChartSeries is a replay's utilisation and queue length over time for
// the HTML charts: means over buckets of a round width (bucketWidths),
// as fine as chartSeriesBuckets per span allow, so that a chart can
// re-bucket replays of different spans (policies, seeds) onto common
// buckets and say how wide they are. The JSON keeps Series
// (seriesPoints buckets per span), so that reports of different
// versions still compare.
type ChartSeries struct {
	// From is the start of bucket 0 and To the end of the replay;
	// bucket k covers [From+k*Width, min(From+(k+1)*Width, To)).
	From, To, Width int64
	// Util is the share of the cluster's GPUs allocated, Queue the
	// jobs pending.
	Util, Queue []float64
	// EndUtil and EndQueue hold from To on: the state the replay ended
	// in (no GPU in use; the jobs that never started pending).
	EndUtil, EndQueue float64
}

// chartSeriesBuckets bounds a ChartSeries' buckets.
const chartSeriesBuckets = 4000

// bucketWidths are the widths, in seconds, that time series are
// averaged over: round ones, so that a chart can say "mean per 3 h".
var bucketWidths = []int64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800,
	3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 7 * 86400, 14 * 86400, 30 * 86400}

// bucketWidth is the smallest of bucketWidths, and at least least, that
// splits span seconds into at most n buckets (the largest width when
// none does).
func bucketWidth(span, least int64, n int) int64 {
	for _, w := range bucketWidths {
		if w >= least && (span+w-1)/w <= int64(n) {
			return w
		}
	}
	return bucketWidths[len(bucketWidths)-1]
}

// newChartSeries integrates r's samples over [from, to] into round
// buckets; nil when there is nothing to chart.
func newChartSeries(r *Result, from, to int64) *ChartSeries {
	if to <= from || len(r.Samples) == 0 || r.TotalGPUs == 0 {
		return nil
	}
	f := &ChartSeries{From: from, To: to, Width: bucketWidth(to-from, 1, chartSeriesBuckets)}
	n := (to - from + f.Width - 1) / f.Width
	f.Util, f.Queue = make([]float64, n), make([]float64, n)
	for i, s := range r.Samples {
		a, b := max(s.T, from), to
		if i+1 < len(r.Samples) {
			b = min(r.Samples[i+1].T, to)
		}
		for k := (a - from) / f.Width; a < b; k++ {
			e := min(from+(k+1)*f.Width, b)
			d := float64(e - a)
			f.Util[k] += float64(s.UsedGPUs) * d
			f.Queue[k] += float64(s.Pending) * d
			a = e
		}
	}
	for k := range f.Util {
		lo := from + int64(k)*f.Width
		d := float64(min(lo+f.Width, to) - lo)
		f.Util[k] /= d * float64(r.TotalGPUs)
		f.Queue[k] /= d
	}
	last := r.Samples[len(r.Samples)-1]
	f.EndUtil, f.EndQueue = float64(last.UsedGPUs)/float64(r.TotalGPUs), float64(last.Pending)
	return f
}

// rebucket averages v (f.Util or f.Queue) over the buckets of width w
// from origin to end: a bucket's mean over the time it shares with
// [f.From, end), the state f ended in (endV) counting from f.To on. A
// bucket before f.From is NaN.
func (f *ChartSeries) rebucket(v []float64, endV float64, origin, end, w int64) []float64 {
	n := (end - origin + w - 1) / w
	sum, cover := make([]float64, n), make([]float64, n)
	add := func(a, b int64, x float64) {
		for a < b {
			k := (a - origin) / w
			e := min(origin+(k+1)*w, b)
			sum[k] += x * float64(e-a)
			cover[k] += float64(e - a)
			a = e
		}
	}
	for k, x := range v {
		lo := f.From + int64(k)*f.Width
		add(max(lo, origin), min(lo+f.Width, f.To, end), x)
	}
	add(max(f.To, origin), end, endV)
	out := make([]float64, n)
	for k := range out {
		out[k] = math.NaN()
		if cover[k] > 0 {
			out[k] = sum[k] / cover[k]
		}
	}
	return out
}

func stats(v []float64) Stats {
	if len(v) == 0 {
		return Stats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	return Stats{N: len(s), Mean: round6(sum / float64(len(s))), P50: percentileSorted(s, 50),
		P95: percentileSorted(s, 95), P99: percentileSorted(s, 99), Max: s[len(s)-1]}
}

// rank is the nearest-rank index of percentile p in n sorted values.
func rank(n int, p float64) int {
	k := int(math.Ceil(p/100*float64(n))) - 1
	return min(max(k, 0), n-1)
}

func percentileSorted(s []float64, p float64) float64 { return s[rank(len(s), p)] }

// round6 keeps reports readable and stable across platforms.
func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// WriteJSON writes the report as indented JSON (without Wall).
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// metric is one row of the comparison: a number of a PolicyReport,
// under a stable key (the JSON path of the number, for Report.Spread).
type metric struct {
	key, name string
	get       func(*PolicyReport) float64
	format    func(float64) string
	// kind says what the number is, for the axes of charts.
	kind metricKind
	// better is the direction of a better value: lowerBetter,
	// higherBetter, or 0 where neither is (a queue's share), so that
	// the HTML table marks no best value in the row.
	better int
}

// metricKind is what a metric's number is.
type metricKind int

const (
	kindCount    metricKind = iota // a count, or a plain number
	kindSeconds                    // a duration in seconds
	kindFraction                   // a share, printed as a percentage
)

// The directions of metric.better.
const (
	lowerBetter  = -1
	higherBetter = 1
)

// tableQueues bounds the queues the table shows (the JSON has all).
const tableQueues = 8

// metrics lists the rows of the comparison for reports shaped like p0:
// the size classes that have jobs and the largest queues of p0.
func metrics(p0 *PolicyReport, starveAfter int64) []metric {
	pct := func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }
	num := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	dur := func(v float64) string { return formatSeconds(v) }
	x := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	stat := func(key, name string, f func(*PolicyReport) *Stats) []metric {
		return []metric{
			{key + ".mean", name + " mean", func(p *PolicyReport) float64 { return f(p).Mean }, dur, kindSeconds, lowerBetter},
			{key + ".p50", name + " p50", func(p *PolicyReport) float64 { return f(p).P50 }, dur, kindSeconds, lowerBetter},
			{key + ".p95", name + " p95", func(p *PolicyReport) float64 { return f(p).P95 }, dur, kindSeconds, lowerBetter},
			{key + ".p99", name + " p99", func(p *PolicyReport) float64 { return f(p).P99 }, dur, kindSeconds, lowerBetter},
		}
	}
	ms := []metric{
		{"utilisation", "GPU utilisation", func(p *PolicyReport) float64 { return p.Utilisation }, pct, kindFraction, higherBetter},
		{"span_s", "makespan", func(p *PolicyReport) float64 { return float64(p.SpanS) }, dur, kindSeconds, lowerBetter},
	}
	ms = append(ms, stat("queue_delay_s", "queue delay", func(p *PolicyReport) *Stats { return &p.QueueDelay })...)
	ms = append(ms, stat("jct_s", "JCT", func(p *PolicyReport) *Stats { return &p.JCT })...)
	for k, cl := range p0.BySize {
		if cl.QueueDelay.N == 0 {
			continue
		}
		label := cl.Class + " GPUs"
		if cl.Class == "cpu" {
			label = "CPU-only"
		}
		class := func(p *PolicyReport) *SizeClass {
			if k < len(p.BySize) {
				return &p.BySize[k]
			}
			return &SizeClass{}
		}
		key := "by_size." + cl.Class
		ms = append(ms,
			metric{key + ".queue_delay_s.mean", fmt.Sprintf("delay mean %s (%d)", label, cl.QueueDelay.N),
				func(p *PolicyReport) float64 { return class(p).QueueDelay.Mean }, dur, kindSeconds, lowerBetter},
			metric{key + ".queue_delay_s.p99", "delay p99 " + label,
				func(p *PolicyReport) float64 { return class(p).QueueDelay.P99 }, dur, kindSeconds, lowerBetter},
			metric{key + ".queue_delay_s.max", "delay max " + label,
				func(p *PolicyReport) float64 { return class(p).QueueDelay.Max }, dur, kindSeconds, lowerBetter},
			metric{key + ".jct_s.mean", "JCT mean " + label,
				func(p *PolicyReport) float64 { return class(p).JCT.Mean }, dur, kindSeconds, lowerBetter})
	}
	ms = append(ms,
		metric{"bounded_slowdown.mean", "bounded slowdown mean", func(p *PolicyReport) float64 { return p.Slowdown.Mean }, x, kindCount, lowerBetter},
		metric{"bounded_slowdown.p99", "bounded slowdown p99", func(p *PolicyReport) float64 { return p.Slowdown.P99 }, x, kindCount, lowerBetter},
		metric{"starved", fmt.Sprintf("starved (waited > %s)", formatSeconds(float64(starveAfter))),
			func(p *PolicyReport) float64 { return float64(p.Starved) }, num, kindCount, lowerBetter},
		metric{"fragmented_gpus", "fragmented GPUs (avg)", func(p *PolicyReport) float64 { return p.FragmentedGPUs }, x, kindCount, lowerBetter},
		metric{"workload_frag_gpus", "workload fragmentation, GPUs (avg)", func(p *PolicyReport) float64 { return p.WorkloadFragGPUs }, x, kindCount, lowerBetter},
		metric{"max_queue", "max queue length", func(p *PolicyReport) float64 { return float64(p.MaxQueue) }, num, kindCount, lowerBetter},
		metric{"preemptions", "preemptions", func(p *PolicyReport) float64 { return float64(p.Preemptions) }, num, kindCount, lowerBetter},
	)
	// A single queue is the whole cluster: nothing to compare.
	if len(p0.Queues) > 1 {
		for _, q := range p0.Queues[:min(len(p0.Queues), tableQueues)] {
			name := q.Queue
			queue := func(p *PolicyReport) *QueueReport {
				for i := range p.Queues {
					if p.Queues[i].Queue == name {
						return &p.Queues[i]
					}
				}
				return &QueueReport{}
			}
			key := "queues." + name
			label := "GPU share, queue " + name
			if q.Guarantee > 0 {
				label += fmt.Sprintf(" (guar. %s)", pct(q.Guarantee))
			}
			// A larger share is neither better nor worse: it is what
			// the queue's jobs asked for that decides.
			ms = append(ms,
				metric{key + ".share", label, func(p *PolicyReport) float64 { return queue(p).Share }, pct, kindFraction, 0},
				metric{key + ".queue_delay_s.mean", "delay mean, queue " + name,
					func(p *PolicyReport) float64 { return queue(p).QueueDelay.Mean }, dur, kindSeconds, lowerBetter})
			if q.Guarantee > 0 {
				ms = append(ms, metric{key + ".below_guarantee_s", "waiting below guarantee, queue " + name,
					func(p *PolicyReport) float64 { return float64(queue(p).BelowGuaranteeS) }, dur, kindSeconds, lowerBetter})
			}
		}
	}
	ms = append(ms, metric{"passes", "scheduling passes", func(p *PolicyReport) float64 { return float64(p.Passes) }, num, kindCount, 0})
	return ms
}

// WriteText writes the comparison table: one column per policy, and for
// every policy after the first its ratio to the first. With several
// seeds each cell is the median over the seeds and its range,
// "median [min–max]", and the ratio is that of the medians.
func (r *Report) WriteText(w io.Writer) error {
	if len(r.Policies) == 0 {
		_, err := fmt.Fprintln(w, "no policies")
		return err
	}
	c := r.Cluster
	seeds := fmt.Sprintf("seed %d", r.Seed)
	if len(r.Seeds) > 1 {
		seeds = fmt.Sprintf("seeds %s (cells: median [min–max] over the %d seeds)", formatSeeds(r.Seeds), len(r.Seeds))
	}
	fmt.Fprintf(w, "trace %s on %d nodes × %d GPUs (%d GPUs, %d leaf switches), %s\n",
		r.Trace, c.Nodes, c.GPUsPerNode, c.GPUs, c.Leaves, seeds)
	for _, l := range r.jobLines() {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"metric"}
	for _, p := range r.Policies {
		head = append(head, p.Policy)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, row := range r.rows() {
		cells := []string{row.name}
		for _, c := range row.cells {
			cells = append(cells, c.text())
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if n := len(r.Policies[0].Queues); n > tableQueues {
		fmt.Fprintf(w, "(%d smaller queues in the JSON and HTML reports)\n", n-tableQueues)
	}
	return nil
}

// jobLines are the lines under the table's title: what became of the
// jobs, and the time limits they asked for.
func (r *Report) jobLines() []string {
	p0 := r.Policies[0]
	out := []string{fmt.Sprintf("jobs %d: %d completed, %d rejected (never fit), %d skipped (no duration), %d unfinished",
		p0.Jobs, p0.Completed, p0.Rejected, p0.Skipped, p0.Unfinished)}
	if p0.Censored > 0 {
		out = append(out, fmt.Sprintf("censored %d: unfinished in the trace, replayed for the time they had run", p0.Censored))
	}
	return append(out, r.Estimates.describe(p0.TimedOut))
}

// tableRow is one row of the comparison, as the text and the HTML
// tables print it.
type tableRow struct {
	key, name string
	cells     []tableCell
	// best marks the cells holding the row's best value; none when the
	// row has no better direction or every policy shows the same.
	best []bool
}

// tableCell is one policy's value of a row.
type tableCell struct {
	// value is the printed number (the median with several seeds), rng
	// its range over the seeds ("min–max", or ""), and ratio its ratio
	// to the first policy's ("(0.85×)"; "" in the first column).
	value, rng, ratio string
}

// text is the cell as the text table prints it.
func (c tableCell) text() string {
	s := c.value
	if c.rng != "" {
		s += " [" + c.rng + "]"
	}
	if c.ratio != "" {
		s += " " + c.ratio
	}
	return s
}

// rows computes the comparison: the rows of metrics, then the
// scheduler's wall time per pass when the report has it.
func (r *Report) rows() []tableRow {
	spread := r.spreadIndex()
	var out []tableRow
	for _, m := range metrics(&r.Policies[0], r.StarveAfterS) {
		row := tableRow{key: m.key, name: m.name}
		// value is policy i's number (the median over seeds) and its
		// printed range.
		value := func(i int) (float64, string) {
			if sp, ok := spread[i][m.key]; ok {
				return sp.Median, m.format(sp.Min) + "–" + m.format(sp.Max)
			}
			return m.get(&r.Policies[i]), ""
		}
		base, _ := value(0)
		// A base that prints as zero gives no meaningful ratio.
		shownZero := m.format(base) == m.format(0)
		vals := make([]float64, len(r.Policies))
		for i := range r.Policies {
			v, rng := value(i)
			vals[i] = v
			c := tableCell{value: m.format(v), rng: rng}
			switch {
			case i == 0:
			case shownZero && m.format(v) == m.format(0):
				c.ratio = "(1.00×)"
			case shownZero:
				c.ratio = "(–)"
			default:
				c.ratio = ratio(v, base)
			}
			row.cells = append(row.cells, c)
		}
		row.best = bestCells(vals, m.better, m.format)
		out = append(out, row)
	}
	if len(r.Wall) == len(r.Policies) {
		for _, q := range []struct {
			name string
			get  func(WallTimes) time.Duration
		}{{"sched time/pass p50", func(w WallTimes) time.Duration { return w.P50 }},
			{"sched time/pass p99", func(w WallTimes) time.Duration { return w.P99 }}} {
			row := tableRow{key: "wall", name: q.name}
			vals := make([]float64, len(r.Wall))
			for i, wt := range r.Wall {
				vals[i] = float64(q.get(wt))
				row.cells = append(row.cells, tableCell{value: formatDuration(q.get(wt))})
			}
			row.best = bestCells(vals, lowerBetter, func(v float64) string { return formatDuration(time.Duration(v)) })
			out = append(out, row)
		}
	}
	return out
}

// bestCells marks the values that are best in the direction better, as
// printed: values that print alike tie. It marks nothing without a
// direction, or when all values print alike (nothing to choose).
func bestCells(vals []float64, better int, format func(float64) string) []bool {
	best := make([]bool, len(vals))
	if better == 0 || len(vals) < 2 {
		return best
	}
	b := 0
	for i, v := range vals {
		if float64(better)*(v-vals[b]) > 0 {
			b = i
		}
	}
	shown := format(vals[b])
	all := true
	for i, v := range vals {
		best[i] = format(v) == shown
		all = all && best[i]
	}
	if all {
		clear(best)
	}
	return best
}

// formatSeeds lists seeds, runs of consecutive ones as ranges: 1-5,9.
func formatSeeds(seeds []uint64) string {
	var parts []string
	for i := 0; i < len(seeds); {
		k := i
		for k+1 < len(seeds) && seeds[k+1] == seeds[k]+1 {
			k++
		}
		if k > i {
			parts = append(parts, fmt.Sprintf("%d-%d", seeds[i], seeds[k]))
		} else {
			parts = append(parts, fmt.Sprint(seeds[i]))
		}
		i = k + 1
	}
	return strings.Join(parts, ",")
}

// ratio is v relative to base: "(0.85×)"; "(–)" when base is zero.
func ratio(v, base float64) string {
	if base == 0 {
		if v == 0 {
			return "(1.00×)"
		}
		return "(–)"
	}
	return fmt.Sprintf("(%.2f×)", v/base)
}

// formatSeconds prints a duration in seconds compactly: 45s, 12.5m,
// 3.2h, 4.1d.
func formatSeconds(s float64) string {
	switch {
	case s < 120:
		return fmt.Sprintf("%.0fs", s)
	case s < 2*3600:
		return fmt.Sprintf("%.1fm", s/60)
	case s < 2*86400:
		return fmt.Sprintf("%.1fh", s/3600)
	}
	return fmt.Sprintf("%.1fd", s/86400)
}

func formatDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return d.Round(time.Millisecond).String()
}

// sortedKeys lists a map's keys in order (for deterministic output).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare[string])
	return keys
}
