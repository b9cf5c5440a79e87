package sim

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/sim/trace"
)

// labels are an axis's tick labels.
func labels(a axis) []string {
	var out []string
	for _, t := range a.ticks {
		out = append(out, a.label(t))
	}
	return out
}

func TestAxes(t *testing.T) {
	const h, d = 3600.0, 86400.0
	tests := []struct {
		name   string
		axis   axis
		want   []string
		lo, hi float64
	}{
		{name: "counts out to a round top", axis: countAxis(0, 7068), want: []string{"0", "2000", "4000", "6000", "8000"}, lo: 0, hi: 8000},
		{name: "small numbers keep decimals", axis: countAxis(0, 0.58), want: []string{"0.0", "0.2", "0.4", "0.6"}, lo: 0, hi: 0.6},
		{name: "percent", axis: percentAxis(0, 100), want: []string{"0%", "20%", "40%", "60%", "80%", "100%"}, lo: 0, hi: 100},
		{name: "a share as percent", axis: metricAxis(0.445, kindFraction), want: []string{"0%", "10%", "20%", "30%", "40%", "50%"}, lo: 0, hi: 0.5},
		{name: "days", axis: durationAxis(0, 3.5*d), want: []string{"0d", "1d", "2d", "3d", "4d"}, lo: 0, hi: 4 * d},
		{name: "hours step by whole hours", axis: durationAxis(0, 40*h), want: []string{"0h", "12h", "24h", "36h", "48h"}, lo: 0, hi: 48 * h},
		{name: "no negative zero", axis: metricAxis(0, kindSeconds), want: []string{"0.0s", "0.5s", "1.0s"}, lo: 0, hi: 1},
		{name: "log durations", axis: logDurationAxis(45, 2e6),
			want: []string{"10s", "1m", "10m", "1h", "6h", "1d", "10d", "100d"}, lo: 10, hi: 100 * d},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, labels(tc.axis)); diff != "" {
				t.Errorf("tick labels (-want +got):\n%s", diff)
			}
			if math.Abs(tc.axis.lo-tc.lo) > 1e-9 || math.Abs(tc.axis.hi-tc.hi) > 1e-9 {
				t.Errorf("axis spans [%v, %v], want [%v, %v]", tc.axis.lo, tc.axis.hi, tc.lo, tc.hi)
			}
		})
	}
	// A time axis keeps its ends and puts round ticks inside them, in a
	// unit its title names.
	for _, tc := range []struct {
		lo, hi float64
		unit   string
		want   []string
	}{
		{30 * d, 66.2 * d, "days", []string{"30", "40", "50", "60"}},
		{0, 5000, "minutes", []string{"0", "15", "30", "45", "60", "75"}},
		{3 * h, 9 * h, "hours", []string{"3", "4", "5", "6", "7", "8", "9"}},
	} {
		a, unit := timeAxis(tc.lo, tc.hi)
		if unit != tc.unit || !cmp.Equal(labels(a), tc.want) || a.lo != tc.lo || a.hi != tc.hi {
			t.Errorf("timeAxis(%v, %v) = %v in %s over [%v, %v], want %v in %s", tc.lo, tc.hi, labels(a), unit, a.lo, a.hi, tc.want, tc.unit)
		}
	}
}

