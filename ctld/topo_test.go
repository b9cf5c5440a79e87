package ctld

import (
	"testing"

	"github.com/tide-hpc/tide/gres"
)

func TestLinkMatrix(t *testing.T) {
	gpus, err := gres.Fake("n1", gres.FakeConfig{Count: 8, Topology: gres.TopologyIslands})
	if err != nil {
		t.Fatal(err)
	}
	m := linkMatrix(gpus)
	if m == nil {
		t.Fatal("no matrix from a fake inventory with links")
	}
	if got := len(m.Islands()); got != 2 {
		t.Fatalf("%d NVLink islands, want 2", got)
	}
	if m.Score(0, 1) <= m.Score(0, 4) {
		t.Fatalf("score within an island %d not above across %d", m.Score(0, 1), m.Score(0, 4))
	}
	plain, _ := gres.Fake("n1", gres.FakeConfig{Count: 2, Topology: gres.TopologyPCIe})
	for i := range plain {
		plain[i].Links = nil
	}
	if linkMatrix(plain) != nil {
		t.Fatal("matrix from an inventory without links")
	}
}
