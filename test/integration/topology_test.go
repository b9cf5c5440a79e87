package integration

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// topoNodes is the local cluster of issue 4's acceptance: leaf s1 =
// gpu[01-02], leaf s2 = gpu[03-04], one spine above them.
var topoNodes = []string{"gpu01", "gpu02", "gpu03", "gpu04"}

// topoGPUs is each node's fake inventory: eight GPUs in two 4-GPU NVLink
// islands joined by PCIe across the sockets.
var topoGPUs = gres.FakeConfig{Count: 8, Model: "h100", MemoryMB: 81920, Topology: gres.TopologyIslands}

// newTopoCluster starts tidectld and four tided with the topology above.
func newTopoCluster(t *testing.T) *cluster {
	t.Helper()
	gpus := topoGPUs
	return newClusterOpts(t, clusterOpts{nodes: len(topoNodes), gpus: &gpus, switches: []string{
		`{name: s1, nodes: "gpu[01-02]"}`,
		`{name: s2, nodes: "gpu[03-04]"}`,
		`{name: spine, switches: "s[1-2]"}`,
	}})
}

// nvlinked reports whether every pair of gpus on node has an NVLink in
// the node's fake inventory.
func nvlinked(t *testing.T, node string, gpus []int) bool {
	t.Helper()
	devs, err := gres.Fake(node, topoGPUs)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range gpus {
		for _, b := range gpus[i+1:] {
			if !slices.ContainsFunc(devs[a].Links, func(l gres.Link) bool { return l.Peer == b && l.NVLinks > 0 }) {
				return false
			}
		}
	}
	return true
}

// cvdIndices parses CUDA_VISIBLE_DEVICES as GPU indices.
func cvdIndices(t *testing.T, cvd string) []int {
	t.Helper()
	var out []int
	for _, f := range strings.Split(cvd, ",") {
		g, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("CUDA_VISIBLE_DEVICES=%q: not indices", cvd)
		}
		out = append(out, g)
	}
	return out
}

// TestTopologyOnLocalCluster is issue 4's acceptance on real daemons: a
// 2-node job takes the two nodes of one leaf; eight 1-GPU jobs pack onto
// as few nodes as possible; a 2-GPU job then gets an NVLink pair, on the
// leaf already in use, so that a second 2-node job still finds a whole
// leaf. scontrol show job and tide events say why.
func TestTopologyOnLocalCluster(t *testing.T) {
	c := newTopoCluster(t)
	const sleeper = "#!/bin/sh\nexec sleep 300\n"
	leafOf := map[string]string{"gpu01": "s1", "gpu02": "s1", "gpu03": "s2", "gpu04": "s2"}

	t.Run("-N 2 --gpus-per-node=8 takes the two nodes of one leaf", func(t *testing.T) {
		defer c.cancelAll()
		id := c.submit(sleeper, "-N", "2", "--gpus-per-node=8", "-t", "5:00")
		j := c.waitState(id, api.StateRunning, 20*time.Second)
		nodes := j.NodeNames()
		if len(nodes) != 2 || leafOf[nodes[0]] != leafOf[nodes[1]] {
			t.Fatalf("nodes %v: want both under one leaf", nodes)
		}
		for _, a := range j.Alloc {
			if len(a.GPUs) != 8 {
				t.Errorf("%s: GPUs %v, want all eight", a.Node, a.GPUs)
			}
		}
		wantWhy := "under leaf " + leafOf[nodes[0]]
		if !strings.Contains(j.Placement, "2 whole nodes") || !strings.Contains(j.Placement, wantWhy) {
			t.Errorf("Placement %q: want 2 whole nodes %s", j.Placement, wantWhy)
		}
		show := c.cli("scontrol", "show", "job", strconv.FormatUint(id, 10)).out
		if !strings.Contains(show, "Tide:Placement="+j.Placement) {
			t.Errorf("scontrol show job lacks the placement %q:\n%s", j.Placement, show)
		}
		ev := c.cli("tide", "events", strconv.FormatUint(id, 10))
		if ev.code != 0 || !strings.Contains(ev.out, j.Placement) {
			t.Errorf("tide events (exit %d) lacks the placement %q:\n%s%s", ev.code, j.Placement, ev.out, ev.err)
		}
	})

	t.Run("1-GPU jobs pack, a 2-GPU job gets an NVLink pair, a whole leaf stays free", func(t *testing.T) {
		defer c.cancelAll()
		var ones []uint64
		for range 8 {
			ones = append(ones, c.submit(sleeper, "--gpus=1", "-t", "5:00"))
		}
		used := map[string]int{}
		for _, id := range ones {
			j := c.waitState(id, api.StateRunning, 20*time.Second)
			used[j.Alloc[0].Node]++
		}
		if len(used) != 1 {
			t.Fatalf("eight 1-GPU jobs on %v: want one node", used)
		}
		var packed string
		for n := range used {
			packed = n
		}

		pair := c.submit(fmt.Sprintf(envScript, "#SBATCH --gpus=2"))
		j := c.waitState(pair, api.StateRunning, 20*time.Second)
		node := j.Alloc[0].Node
		cvd := cvdIndices(t, c.envOf(pair)["CVD"])
		if !slices.Equal(cvd, j.Alloc[0].GPUs) {
			t.Errorf("CUDA_VISIBLE_DEVICES %v, allocation %v", cvd, j.Alloc[0].GPUs)
		}
		if len(cvd) != 2 || !nvlinked(t, node, cvd) {
			t.Errorf("2-GPU job got %v on %s: want an NVLink-connected pair", cvd, node)
		}
		if node == packed || leafOf[node] != leafOf[packed] {
			t.Errorf("2-GPU job on %s, 1-GPU jobs on %s: want the other node of the leaf in use", node, packed)
		}
		if !strings.Contains(j.Placement, "link score 600/600") {
			t.Errorf("Placement %q: want the best pair's link score 600/600", j.Placement)
		}

		big := c.submit(sleeper, "-N", "2", "--gpus-per-node=8", "-t", "5:00")
		b := c.waitState(big, api.StateRunning, 20*time.Second)
		for _, n := range b.NodeNames() {
			if leafOf[n] == leafOf[packed] {
				t.Errorf("2-node job on %v: want the untouched leaf", b.NodeNames())
			}
		}
	})
}
