package sim

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/sim/trace"
)

func TestParseSeeds(t *testing.T) {
	tests := []struct {
		in   string
		want []uint64
		err  string
	}{
		{in: "1-5", want: []uint64{1, 2, 3, 4, 5}},
		{in: "3,7,9", want: []uint64{3, 7, 9}},
		{in: "1-3, 10", want: []uint64{1, 2, 3, 10}},
		{in: "4", want: []uint64{4}},
		{in: "5-1", err: "not a range"},
		{in: "1-x", err: "not a range"},
		{in: "a", err: "not a seed"},
		{in: "1,1", err: "seed 1 twice"},
		{in: "1-3,2", err: "seed 2 twice"},
		{in: "0-1000000", err: "more than 1000 seeds"},
		{in: "", err: "not a seed"},
	}
	for _, tc := range tests {
		got, err := ParseSeeds(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSeeds(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseSeeds(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestMultiSeedCompare compares over three seeds and checks the report
// against one-seed comparisons: Policies are the first seed's replays,
// MoreSeeds the others', and every spread holds each seed's value with
// their median and range. Two runs with different parallelism write the
// same JSON.
func TestMultiSeedCompare(t *testing.T) {
	jobs := readSample(t, samples[0], trace.Options{Load: 30})
	c, err := Generate(ClusterSpec{Nodes: 4, GPUsPerNode: 8, CPUsPerNode: 64, MemPerNodeMB: 512000, Leaf: 2})
	if err != nil {
		t.Fatal(err)
	}
	pols, err := ParsePolicies([]string{"fifo", "backfill"})
	if err != nil {
		t.Fatal(err)
	}
	seeds := []uint64{4, 5, 6}
	var out [2]bytes.Buffer
	var rep *Report
	for i, par := range []int{1, 3} {
		if rep, err = Compare(jobs, CompareOptions{Cluster: c, Policies: pols, Seeds: seeds, TraceName: "s", Parallel: par}); err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteJSON(&out[i]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(out[0].Bytes(), out[1].Bytes()) {
		t.Fatalf("one and three replays at once wrote different JSON")
	}
	if !slices.Equal(rep.Seeds, seeds) || rep.Seed != 4 || len(rep.MoreSeeds) != 2 || len(rep.Spread) != 2 {
		t.Fatalf("report seeds %v (seed %d), %d more seeds, %d spreads", rep.Seeds, rep.Seed, len(rep.MoreSeeds), len(rep.Spread))
	}
	perSeed := make([][]PolicyReport, len(seeds))
	for s, seed := range seeds {
		one, err := Compare(jobs, CompareOptions{Cluster: c, Policies: pols, Seed: seed, TraceName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		got := rep.Policies
		if s > 0 {
			got = rep.MoreSeeds[s-1].Policies
			if rep.MoreSeeds[s-1].Seed != seed {
				t.Errorf("more_seeds[%d] is seed %d, want %d", s-1, rep.MoreSeeds[s-1].Seed, seed)
			}
		}
		if diff := cmp.Diff(one.Policies, got); diff != "" {
			t.Errorf("seed %d: replays differ from a one-seed comparison (-one +multi):\n%s", seed, diff)
		}
		perSeed[s] = one.Policies
	}
	differ := false
	for i, ps := range rep.Spread {
		if ps.Policy != pols[i].Name {
			t.Errorf("spread %d is policy %s, want %s", i, ps.Policy, pols[i].Name)
		}
		for _, m := range ps.Metrics {
			var want []float64
			for s := range seeds {
				for _, mm := range metrics(&perSeed[0][0], rep.StarveAfterS) {
					if mm.key == m.Metric {
						want = append(want, round6(mm.get(&perSeed[s][i])))
					}
				}
			}
			if !slices.Equal(m.Values, want) {
				t.Errorf("%s %s: values %v, want %v", ps.Policy, m.Metric, m.Values, want)
			}
			sorted := slices.Sorted(slices.Values(want))
			if m.Min != sorted[0] || m.Max != sorted[2] || m.Median != sorted[1] {
				t.Errorf("%s %s: median %v [%v, %v], want %v", ps.Policy, m.Metric, m.Median, m.Min, m.Max, sorted)
			}
			differ = differ || m.Min != m.Max
		}
	}
	if !differ {
		t.Errorf("every metric is the same under three seeds: the seeds do not reach the replays")
	}
	// The JSON keeps the spread of the headline metrics.
	var decoded struct {
		Spread []struct {
			Metrics []struct{ Metric string } `json:"metrics"`
		} `json:"spread"`
	}
	if err := json.Unmarshal(out[0].Bytes(), &decoded); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range decoded.Spread[0].Metrics {
		keys = append(keys, m.Metric)
	}
	for _, want := range []string{"queue_delay_s.mean", "queue_delay_s.p99", "by_size.1.queue_delay_s.p99", "starved", "utilisation"} {
		if !slices.Contains(keys, want) {
			t.Errorf("spread lacks %s (has %v)", want, keys)
		}
	}
	// The table shows medians and ranges; the HTML draws them.
	var text, html bytes.Buffer
	rep.Wall = nil
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "seeds 4-6 (cells: median [min–max] over the 3 seeds)") || !strings.Contains(text.String(), "–") {
		t.Errorf("table lacks the seeds or ranges:\n%s", text.String())
	}
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Spread over seeds 4-6", "<circle", "queue delay p99"} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}

func TestFormatSeeds(t *testing.T) {
	for _, tc := range []struct {
		in   []uint64
		want string
	}{{[]uint64{1, 2, 3, 4, 5}, "1-5"}, {[]uint64{3, 7, 9}, "3,7,9"}, {[]uint64{1, 2, 3, 10, 11}, "1-3,10-11"}} {
		if got := formatSeeds(tc.in); got != tc.want {
			t.Errorf("formatSeeds(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
