package sim

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/sim/trace"
)

// TestLimitModel checks the model's properties on 20,000 jobs of
// log-uniform durations from 10 s to 3 days: limits are never below the
// run time, are popular values or the maximum, about pAskMax of the jobs
// ask for the maximum, and most jobs use a small part of their limit.
func TestLimitModel(t *testing.T) {
	m := newLimitModel(7, 0)
	if m.max != DefaultMaxLimit || m.values[len(m.values)-1] != DefaultMaxLimit {
		t.Fatalf("model max %d, values %v: want the default max on top", m.max, m.values)
	}
	const n = 20000
	atMax, under20, under50 := 0, 0, 0
	for i := range n {
		// 10 s · 25920^(i/n): 10 s to 3 days.
		dur := int64(10 * math.Pow(25920, float64(i)/n))
		lim := m.limit(fmt.Sprint("job-", i), dur)
		if lim < dur {
			t.Fatalf("job %d: limit %d below its run time %d", i, lim, dur)
		}
		if !slices.Contains(m.values, lim) {
			t.Fatalf("job %d: limit %d is not a popular value", i, lim)
		}
		if lim == m.max {
			atMax++
		}
		if acc := float64(dur) / float64(lim); acc < 0.2 {
			under20++
		} else if acc < 0.5 {
			under50++
		}
	}
	// At least pAskMax ask for the maximum (more: long jobs whose
	// overestimate passes it).
	if share := float64(atMax) / n; share < pAskMax-0.01 || share > pAskMax+0.15 {
		t.Errorf("%.1f%% of jobs ask for the maximum, want about %.0f%% and more", 100*share, 100*pAskMax)
	}
	if share := float64(under20) / n; share < 0.4 || share > 0.75 {
		t.Errorf("%.1f%% of jobs use under 20%% of their limit, want about half", 100*share)
	}
	if share := float64(under20+under50) / n; share < 0.6 {
		t.Errorf("%.1f%% of jobs use under half their limit, want most", 100*share)
	}
}

// TestLimitModelDeterministic: the same job and seed give the same
// limit, whatever else is in the trace; another seed draws again.
func TestLimitModelDeterministic(t *testing.T) {
	a, b := newLimitModel(3, 0), newLimitModel(3, 0)
	other := newLimitModel(4, 0)
	differ := 0
	for i := range 200 {
		id := fmt.Sprint("j", i)
		if a.limit(id, 600) != b.limit(id, 600) {
			t.Fatalf("job %s: two models of one seed disagree", id)
		}
		if a.limit(id, 600) != other.limit(id, 600) {
			differ++
		}
	}
	if differ < 50 {
		t.Errorf("seeds 3 and 4 agree on %d of 200 limits: the seed does not reach the model", 200-differ)
	}
}

// TestLimitModelPartitionMax caps limits at the partition's MaxTime, and
// a job longer than it asks for its run time rounded up to an hour.
func TestLimitModelPartitionMax(t *testing.T) {
	m := newLimitModel(1, 3600)
	for i := range 500 {
		if lim := m.limit(fmt.Sprint(i), 1000); lim > 3600 || lim < 1000 {
			t.Fatalf("limit %d outside [1000, 3600]", lim)
		}
	}
	if lim := m.limit("long", 5000); lim != 7200 {
		t.Errorf("a 5000 s job in a 1 h partition asks for %d, want 7200", lim)
	}
}

// TestEstimatesSameUnderEveryPolicy replays a sample under three
// policies: each job asks for the same limit under all of them.
func TestEstimatesSameUnderEveryPolicy(t *testing.T) {
	jobs := readSample(t, samples[0], trace.Options{})
	c, err := Generate(ClusterSpec{Nodes: 8, GPUsPerNode: 8, CPUsPerNode: 64, MemPerNodeMB: 512000})
	if err != nil {
		t.Fatal(err)
	}
	var first []int64
	for _, name := range []string{"fifo", "backfill", "tide"} {
		res, err := Run(jobs, Options{Cluster: c, Policy: policy(t, name), Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		var lims []int64
		overestimated := 0
		for _, j := range res.Jobs {
			lims = append(lims, j.Limit)
			if j.Duration >= 0 && j.Limit > limitOf(j.Duration) {
				overestimated++
			}
		}
		if first == nil {
			first = lims
			if overestimated < len(lims)/2 {
				t.Errorf("%d of %d jobs ask for more than their run time: the default is not the model", overestimated, len(lims))
			}
			continue
		}
		if diff := cmp.Diff(first, lims); diff != "" {
			t.Errorf("%s: limits differ from fifo's (-fifo +%s):\n%s", name, name, diff)
		}
	}
}

// TestEstimatesLimit replays with the trace's limits: a job whose limit
// is below its run time is killed at the limit (timeout), one without a
// limit gets a modelled one, and the report counts both.
func TestEstimatesLimit(t *testing.T) {
	jobs := []trace.Job{
		{ID: "short-limit", Submit: 0, Duration: 500, GPUs: 8, Share: 1, TimeLimit: 300},
		{ID: "fits", Submit: 1, Duration: 100, GPUs: 8, Share: 1, TimeLimit: 7200},
		{ID: "no-limit", Submit: 2, Duration: 100, GPUs: 8, Share: 1},
	}
	got := replayOutcomes(t, oneNode(t), slices.Clone(jobs), "fifo", EstimatesLimit)
	want := map[string]outcomeAt{
		"short-limit": {0, 300, OutcomeTimeout},
		"fits":        {300, 400, OutcomeDone},
		"no-limit":    {400, 500, OutcomeDone},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	rep, err := Compare(slices.Clone(jobs), CompareOptions{Cluster: oneNode(t), Policies: []PolicySpec{policy(t, "fifo")},
		Estimates: EstimatesLimit})
	if err != nil {
		t.Fatal(err)
	}
	if e := rep.Estimates; e != (EstimateSummary{Mode: EstimatesLimit, FromTrace: 2, Modelled: 1}) {
		t.Errorf("estimates %+v, want 2 from the trace and 1 modelled", e)
	}
	if p := rep.Policies[0]; p.TimedOut != 1 || p.Completed != 3 {
		t.Errorf("report: %d timed out of %d completed, want 1 of 3", p.TimedOut, p.Completed)
	}
	// Exact estimates never kill a job.
	got = replayOutcomes(t, oneNode(t), slices.Clone(jobs), "fifo", EstimatesExact)
	if got["short-limit"] != (outcomeAt{0, 500, OutcomeDone}) {
		t.Errorf("exact: %+v, want the job to run its 500 s", got["short-limit"])
	}
}

func TestParseEstimates(t *testing.T) {
	for in, want := range map[string]EstimateMode{"": EstimatesModel, "exact": EstimatesExact, "limit": EstimatesLimit, "model": EstimatesModel} {
		if got, err := ParseEstimates(in); err != nil || got != want {
			t.Errorf("ParseEstimates(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseEstimates("perfect"); err == nil {
		t.Errorf("ParseEstimates(perfect): no error")
	}
}