func TestBestCells(t *testing.T) {
	f := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	tests := []struct {
		name   string
		vals   []float64
		better int
		want   []bool
	}{
		{name: "lower is better", vals: []float64{3, 1, 2}, better: lowerBetter, want: []bool{false, true, false}},
		{name: "higher is better", vals: []float64{0.3, 0.1, 0.5}, better: higherBetter, want: []bool{false, false, true}},
		{name: "ties as printed", vals: []float64{1.01, 1.04, 2}, better: lowerBetter, want: []bool{true, true, false}},
		{name: "all alike: none", vals: []float64{2, 2, 2.01}, better: lowerBetter, want: []bool{false, false, false}},
		{name: "no direction: none", vals: []float64{1, 2}, better: 0, want: []bool{false, false}},
		{name: "one policy: none", vals: []float64{1}, better: lowerBetter, want: []bool{false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, bestCells(tc.vals, tc.better, f)); diff != "" {
				t.Errorf("best (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBucketWidth(t *testing.T) {
	for _, tc := range []struct {
		span, least int64
		n           int
		want        int64
	}{
		{130, 1, 4000, 1},
		{46800, 1, 4000, 15},
		{50*86400 + 60000, 3600, 480, 3 * 3600}, // 10.2 h wanted: 3 h buckets
		{3600, 7200, 480, 7200},                 // never finer than the data
		{1 << 40, 1, 10, 30 * 86400},            // the widest there is
	} {
		if got := bucketWidth(tc.span, tc.least, tc.n); got != tc.want {
			t.Errorf("bucketWidth(%d, %d, %d) = %d, want %d", tc.span, tc.least, tc.n, got, tc.want)
		}
	}
}

// TestChartSeries integrates samples by hand: 8 of 16 GPUs in use and 3
// jobs pending from 0, all 16 and 1 pending from 5.5 h, idle with 2
// pending from 13 h, the end. Re-bucketed to hours up to 20 h, the hour
// of the change averages the two states, and after the end the replay
// keeps its last state.
func TestChartSeries(t *testing.T) {
	const h = 3600
	r := &Result{TotalGPUs: 16, Samples: []Sample{
		{T: 0, UsedGPUs: 8, Pending: 3}, {T: 5*h + h/2, UsedGPUs: 16, Pending: 1}, {T: 13 * h, UsedGPUs: 0, Pending: 2}}}
	f := newChartSeries(r, 0, 13*h)
	if f == nil || f.Width != 15 || len(f.Util) != 13*h/15 {
		t.Fatalf("series %+v; want 15 s buckets, %d of them", f, 13*h/15)
	}
	util := f.rebucket(f.Util, f.EndUtil, 0, 20*h, h)
	queue := f.rebucket(f.Queue, f.EndQueue, 0, 20*h, h)
	var wantU, wantQ []float64
	for k := range 20 {
		switch {
		case k < 5:
			wantU, wantQ = append(wantU, 0.5), append(wantQ, 3)
		case k == 5:
			wantU, wantQ = append(wantU, 0.75), append(wantQ, 2)
		case k < 13:
			wantU, wantQ = append(wantU, 1), append(wantQ, 1)
		default:
			wantU, wantQ = append(wantU, 0), append(wantQ, 2)
		}
	}
	approx := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 || math.IsNaN(a) && math.IsNaN(b) })
	if diff := cmp.Diff(wantU, util, approx); diff != "" {
		t.Errorf("utilisation per hour (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantQ, queue, approx); diff != "" {
		t.Errorf("queue per hour (-want +got):\n%s", diff)
	}
	// Buckets before the replay's start have no value; a bucket that
	// straddles the start averages only the time it covers.
	early := f.rebucket(f.Util, f.EndUtil, -2*h-h/2, 2*h, h)
	if diff := cmp.Diff([]float64{math.NaN(), math.NaN(), 0.5, 0.5, 0.5}, early, approx); diff != "" {
		t.Errorf("from before the start (-want +got):\n%s", diff)
	}
}

// syntheticJobs is a small, busy two-queue trace: wide and narrow jobs
// of varied lengths, arriving faster than 16 GPUs serve them.
func syntheticJobs() []trace.Job {
	var jobs []trace.Job
	for i := range 80 {
		q := "alpha"
		if i%3 == 0 {
			q = "beta"
		}
		jobs = append(jobs, trace.Job{ID: fmt.Sprint(i), Submit: int64(i * 97), Start: -1, End: -1,
			Duration: int64(600 + (i*7919)%5400), GPUs: []int{1, 2, 4, 8, 1, 1, 16}[i%7], Share: 1, Queue: q})
	}
	return jobs
}

// svgText is a <text> of an SVG chart.
type svgText struct {
	X         float64 `xml:"x,attr"`
	Y         float64 `xml:"y,attr"`
	Size      float64 `xml:"font-size,attr"`
	Anchor    string  `xml:"text-anchor,attr"`
	Transform string  `xml:"transform,attr"`
	Text      string  `xml:",chardata"`
}

// checkFits fails for a label of an SVG that reaches outside its
// viewBox (by the width estimate the layout uses), or a tick that
// reads "-0".
func checkFits(t *testing.T, svg string) {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(svg))
	var vb [4]float64
	title := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse: %v\n%s", err, svg)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch se.Name.Local {
		case "svg":
			for _, a := range se.Attr {
				if a.Name.Local == "viewBox" {
					for i, f := range strings.Fields(a.Value) {
						vb[i], _ = strconv.ParseFloat(f, 64)
					}
				}
				if a.Name.Local == "aria-label" {
					title = a.Value
				}
			}
		case "text":
			var tx svgText
			if err := dec.DecodeElement(&tx, &se); err != nil {
				t.Fatal(err)
			}
			if tx.Text == "-0" || strings.HasPrefix(tx.Text, "-0") {
				t.Errorf("%s: label %q", title, tx.Text)
			}
			w := textWidth(len([]rune(tx.Text)), tx.Size)
			left := map[string]float64{"": 0, "start": 0, "middle": w / 2, "end": w}[tx.Anchor]
			lo, hi := tx.X-left, tx.X-left+w
			if strings.HasPrefix(tx.Transform, "rotate(-90") {
				// Rotated: the text runs up the y axis.
				lo, hi = tx.Y-left, tx.Y-left+w
				if lo < vb[1] || hi > vb[1]+vb[3] {
					t.Errorf("%s: rotated label %q spans y %.0f..%.0f, outside 0..%.0f", title, tx.Text, lo, hi, vb[3])
				}
				continue
			}
			if lo < vb[0]-0.5 || hi > vb[0]+vb[2]+0.5 || tx.Y-tx.Size < vb[1] || tx.Y > vb[1]+vb[3] {
				t.Errorf("%s: label %q at x %.0f..%.0f, y %.0f: outside the %.0f×%.0f view", title, tx.Text, lo, hi, tx.Y, vb[2], vb[3])
			}
		}
	}
}

