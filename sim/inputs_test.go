package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/sim/trace"
)

// outcome is what a test wants of one job.
type outcomeAt struct {
	Start, End int64
	Outcome    string
}

func replayOutcomes(t *testing.T, c *Cluster, jobs []trace.Job, policyName string, est EstimateMode) map[string]outcomeAt {
	t.Helper()
	for i := range jobs {
		jobs[i].Start, jobs[i].End = -1, -1
	}
	res, err := Run(jobs, Options{Cluster: c, Policy: policy(t, policyName), Estimates: est})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]outcomeAt{}
	for _, j := range res.Jobs {
		got[j.TraceID] = outcomeAt{j.Start, j.End, j.Outcome}
	}
	return got
}

// TestCPUOnlyJobsAskTheirCPUs replays CPU-only jobs with the trace's CPU
// counts: two that together need more CPUs than the node has run one
// after the other (with one CPU each, as before num_cpus, they would
// share it), one wider than a node spreads over two, and one wider than
// the cluster is rejected.
func TestCPUOnlyJobsAskTheirCPUs(t *testing.T) {
	c, err := Generate(ClusterSpec{Nodes: 2, GPUsPerNode: 8, CPUsPerNode: 64, MemPerNodeMB: 512000})
	if err != nil {
		t.Fatal(err)
	}
	jobs := []trace.Job{
		{ID: "a", Submit: 0, Duration: 100, CPUs: 100, Share: 1},
		{ID: "b", Submit: 1, Duration: 10, CPUs: 48, Share: 1},
		{ID: "unknown", Submit: 2, Duration: 10, Share: 1},
		{ID: "huge", Submit: 3, Duration: 10, CPUs: 200, Share: 1},
	}
	got := replayOutcomes(t, c, jobs, "fifo", EstimatesExact)
	want := map[string]outcomeAt{
		// a takes 50 CPUs on each node: b's 48 fit on neither.
		"a": {0, 100, OutcomeDone}, "b": {100, 110, OutcomeDone},
		// One CPU (the trace has no count) fits next to a, but FIFO
		// keeps it behind b.
		"unknown": {100, 110, OutcomeDone},
		"huge":    {-1, -1, OutcomeRejected},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestZeroLengthAndCensoredJobs replays a zero-length job (it starts and
// ends in the same second, occupying nothing) and a censored one (it
// runs the time it had run when the trace was taken).
func TestZeroLengthAndCensoredJobs(t *testing.T) {
	jobs := []trace.Job{
		{ID: "zero", Submit: 0, Duration: 0, GPUs: 8, Share: 1},
		{ID: "next", Submit: 0, Duration: 50, GPUs: 8, Share: 1},
		{ID: "running", Submit: 10, Duration: 30, GPUs: 8, Share: 1, Censored: true, TimeLimit: 3600},
	}
	res, err := Run(jobs, Options{Cluster: oneNode(t), Policy: policy(t, "fifo"), Estimates: EstimatesLimit})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]outcomeAt{}
	censored := map[string]bool{}
	for _, j := range res.Jobs {
		got[j.TraceID] = outcomeAt{j.Start, j.End, j.Outcome}
		censored[j.TraceID] = j.Censored
	}
	// The seed may submit next before zero; either way both start at 0
	// or when the other ends.
	if z, n := got["zero"], got["next"]; !(z == outcomeAt{0, 0, OutcomeDone} && n == outcomeAt{0, 50, OutcomeDone} ||
		z == outcomeAt{50, 50, OutcomeDone} && n == outcomeAt{0, 50, OutcomeDone}) {
		t.Errorf("zero %+v, next %+v: want the zero-length job to start and end at once", z, n)
	}
	if r := got["running"]; r != (outcomeAt{50, 80, OutcomeDone}) || !censored["running"] || censored["next"] {
		t.Errorf("censored job %+v (censored %v): want it to run its 30 s from 50", r, censored["running"])
	}
	pr, _ := Summarize(res, DefaultStarveAfter)
	if pr.Censored != 1 || pr.Completed != 3 {
		t.Errorf("report counts %d censored of %d completed, want 1 of 3", pr.Censored, pr.Completed)
	}
}
