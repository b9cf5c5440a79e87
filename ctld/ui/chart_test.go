package ui

import (
	"strings"
	"testing"
	"time"
)

// TestChart checks what a chart draws: lines broken at gaps, a lone
// point as a dot, unknown values left out, long series averaged into
// buckets that the caption names, and a legend under the plot.
func TestChart(t *testing.T) {
	t0 := fixedNow.Add(-24 * time.Hour)
	points := func(n int, every time.Duration, v func(int) float64) []chartPoint {
		ps := make([]chartPoint, n)
		for i := range ps {
			ps[i] = chartPoint{T: t0.Add(time.Duration(i) * every), V: v(i)}
		}
		return ps
	}
	flat := func(int) float64 { return 5 }
	for _, tc := range []struct {
		name            string
		c               chart
		want, wantNot   []string
		lines, dots     int
		legendOrCaption string
	}{
		{name: "a day of 30 s samples is averaged into 4 min buckets",
			c:    chart{Title: "t", From: t0, To: fixedNow, Every: 30 * time.Second, Series: []chartSeries{{Name: "a", Points: points(2880, 30*time.Second, flat)}}},
			want: []string{"(mean per 4 min bucket)"}, lines: 1},
		{name: "a gap breaks the line",
			c: chart{Title: "t", From: t0, To: t0.Add(time.Hour), Every: 30 * time.Second, Series: []chartSeries{{Name: "a",
				Points: append(points(3, 30*time.Second, flat), chartPoint{T: t0.Add(30 * time.Minute), V: 1}, chartPoint{T: t0.Add(30*time.Minute + 30*time.Second), V: 2})}}},
			wantNot: []string{"mean per"}, lines: 2},
		{name: "unknown values are left out, a lone point is a dot",
			c: chart{Title: "t", From: t0, To: t0.Add(time.Hour), Every: 30 * time.Second, Series: []chartSeries{{Name: "a",
				Points: points(5, 30*time.Second, func(i int) float64 { return []float64{1, -1, 3, 4, -1}[i] })}}},
			lines: 1, dots: 1},
		{name: "nothing known",
			c:    chart{Title: "t", From: t0, To: t0.Add(time.Hour), Series: []chartSeries{{Name: "a", Points: points(3, time.Minute, func(int) float64 { return -1 })}}},
			want: []string{"No samples yet."}},
		{name: "legend under the plot, names escaped",
			c: chart{Title: "<q>", From: t0, To: t0.Add(time.Hour), Series: []chartSeries{{Name: "a&b", Points: points(2, time.Minute, flat)},
				{Name: "c", Points: points(2, time.Minute, flat)}}},
			want:  []string{"<figcaption>&lt;q&gt;</figcaption>", `</svg><ul class="legend"><li>`, `<line class="l1" x1="0" x2="24" y1="4" y2="4"/></svg>c</li>`, "a&amp;b"},
			lines: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(tc.c.render())
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("chart lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("chart has %q:\n%s", w, got)
				}
			}
			if n := strings.Count(got, "<polyline"); n != tc.lines {
				t.Errorf("%d lines, want %d:\n%s", n, tc.lines, got)
			}
			if n := strings.Count(got, "<circle"); n != tc.dots {
				t.Errorf("%d dots, want %d:\n%s", n, tc.dots, got)
			}
		})
	}
}

func TestNiceAxis(t *testing.T) {
	for _, tc := range []struct{ top, step, axisTop float64 }{
		{0, 1, 1}, {1, 1, 1}, {7, 2, 8}, {10, 5, 10}, {13, 5, 15}, {100, 50, 100}, {240, 100, 300}, {0.3, 0.1, 0.3},
	} {
		step, top := niceAxis(tc.top)
		if step != tc.step || top < tc.axisTop-1e-9 || top > tc.axisTop+1e-9 {
			t.Errorf("niceAxis(%v) = %v, %v; want %v, %v", tc.top, step, top, tc.step, tc.axisTop)
		}
	}
}
