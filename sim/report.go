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
}

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
			{key + ".mean", name + " mean", func(p *PolicyReport) float64 { return f(p).Mean }, dur},
			{key + ".p50", name + " p50", func(p *PolicyReport) float64 { return f(p).P50 }, dur},
			{key + ".p95", name + " p95", func(p *PolicyReport) float64 { return f(p).P95 }, dur},
			{key + ".p99", name + " p99", func(p *PolicyReport) float64 { return f(p).P99 }, dur},
		}
	}
	ms := []metric{
		{"utilisation", "GPU utilisation", func(p *PolicyReport) float64 { return p.Utilisation }, pct},
		{"span_s", "makespan", func(p *PolicyReport) float64 { return float64(p.SpanS) }, dur},
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
				func(p *PolicyReport) float64 { return class(p).QueueDelay.Mean }, dur},
			metric{key + ".queue_delay_s.p99", "delay p99 " + label,
				func(p *PolicyReport) float64 { return class(p).QueueDelay.P99 }, dur},
			metric{key + ".queue_delay_s.max", "delay max " + label,
				func(p *PolicyReport) float64 { return class(p).QueueDelay.Max }, dur},
			metric{key + ".jct_s.mean", "JCT mean " + label,
				func(p *PolicyReport) float64 { return class(p).JCT.Mean }, dur})
	}
	ms = append(ms,
		metric{"bounded_slowdown.mean", "bounded slowdown mean", func(p *PolicyReport) float64 { return p.Slowdown.Mean }, x},
		metric{"bounded_slowdown.p99", "bounded slowdown p99", func(p *PolicyReport) float64 { return p.Slowdown.P99 }, x},
		metric{"starved", fmt.Sprintf("starved (waited > %s)", formatSeconds(float64(starveAfter))),
			func(p *PolicyReport) float64 { return float64(p.Starved) }, num},
		metric{"fragmented_gpus", "fragmented GPUs (avg)", func(p *PolicyReport) float64 { return p.FragmentedGPUs }, x},
		metric{"workload_frag_gpus", "workload fragmentation, GPUs (avg)", func(p *PolicyReport) float64 { return p.WorkloadFragGPUs }, x},
		metric{"max_queue", "max queue length", func(p *PolicyReport) float64 { return float64(p.MaxQueue) }, num},
		metric{"preemptions", "preemptions", func(p *PolicyReport) float64 { return float64(p.Preemptions) }, num},
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
			ms = append(ms,
				metric{key + ".share", label, func(p *PolicyReport) float64 { return queue(p).Share }, pct},
				metric{key + ".queue_delay_s.mean", "delay mean, queue " + name,
					func(p *PolicyReport) float64 { return queue(p).QueueDelay.Mean }, dur})
			if q.Guarantee > 0 {
				ms = append(ms, metric{key + ".below_guarantee_s", "waiting below guarantee, queue " + name,
					func(p *PolicyReport) float64 { return float64(queue(p).BelowGuaranteeS) }, dur})
			}
		}
	}
	ms = append(ms, metric{"passes", "scheduling passes", func(p *PolicyReport) float64 { return float64(p.Passes) }, num})
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
	p0 := r.Policies[0]
	fmt.Fprintf(w, "jobs %d: %d completed, %d rejected (never fit), %d skipped (no duration), %d unfinished\n",
		p0.Jobs, p0.Completed, p0.Rejected, p0.Skipped, p0.Unfinished)
	if p0.Censored > 0 {
		fmt.Fprintf(w, "censored %d: unfinished in the trace, replayed for the time they had run\n", p0.Censored)
	}
	fmt.Fprintln(w, r.Estimates.describe(p0.TimedOut))
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"metric"}
	for _, p := range r.Policies {
		head = append(head, p.Policy)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	spread := r.spreadIndex()
	for _, m := range metrics(&r.Policies[0], r.StarveAfterS) {
		cells := []string{m.name}
		// value is policy i's number (the median over seeds) and its
		// printed cell.
		value := func(i int) (float64, string) {
			if sp, ok := spread[i][m.key]; ok {
				return sp.Median, fmt.Sprintf("%s [%s–%s]", m.format(sp.Median), m.format(sp.Min), m.format(sp.Max))
			}
			v := m.get(&r.Policies[i])
			return v, m.format(v)
		}
		base, _ := value(0)
		// A base that prints as zero gives no meaningful ratio.
		shownZero := m.format(base) == m.format(0)
		for i := range r.Policies {
			v, cell := value(i)
			switch {
			case i == 0:
			case shownZero && m.format(v) == m.format(0):
				cell += " (1.00×)"
			case shownZero:
				cell += " (–)"
			default:
				cell += " " + ratio(v, base)
			}
			cells = append(cells, cell)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if len(r.Wall) == len(r.Policies) {
		cells50, cells99 := []string{"sched time/pass p50"}, []string{"sched time/pass p99"}
		for _, wt := range r.Wall {
			cells50 = append(cells50, formatDuration(wt.P50))
			cells99 = append(cells99, formatDuration(wt.P99))
		}
		fmt.Fprintln(tw, strings.Join(cells50, "\t")+"\t")
		fmt.Fprintln(tw, strings.Join(cells99, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if n := len(p0.Queues); n > tableQueues {
		fmt.Fprintf(w, "(%d smaller queues in the JSON and HTML reports)\n", n-tableQueues)
	}
	return nil
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
