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

// palette colours the policies in charts (colour-blind safe).
var palette = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9"}

// chart geometry, in SVG units.
const (
	chartW, chartH         = 760, 260
	padL, padR, padT, padB = 64, 16, 24, 40
)

// series is one line of a chart.
type line struct {
	name  string
	color string
	x, y  []float64
}

// svgChart draws lines as an inline SVG with axes, ticks and a legend.
// With logX the x axis is logarithmic (values <= 0 are clamped to 1).
func svgChart(title, xLabel, yLabel string, lines []line, logX bool, xFmt, yFmt func(float64) string) template.HTML {
	return drawChart(chart{w: chartW, h: chartH, title: title, xLabel: xLabel, yLabel: yLabel, logX: logX, xFmt: xFmt, yFmt: yFmt}, lines)
}

// chart is the frame of a line chart: size, labels, axes.
type chart struct {
	w, h                  int
	title, xLabel, yLabel string
	logX                  bool
	xFmt, yFmt            func(float64) string
	// ref > 0 draws a dashed horizontal line at that value, labelled
	// refLabel (a queue's guarantee).
	ref      float64
	refLabel string
}

// drawChart draws lines in the frame ch.
func drawChart(ch chart, lines []line) template.HTML {
	chartW, chartH, title, xLabel, yLabel, logX, xFmt, yFmt := ch.w, ch.h, ch.title, ch.xLabel, ch.yLabel, ch.logX, ch.xFmt, ch.yFmt
	minX, maxX, maxY := math.Inf(1), math.Inf(-1), ch.ref*1.1
	tx := func(v float64) float64 {
		if logX {
			return math.Log10(math.Max(v, 1))
		}
		return v
	}
	for _, l := range lines {
		for i := range l.x {
			minX, maxX = math.Min(minX, tx(l.x[i])), math.Max(maxX, tx(l.x[i]))
			maxY = math.Max(maxY, l.y[i])
		}
	}
	if math.IsInf(minX, 0) || maxX <= minX {
		minX, maxX = 0, 1
	}
	if maxY <= 0 {
		maxY = 1
	}
	pw, ph := float64(chartW-padL-padR), float64(chartH-padT-padB)
	px := func(v float64) float64 { return padL + (tx(v)-minX)/(maxX-minX)*pw }
	py := func(v float64) float64 { return padT + ph - v/maxY*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		chartW, chartH, chartW, chartH, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<text x="%d" y="16" font-size="14" font-weight="bold">%s</text>`, padL, template.HTMLEscapeString(title))
	// Axes and ticks.
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#333"/>`, padL, padT+ph, chartW-padR, padT+ph)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%.1f" stroke="#333"/>`, padL, padT, padL, padT+ph)
	for k := 0; k <= 4; k++ {
		yv := maxY * float64(k) / 4
		y := py(yv)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`, padL, y, chartW-padR, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>`, padL-4, y+4, template.HTMLEscapeString(yFmt(yv)))
	}
	for k := 0; k <= 5; k++ {
		t := minX + (maxX-minX)*float64(k)/5
		xv := t
		if logX {
			xv = math.Pow(10, t)
		}
		x := padL + float64(k)/5*pw
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`, x, padT+ph+16, template.HTMLEscapeString(xFmt(xv)))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%s</text>`, padL+pw/2, chartH-4, template.HTMLEscapeString(xLabel))
	fmt.Fprintf(&b, `<text x="12" y="%.1f" font-size="11" text-anchor="middle" transform="rotate(-90 12 %.1f)">%s</text>`,
		padT+ph/2, padT+ph/2, template.HTMLEscapeString(yLabel))
	if ch.ref > 0 {
		y := py(ch.ref)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#555" stroke-dasharray="4 3"/>`, padL, y, chartW-padR, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="10" fill="#555">%s</text>`, padL+4, y-3, template.HTMLEscapeString(ch.refLabel))
	}
	for i, l := range lines {
		var pts strings.Builder
		for k := range l.x {
			fmt.Fprintf(&pts, "%.1f,%.1f ", px(l.x[k]), py(l.y[k]))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, l.color, strings.TrimSpace(pts.String()))
		lx := float64(chartW - padR - 120)
		ly := float64(padT + 14*i + 4)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="12" height="3" fill="%s"/>`, lx, ly, l.color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11">%s</text>`, lx+16, ly+5, template.HTMLEscapeString(l.name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec: built from escaped parts
}

// htmlPage parses the report template on first use: html/template's
// parse is a noticeable share of a short tool's start, and most runs
// write no HTML. The template is a constant, so a parse error is a bug
// that every WriteHTML test catches.
var htmlPage = sync.OnceValues(func() (*template.Template, error) {
	return template.New("report").Parse(htmlSource)
})

const htmlSource = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tide sim: {{.R.Trace}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:900px}
table{border-collapse:collapse;margin:12px 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;font-variant-numeric:tabular-nums}
th:first-child,td:first-child{text-align:left}
figure{margin:16px 0}
.queues{display:flex;flex-wrap:wrap;gap:8px}
.queues figure{margin:0}
</style></head><body>
<h1>tide sim</h1>
<p>Trace <code>{{.R.Trace}}</code> on {{.R.Cluster.Nodes}} nodes × {{.R.Cluster.GPUsPerNode}} GPUs
({{.R.Cluster.GPUs}} GPUs, {{.R.Cluster.Leaves}} leaf switches), seed {{.R.Seed}}.</p>
<pre>{{.Table}}</pre>
{{if .Spread}}<h2>Spread over seeds {{.Seeds}}</h2>
<p>Each bar runs from the lowest to the highest value over the seeds; the dot is the median.</p>
{{range .Spread}}<figure class="spread">{{.}}</figure>
{{end}}<p>The charts below show seed {{.R.Seed}}.</p>
{{end}}<figure id="utilisation">{{.Util}}</figure>
<figure id="queue">{{.Queue}}</figure>
<figure id="jct-cdf">{{.CDF}}</figure>
{{if .Queues}}<h2>Queues: share of the cluster's GPUs over time</h2>
<p>Each queue's GPUs in use as a share of the cluster's, per policy{{if .Guarantees}}; the dashed line is its guarantee in the config{{else}}
(guarantees come from the queues of a --config file; this replay has none){{end}}.</p>
<div class="queues">{{range .Queues}}<figure class="queue">{{.}}</figure>{{end}}</div>
{{end}}
<p>Scheduler time per pass is wall-clock time on the machine that ran the simulation; everything else is deterministic.</p>
</body></html>
`

// WriteHTML writes a self-contained HTML report: the comparison table
// and SVG charts of utilisation and queue length over time and of the
// JCT distribution per policy. It loads nothing from the network.
func (r *Report) WriteHTML(w io.Writer) error {
	var table strings.Builder
	if err := r.WriteText(&table); err != nil {
		return err
	}
	var util, queue, cdf []line
	for i, p := range r.Policies {
		color := palette[i%len(palette)]
		u := line{name: p.Policy, color: color}
		q := line{name: p.Policy, color: color}
		for _, pt := range p.Series {
			day := float64(pt.T) / 86400
			u.x, u.y = append(u.x, day), append(u.y, 100*pt.Utilisation)
			q.x, q.y = append(q.x, day), append(q.y, pt.Queue)
		}
		c := line{name: p.Policy, color: color}
		for k, v := range p.JCTCDF {
			c.x, c.y = append(c.x, v), append(c.y, float64(k))
		}
		util, queue, cdf = append(util, u), append(queue, q), append(cdf, c)
	}
	days := func(v float64) string { return fmt.Sprintf("%.1fd", v) }
	data := struct {
		R                *Report
		Table            string
		Util, Queue, CDF template.HTML
		Seeds            string
		Spread           []template.HTML
		Queues           []template.HTML
		Guarantees       bool
	}{
		R:      r,
		Table:  table.String(),
		Seeds:  formatSeeds(r.Seeds),
		Spread: r.spreadCharts(),
		Queues: r.queueCharts(),
		Guarantees: len(r.Policies) > 0 &&
			slices.ContainsFunc(r.Policies[0].Queues, func(q QueueReport) bool { return q.Guarantee > 0 }),
		Util: svgChart("GPU utilisation over time", "trace time (days)", "allocated GPUs %", util, false, days,
			func(v float64) string { return fmt.Sprintf("%.0f%%", v) }),
		Queue: svgChart("Queue length over time", "trace time (days)", "pending jobs", queue, false, days,
			func(v float64) string { return fmt.Sprintf("%.0f", v) }),
		CDF: svgChart("Job completion time CDF", "JCT (log scale)", "jobs %", cdf, true, formatSeconds,
			func(v float64) string { return fmt.Sprintf("%.0f%%", v) }),
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

// htmlQueues bounds the queues the HTML report charts.
const htmlQueues = 16

// queueCharts draws, for each of the largest queues, its share of the
// cluster's GPUs over time under each policy (the first seed), with its
// guarantee when it has one.
func (r *Report) queueCharts() []template.HTML {
	if len(r.Policies) == 0 || len(r.Policies[0].Queues) < 2 {
		return nil
	}
	var out []template.HTML
	for _, q0 := range r.Policies[0].Queues[:min(len(r.Policies[0].Queues), htmlQueues)] {
		var lines []line
		for i := range r.Policies {
			p := &r.Policies[i]
			l := line{name: p.Policy, color: palette[i%len(palette)]}
			for _, q := range p.Queues {
				if q.Queue != q0.Queue {
					continue
				}
				for _, pt := range q.Series {
					l.x, l.y = append(l.x, float64(pt.T)/86400), append(l.y, 100*pt.Share)
				}
			}
			lines = append(lines, l)
		}
		ch := chart{w: 440, h: 200, title: fmt.Sprintf("queue %s (%d jobs)", q0.Queue, q0.Jobs), xLabel: "trace time (days)",
			yLabel: "GPUs held %", xFmt: func(v float64) string { return fmt.Sprintf("%.0fd", v) },
			yFmt: func(v float64) string { return fmt.Sprintf("%.0f%%", v) }}
		if q0.Guarantee > 0 {
			ch.ref, ch.refLabel = 100*q0.Guarantee, fmt.Sprintf("guarantee %.0f%%", 100*q0.Guarantee)
		}
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
				rows = append(rows, rangeRow{label: p.Policy, color: palette[i%len(palette)], min: sp.Min, med: sp.Median, max: sp.Max})
			}
		}
		out = append(out, svgRanges(m.name, rows, m.format))
	}
	return out
}

// rangeRow is one policy's range of a metric.
type rangeRow struct {
	label, color  string
	min, med, max float64
}

// svgRanges draws one bar per row from min to max, with a dot at the
// median and the three values written out.
func svgRanges(title string, rows []rangeRow, format func(float64) string) template.HTML {
	const rowH, w = 22, chartW
	h := padT + rowH*len(rows) + 28
	hi := 0.0
	for _, r := range rows {
		hi = math.Max(hi, r.max)
	}
	if hi <= 0 {
		hi = 1
	}
	left, right := 120.0, float64(w-padR-150)
	px := func(v float64) float64 { return left + v/hi*(right-left) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		w, h, w, h, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<text x="8" y="16" font-size="14" font-weight="bold">%s</text>`, template.HTMLEscapeString(title))
	base := float64(padT + rowH*len(rows) + 4)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`, left, base, right, base)
	for k := 0; k <= 4; k++ {
		v := hi * float64(k) / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle">%s</text>`, px(v), base+14, template.HTMLEscapeString(format(v)))
	}
	for i, r := range rows {
		y := float64(padT + rowH*i + rowH/2)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="end">%s</text>`, left-8, y+4, template.HTMLEscapeString(r.label))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`, px(r.min), y, px(r.max), y, r.color)
		for _, v := range []float64{r.min, r.max} {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`, px(v), y-6, px(v), y+6, r.color)
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`, px(r.med), y, r.color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11">%s [%s–%s]</text>`, right+12, y+4,
			template.HTMLEscapeString(format(r.med)), template.HTMLEscapeString(format(r.min)), template.HTMLEscapeString(format(r.max)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec: built from escaped parts
}
