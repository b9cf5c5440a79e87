package ui

import (
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// Line charts as inline SVG, drawn on the server: no script library,
// nothing fetched, and the page's Content-Security-Policy holds (the
// SVG is markup with classes; colours and dashes come from ui.css).

// chartPoint is one value at one time.
type chartPoint struct {
	T time.Time
	V float64
}

// chartSeries is one line.
type chartSeries struct {
	Name   string
	Points []chartPoint
}

// chart is one line chart over time.
type chart struct {
	Title string
	// Unit is appended to the y axis' labels ("%", " GPUs").
	Unit string
	// YMax fixes the top of the y axis (0: from the data).
	YMax   float64
	From   time.Time
	To     time.Time
	Series []chartSeries
	// Every is the data's sampling interval: a longer gap between two
	// points breaks the line rather than drawing through the gap.
	Every time.Duration
}

// maxChartPoints bounds the points drawn per line: a day of 30-second
// samples is 2,880, more than the plot has pixels; longer series are
// averaged into buckets, and the chart says how long a bucket is.
const maxChartPoints = 360

// Plot geometry, in the SVG's own units.
const (
	chartW, chartH  = 760, 210
	plotL, plotR    = 56, 744
	plotT, plotB    = 12, 176
	lineClasses     = 6
	chartAxisLabelY = 194
	chartMinSpan    = time.Minute
	chartGapFactor  = 2.5
)

// bucketed averages ps into buckets of width d (time-aligned), one
// point per non-empty bucket at the bucket's middle.
func bucketed(ps []chartPoint, d time.Duration) []chartPoint {
	var out []chartPoint
	var sum float64
	var n int
	var cur time.Time
	flush := func() {
		if n > 0 {
			out = append(out, chartPoint{T: cur.Add(d / 2), V: sum / float64(n)})
		}
	}
	for _, p := range ps {
		b := p.T.Truncate(d)
		if !b.Equal(cur) {
			flush()
			cur, sum, n = b, 0, 0
		}
		sum += p.V
		n++
	}
	flush()
	return out
}

// render draws the chart and its legend; the legend sits under the
// plot, never over a line.
func (c chart) render() template.HTML {
	var b strings.Builder
	b.WriteString(`<figure class="chart"><figcaption>` + html.EscapeString(c.Title))
	from, to := c.From, c.To
	if to.Sub(from) < chartMinSpan {
		from = to.Add(-chartMinSpan)
	}
	span := to.Sub(from)
	// Average into buckets when a line has more points than the plot
	// has room for.
	bucket := time.Duration(0)
	most := 0
	for _, s := range c.Series {
		most = max(most, len(s.Points))
	}
	if most > maxChartPoints {
		bucket = niceDuration(span / maxChartPoints)
	}
	every := c.Every
	if bucket > 0 {
		every = max(every, bucket)
		b.WriteString(` <small>(mean per ` + fmtDuration(bucket) + ` bucket)</small>`)
	}
	b.WriteString(`</figcaption>`)
	series := make([][]chartPoint, len(c.Series))
	top := c.YMax
	any := false
	for i, s := range c.Series {
		ps := s.Points
		if bucket > 0 {
			ps = bucketed(ps, bucket)
		}
		series[i] = ps
		for _, p := range ps {
			if p.V >= 0 && !math.IsNaN(p.V) {
				any = true
				if c.YMax == 0 {
					top = max(top, p.V)
				}
			}
		}
	}
	if !any {
		b.WriteString(`<p class="empty">No samples yet.</p></figure>`)
		return template.HTML(b.String())
	}
	yStep, yTop := niceAxis(top)
	if c.YMax > 0 {
		yTop = c.YMax
		yStep = c.YMax / 4
	}
	x := func(t time.Time) float64 {
		return plotL + float64(t.Sub(from))/float64(span)*(plotR-plotL)
	}
	y := func(v float64) float64 {
		return plotB - v/yTop*(plotB-plotT)
	}
	b.WriteString(`<svg viewBox="0 0 ` + itoa(chartW) + ` ` + itoa(chartH) + `" role="img" aria-label="` +
		html.EscapeString(c.Title) + `" preserveAspectRatio="xMidYMid meet">`)
	// Grid and y labels.
	for v := 0.0; v <= yTop+yStep/1000; v += yStep {
		yy := f1(y(v))
		b.WriteString(`<line class="grid" x1="` + itoa(plotL) + `" x2="` + itoa(plotR) + `" y1="` + yy + `" y2="` + yy + `"/>`)
		b.WriteString(`<text class="yl" x="` + itoa(plotL-6) + `" y="` + f1(y(v)+4) + `">` + fmtValue(v) + html.EscapeString(c.Unit) + `</text>`)
	}
	// Time ticks.
	step := timeStep(span)
	for t := from.Truncate(step).Add(step); !t.After(to); t = t.Add(step) {
		xx := f1(x(t))
		b.WriteString(`<line class="tick" x1="` + xx + `" x2="` + xx + `" y1="` + itoa(plotT) + `" y2="` + itoa(plotB) + `"/>`)
		label := t.Local().Format("15:04")
		if step >= 24*time.Hour {
			label = t.Local().Format("Jan 2")
		}
		b.WriteString(`<text class="xl" x="` + xx + `" y="` + itoa(chartAxisLabelY) + `">` + label + `</text>`)
	}
	b.WriteString(`<line class="axis" x1="` + itoa(plotL) + `" x2="` + itoa(plotR) + `" y1="` + itoa(plotB) + `" y2="` + itoa(plotB) + `"/>`)
	gap := time.Duration(float64(every) * chartGapFactor)
	for i, ps := range series {
		cls := "l" + itoa(i%lineClasses)
		var pts strings.Builder
		var last time.Time
		n := 0
		flush := func() {
			switch {
			case n == 1: // a lone point: a dot, since a line needs two
				xy := strings.Split(strings.TrimSpace(pts.String()), ",")
				b.WriteString(`<circle class="` + cls + `" cx="` + xy[0] + `" cy="` + xy[1] + `" r="2.5"/>`)
			case n > 1:
				b.WriteString(`<polyline class="` + cls + `" points="` + strings.TrimSpace(pts.String()) + `"/>`)
			}
			pts.Reset()
			n = 0
		}
		for _, p := range ps {
			if p.V < 0 || math.IsNaN(p.V) || p.T.Before(from) {
				flush()
				continue
			}
			if n > 0 && gap > 0 && p.T.Sub(last) > gap {
				flush()
			}
			pts.WriteString(f1(x(p.T)) + "," + f1(y(min(p.V, yTop))) + " ")
			last = p.T
			n++
		}
		flush()
	}
	b.WriteString(`</svg><ul class="legend">`)
	for i, s := range c.Series {
		cls := "l" + itoa(i%lineClasses)
		b.WriteString(`<li><svg class="sw" viewBox="0 0 24 8"><line class="` + cls + `" x1="0" x2="24" y1="4" y2="4"/></svg>` +
			html.EscapeString(s.Name) + `</li>`)
	}
	b.WriteString(`</ul></figure>`)
	return template.HTML(b.String())
}

// niceAxis returns a step of 1, 2 or 5 times a power of ten and the
// multiple of it at or above top (at least 1), for four or five lines.
func niceAxis(top float64) (step, axisTop float64) {
	if top <= 0 || math.IsNaN(top) {
		top = 1
	}
	raw := top / 4
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch {
	case raw <= p:
		step = p
	case raw <= 2*p:
		step = 2 * p
	case raw <= 5*p:
		step = 5 * p
	default:
		step = 10 * p
	}
	if step < 1 && top >= 1 {
		step = 1
	}
	return step, math.Ceil(top/step-1e-9) * step
}

// timeSteps are the time axis' tick intervals.
var timeSteps = []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute,
	30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}

