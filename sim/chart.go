package sim

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// The HTML report's charts: inline SVG, drawn here without a library so
// that the report stays one self-contained file. Lines are told apart
// by colour, dash pattern and marker shape (colour alone fails in print
// and for colour-blind readers), and lines that coincide stay visible:
// the first policy is drawn widest, each later one narrower on top of
// it, and the markers of each line sit at points of their own.

// palette colours the policies in charts (colour-blind safe: Okabe-Ito).
var palette = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9"}

// dashes are the policies' dash patterns, in palette order.
var dashes = []string{"", "8 3", "2 2.5", "10 3 2 3", "5 2", "1 3"}

// Marker shapes, in palette order.
const (
	markCircle = iota
	markSquare
	markTriangle
	markDiamond
	markTriangleDown
	markCross
	markShapes
)

// style is how one policy's line looks.
type style struct {
	color, dash string
	marker      int
	width       float64
}

// policyStyle is the style of policy i of n: its colour, dash and
// marker, and a width that shrinks with i so that a later line drawn
// over an earlier one leaves the earlier one's edges showing.
func policyStyle(i, n int) style {
	w := 1.6
	if n > 1 {
		w += 2.4 * float64(n-1-i) / float64(n-1)
	}
	return style{color: palette[i%len(palette)], dash: dashes[i%len(dashes)], marker: i % markShapes, width: w}
}

// line is one series of a chart, in data coordinates. A NaN y breaks
// the line.
type line struct {
	name  string
	style style
	x, y  []float64
	// band, when not empty, is a polygon (data coordinates) shaded
	// under the line: the range over seeds.
	band [][2]float64
}

// axis maps data values to a chart's length and labels its ticks.
type axis struct {
	lo, hi float64
	log    bool
	ticks  []float64
	label  func(float64) string
}

// frac is v's position on the axis, 0 at lo and 1 at hi.
func (a *axis) frac(v float64) float64 {
	if a.log {
		v = math.Log10(math.Max(v, 1))
		lo, hi := math.Log10(math.Max(a.lo, 1)), math.Log10(math.Max(a.hi, 1))
		if hi <= lo {
			return 0
		}
		return (v - lo) / (hi - lo)
	}
	if a.hi <= a.lo {
		return 0
	}
	return (v - a.lo) / (a.hi - a.lo)
}

// widest is the length in characters of the longest tick label.
func (a *axis) widest() int {
	n := 0
	for _, t := range a.ticks {
		n = max(n, len([]rune(a.label(t))))
	}
	return n
}

// niceStep is the step of about n ticks over span: 1, 2 or 5 times a
// power of ten, or, when the span in the unit is at least n, one of
// whole (the steps natural in a unit, such as 1, 2, 3, 6 and 12
// hours).
func niceStep(span float64, n int, whole []float64) float64 {
	raw := span / float64(n)
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	if raw >= 1 {
		for _, s := range whole {
			if s >= raw*(1-1e-9) {
				return s
			}
		}
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw*(1-1e-9) {
			return m * mag
		}
	}
	return 10 * mag
}

// decimals is how many decimals tick labels of step need.
func decimals(step float64) int {
	if step >= 1 {
		return 0
	}
	return int(math.Ceil(-math.Log10(step) - 1e-9))
}

// linearAxis spans [lo, hi] with about n ticks a step of niceStep
// apart. With extend the ends move out to whole steps (a value axis
// from 0), else they stay and the ticks fall inside (a time axis).
// Ticks are in units of unit; label prints a tick given in units.
func linearAxis(lo, hi float64, n int, extend bool, unit float64, whole []float64, label func(v float64, dec int) string) axis {
	if hi <= lo {
		hi = lo + unit
	}
	step := niceStep((hi-lo)/unit, n, whole)
	if extend {
		lo = math.Floor(lo/unit/step+1e-9) * step * unit
		hi = math.Ceil(hi/unit/step-1e-9) * step * unit
	}
	a := axis{lo: lo, hi: hi}
	dec := decimals(step)
	first := math.Ceil(lo/unit/step - 1e-9)
	for k := first; k*step*unit <= hi*(1+1e-9)+1e-9; k++ {
		v := k * step * unit
		if v == 0 {
			v = 0 // not -0, which prints as "-0"
		}
		a.ticks = append(a.ticks, v)
	}
	a.label = func(v float64) string { return label(v/unit, dec) }
	return a
}

