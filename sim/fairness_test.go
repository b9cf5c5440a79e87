package sim

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/sim/trace"
)

// TestSizeClasses puts one job in each size class (a slice counts as
// one GPU, CPU-only jobs have their own class) on a cluster that runs
// them all at once, so that every wait is 0 but the wide job's.
func TestSizeClasses(t *testing.T) {
	c, err := Generate(ClusterSpec{Nodes: 8, GPUsPerNode: 8, CPUsPerNode: 64, MemPerNodeMB: 512000})
	if err != nil {
		t.Fatal(err)
	}
	jobs := []trace.Job{
		{ID: "slice", Duration: 10, GPUs: 1, Share: 0.5},
		{ID: "two", Duration: 10, GPUs: 2, Share: 1},
		{ID: "eight", Duration: 10, GPUs: 8, Share: 1},
		{ID: "sixteen", Duration: 10, GPUs: 16, Share: 1},
		{ID: "cpu", Duration: 10, CPUs: 4, Share: 1},
		// Waits for the others: the cluster has 64 GPUs.
		{ID: "forty", Submit: 1, Duration: 10, GPUs: 40, Share: 1},
	}
	res, err := Run(jobs, Options{Cluster: c, Policy: policy(t, "fifo"), Estimates: EstimatesExact})
	if err != nil {
		t.Fatal(err)
	}
	pr, _ := Summarize(res, 5)
	got := map[string][2]float64{}
	for _, cl := range pr.BySize {
		got[cl.Class] = [2]float64{float64(cl.QueueDelay.N), cl.QueueDelay.Max}
	}
	want := map[string][2]float64{"1": {1, 0}, "2-4": {1, 0}, "5-8": {1, 0}, "9-32": {1, 0}, ">32": {1, 9}, "cpu": {1, 0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("classes {jobs, max wait} (-want +got):\n%s", diff)
	}
	// The 40-GPU job waited 9 s: starved under a 5 s bound.
	if pr.Starved != 1 {
		t.Errorf("%d starved, want 1", pr.Starved)
	}
}

// queueConfig is a two-node cluster whose queue "small" is guaranteed
// a quarter of the GPUs.
const queueConfig = `
version: 1
nodes:
  - {names: "n[1-2]", cpus: 64, memory: 512G, gpus: 4}
partitions:
  - {name: gpu, nodes: "n[1-2]", default: true}
queues:
  - {name: big}
  - {name: small, guaranteed: "25%"}
scheduler: {policy: fifo}
`

// TestQueueShares replays two queues on 8 GPUs: big holds all 8 for
// 100 s, then small's 4-GPU job (which waited from 0, below its 2-GPU
// guarantee) runs for 50 s. Over the 150 s span big has 800 of 1200
// GPU-seconds, small 200.
func TestQueueShares(t *testing.T) {
	c, pol, err := LoadConfig(writeConfig(t, queueConfig))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]float64{"small": 0.25}, c.Guarantees); diff != "" {
		t.Fatalf("guarantees (-want +got):\n%s", diff)
	}
	jobs := []trace.Job{
		{ID: "a", Submit: 0, Duration: 100, GPUs: 8, Share: 1, Queue: "big"},
		{ID: "b", Submit: 1, Duration: 50, GPUs: 4, Share: 1, Queue: "small"},
	}
	for i := range jobs {
		jobs[i].Start, jobs[i].End = -1, -1
	}
	res, err := Run(jobs, Options{Cluster: c, Policy: pol, Estimates: EstimatesExact})
	if err != nil {
		t.Fatal(err)
	}
	pr, _ := Summarize(res, DefaultStarveAfter)
	if len(pr.Queues) != 2 {
		t.Fatalf("queues %+v, want big and small", pr.Queues)
	}
	big, small := pr.Queues[0], pr.Queues[1]
	type summary struct {
		Queue           string
		Jobs            int
		GPUHours, Share float64
		Guarantee       float64
		BelowGuaranteeS int64
		DelayMean       float64
	}
	sum := func(q QueueReport) summary {
		return summary{q.Queue, q.Jobs, q.GPUHours, q.Share, q.Guarantee, q.BelowGuaranteeS, q.QueueDelay.Mean}
	}
	wantBig := summary{Queue: "big", Jobs: 1, GPUHours: round6(800.0 / 3600), Share: round6(800.0 / 1200)}
	wantSmall := summary{Queue: "small", Jobs: 1, GPUHours: round6(200.0 / 3600), Share: round6(200.0 / 1200), Guarantee: 0.25,
		BelowGuaranteeS: 99, DelayMean: 99}
	if diff := cmp.Diff([]summary{wantBig, wantSmall}, []summary{sum(big), sum(small)}); diff != "" {
		t.Errorf("queues (-want +got):\n%s", diff)
	}
	// The series: big holds the whole cluster over the first two thirds
	// of the span, small half of it over the last third, after waiting
	// for half the cluster.
	if n := len(small.Series); n != queuePoints {
		t.Fatalf("%d points, want %d", n, queuePoints)
	}
	first, last := small.Series[10], small.Series[queuePoints-1]
	if big.Series[10].Share != 1 || first.Share != 0 || first.Pending != 0.5 || last.Share != 0.5 || last.Pending != 0 {
		t.Errorf("series: big %+v, small %+v then %+v", big.Series[10], first, last)
	}
	// The table names the guarantee and the time below it.
	rep := &Report{Policies: []PolicyReport{pr}, StarveAfterS: DefaultStarveAfter, Seed: 1}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GPU share, queue small (guar. 25.0%)", "waiting below guarantee, queue small", "GPU share, queue big"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"queue small (1 jobs)", "guarantee 25%", "stroke-dasharray"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}