// timeStep picks the tick interval that gives at most seven ticks.
func timeStep(span time.Duration) time.Duration {
	for _, s := range timeSteps {
		if span/s <= 7 {
			return s
		}
	}
	return timeSteps[len(timeSteps)-1]
}

// niceDuration rounds d up to a whole second, minute or hour count.
func niceDuration(d time.Duration) time.Duration {
	for _, u := range []time.Duration{time.Hour, time.Minute, time.Second} {
		if d >= u {
			return (d + u - 1) / u * u
		}
	}
	return time.Second
}

// fmtDuration is "90 s", "5 min", "2 h", "1 h 30 min".
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return itoa(int(d/time.Second)) + " s"
	case d < time.Hour:
		if d%time.Minute != 0 {
			return itoa(int(d/time.Minute)) + " min " + itoa(int(d%time.Minute/time.Second)) + " s"
		}
		return itoa(int(d/time.Minute)) + " min"
	}
	if m := d % time.Hour / time.Minute; m != 0 {
		return itoa(int(d/time.Hour)) + " h " + itoa(int(m)) + " min"
	}
	return itoa(int(d/time.Hour)) + " h"
}

// fmtValue prints an axis value without needless decimals.
func fmtValue(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func itoa(n int) string { return strconv.Itoa(n) }

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