// number prints v with dec decimals.
func number(v float64, dec int) string { return strconv.FormatFloat(v, 'f', dec, 64) }

// countAxis is an axis of counts or plain numbers from lo to hi.
func countAxis(lo, hi float64) axis {
	return linearAxis(lo, hi, 4, true, 1, nil, number)
}

// percentAxis is an axis of percentages (values in percent).
func percentAxis(lo, hi float64) axis {
	return linearAxis(lo, hi, 5, true, 1, nil, func(v float64, dec int) string { return number(v, dec) + "%" })
}

// timeUnit is a unit of durations for axes.
type timeUnit struct {
	seconds float64
	suffix  string // on tick labels: "d"
	name    string // in axis titles: "days"
	// whole are the steps natural in the unit.
	whole []float64
}

var (
	unitSeconds = timeUnit{1, "s", "seconds", []float64{1, 2, 5, 10, 15, 30}}
	unitMinutes = timeUnit{60, "m", "minutes", []float64{1, 2, 5, 10, 15, 30}}
	unitHours   = timeUnit{3600, "h", "hours", []float64{1, 2, 3, 6, 12}}
	unitDays    = timeUnit{86400, "d", "days", []float64{1, 2, 5, 10, 20, 50, 100, 200, 500}}
)

// unitFor is the unit that shows span seconds as at least 3 units.
func unitFor(span float64) timeUnit {
	for _, u := range []timeUnit{unitDays, unitHours, unitMinutes} {
		if span >= 3*u.seconds {
			return u
		}
	}
	return unitSeconds
}

// timeAxis is an axis of trace time in seconds over exactly [lo, hi],
// ticks in a unit chosen for the span; the unit's name is for the axis
// title.
func timeAxis(lo, hi float64) (axis, string) {
	u := unitFor(hi - lo)
	return linearAxis(lo, hi, 6, false, u.seconds, u.whole, number), u.name
}

// durationAxis is an axis of durations in seconds from lo to hi (out to
// whole steps), each tick labelled with its unit: 0h, 12h, 24h.
func durationAxis(lo, hi float64) axis {
	u := unitFor(hi - lo)
	return linearAxis(lo, hi, 4, true, u.seconds, u.whole, func(v float64, dec int) string { return number(v, dec) + u.suffix })
}

// logTicks are the ticks of logarithmic duration axes: round durations
// about evenly apart on a log scale.
var logTicks = []struct {
	s     float64
	label string
}{{1, "1s"}, {10, "10s"}, {60, "1m"}, {600, "10m"}, {3600, "1h"}, {6 * 3600, "6h"}, {86400, "1d"},
	{864000, "10d"}, {8640000, "100d"}, {86400000, "1000d"}}

// logDurationAxis is a logarithmic axis of durations in seconds from
// the tick at or below lo to the one at or above hi.
func logDurationAxis(lo, hi float64) axis {
	a := axis{log: true, lo: logTicks[0].s, hi: logTicks[len(logTicks)-1].s}
	for _, t := range logTicks {
		if t.s <= math.Max(lo, 1) {
			a.lo = t.s
		}
	}
	for i := len(logTicks) - 1; i >= 0; i-- {
		if logTicks[i].s >= hi {
			a.hi = logTicks[i].s
		}
	}
	if a.hi <= a.lo {
		a.hi = 10 * a.lo
	}
	labels := map[float64]string{}
	for _, t := range logTicks {
		if t.s >= a.lo && t.s <= a.hi {
			a.ticks = append(a.ticks, t.s)
			labels[t.s] = t.label
		}
	}
	a.label = func(v float64) string {
		if l, ok := labels[v]; ok {
			return l
		}
		return formatSeconds(v)
	}
	return a
}

// metricAxis is an axis from 0 to hi for values of a metric kind.
func metricAxis(hi float64, kind metricKind) axis {
	switch kind {
	case kindSeconds:
		return durationAxis(0, hi)
	case kindFraction:
		a := percentAxis(0, 100*hi)
		for i := range a.ticks {
			a.ticks[i] /= 100
		}
		a.lo, a.hi = a.lo/100, a.hi/100
		label := a.label
		a.label = func(v float64) string { return label(100 * v) }
		return a
	}
	return countAxis(0, hi)
}

