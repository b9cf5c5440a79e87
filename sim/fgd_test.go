package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/sched"
	"github.com/tide-hpc/tide/sim/trace"
)

func TestParsePoliciesPlacement(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		fit      sched.SliceFit
		topology bool
		err      bool
	}{
		{name: "the default measures fragmentation", in: "tide", fit: sched.SliceFragAware, topology: true},
		{name: "fgd alone", in: "tide+fgd", fit: sched.SliceFGD, topology: true},
		{name: "best fit, the old default", in: "priority+bestfit", fit: sched.SliceBestFit},
		{name: "first fit", in: "backfill+firstfit", fit: sched.SliceFirstFit},
		{name: "one suffix only", in: "tide+fgd+firstfit", err: true},
		{name: "unknown suffix", in: "tide+worstfit", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, err := ParsePolicies([]string{tt.in})
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if tt.err {
				return
			}
			p := ps[0]
			if p.Name != tt.in || p.Sched.SliceFit != tt.fit || p.Topology != tt.topology {
				t.Errorf("got name %q fit %d topology %v, want %q %d %v", p.Name, p.Sched.SliceFit, p.Topology, tt.in, tt.fit, tt.topology)
			}
		})
	}
}

// TestPackFragAware: on one node of two GPUs, two 40 % slices then two
// 60 % slices arrive. Best fit stacks the 40 % slices on one GPU (20 %
// left, which no slice of the trace can use) and turns the second 60 %
// slice away; measured against the trace's workload (40 % and 60 %
// slices), the default and FGD put the second 40 % slice on the other
// GPU, and every slice fits. The default sees the workload only
// through the experiment's Snapshot.Workload, so this fails if the
// experiment stops passing it.
func TestPackFragAware(t *testing.T) {
	c, err := Generate(ClusterSpec{Nodes: 1, GPUsPerNode: 2, CPUsPerNode: 64, MemPerNodeMB: 512 * 1024})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []trace.Job
	for _, share := range []float64{0.4, 0.4, 0.6, 0.6} {
		jobs = append(jobs, trace.Job{ID: "j", Submit: int64(len(jobs)), Duration: 100, GPUs: 1, Share: share})
	}
	pols, err := ParsePolicies([]string{"tide", "tide+fgd", "tide+bestfit"})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := PackCompare(jobs, c, pols, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]float64{}
	for _, r := range rs {
		got[r.Policy] = [2]float64{float64(r.Failed), r.FirstFailAt}
	}
	want := map[string][2]float64{
		"tide":         {0, 1},
		"tide+fgd":     {0, 1},
		"tide+bestfit": {1, 0.7}, // 0.4 + 0.4 + 0.6 of 2 GPUs held
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("failed jobs and first failure (-want +got):\n%s", diff)
	}
}
