package ui

import (
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// The queues page: every queue the caller may see with its guarantee,
// cap, use and borrowing now, the job classes, and the last 24 hours:
// cluster utilisation and fragmentation, and each queue's GPUs.

// HistorySpan is how far back the queues page draws.
const HistorySpan = 24 * time.Hour

// queuesView is the queues page's data.
type queuesView struct {
	Queues     []queueRow
	QOS        []qosRow
	DefaultQOS string
	Charts     []template.HTML
	// ClusterHidden says why cluster-wide charts are missing.
	ClusterHidden string
	Every         string
}

// queueRow is one queue now.
type queueRow struct {
	Name, Parent                            string
	Depth                                   int
	Guaranteed, Cap, Used, Borrowed, Lent   string
	Running, Pending, Buffered, Limits, Who string
	UseBar                                  template.HTML
	Over                                    bool
	Href                                    string
}

// qosRow is one job class.
type qosRow struct {
	Name, Levels, Mode, Grace, MaxTime, Who string
}

func (h *Handler) serveQueues(w http.ResponseWriter, r *http.Request) {
	h.page(w, r, "queues", "Queues", func(rq *request) (string, any, error) {
		return "Queues", queuesViewOf(h.src.Queues(r), h.src.History(r), rq.cl.Now), nil
	})
}

// queuesViewOf builds the page from the queue listing and the history.
func queuesViewOf(ql api.QueueList, hist History, now time.Time) queuesView {
	v := queuesView{DefaultQOS: ql.DefaultQOS, ClusterHidden: hist.ClusterHidden}
	if hist.Every > 0 {
		v.Every = fmtDuration(hist.Every)
	}
	depth := map[string]int{}
	for _, q := range ql.Queues {
		d := 0
		if q.Parent != "" {
			d = depth[q.Parent] + 1
		}
		depth[q.Name] = d
		row := queueRow{Name: q.Name, Parent: q.Parent, Depth: min(d, 4), Guaranteed: strconv.Itoa(q.Guaranteed),
			Cap: "none", Used: strconv.Itoa(q.UsedGPUs), Borrowed: strconv.Itoa(q.BorrowedGPUs), Lent: strconv.Itoa(q.LentGPUs),
			Running: strconv.Itoa(q.Running), Pending: strconv.Itoa(q.Pending), Buffered: strconv.Itoa(q.Buffered),
			Over: q.BorrowedGPUs > 0, Href: Prefix + "queue?queue=" + urlQueryEscape(q.Name)}
		if q.Cap > 0 {
			row.Cap = strconv.Itoa(q.Cap)
		}
		scale := max(q.Guaranteed, q.Cap, q.UsedGPUs, 1)
		row.UseBar = useBar(q.UsedGPUs, q.Guaranteed, scale)
		var lim []string
		if q.MaxRunningPerUser > 0 {
			lim = append(lim, strconv.Itoa(q.MaxRunningPerUser)+" running/user")
		}
		if q.MaxSubmitPerUser > 0 {
			lim = append(lim, strconv.Itoa(q.MaxSubmitPerUser)+" jobs/user")
		}
		if q.MaxGPUsPerUser > 0 {
			lim = append(lim, strconv.Itoa(q.MaxGPUsPerUser)+" GPUs/user")
		}
		if q.BorrowLimit >= 0 {
			lim = append(lim, "borrows ≤ "+strconv.Itoa(q.BorrowLimit))
		}
		if q.LendLimit >= 0 {
			lim = append(lim, "lends ≤ "+strconv.Itoa(q.LendLimit))
		}
		row.Limits = joinComma(lim)
		row.Who = joinComma(append(append([]string(nil), q.Users...), prefixed("@", q.Groups)...))
		v.Queues = append(v.Queues, row)
	}
	for _, q := range ql.QOS {
		row := qosRow{Name: q.Name, Levels: strconv.Itoa(q.MinLevel) + "–" + strconv.Itoa(q.MaxLevel) + " (default " + strconv.Itoa(q.DefaultLevel) + ")",
			Mode: string(q.Mode), Grace: fmtSecs(q.GraceTime), MaxTime: "none", Who: "everyone"}
		if q.MaxTime > 0 {
			row.MaxTime = fmtSecs(q.MaxTime)
		}
		if !q.Open {
			row.Who = joinComma(append(append(append([]string(nil), q.Users...), prefixed("@", q.Groups)...), q.Accounts...))
			if row.Who == "" {
				row.Who = "operators"
			}
		}
		v.QOS = append(v.QOS, row)
	}
	v.Charts = historyCharts(hist, now)
	return v
}

// historyCharts draws the last HistorySpan of the samples.
func historyCharts(hist History, now time.Time) []template.HTML {
	from := now.Add(-HistorySpan)
	var samples []Sample
	for _, s := range hist.Samples {
		if !s.Time.Before(from) {
			samples = append(samples, s)
		}
	}
	// At least the last quarter of an hour: a controller that started
	// a minute ago draws its few points across the plot, not in a
	// corner of a day.
	start := now.Add(-15 * time.Minute)
	if len(samples) > 0 && samples[0].Time.Before(start) {
		start = samples[0].Time
	}
	series := func(name string, f func(Sample) float64) chartSeries {
		ps := make([]chartPoint, len(samples))
		for i, s := range samples {
			ps[i] = chartPoint{T: s.Time, V: f(s)}
		}
		return chartSeries{Name: name, Points: ps}
	}
	var out []template.HTML
	if hist.ClusterHidden == "" {
		out = append(out,
			chart{Title: "GPU utilisation", Unit: "%", YMax: 100, From: start, To: now, Every: hist.Every, Series: []chartSeries{
				series("allocated to jobs", func(s Sample) float64 { return ratio(s.Allocated, s.GPUs) }),
				series("busy (measured by the nodes)", func(s Sample) float64 { return s.UtilPct }),
			}}.render(),
			chart{Title: "Fragmentation: free GPUs no pending job fits", Unit: "", From: start, To: now, Every: hist.Every, Series: []chartSeries{
				series("stranded GPUs", func(s Sample) float64 { return float64(s.Stranded) }),
				series("free GPUs", func(s Sample) float64 { return float64(s.GPUs - s.Allocated) }),
			}}.render(),
			chart{Title: "Jobs", Unit: "", From: start, To: now, Every: hist.Every, Series: []chartSeries{
				series("running", func(s Sample) float64 { return float64(s.Running) }),
				series("pending", func(s Sample) float64 { return float64(s.Pending) }),
			}}.render(),
		)
	}
	// One line per queue, in the order the last sample lists them.
	var names []string
	if len(samples) > 0 {
		for _, q := range samples[len(samples)-1].Queues {
			names = append(names, q.Name)
		}
	}
	if len(names) > 0 {
		used := make([]chartSeries, len(names))
		idx := map[string]int{}
		for i, n := range names {
			used[i].Name = n
			idx[n] = i
		}
		for _, s := range samples {
			for _, q := range s.Queues {
				if i, ok := idx[q.Name]; ok {
					used[i].Points = append(used[i].Points, chartPoint{T: s.Time, V: float64(q.Used)})
				}
			}
		}
		out = append(out, chart{Title: "GPUs used per queue", Unit: "", From: start, To: now, Every: hist.Every, Series: used}.render())
	}
	return out
}

// ratio is part/whole in percent, -1 (unknown) for an empty whole.
func ratio(part, whole int) float64 {
	if whole <= 0 {
		return -1
	}
	return float64(part) * 100 / float64(whole)
}

// useBar draws a queue's use against its guarantee: the use as a bar,
// the guarantee as a mark, both on a scale of scale GPUs.
func useBar(used, guaranteed, scale int) template.HTML {
	w := float64(used) / float64(scale) * 100
	g := float64(guaranteed) / float64(scale) * 100
	cls := "fg"
	if used > guaranteed {
		cls = "fg over"
	}
	return template.HTML(`<svg class="bar" viewBox="0 0 100 8" preserveAspectRatio="none"><rect class="bg" width="100" height="8"/>` +
		`<rect class="` + cls + `" width="` + f1(w) + `" height="8"/><rect class="mark" x="` + f1(max(g-0.8, 0)) + `" width="1.6" height="8"/></svg>`)
}

func joinComma(xs []string) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

func prefixed(p string, xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = p + x
	}
	return out
}