// textWidth estimates the width of a label in SVG units: about 0.6 em a
// character in a sans-serif face (digits are 0.55 em).
func textWidth(chars int, fontSize float64) float64 { return float64(chars) * fontSize * 0.6 }

// chart is the frame of a line chart: size, titles, axes.
type chart struct {
	w, h int
	// note is a second title line: what each point averages, what the
	// bands are.
	title, note    string
	xLabel, yLabel string
	x, y           axis
	// ref > 0 draws a dashed horizontal line at that value, labelled
	// refLabel (a queue's guarantee).
	ref      float64
	refLabel string
	// legend draws the lines' legend right of the plot; a chart in a
	// grid leaves it to one legend for the grid.
	legend bool
}

// esc escapes text for SVG.
func esc(s string) string { return template.HTMLEscapeString(s) }

// drawChart draws lines in the frame ch as an inline SVG. The plot area
// leaves room for the tick labels, the axis titles and the legend, so
// that nothing is cut or drawn over a curve.
func drawChart(ch chart, lines []line) template.HTML {
	const font, small = 12.0, 11.0
	legendW := 0.0
	if ch.legend {
		n := 0
		for _, l := range lines {
			n = max(n, len([]rune(l.name)))
		}
		legendW = 16 + 34 + textWidth(n, font)
	}
	// At least room for four-character ticks ("100%"), so that the
	// plots of charts above each other mostly line up.
	padL := 8 + small + 8 + textWidth(max(ch.y.widest(), 4), small) + 6
	lastX := ""
	if len(ch.x.ticks) > 0 {
		lastX = ch.x.label(ch.x.ticks[len(ch.x.ticks)-1])
	}
	padR := math.Max(textWidth(len([]rune(lastX)), small)/2+4, 10) + legendW
	padT := 26.0
	if ch.note != "" {
		padT += 16
	}
	padB := 44.0
	pw, ph := float64(ch.w)-padL-padR, float64(ch.h)-padT-padB
	px := func(v float64) float64 { return padL + ch.x.frac(v)*pw }
	py := func(v float64) float64 { return padT + ph - ch.y.frac(v)*ph }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" font-family="system-ui,sans-serif">`,
		ch.w, ch.h, ch.w, ch.h, esc(ch.title))
	fmt.Fprintf(&b, `<text x="%.1f" y="17" font-size="14" font-weight="bold">%s</text>`, padL, esc(ch.title))
	if ch.note != "" {
		fmt.Fprintf(&b, `<text x="%.1f" y="33" font-size="%.0f" fill="#555">%s</text>`, padL, small, esc(ch.note))
	}
	// Grid, ticks and axes.
	for _, t := range ch.y.ticks {
		y := py(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`, padL, y, padL+pw, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="%.0f" text-anchor="end">%s</text>`, padL-5, y+4, small, esc(ch.y.label(t)))
	}
	for _, t := range ch.x.ticks {
		x := px(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`, x, padT+ph, x, padT+ph+4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="%.0f" text-anchor="middle">%s</text>`, x, padT+ph+16, small, esc(ch.x.label(t)))
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`, padL, padT+ph, padL+pw, padT+ph)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`, padL, padT, padL, padT+ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="%.0f" text-anchor="middle">%s</text>`, padL+pw/2, float64(ch.h)-6, small, esc(ch.xLabel))
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="%.0f" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>`,
		8+small/2+2, padT+ph/2, small, 8+small/2+2, padT+ph/2, esc(ch.yLabel))
	if ch.ref > 0 {
		y := py(ch.ref)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="4 3"/>`, padL, y, padL+pw, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" fill="#555">%s</text>`, padL+4, y-3, esc(ch.refLabel))
	}
	// Bands under every line, then the lines (the first, widest, at the
	// bottom), then every line's markers over all lines.
	for _, l := range lines {
		if len(l.band) < 3 {
			continue
		}
		var pts strings.Builder
		for _, p := range l.band {
			fmt.Fprintf(&pts, "%.1f,%.1f ", px(p[0]), py(p[1]))
		}
		fmt.Fprintf(&b, `<polygon fill="%s" fill-opacity="0.16" stroke="none" points="%s"/>`, l.style.color, strings.TrimSpace(pts.String()))
	}
	for _, l := range lines {
		for _, seg := range segments(l) {
			var pts strings.Builder
			for _, k := range seg {
				fmt.Fprintf(&pts, "%.1f,%.1f ", px(l.x[k]), py(l.y[k]))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%.1f" stroke-linejoin="round"%s points="%s"/>`,
				l.style.color, l.style.width, dashAttr(l.style.dash), strings.TrimSpace(pts.String()))
		}
	}
	for i, l := range lines {
		for _, k := range markerPoints(len(l.x), i, len(lines), 8) {
			if !math.IsNaN(l.y[k]) {
				marker(&b, l.style, px(l.x[k]), py(l.y[k]))
			}
		}
	}
	if ch.legend {
		lx := float64(ch.w) - legendW + 16
		for i, l := range lines {
			ly := padT + 8 + 18*float64(i)
			legendEntry(&b, l.style, lx, ly)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="%.0f">%s</text>`, lx+34, ly+4, font, esc(l.name))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec: built from escaped parts
}

// segments splits a line's points into runs without a NaN.
func segments(l line) [][]int {
	var out [][]int
	var cur []int
	for k := range l.x {
		if math.IsNaN(l.y[k]) || math.IsNaN(l.x[k]) {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, k)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// markerPoints picks about per points of n for line i of lines to mark,
// each line at points of its own, so that the markers of coinciding
// lines do not cover each other.
func markerPoints(n, i, lines, per int) []int {
	if n == 0 {
		return nil
	}
	step := max(n/per, 1)
	off := (step/2 + i*step/max(lines, 1)) % step
	var out []int
	for k := off; k < n; k += step {
		out = append(out, k)
	}
	return out
}

func dashAttr(d string) string {
	if d == "" {
		return ""
	}
	return ` stroke-dasharray="` + d + `"`
}

// marker draws st's marker centred on (x, y), outlined in white so that
// it shows over lines of the same colour.
func marker(b *strings.Builder, st style, x, y float64) {
	const r = 3.6
	attr := fmt.Sprintf(`fill="%s" stroke="#fff" stroke-width="0.8"`, st.color)
	switch st.marker {
	case markCircle:
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="%.1f" %s/>`, x, y, r, attr)
	case markSquare:
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" %s/>`, x-r*0.85, y-r*0.85, 1.7*r, 1.7*r, attr)
	case markTriangle:
		fmt.Fprintf(b, `<path d="M%.1f %.1fL%.1f %.1fL%.1f %.1fZ" %s/>`, x, y-r*1.15, x+r, y+r*0.75, x-r, y+r*0.75, attr)
	case markDiamond:
		fmt.Fprintf(b, `<path d="M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ" %s/>`, x, y-r*1.2, x+r, y, x, y+r*1.2, x-r, y, attr)
	case markTriangleDown:
		fmt.Fprintf(b, `<path d="M%.1f %.1fL%.1f %.1fL%.1f %.1fZ" %s/>`, x, y+r*1.15, x+r, y-r*0.75, x-r, y-r*0.75, attr)
	default:
		fmt.Fprintf(b, `<path d="M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f" stroke="%s" stroke-width="2"/>`,
			x-r, y-r, x+r, y+r, x-r, y+r, x+r, y-r, st.color)
	}
}

// legendEntry draws a 28-unit sample of st's line with its marker,
// starting at (x, y).
func legendEntry(b *strings.Builder, st style, x, y float64) {
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"%s/>`,
		x, y, x+28, y, st.color, min(st.width, 3), dashAttr(st.dash))
	marker(b, st, x+14, y)
}

// legendSVG is a legend of its own, one entry per style, for the HTML
// around charts (the table's header, a grid of small charts).
func legendSVG(name string, st style) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="32" height="12" viewBox="-2 -6 32 12" role="img" aria-label="%s">`, esc(name))
	legendEntry(&b, st, 0, 0)
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec: built from escaped parts
}
