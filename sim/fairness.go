package sim

import (
	"cmp"
	"slices"
)

// Fairness: a policy that wins the mean wait by starving big jobs or a
// small queue should show it. The report gives, per job-size class, the
// mean, p99 and longest wait (PolicyReport.BySize), the count of jobs
// that waited longer than a bound (PolicyReport.Starved), and per
// trace queue its share of the cluster's GPU-time over time, against
// its guarantee when the cluster's config gives one (QueueReport).

// sizeClasses name the job-size classes of PolicyReport.BySize, in
// order: GPU jobs by GPU count (a GPU slice counts as 1), then CPU-only
// jobs.
var sizeClasses = []string{"1", "2-4", "5-8", "9-32", ">32", "cpu"}

// sizeClass is the index in sizeClasses of a job of gpus GPUs.
func sizeClass(gpus int) int {
	switch {
	case gpus == 0:
		return 5
	case gpus <= 1:
		return 0
	case gpus <= 4:
		return 1
	case gpus <= 8:
		return 2
	case gpus <= 32:
		return 3
	}
	return 4
}

// queuePoints is the resolution of the per-queue series.
const queuePoints = 60

// QueueReport is what one trace queue got in a replay.
type QueueReport struct {
	Queue string `json:"queue"`
	// Jobs counts the queue's jobs that ran.
	Jobs int `json:"jobs"`
	// GPUHours is the GPU time the queue's jobs held (slices by their
	// share); Share divides it by the cluster's GPU capacity over the
	// report's span.
	GPUHours float64 `json:"gpu_hours"`
	Share    float64 `json:"share"`
	// Guarantee is the queue's guaranteed share of the cluster's GPUs
	// (the config's queues[].guaranteed), 0 when it has none.
	Guarantee float64 `json:"guarantee,omitempty"`
	// BelowGuaranteeS is how long the queue had jobs waiting while it
	// held less than its guarantee (with a guarantee only).
	BelowGuaranteeS int64 `json:"below_guarantee_s,omitempty"`
	QueueDelay      Stats `json:"queue_delay_s"`
	// Series holds queuePoints steps over the span: the queue's mean
	// share of the cluster's GPUs held, and asked for by its pending
	// jobs.
	Series []QueuePoint `json:"series"`
}

// QueuePoint is one step of a queue's series: averages over [T, next T).
type QueuePoint struct {
	T       int64   `json:"t"`
	Share   float64 `json:"share"`
	Pending float64 `json:"pending"`
}

// queueEvent changes a queue's held or pending GPUs at T.
type queueEvent struct {
	t             int64
	held, pending float64
}

// queueReports summarises each trace queue of r over [first, last]:
// jobs that ran hold their GPUs from start to end and wait from submit
// to start; unfinished ones wait to the end. Queues come in order of
// the GPU time their jobs ask for (durations, not replayed times: the
// same order under every policy), then by name.
func queueReports(r *Result, first, last int64, guarantees map[string]float64) []QueueReport {
	type acc struct {
		demand float64
		jobs   int
		held   float64 // GPU-seconds
		delays []float64
		events []queueEvent
	}
	byName := map[string]*acc{}
	var names []string
	for i := range r.Jobs {
		j := &r.Jobs[i]
		if j.Outcome == OutcomeRejected || j.Outcome == OutcomeSkipped {
			continue
		}
		a := byName[j.Queue]
		if a == nil {
			a = &acc{}
			byName[j.Queue] = a
			names = append(names, j.Queue)
		}
		gpus := float64(j.GPUs)
		if j.SlicePct > 0 {
			gpus = float64(j.SlicePct) / 100
		}
		a.demand += gpus * float64(max(j.Duration, 0))
		if j.Outcome == OutcomeUnstarted {
			a.events = append(a.events, queueEvent{t: j.Submit, pending: gpus}, queueEvent{t: last, pending: -gpus})
			continue
		}
		a.jobs++
		a.held += gpus * float64(j.End-j.Start)
		a.delays = append(a.delays, float64(j.Start-j.Submit))
		a.events = append(a.events, queueEvent{t: j.Submit, pending: gpus}, queueEvent{t: j.Start, pending: -gpus, held: gpus},
			queueEvent{t: j.End, held: -gpus})
	}
	slices.SortFunc(names, func(x, y string) int {
		return cmp.Or(cmp.Compare(byName[y].demand, byName[x].demand), cmp.Compare(x, y))
	})
	total := float64(r.TotalGPUs)
	span := last - first
	out := make([]QueueReport, 0, len(names))
	for _, name := range names {
		a := byName[name]
		q := QueueReport{Queue: name, Jobs: a.jobs, GPUHours: round6(a.held / 3600), Guarantee: guarantees[name],
			QueueDelay: stats(a.delays)}
		if span > 0 && total > 0 {
			q.Share = round6(a.held / (total * float64(span)))
			q.Series, q.BelowGuaranteeS = queueSeries(a.events, first, last, total, q.Guarantee)
		}
		out = append(out, q)
	}
	return out
}

// queueSeries integrates a queue's events over [from, to] into
// queuePoints steps of held and pending GPUs (as shares of total), and
// measures how long it waited below guarantee (a share; 0: none).
func queueSeries(events []queueEvent, from, to int64, total, guarantee float64) ([]QueuePoint, int64) {
	slices.SortStableFunc(events, func(a, b queueEvent) int { return cmp.Compare(a.t, b.t) })
	n := int64(queuePoints)
	span := to - from
	edge := func(k int64) int64 { return from + span*k/n }
	held := make([]float64, n)
	pend := make([]float64, n)
	var below int64
	var h, p float64
	for i := 0; i < len(events); {
		t := events[i].t
		for ; i < len(events) && events[i].t == t; i++ {
			h += events[i].held
			p += events[i].pending
		}
		end := to
		if i < len(events) {
			end = events[i].t
		}
		a, b := max(t, from), min(end, to)
		if b <= a {
			continue
		}
		// Rounding of slices leaves dust: a queue holds nothing below
		// a thousandth of a GPU.
		if guarantee > 0 && p > 1e-3 && h < guarantee*total-1e-3 {
			below += b - a
		}
		k := min((a-from)*n/span, n-1)
		for k > 0 && edge(k) > a {
			k--
		}
		for ; k < n && edge(k) < b; k++ {
			if d := float64(min(b, edge(k+1)) - max(a, edge(k))); d > 0 {
				held[k] += h * d
				pend[k] += p * d
			}
		}
	}
	pts := make([]QueuePoint, n)
	for k := range pts {
		pts[k].T = edge(int64(k))
		if width := float64(edge(int64(k)+1) - edge(int64(k))); width > 0 {
			pts[k].Share = round6(max(0, held[k]) / width / total)
			pts[k].Pending = round6(max(0, pend[k]) / width / total)
		}
	}
	return pts, below
}
