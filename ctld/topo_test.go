package ctld

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

func TestLinkMatrix(t *testing.T) {
	fake := func(count int, topo string) []gres.Device {
		t.Helper()
		gpus, err := gres.Fake("n1", gres.FakeConfig{Count: count, Topology: topo})
		if err != nil {
			t.Fatal(err)
		}
		return gpus
	}
	noLinks := func(d []gres.Device) []gres.Device {
		for i := range d {
			d[i].Links = nil
		}
		return d
	}
	unknownNUMA := func(d []gres.Device) []gres.Device {
		d[1].NUMANode = -1
		return d
	}
	oneSocket := func(d []gres.Device) []gres.Device {
		for i := range d {
			d[i].NUMANode = 0
		}
		return d
	}
	tests := []struct {
		name     string
		gpus     []gres.Device
		wantNil  bool
		islands  int
		wantNUMA []int // per GPU; nil = no NUMA data
	}{
		{name: "islands with NUMA halves", gpus: fake(8, gres.TopologyIslands), islands: 2, wantNUMA: []int{0, 0, 0, 0, 1, 1, 1, 1}},
		{name: "one GPU without NUMA keeps the links only", gpus: unknownNUMA(fake(8, gres.TopologyDGX)), islands: 1},
		{name: "no links but two NUMA nodes", gpus: noLinks(fake(4, gres.TopologyPCIe)), islands: 4, wantNUMA: []int{0, 0, 1, 1}},
		{name: "no links on one NUMA node", gpus: oneSocket(noLinks(fake(2, gres.TopologyPCIe))), wantNil: true},
		{name: "no GPUs", wantNil: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := linkMatrix(tt.gpus)
			if tt.wantNil {
				if m != nil {
					t.Fatalf("matrix %v, want none", m)
				}
				return
			}
			if m == nil {
				t.Fatal("no matrix")
			}
			if got := len(m.Islands()); got != tt.islands {
				t.Errorf("%d NVLink islands, want %d", got, tt.islands)
			}
			var numa []int
			if m.HasNUMA() {
				for i := range m.N() {
					numa = append(numa, m.NUMA(i))
				}
			}
			if diff := cmp.Diff(tt.wantNUMA, numa); diff != "" {
				t.Errorf("NUMA (-want +got):\n%s", diff)
			}
		})
	}
	islands := linkMatrix(fake(8, gres.TopologyIslands))
	if islands.Score(0, 1) <= islands.Score(0, 4) {
		t.Fatalf("score within an island %d not above across %d", islands.Score(0, 1), islands.Score(0, 4))
	}
}

// TestPlacementRecorded checks the plumbing of a placement's reasons: the
// job keeps the scheduler's Why (for scontrol show job) across a
// controller restart, the start event carries it (for tide events), and
// the allocation names the GPUs' NUMA node from the inventory.
func TestPlacementRecorded(t *testing.T) {
	h := newHarness(t)
	gpus, _ := gres.Fake("gpu01", gres.FakeConfig{Count: 8, Topology: gres.TopologyIslands})
	if _, err := h.s.register(api.NodeRegistration{Name: "gpu01", CPUs: 8, MemoryMB: 64 * 1024, GPUs: gpus}); err != nil {
		t.Fatal(err)
	}
	id := h.submit(api.JobSpec{GPUs: 4, Nodes: 1})
	h.s.schedulePass()
	const want = "best fit on gpu01: 4/8 GPUs free left; gpu01: GPUs 0-3, link score 3600/3600, NUMA 0"
	j := h.job(id)
	if j.State != api.StateRunning || j.Placement != want {
		t.Fatalf("job %s, Placement %q; want RUNNING, %q", j.State, j.Placement, want)
	}
	if diff := cmp.Diff([]int{0}, j.Alloc[0].NUMA); diff != "" {
		t.Errorf("alloc NUMA (-want +got):\n%s", diff)
	}
	evs, err := h.s.store.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var startMsg string
	for _, e := range evs {
		if e.Kind == api.EventStart {
			startMsg = e.Message
		}
	}
	// The start event adds the allocation itself (startMessage).
	if wantMsg := want + " [alloc gpu01 cpus=1 mem_mb=0 gpus=0,1,2,3]"; startMsg != wantMsg {
		t.Errorf("start event message %q, want %q", startMsg, wantMsg)
	}
	h.restart()
	if got := h.job(id).Placement; got != want {
		t.Errorf("after restart Placement = %q, want %q", got, want)
	}
}