var svgRe = regexp.MustCompile(`(?s)<svg .*?</svg>`)

func TestHTMLReportLayout(t *testing.T) {
	c, err := Generate(ClusterSpec{Nodes: 2, GPUsPerNode: 8, CPUsPerNode: 64, MemPerNodeMB: 512000})
	if err != nil {
		t.Fatal(err)
	}
	pols, err := ParsePolicies([]string{"fifo", "backfill", "tide"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		seeds []uint64
		want  []string
		bad   []string
	}{
		{name: "one seed", want: []string{`<table class="cmp">`, `class="best"`, "mean per 5 min bucket",
			`stroke-dasharray="8 3"`, `stroke-dasharray="2 2.5"`, "queue alpha", "trace time (hours)"},
			bad: []string{"<polygon", "<pre", "bands:"}},
		{name: "seeds", seeds: []uint64{1, 2, 3},
			want: []string{"<polygon", "lines: seed 1, bands: min–max over seeds 1-3", "Spread over seeds 1-3", `<span class="rng">`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Compare(syntheticJobs(), CompareOptions{Cluster: c, Policies: pols, Seed: 1, Seeds: tc.seeds, TraceName: "synthetic"})
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := rep.WriteHTML(&b); err != nil {
				t.Fatal(err)
			}
			html := b.String()
			for _, want := range tc.want {
				if !strings.Contains(html, want) {
					t.Errorf("HTML lacks %q", want)
				}
			}
			for _, bad := range tc.bad {
				if strings.Contains(html, bad) {
					t.Errorf("HTML holds %q", bad)
				}
			}
			svgs := svgRe.FindAllString(html, -1)
			if len(svgs) < 6 {
				t.Fatalf("%d SVGs, want the legends and charts", len(svgs))
			}
			for _, s := range svgs {
				checkFits(t, s)
			}
			// The table marks the best value of a row where one is
			// best: every policy's utilisation differs here.
			row := regexp.MustCompile(`(?s)<th scope="row">GPU utilisation</th>(.*?)</tr>`).FindStringSubmatch(html)
			if row == nil || strings.Count(row[1], `class="best"`) != 1 {
				t.Errorf("utilisation row marks no single best: %v", row)
			}
		})
	}
}

// TestChartLegendOutside draws a chart whose lines fill the plot and
// wants every legend label right of every line's point.
func TestChartLegendOutside(t *testing.T) {
	var lines []line
	for i, name := range []string{"fifo", "backfill+firstfit", "tide"} {
		l := line{name: name, style: policyStyle(i, 3)}
		for k := range 50 {
			l.x, l.y = append(l.x, float64(k)), append(l.y, 100)
		}
		lines = append(lines, l)
	}
	x, _ := timeAxis(0, 49)
	svg := string(drawChart(chart{w: wideW, h: wideH, title: "t", x: x, y: percentAxis(0, 100), legend: true}, lines))
	maxX := 0.0
	for _, m := range regexp.MustCompile(`points="([^"]*)"`).FindAllStringSubmatch(svg, -1) {
		for _, p := range strings.Fields(m[1]) {
			v, _ := strconv.ParseFloat(strings.Split(p, ",")[0], 64)
			maxX = math.Max(maxX, v)
		}
	}
	for _, l := range lines {
		m := regexp.MustCompile(`<text x="([0-9.]+)"[^>]*>` + regexp.QuoteMeta(l.name) + `</text>`).FindStringSubmatch(svg)
		if m == nil {
			t.Fatalf("no legend entry for %s", l.name)
		}
		if v, _ := strconv.ParseFloat(m[1], 64); v <= maxX {
			t.Errorf("legend %s at x %.0f, inside the plot (lines reach %.0f)", l.name, v, maxX)
		}
	}
	// Lines that coincide stay apart by width and dash: the first
	// widest, each later one narrower and dashed.
	if !(lines[0].style.width > lines[1].style.width && lines[1].style.width > lines[2].style.width) ||
		lines[0].style.dash != "" || lines[1].style.dash == "" || lines[2].style.dash == lines[1].style.dash {
		t.Errorf("styles do not tell coinciding lines apart: %+v", []style{lines[0].style, lines[1].style, lines[2].style})
	}
	checkFits(t, svg)
}

// TestHTMLReportWithoutPolicies writes a page that says so, not a
// broken one.
func TestHTMLReportWithoutPolicies(t *testing.T) {
	var b bytes.Buffer
	if err := (&Report{Trace: "empty.csv"}).WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "No policies were replayed.") || strings.Contains(b.String(), "<table") {
		t.Errorf("page without policies:\n%s", b.String())
	}
}
