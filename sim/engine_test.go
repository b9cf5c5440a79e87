package sim

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/sim/trace"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// golden compares got with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

func oneNode(t *testing.T) *Cluster {
	t.Helper()
	c, err := Generate(ClusterSpec{Nodes: 1, GPUsPerNode: 8, CPUsPerNode: 64, MemPerNodeMB: 512000})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func policy(t *testing.T, name string) PolicySpec {
	t.Helper()
	p, err := ParsePolicies([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	return p[0]
}

// TestHandComputed replays three jobs on one 8-GPU node. A (4 GPUs,
// 100s, limit 120s) starts at 0. B (8 GPUs) arrives at 10 and must wait
// for A. C (2 GPUs) arrives at 20: FIFO and priority blocking keep it
// behind B (B starts at 100 when A ends, C at 150 when B ends); backfill
// (and tide, which backfills) starts it at once when its limit ends it by
// B's reserved start (A's limit: 120s), and not when it would run past it.
func TestHandComputed(t *testing.T) {
	jobs := func(cDur int64) []trace.Job {
		return []trace.Job{
			{ID: "A", Submit: 0, Duration: 100, GPUs: 4, Share: 1},
			{ID: "B", Submit: 10, Duration: 50, GPUs: 8, Share: 1},
			{ID: "C", Submit: 20, Duration: cDur, GPUs: 2, Share: 1},
		}
	}
	type times struct{ Start, End int64 }
	tests := []struct {
		name   string
		policy string
		cDur   int64
		want   map[string]times
	}{
		{name: "fifo", policy: "fifo", cDur: 30,
			want: map[string]times{"A": {0, 100}, "B": {100, 150}, "C": {150, 180}}},
		{name: "priority", policy: "priority", cDur: 30,
			want: map[string]times{"A": {0, 100}, "B": {100, 150}, "C": {150, 180}}},
		{name: "tide, C ends before B's reservation", policy: "tide", cDur: 30,
			want: map[string]times{"A": {0, 100}, "B": {100, 150}, "C": {20, 50}}},
		{name: "backfill, C ends before B's reservation", policy: "backfill", cDur: 30,
			want: map[string]times{"A": {0, 100}, "B": {100, 150}, "C": {20, 50}}},
		{name: "backfill, C's limit would delay B", policy: "backfill", cDur: 90,
			want: map[string]times{"A": {0, 100}, "B": {100, 150}, "C": {150, 240}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run(jobs(tc.cDur), Options{Cluster: oneNode(t), Policy: policy(t, tc.policy), Estimates: EstimatesExact})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]times{}
			for _, j := range res.Jobs {
				if j.Outcome != OutcomeDone {
					t.Errorf("job %s: outcome %s", j.TraceID, j.Outcome)
				}
				got[j.TraceID] = times{j.Start, j.End}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("start/end (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOutcomes(t *testing.T) {
	jobs := []trace.Job{
		{ID: "big", Submit: 0, Duration: 10, GPUs: 16, Share: 1},
		{ID: "unknown", Submit: 0, Duration: -1, GPUs: 1, Share: 1},
		{ID: "cpu", Submit: 5, Duration: 10, GPUs: 0, Share: 0},
		{ID: "share", Submit: 5, Duration: 10, GPUs: 1, Share: 0.25},
	}
	res, err := Run(jobs, Options{Cluster: oneNode(t), Policy: policy(t, "tide")})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, j := range res.Jobs {
		got[j.TraceID] = j.Outcome
	}
	want := map[string]string{"big": OutcomeRejected, "unknown": OutcomeSkipped, "cpu": OutcomeDone, "share": OutcomeDone}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
}

// samples are the test traces shipped with the repository's shared data.
var samples = []string{
	"/work/shared/traces/philly-pollux/jobs_sample_first1000.csv",
	"/work/shared/traces/alibaba-pai-v2023-openb/jobs_sample_first1000.csv",
}

func readSample(t testing.TB, path string, opts trace.Options) []trace.Job {
	t.Helper()
	jobs, err := trace.Read(path, opts)
	if os.IsNotExist(err) || err != nil && strings.Contains(err.Error(), "no such file") {
		t.Skipf("trace not available: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// TestPrefixPassesMatchFullPasses checks the engine's shortcut: handing
// the scheduler growing prefixes of the queue gives the same replay as
// handing it the whole queue every time.
func TestPrefixPassesMatchFullPasses(t *testing.T) {
	for _, path := range samples {
		// Load 40 makes the sparse first weeks a deep queue.
		jobs := readSample(t, path, trace.Options{Load: 40})
		c, err := Generate(ClusterSpec{Nodes: 4, GPUsPerNode: 8, CPUsPerNode: 64, MemPerNodeMB: 512000, Leaf: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"fifo", "backfill", "tide"} {
			t.Run(filepath.Base(filepath.Dir(path))+"/"+name, func(t *testing.T) {
				fast, err := Run(jobs, Options{Cluster: c, Policy: policy(t, name), Seed: 3})
				if err != nil {
					t.Fatal(err)
				}
				full, err := Run(jobs, Options{Cluster: c, Policy: policy(t, name), Seed: 3, FullPasses: true})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(full.Jobs, fast.Jobs); diff != "" {
					t.Errorf("jobs differ (-full +prefix):\n%s", diff)
				}
				// A first prefix of one job: nearly every pass takes the
				// shortcut or grows.
				tiny, err := Run(jobs, Options{Cluster: c, Policy: policy(t, name), Seed: 3, prefix: 1})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(full.Jobs, tiny.Jobs); diff != "" {
					t.Errorf("first prefix 1: jobs differ (-full +prefix):\n%s", diff)
				}
				maxQ := 0
				for _, s := range full.Samples {
					maxQ = max(maxQ, int(s.Pending))
				}
				if maxQ <= firstPrefixBackfill {
					t.Errorf("max queue %d: the trace never exercises prefixes (> %d)", maxQ, firstPrefixBackfill)
				}
			})
		}
	}
}

// TestFastPathJSONMatchesFullPasses runs the comparison of all three
// policies with the engine's shortcuts (prefix passes, backfill
// representatives) and with the whole queue handed over every pass, on
// both 1000-job samples, and wants byte-identical JSON.
func TestFastPathJSONMatchesFullPasses(t *testing.T) {
	pols, err := ParsePolicies([]string{"fifo", "backfill", "tide"})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range samples {
		for _, load := range []float64{1, 40} {
			t.Run(fmt.Sprintf("%s/load=%g", filepath.Base(filepath.Dir(path)), load), func(t *testing.T) {
				jobs := readSample(t, path, trace.Options{Load: load})
				c, err := Generate(ClusterSpec{Nodes: 4, GPUsPerNode: 8, CPUsPerNode: 64, MemPerNodeMB: 512000, Leaf: 2})
				if err != nil {
					t.Fatal(err)
				}
				var out [2]bytes.Buffer
				for i, full := range []bool{false, true} {
					rep, err := Compare(jobs, CompareOptions{Cluster: c, Policies: pols, Seed: 5, TraceName: path, FullPasses: full})
					if err != nil {
						t.Fatal(err)
					}
					if err := rep.WriteJSON(&out[i]); err != nil {
						t.Fatal(err)
					}
				}
				if !bytes.Equal(out[0].Bytes(), out[1].Bytes()) {
					t.Errorf("fast and full passes wrote different JSON:\n%s", cmp.Diff(out[1].String(), out[0].String()))
				}
			})
		}
	}
}

// TestRepresentativesExercised makes sure the backfill shortcut is
// taken on a deep queue, so that the comparison above tests it.
func TestRepresentativesExercised(t *testing.T) {
	jobs := readSample(t, samples[0], trace.Options{Load: 40})
	c, err := Generate(ClusterSpec{Nodes: 4, GPUsPerNode: 8, CPUsPerNode: 64, MemPerNodeMB: 512000})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(jobs, Options{Cluster: c, Policy: policy(t, "backfill"), Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.repPasses == 0 {
		t.Errorf("no pass was decided by a prefix plus representatives (of %d)", res.Passes)
	}
}

// TestDeterministicJSON runs the same comparison twice (in parallel
// replays) and wants byte-identical JSON, pinned by a golden file.
func TestDeterministicJSON(t *testing.T) {
	jobs := readSample(t, samples[0], trace.Options{Load: 20})
	c, err := Generate(ClusterSpec{Nodes: 4, GPUsPerNode: 8, CPUsPerNode: 64, MemPerNodeMB: 512000, Leaf: 2})
	if err != nil {
		t.Fatal(err)
	}
	pols, err := ParsePolicies([]string{"fifo", "backfill", "tide"})
	if err != nil {
		t.Fatal(err)
	}
	var out [2]bytes.Buffer
	var text bytes.Buffer
	for i := range out {
		rep, err := Compare(jobs, CompareOptions{Cluster: c, Policies: pols, Seed: 7, TraceName: "philly-sample", Estimates: EstimatesExact})
		if err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteJSON(&out[i]); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			rep.Wall = nil // wall-clock times vary
			if err := rep.WriteText(&text); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !bytes.Equal(out[0].Bytes(), out[1].Bytes()) {
		t.Fatalf("two runs wrote different JSON")
	}
	if bytes.Contains(out[0].Bytes(), []byte("Wall")) {
		t.Errorf("JSON holds wall-clock times")
	}
	golden(t, "philly-sample.txt", text.String())
}

func TestHTMLReport(t *testing.T) {
	jobs := readSample(t, samples[0], trace.Options{Load: 20})
	c, err := Generate(ClusterSpec{Nodes: 4, GPUsPerNode: 8, CPUsPerNode: 64, MemPerNodeMB: 512000})
	if err != nil {
		t.Fatal(err)
	}
	pols, _ := ParsePolicies([]string{"fifo", "backfill"})
	rep, err := Compare(jobs, CompareOptions{Cluster: c, Policies: pols, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{"<svg", "GPU utilisation over time", "Queue length over time", "Job completion time CDF", "<polyline"} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "http://", "https://"} {
		if strings.Contains(strings.ReplaceAll(html, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("HTML is not self-contained: holds %q", bad)
		}
	}
}

func TestParsePolicies(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
		err  bool
	}{
		{name: "all", in: []string{"fifo", "backfill", "tide", "priority"}, want: []string{"fifo", "backfill", "tide", "priority"}},
		{name: "unknown", in: []string{"lottery"}, err: true},
		{name: "twice", in: []string{"fifo", "fifo"}, err: true},
		{name: "none", in: nil, err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePolicies(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkSimPhilly(b *testing.B) {
	jobs := readSample(b, "/work/shared/traces/philly-pollux/jobs.csv.gz", trace.Options{From: 30 * 86400, To: 37 * 86400})
	c, err := Generate(ClusterSpec{Nodes: 64, GPUsPerNode: 8, CPUsPerNode: 64, MemPerNodeMB: 512000, Leaf: 16})
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"fifo", "backfill", "tide"} {
		b.Run("policy="+name, func(b *testing.B) {
			p, _ := ParsePolicies([]string{name})
			for b.Loop() {
				if _, err := Run(jobs, Options{Cluster: c, Policy: p[0], Seed: 7}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(jobs))*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// TestRepresentativesReservingEachOther builds the case where, under
// multi-reservation backfill, one representative's reservation keeps
// another from starting while a job of the second one's shape, ahead
// of the first in the queue, starts in a pass over the whole queue. On
// one 8-GPU node X1 (4 GPUs) ends at 660 and X2 (2 GPUs) at 6060; at 60
// arrive, in this order, P (8 GPUs: reserved at 6060), Bl (2 GPUs for
// 30 min: fits now, before P), A (6 GPUs: reserved from 660 over the
// whole queue, later once Bl runs) and Bs (2 GPUs for 20 min). With the
// first prefix P alone, the representatives are A and Bs (the shortest
// of Bl's shape): A's reservation at 660 leaves Bs no room, yet Bl
// starts at 60 in the whole queue. The shortcut must not take that pass.
func TestRepresentativesReservingEachOther(t *testing.T) {
	jobs := []trace.Job{
		{ID: "X1", Submit: 0, Duration: 660, GPUs: 4, Share: 1},
		{ID: "X2", Submit: 0, Duration: 6060, GPUs: 2, Share: 1},
		{ID: "P", Submit: 60, Duration: 6000, GPUs: 8, Share: 1},
		{ID: "Bl", Submit: 60, Duration: 1800, GPUs: 2, Share: 1},
		{ID: "A", Submit: 60, Duration: 3000, GPUs: 6, Share: 1},
		{ID: "Bs", Submit: 60, Duration: 1200, GPUs: 2, Share: 1},
	}
	// Jobs of one second arrive in a seeded order: take a seed that
	// gives the order above.
	c := oneNode(t)
	seed := -1
	for s := range 200 {
		tab, err := newTable(jobs, uint64(s), c, EstimatesExact)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i := 2; i < 6; i++ {
			ids = append(ids, tab.id(i))
		}
		if strings.Join(ids, ",") == "P,Bl,A,Bs" {
			seed = s
			break
		}
	}
	if seed < 0 {
		t.Fatal("no seed of 200 submits P, Bl, A, Bs in this order")
	}
	pol := policy(t, "backfill")
	full, err := Run(jobs, Options{Cluster: c, Policy: pol, Seed: uint64(seed), Estimates: EstimatesExact, FullPasses: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range full.Jobs {
		if j.TraceID == "Bl" && j.Start != 60 {
			t.Fatalf("Bl starts at %d over the whole queue, want 60: the case does not hold", j.Start)
		}
	}
	fast, err := Run(jobs, Options{Cluster: c, Policy: pol, Seed: uint64(seed), Estimates: EstimatesExact, prefix: 1})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(full.Jobs, fast.Jobs); diff != "" {
		t.Errorf("jobs differ (-full +prefix):\n%s", diff)
	}
}

// TestTideOrdersShortJobsFirst: A holds the node; B (8 GPUs, an hour)
// and then C (8 GPUs, two minutes) wait for it. Backfill keeps arrival
// order (B at 100, C after B); tide's multifactor order puts the short C
// first (its length factor outweighs B's ten seconds of age).
func TestTideOrdersShortJobsFirst(t *testing.T) {
	jobs := []trace.Job{
		{ID: "A", Submit: 0, Duration: 100, GPUs: 8, Share: 1},
		{ID: "B", Submit: 10, Duration: 3600, GPUs: 8, Share: 1},
		{ID: "C", Submit: 20, Duration: 120, GPUs: 8, Share: 1},
	}
	type times struct{ Start, End int64 }
	for _, tc := range []struct {
		policy string
		want   map[string]times
	}{
		{"backfill", map[string]times{"A": {0, 100}, "B": {100, 3700}, "C": {3700, 3820}}},
		{"tide", map[string]times{"A": {0, 100}, "C": {100, 220}, "B": {220, 3820}}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			res, err := Run(jobs, Options{Cluster: oneNode(t), Policy: policy(t, tc.policy), Estimates: EstimatesExact})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]times{}
			for _, j := range res.Jobs {
				got[j.TraceID] = times{j.Start, j.End}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("start/end (-want +got):\n%s", diff)
			}
		})
	}
}
