package sim

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
)

// Sizes of the HTML report's charts, in SVG units (CSS pixels).
const (
	wideW, wideH   = 960, 330
	smallW, smallH = 485, 240
	// chartBuckets bounds the buckets a time chart averages over: about
	// two pixels each on a wide chart.
	chartBuckets = 480
)

// htmlPage parses the report template on first use: html/template's
// parse is a noticeable share of a short tool's start, and most runs
// write no HTML. The template is a constant, so a parse error is a bug
// that every WriteHTML test catches.
var htmlPage = sync.OnceValues(func() (*template.Template, error) {
	return template.New("report").Parse(htmlSource)
})

const htmlSource = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tide sim: {{.R.Trace}}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,sans-serif;margin:24px auto;padding:0 16px;color:#222;max-width:1000px;line-height:1.4}
h1{margin-bottom:4px}
h2{margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
code{font-size:90%}
.facts{color:#444;margin:4px 0 16px;padding-left:20px}
table.cmp{border-collapse:collapse;margin:12px 0;font-size:14px}
table.cmp td,table.cmp th{border-bottom:1px solid #e2e2e2;padding:3px 10px;text-align:right;font-variant-numeric:tabular-nums}
table.cmp .v,table.cmp .rng,table.cmp .ratio{white-space:nowrap;display:inline-block}
table.cmp thead th{border-bottom:2px solid #888;vertical-align:bottom}
table.cmp thead th:first-child{text-align:left}
table.cmp th[scope=row]{text-align:left;font-weight:normal;min-width:12em}
table.cmp tr.sep>*{border-top:2px solid #aaa}
table.cmp tbody tr:hover{background:#f6f6f6}
table.cmp td.best{font-weight:700;background:#d9f0d3}
table.cmp .rng,table.cmp .ratio{color:#666;font-size:85%;font-weight:normal;margin-left:5px}
.key{display:inline-flex;align-items:center;gap:5px;margin-right:16px;white-space:nowrap}
.swatch{display:inline-block;width:14px;height:14px;background:#d9f0d3;border:1px solid #aaa;vertical-align:middle}
figure{margin:16px 0}
svg{max-width:100%;height:auto}
.queues{display:flex;flex-wrap:wrap;gap:8px}
.queues figure{margin:0}
.note{color:#555}
</style></head><body>
<h1>tide sim</h1>
<p>Trace <code>{{.R.Trace}}</code> on {{.R.Cluster.Nodes}} nodes × {{.R.Cluster.GPUsPerNode}} GPUs
({{.R.Cluster.GPUs}} GPUs, {{.R.Cluster.Leaves}} leaf switches), {{if .Seeds}}seeds {{.Seeds}}{{else}}seed {{.R.Seed}}{{end}}.</p>
{{if .Rows}}<ul class="facts">{{range .Lines}}<li>{{.}}</li>
{{end}}</ul>
<h2>Comparison</h2>
<p class="note">{{if .Seeds}}Each cell is the median over the seeds, then its range (min–max). {{end}}Ratios are to the first policy,
{{.First}}. <span class="swatch"></span> <b>Bold on green</b>: the best value of the row (lower is better, except GPU utilisation;
rows where neither is better, such as a queue's share, mark none; nor do rows where every policy shows the same).</p>
<table class="cmp">
<thead><tr><th scope="col">metric</th>{{range .Head}}<th scope="col"><span class="key">{{.Key}}{{.Name}}</span></th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}<tr{{if .Sep}} class="sep"{{end}}><th scope="row">{{.Name}}</th>{{range .Cells}}<td{{if .Best}} class="best" title="best of the row"{{end}}><span class="v">{{.Value}}</span>{{if .Range}}<span class="rng">[{{.Range}}]</span>{{end}}{{if .Ratio}}<span class="ratio">{{.Ratio}}</span>{{end}}</td>{{end}}</tr>
{{end}}</tbody></table>
{{if .More}}<p class="note">{{.More}} smaller queues are in the JSON report{{if .Queues}} and the queue charts below{{end}}.</p>{{end}}
{{else}}<p>No policies were replayed.</p>
{{end}}{{if .Spread}}<h2>Spread over seeds {{.Seeds}}</h2>
<p class="note">Each bar runs from the lowest to the highest value over the seeds; the marker is the median.</p>
{{range .Spread}}<figure class="spread">{{.}}</figure>
{{end}}{{end}}{{if .Rows}}<h2>Over time</h2>
<p class="note">{{if .Seeds}}Lines show seed {{.R.Seed}}; the shaded band around each is the range (min–max) over seeds {{.Seeds}}.
{{end}}Each point of the two time charts is the mean over one bucket of trace time, of the width their subtitle gives;
after its last job ends, a replay's cluster stays in the state it ended in (idle, with any job that never started still pending).</p>
<figure id="utilisation">{{.Util}}</figure>
<figure id="queue">{{.Queue}}</figure>
<figure id="jct-cdf">{{.CDF}}</figure>
{{end}}{{if .Queues}}<h2>Queues: share of the cluster's GPUs over time</h2>
<p class="note">Each queue's GPUs in use as a share of the cluster's, per policy{{if .Guarantees}}; the dashed line is its guarantee in the config{{else}}
(guarantees come from the queues of a --config file; this replay has none){{end}}. {{if .Seeds}}Seed {{.R.Seed}}. {{end}}</p>
<p>{{range .Head}}<span class="key">{{.Key}}{{.Name}}</span>{{end}}</p>
<div class="queues">{{range .Queues}}<figure class="queue">{{.}}</figure>{{end}}</div>
{{end}}
<p class="note">Scheduler time per pass is wall-clock time on the machine that ran the simulation; everything else is deterministic.</p>
</body></html>
`

// htmlHead is a column of the HTML table: a policy and its line style.
type htmlHead struct {
	Name string
	Key  template.HTML
}

// htmlRow is a row of the HTML table.
type htmlRow struct {
	Name  string
	Cells []htmlCell
	// Sep starts a group of rows (size classes, queues, the
	// scheduler's time).
	Sep bool
}

// htmlCell is a cell of the HTML table.
type htmlCell struct {
	Value, Range, Ratio string
	Best                bool
}

// rowGroup names the group of rows a metric key belongs to.
func rowGroup(key string) string {
	for _, g := range []string{"by_size.", "queues.", "wall"} {
		if strings.HasPrefix(key, g) {
			return g
		}
	}
	return ""
}

// WriteHTML writes a self-contained HTML report: the comparison table
// with the best value of each row marked, and SVG charts of utilisation
// and queue length over time, of the JCT distribution per policy and of
// each large queue's share; with several seeds, the range of the
// headline metrics and bands of the range over seeds around the lines.
// It loads nothing from the network and runs no script.
func (r *Report) WriteHTML(w io.Writer) error {
	data := struct {
		R                *Report
		Seeds            string
		First            string
		Lines            []string
		Head             []htmlHead
		Rows             []htmlRow
		More             int
		Util, Queue, CDF template.HTML
		Spread           []template.HTML
		Queues           []template.HTML
		Guarantees       bool
	}{R: r}
	if len(r.Seeds) > 1 {
		data.Seeds = formatSeeds(r.Seeds)
	}
	if len(r.Policies) > 0 {
		data.First = r.Policies[0].Policy
		data.Lines = r.jobLines()
		for i, p := range r.Policies {
			data.Head = append(data.Head, htmlHead{Name: p.Policy, Key: legendSVG(p.Policy, policyStyle(i, len(r.Policies)))})
		}
		prev := ""
		for k, row := range r.rows() {
			hr := htmlRow{Name: row.name, Sep: k > 0 && rowGroup(row.key) != prev}
			prev = rowGroup(row.key)
			for i, c := range row.cells {
				hr.Cells = append(hr.Cells, htmlCell{Value: c.value, Range: c.rng, Ratio: c.ratio, Best: row.best[i]})
			}
			data.Rows = append(data.Rows, hr)
		}
		if n := len(r.Policies[0].Queues); n > tableQueues {
			data.More = n - tableQueues
		}
		data.Util, data.Queue = r.timeCharts()
		data.CDF = r.cdfChart()
		data.Spread = r.spreadCharts()
		data.Queues = r.queueCharts()
		data.Guarantees = slices.ContainsFunc(r.Policies[0].Queues, func(q QueueReport) bool { return q.Guarantee > 0 })
	}
	page, err := htmlPage()
	if err != nil {
		return fmt.Errorf("parse HTML template: %w", err)
	}
	if err := page.Execute(w, data); err != nil {
		return fmt.Errorf("write HTML report: %w", err)
	}
	return nil
}

// replays lists policy i's replays, the first seed's first.
func (r *Report) replays(i int) []*PolicyReport {
	out := []*PolicyReport{&r.Policies[i]}
	for s := range r.MoreSeeds {
		if i < len(r.MoreSeeds[s].Policies) {
			out = append(out, &r.MoreSeeds[s].Policies[i])
		}
	}
	return out
}

// bandOf is the polygon between lo and hi over xs (a NaN ends it:
// bands stop where a series has no value).
func bandOf(xs, lo, hi []float64) [][2]float64 {
	var up, down [][2]float64
	for k := range xs {
		if math.IsNaN(lo[k]) || math.IsNaN(hi[k]) {
			continue
		}
		up = append(up, [2]float64{xs[k], hi[k]})
		down = append(down, [2]float64{xs[k], lo[k]})
	}
	slices.Reverse(down)
	return append(up, down...)
}

// spanOf is the range of values over replays: per index, the lowest
// and highest of the series at that index (NaN where none has one).
func spanOf(series [][]float64) (lo, hi []float64) {
	n := 0
	for _, s := range series {
		n = max(n, len(s))
	}
	lo, hi = make([]float64, n), make([]float64, n)
	for k := range n {
		lo[k], hi[k] = math.Inf(1), math.Inf(-1)
		for _, s := range series {
			if k < len(s) && !math.IsNaN(s[k]) {
				lo[k], hi[k] = math.Min(lo[k], s[k]), math.Max(hi[k], s[k])
			}
		}
		if math.IsInf(lo[k], 1) {
			lo[k], hi[k] = math.NaN(), math.NaN()
		}
	}
	return lo, hi
}

// formatWidth prints a bucket width: 30 s, 15 min, 3 h, 1 d.
func formatWidth(w int64) string {
	switch {
	case w%86400 == 0:
		return fmt.Sprintf("%d d", w/86400)
	case w%3600 == 0:
		return fmt.Sprintf("%d h", w/3600)
	case w%60 == 0:
		return fmt.Sprintf("%d min", w/60)
	}
	return fmt.Sprintf("%d s", w)
}

// timeCharts draws utilisation and queue length over time per policy:
// every replay re-bucketed onto buckets of one round width over the
// span of them all, the first seed's as lines, the range over seeds as
// bands.
func (r *Report) timeCharts() (util, queue template.HTML) {
	origin, end, least := int64(math.MaxInt64), int64(math.MinInt64), int64(0)
	for i := range r.Policies {
		for _, p := range r.replays(i) {
			if c := p.Charts; c != nil {
				origin, end, least = min(origin, c.From), max(end, c.To), max(least, c.Width)
			}
		}
	}
	if least == 0 {
		origin, end = 0, 1
	}
	width := bucketWidth(end-origin, max(least, 1), chartBuckets)
	var xs []float64
	for lo := origin; lo < end; lo += width {
		xs = append(xs, float64(lo+min(lo+width, end))/2)
	}
	note := "mean per " + formatWidth(width) + " bucket"
	if len(r.Seeds) > 1 {
		note += fmt.Sprintf("; lines: seed %d, bands: min–max over seeds %s", r.Seed, formatSeeds(r.Seeds))
	}
	var uLines, qLines []line
	maxQ := 0.0
	for i, p0 := range r.Policies {
		if p0.Charts == nil {
			continue
		}
		st := policyStyle(i, len(r.Policies))
		var us, qs [][]float64
		for _, p := range r.replays(i) {
			c := p.Charts
			if c == nil {
				continue
			}
			u := c.rebucket(c.Util, c.EndUtil, origin, end, width)
			for k := range u {
				u[k] *= 100
			}
			q := c.rebucket(c.Queue, c.EndQueue, origin, end, width)
			us, qs = append(us, u), append(qs, q)
		}
		u, q := line{name: p0.Policy, style: st, x: xs, y: us[0]}, line{name: p0.Policy, style: st, x: xs, y: qs[0]}
		_, hi := spanOf(qs)
		for _, v := range hi {
			if !math.IsNaN(v) {
				maxQ = math.Max(maxQ, v)
			}
		}
		if len(us) > 1 {
			lo, hi := spanOf(us)
			u.band = bandOf(xs, lo, hi)
			lo, hi = spanOf(qs)
			q.band = bandOf(xs, lo, hi)
		}
		uLines, qLines = append(uLines, u), append(qLines, q)
	}
	x, unit := timeAxis(float64(origin), float64(end))
	xl := "trace time (" + unit + ")"
	util = drawChart(chart{w: wideW, h: wideH, title: "GPU utilisation over time", note: note, xLabel: xl,
		yLabel: "allocated GPUs %", x: x, y: percentAxis(0, 100), legend: true}, uLines)
	queue = drawChart(chart{w: wideW, h: wideH, title: "Queue length over time", note: note, xLabel: xl,
		yLabel: "pending jobs", x: x, y: countAxis(0, math.Max(maxQ, 1)), legend: true}, qLines)
	return util, queue
}

// cdfChart draws the distribution of job completion times per policy
// (log scale), the first seed's as lines and the range over seeds as
// bands.
func (r *Report) cdfChart() template.HTML {
	ys := make([]float64, 101)
	for k := range ys {
		ys[k] = float64(k)
	}
	lo, hi := math.Inf(1), 0.0
	var lines []line
	for i, p0 := range r.Policies {
		if len(p0.JCTCDF) != len(ys) {
			continue
		}
		l := line{name: p0.Policy, style: policyStyle(i, len(r.Policies)), x: p0.JCTCDF, y: ys}
		var cdfs [][]float64
		for _, p := range r.replays(i) {
			if len(p.JCTCDF) == len(ys) {
				cdfs = append(cdfs, p.JCTCDF)
				lo, hi = math.Min(lo, p.JCTCDF[0]), math.Max(hi, p.JCTCDF[100])
			}
		}
		if len(cdfs) > 1 {
			// The band runs across: at each percentile, from the
			// shortest JCT over the seeds to the longest.
			left, right := spanOf(cdfs)
			var poly [][2]float64
			for k := range ys {
				poly = append(poly, [2]float64{left[k], ys[k]})
			}
			for k := len(ys) - 1; k >= 0; k-- {
				poly = append(poly, [2]float64{right[k], ys[k]})
			}
			l.band = poly
		}
		lines = append(lines, l)
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	note := "percentiles 0–100 of the completed jobs' JCT (end − submit)"
	if len(r.Seeds) > 1 {
		note += fmt.Sprintf("; lines: seed %d, bands: min–max over seeds %s", r.Seed, formatSeeds(r.Seeds))
	}
	return drawChart(chart{w: wideW, h: wideH, title: "Job completion time CDF", note: note, xLabel: "JCT (log scale)",
		yLabel: "jobs %", x: logDurationAxis(lo, hi), y: percentAxis(0, 100), legend: true}, lines)
}

// htmlQueues bounds the queues the HTML report charts.
const htmlQueues = 16

// queueCharts draws, for each of the largest queues, its share of the
// cluster's GPUs over time under each policy (the first seed), with its
// guarantee when it has one. The charts share the legend above them.
func (r *Report) queueCharts() []template.HTML {
	if len(r.Policies) == 0 || len(r.Policies[0].Queues) < 2 {
		return nil
	}
	var out []template.HTML
	for _, q0 := range r.Policies[0].Queues[:min(len(r.Policies[0].Queues), htmlQueues)] {
		var lines []line
		lo, hi, maxY, bucket := math.Inf(1), math.Inf(-1), 0.0, 0.0
		for i := range r.Policies {
			p := &r.Policies[i]
			l := line{name: p.Policy, style: policyStyle(i, len(r.Policies))}
			for _, q := range p.Queues {
				if q.Queue != q0.Queue || len(q.Series) == 0 {
					continue
				}
				// Series points are bucket starts; the line runs
				// through bucket middles.
				w := 0.0
				if len(q.Series) > 1 {
					w = float64(q.Series[1].T - q.Series[0].T)
				}
				if i == 0 {
					bucket = w
				}
				for _, pt := range q.Series {
					l.x, l.y = append(l.x, float64(pt.T)+w/2), append(l.y, 100*pt.Share)
					maxY = math.Max(maxY, 100*pt.Share)
				}
				lo, hi = math.Min(lo, float64(q.Series[0].T)), math.Max(hi, float64(q.Series[len(q.Series)-1].T)+w)
			}
			lines = append(lines, l)
		}
		if math.IsInf(lo, 1) {
			lo, hi = 0, 1
		}
		x, unit := timeAxis(lo, hi)
		ch := chart{w: smallW, h: smallH, title: fmt.Sprintf("queue %s (%d jobs)", q0.Queue, q0.Jobs),
			xLabel: "trace time (" + unit + ")", yLabel: "GPUs held %", x: x}
		if bucket > 0 {
			ch.note = "mean per ≈" + formatSeconds(bucket) + " bucket (" + fmt.Sprint(queuePoints) + " per replay)"
		}
		if q0.Guarantee > 0 {
			ch.ref, ch.refLabel = 100*q0.Guarantee, fmt.Sprintf("guarantee %.0f%%", 100*q0.Guarantee)
		}
		ch.y = percentAxis(0, math.Max(math.Max(maxY, ch.ref*1.15), 1))
		out = append(out, drawChart(ch, lines))
	}
	return out
}

// spreadMetrics are the metrics the HTML report draws the spread of
// (those of them the report has): the headline ones, then the p99 wait
// of each size class.
var spreadMetrics = []string{"queue_delay_s.mean", "queue_delay_s.p99", "jct_s.mean", "bounded_slowdown.mean",
	"utilisation", "starved"}

// spreadCharts draws, with several seeds, each metric's range over the
// seeds per policy.
func (r *Report) spreadCharts() []template.HTML {
	if len(r.Spread) == 0 {
		return nil
	}
	byKey := map[string]metric{}
	var classes []string
	for _, m := range metrics(&r.Policies[0], r.StarveAfterS) {
		byKey[m.key] = m
		if strings.HasPrefix(m.key, "by_size.") && strings.HasSuffix(m.key, ".queue_delay_s.p99") {
			classes = append(classes, m.key)
		}
	}
	idx := r.spreadIndex()
	var out []template.HTML
	for _, key := range append(slices.Clone(spreadMetrics), classes...) {
		m, ok := byKey[key]
		if !ok {
			continue
		}
		var rows []rangeRow
		for i, p := range r.Policies {
			if sp := idx[i][key]; sp != nil {
				rows = append(rows, rangeRow{label: p.Policy, style: policyStyle(i, len(r.Policies)), min: sp.Min, med: sp.Median, max: sp.Max})
			}
		}
		out = append(out, svgRanges(m, rows))
	}
	return out
}

// rangeRow is one policy's range of a metric.
type rangeRow struct {
	label         string
	style         style
	min, med, max float64
}

// svgRanges draws one bar per row from min to max, with the policy's
// marker at the median and the three values written out.
func svgRanges(m metric, rows []rangeRow) template.HTML {
	const rowH, font, small = 22, 12.0, 11.0
	hi := 0.0
	labelN, valueN := 0, 0
	values := make([]string, len(rows))
	for i, r := range rows {
		hi = math.Max(hi, r.max)
		labelN = max(labelN, len([]rune(r.label)))
		values[i] = fmt.Sprintf("%s [%s–%s]", m.format(r.med), m.format(r.min), m.format(r.max))
		valueN = max(valueN, len([]rune(values[i])))
	}
	x := metricAxis(math.Max(hi, 1e-9), m.kind)
	if hi <= 0 {
		x = metricAxis(1, m.kind)
	}
	lastTick := 0.0
	if len(x.ticks) > 0 {
		lastTick = textWidth(len([]rune(x.label(x.ticks[len(x.ticks)-1]))), small) / 2
	}
	left := 12 + textWidth(labelN, font)
	right := float64(wideW) - 24 - textWidth(valueN, font) - math.Max(lastTick, 8)
	h := 28 + rowH*len(rows) + 30
	px := func(v float64) float64 { return left + x.frac(v)*(right-left) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" font-family="system-ui,sans-serif">`,
		wideW, h, wideW, h, esc(m.name))
	fmt.Fprintf(&b, `<text x="4" y="17" font-size="14" font-weight="bold">%s</text>`, esc(m.name))
	base := float64(28 + rowH*len(rows) + 4)
	for _, t := range x.ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="28" x2="%.1f" y2="%.1f" stroke="#eee"/>`, px(t), px(t), base)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="%.0f" text-anchor="middle">%s</text>`, px(t), base+15, small, esc(x.label(t)))
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`, left, base, right, base)
	for i, r := range rows {
		y := float64(28 + rowH*i + rowH/2)
		c := r.style.color
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="%.0f" text-anchor="end">%s</text>`, left-8, y+4, font, esc(r.label))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`, px(r.min), y, px(r.max), y, c)
		for _, v := range []float64{r.min, r.max} {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`, px(v), y-6, px(v), y+6, c)
		}
		marker(&b, style{color: c, marker: r.style.marker}, px(r.med), y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="%.0f">%s</text>`, float64(wideW)-8-textWidth(valueN, font), y+4, font, esc(values[i]))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec: built from escaped parts
}
