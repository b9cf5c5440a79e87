package sched_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
	"github.com/tide-hpc/tide/hostlist"
	"github.com/tide-hpc/tide/topology"
	"github.com/tide-hpc/tide/topology/topotest"
)

// randomSnapshot builds a random but reproducible cluster: mixed node
// sizes and GPU models, some nodes busy, down or drained, overlapping
// partitions (one down) and pending jobs that use every request option.
func randomSnapshot(seed int64, nodes, jobs int) *sched.Snapshot {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x7469646573636864))
	pick := func(xs ...int) int { return xs[rng.IntN(len(xs))] }

	w := st.MakeSnapshot()
	var names []string
	for i := range nodes {
		name := fmt.Sprintf("n%03d", i+1)
		names = append(names, name)
		nw := st.MakeNode(name).CPUs(pick(8, 16, 64, 128)).Mem(int64(pick(16000, 64000, 256000)))
		if g := pick(0, 4, 8, 8); g > 0 {
			nw.GPUs(g).Model([]string{"a100", "H100"}[rng.IntN(2)])
			if rng.IntN(2) == 0 {
				var used []int
				for x := range g {
					if rng.IntN(3) == 0 {
						used = append(used, x)
					}
				}
				nw.UsedGPUs(used...)
			}
		}
		n := nw.Obj()
		if rng.IntN(3) == 0 {
			nw.UsedCPUs(rng.IntN(n.CPUs + 1)).UsedMem(rng.Int64N(n.MemoryMB + 1))
		}
		switch rng.IntN(12) {
		case 0:
			nw.Down()
		case 1:
			nw.Drained()
		}
		w.Nodes(nw.Obj())
	}
	subset := func(p int) []string { return randomSubset(rng, names, p) }
	w.Partitions(
		st.MakePartition("all", names...).MaxTime(7200).Obj(),
		st.MakePartition("gpu", subset(60)...).DefaultTime(600).MaxTime(3600).MaxNodes(4).Obj(),
		st.MakePartition("small", subset(30)...).Obj(),
		st.MakePartition("off", subset(30)...).Down().Obj(),
	)
	parts := []string{"all", "all", "gpu", "gpu", "small", "off", "missing"}

	for i := range jobs {
		jw := st.MakeJob().ID(uint64(i + 1)).Partition(parts[rng.IntN(len(parts))]).
			Priority(uint32(rng.IntN(4))).Submit(st.Epoch.Add(time.Duration(rng.IntN(50)) * time.Second))
		if rng.IntN(3) == 0 {
			jw.Nodes(pick(1, 1, 2, 3, 5))
		}
		switch rng.IntN(4) {
		case 0:
			jw.Tasks(pick(1, 2, 7, 16))
		case 1:
			jw.TasksPerNode(pick(1, 4))
		}
		if rng.IntN(3) == 0 {
			jw.CPUsPerTask(pick(1, 2, 8))
		}
		switch rng.IntN(5) {
		case 0:
			jw.GPUs(pick(1, 2, 3, 8, 9))
		case 1:
			jw.GPUsPerNode(pick(1, 4, 8))
		case 2:
			jw.GPUsPerTask(pick(1, 2))
		}
		if rng.IntN(4) == 0 {
			jw.CPUsPerGPU(pick(2, 16))
		}
		switch rng.IntN(5) {
		case 0:
			jw.Mem(int64(pick(1000, 64000)))
		case 1:
			jw.MemPerCPU(int64(pick(100, 4000)))
		case 2:
			jw.MemPerGPU(int64(pick(1000, 32000)))
		}
		if rng.IntN(8) == 0 {
			jw.GPUType([]string{"A100", "h100", "v100"}[rng.IntN(3)])
		}
		if rng.IntN(10) == 0 {
			jw.Exclusive()
		}
		if rng.IntN(10) == 0 {
			jw.NodeList(names[rng.IntN(len(names))])
		}
		if rng.IntN(8) == 0 {
			jw.Exclude(subset(20)...)
		}
		switch rng.IntN(25) {
		case 0:
			jw.Hold(api.HoldUser)
		case 1:
			jw.Begin(now.Add(time.Minute))
		case 2:
			jw.TimeLimit(api.Infinite)
		case 3:
			jw.TimeLimit(4000)
		}
		w.Jobs(jw.Obj())
	}
	return w.Obj()
}

// addTopology gives a random snapshot GPU link matrices (the canned
// machines, sometimes one smaller than the node, sometimes none) and a
// switch tree: leaves of 1-4 nodes, two leaves per aggregation switch,
// one or two roots (a forest), and a few nodes left out of the tree.
func addTopology(t *testing.T, snap *sched.Snapshot, seed int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(seed), 0x746f706f))
	machines := []*topology.Matrix{topotest.DGXH100().Matrix, topotest.TwoIslands().Matrix,
		topotest.PCIeOnly(8).Matrix, topotest.PCIeOnly(4).Matrix, nil}
	var cfg []topology.SwitchConfig
	var leaves, aggs []string
	var leafNodes []string
	flush := func() {
		if len(leafNodes) == 0 {
			return
		}
		name := fmt.Sprintf("s%d", len(leaves)+1)
		cfg = append(cfg, topology.SwitchConfig{Name: name, Nodes: hostlist.Compress(leafNodes)})
		leaves, leafNodes = append(leaves, name), nil
		if len(leaves)%2 == 0 {
			agg := fmt.Sprintf("agg%d", len(aggs)+1)
			cfg = append(cfg, topology.SwitchConfig{Name: agg, Switches: hostlist.Compress(leaves[len(leaves)-2:])})
			aggs = append(aggs, agg)
		}
	}
	size := 1 + rng.IntN(4)
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		switch {
		case n.GPUs == 8:
			n.Matrix = machines[rng.IntN(len(machines))]
		case n.GPUs == 4 && rng.IntN(2) == 0:
			n.Matrix = topotest.PCIeOnly(4).Matrix
		}
		if rng.IntN(10) == 0 {
			continue // not in the tree
		}
		if leafNodes = append(leafNodes, n.Name); len(leafNodes) >= size {
			flush()
			size = 1 + rng.IntN(4)
		}
	}
	flush()
	if len(leaves)%2 == 1 {
		cfg = append(cfg, topology.SwitchConfig{Name: "agg-odd", Switches: leaves[len(leaves)-1]})
		aggs = append(aggs, "agg-odd")
	}
	if rng.IntN(3) == 0 && len(aggs) > 1 {
		// A forest: the first aggregation switch is a root of its own.
		cfg = append(cfg, topology.SwitchConfig{Name: "core", Switches: strings.Join(aggs[1:], ",")})
	} else {
		cfg = append(cfg, topology.SwitchConfig{Name: "core", Switches: strings.Join(aggs, ",")})
	}
	tree, err := topology.Build(cfg, nil)
	if err != nil {
		t.Fatalf("seed %d: tree: %v", seed, err)
	}
	snap.Tree = tree
}

// addFeatures gives a random snapshot node features and some of its jobs
// a --constraint (from its own generator, so the rest of the snapshot
// stays as randomSnapshot made it): plain, AND, per-node OR, matching OR
// ([r1|r2]), grouping, and a feature no node has.
func addFeatures(snap *sched.Snapshot, seed int64) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x66656174))
	for i := range snap.Nodes {
		var fs []string
		for _, f := range []string{"containerd", "ib", "nvlink"} {
			if rng.IntN(2) == 0 {
				fs = append(fs, f)
			}
		}
		fs = append(fs, []string{"r1", "r2"}[rng.IntN(2)])
		slices.Sort(fs)
		snap.Nodes[i].Features = fs
	}
	constraints := []string{"nvlink", "ib&nvlink", "ib|nvlink", "[r1|r2]", "nvlink&[r1|r2]",
		"(ib|nvlink)&containerd", "r1", "nosuch", "ib,r2"}
	for _, j := range snap.Pending {
		if rng.IntN(3) == 0 {
			j.Constraint = constraints[rng.IntN(len(constraints))]
		}
	}
}

// checkFeatures verifies that a started job's nodes all satisfy one
// alternative of its --constraint.
func checkFeatures(t *testing.T, j *api.Job, s sched.Start, nodes map[string]*sched.NodeInfo) {
	t.Helper()
	c, err := sched.ParseConstraint(j.Constraint)
	if err != nil {
		t.Errorf("job %d started with invalid constraint %q: %v", j.ID, j.Constraint, err)
		return
	}
	for k := range c.Alternatives() {
		all := true
		for _, a := range s.Alloc {
			if n := nodes[a.Node]; n == nil || !c.Match(k, n.Features) {
				all = false
				break
			}
		}
		if all {
			return
		}
	}
	t.Errorf("job %d (-C %s): nodes %v do not share one alternative", j.ID, j.Constraint, s.Alloc)
}

// checkPlan verifies the invariants every plan must keep.
func checkPlan(t *testing.T, snap *sched.Snapshot, plan sched.Plan) {
	t.Helper()
	nodes := map[string]*sched.NodeInfo{}
	for i := range snap.Nodes {
		nodes[snap.Nodes[i].Name] = &snap.Nodes[i]
	}
	jobs := map[uint64]*api.Job{}
	for _, j := range snap.Pending {
		jobs[j.ID] = j
	}

	seen := map[uint64]int{}
	for _, s := range plan.Starts {
		seen[s.JobID]++
	}
	for _, d := range plan.Pending {
		seen[d.JobID]++
		if d.Reason == "" {
			t.Errorf("job %d: empty reason", d.JobID)
		}
		if d.Reason == api.ReasonResources && !strings.Contains(d.Detail, " nodes available") {
			t.Errorf("job %d: Resources detail %q is no histogram", d.JobID, d.Detail)
		}
	}
	for id := range jobs {
		if seen[id] != 1 {
			t.Errorf("job %d has %d outcomes, want exactly 1", id, seen[id])
		}
	}
	if len(plan.Starts)+len(plan.Pending) != len(jobs) {
		t.Errorf("%d starts + %d decisions for %d jobs", len(plan.Starts), len(plan.Pending), len(jobs))
	}

	usedCPU := map[string]int{}
	usedMem := map[string]int64{}
	usedGPU := map[string]map[int]uint64{}
	startsOn := map[string][]uint64{}
	for _, s := range plan.Starts {
		j := jobs[s.JobID]
		partName := j.Partition
		if s.Partition != "" {
			// A job of several partitions (-p a,b) names the one it got.
			if !slices.Contains(api.PartitionNames(j.ReqPartition()), s.Partition) {
				t.Errorf("job %d of partitions %s started in %s", j.ID, j.ReqPartition(), s.Partition)
			}
			partName = s.Partition
		} else if strings.Contains(j.ReqPartition(), ",") {
			t.Errorf("job %d of partitions %s started without naming one", j.ID, j.ReqPartition())
		}
		part := snap.Partitions[partName]
		if j.HoldKind != api.HoldNone || j.BeginTime.After(now) || part == nil || !part.Up {
			t.Errorf("job %d started though held, not begun or its partition is missing or down", j.ID)
			continue
		}
		wantNodes := j.ReqNodes()
		required := map[string]bool{}
		for _, n := range j.NodeList {
			required[n] = true
		}
		wantNodes = max(wantNodes, len(required))
		spans := j.Nodes == 0 || j.MaxNodes > j.Nodes
		switch {
		case spans && len(s.Alloc) < wantNodes:
			t.Errorf("job %d: %d nodes, want at least %d", j.ID, len(s.Alloc), wantNodes)
		case spans && len(s.Alloc) > max(wantNodes, j.Tasks, j.GPUs):
			// A total (--gpus, -n) spans at most one node per GPU or task.
			t.Errorf("job %d: %d nodes for %d tasks and %d GPUs", j.ID, len(s.Alloc), j.Tasks, j.GPUs)
		case spans && j.MaxNodes > j.Nodes && len(s.Alloc) > max(j.MaxNodes, len(required)):
			t.Errorf("job %d: %d nodes, above -N %d-%d", j.ID, len(s.Alloc), j.Nodes, j.MaxNodes)
		case !spans && len(s.Alloc) != wantNodes:
			t.Errorf("job %d: %d nodes, want %d", j.ID, len(s.Alloc), wantNodes)
		}
		if s.TimeLimit == 0 {
			t.Errorf("job %d: no time limit", j.ID)
		}
		if j.Constraint != "" {
			checkFeatures(t, j, s, nodes)
		}
		gpus, tasks := 0, 0
		inAlloc := map[string]bool{}
		for _, a := range s.Alloc {
			n := nodes[a.Node]
			switch {
			case n == nil:
				t.Errorf("job %d: unknown node %s", j.ID, a.Node)
				continue
			case inAlloc[a.Node]:
				t.Errorf("job %d: node %s twice", j.ID, a.Node)
			case !slices.Contains(part.Nodes, a.Node):
				t.Errorf("job %d: node %s outside partition %s", j.ID, a.Node, part.Name)
			case !n.Usable:
				t.Errorf("job %d: unusable node %s", j.ID, a.Node)
			case slices.Contains(j.Exclude, a.Node):
				t.Errorf("job %d: excluded node %s", j.ID, a.Node)
			case j.GPUType != "" && !strings.EqualFold(j.GPUType, n.GPUModel):
				t.Errorf("job %d: node %s has model %q, want %q", j.ID, a.Node, n.GPUModel, j.GPUType)
			case j.Exclusive && !n.Idle:
				t.Errorf("job %d: exclusive on busy node %s", j.ID, a.Node)
			}
			inAlloc[a.Node] = true
			if a.CPUs < 1 {
				t.Errorf("job %d: %d CPUs on %s", j.ID, a.CPUs, a.Node)
			}
			usedCPU[a.Node] += a.CPUs
			usedMem[a.Node] += a.MemoryMB
			startsOn[a.Node] = append(startsOn[a.Node], j.ID)
			if usedGPU[a.Node] == nil {
				usedGPU[a.Node] = map[int]uint64{}
			}
			for _, g := range a.GPUs {
				if a.Sliced() {
					break // checkSlicePlan checks shared GPUs
				}
				if !slices.Contains(n.FreeGPUs, g) {
					t.Errorf("job %d: GPU %d of %s is not free", j.ID, g, a.Node)
				}
				if other, dup := usedGPU[a.Node][g]; dup {
					t.Errorf("GPU %d of %s given to jobs %d and %d", g, a.Node, other, j.ID)
				}
				usedGPU[a.Node][g] = j.ID
			}
			if !slices.IsSorted(a.GPUs) {
				t.Errorf("job %d: GPUs %v on %s not ascending", j.ID, a.GPUs, a.Node)
			}
			gpus += len(a.GPUs)
			tasks += a.Tasks
		}
		for n := range required {
			if !inAlloc[n] {
				t.Errorf("job %d: required node %s missing", j.ID, n)
			}
		}
		wantGPUs := j.ReqGPUs()
		if j.GPUsPerNode > 0 {
			// Per node, on however many nodes a task total spans.
			wantGPUs = j.GPUsPerNode * len(s.Alloc)
		}
		if !j.Exclusive && gpus != wantGPUs && j.GPUsPerTask == 0 {
			t.Errorf("job %d: %d GPUs, want %d", j.ID, gpus, wantGPUs)
		}
		if j.TasksPerNode == 0 && tasks != max(j.Tasks, 0) && j.Tasks > 0 {
			t.Errorf("job %d: %d tasks, want %d", j.ID, tasks, j.Tasks)
		}
	}
	for name, n := range nodes {
		if usedCPU[name] > n.FreeCPUs {
			t.Errorf("%s: %d CPUs given, %d free", name, usedCPU[name], n.FreeCPUs)
		}
		if usedMem[name] > n.FreeMemMB {
			t.Errorf("%s: %d MB given, %d free", name, usedMem[name], n.FreeMemMB)
		}
		for _, id := range startsOn[name] {
			if jobs[id].Exclusive && len(startsOn[name]) > 1 {
				t.Errorf("%s: exclusive job %d shares the node with %v", name, id, startsOn[name])
			}
		}
	}
}

func TestScheduleProperties(t *testing.T) {
	seeds := 400
	if testing.Short() {
		seeds = 50
	}
	var starts, pending int
	var underSwitch, crossRoots, linked int // starts on the topology paths
	constrained := 0                        // starts of jobs with -C
	reasons := map[api.ReasonCode]int{}
	for seed := range seeds {
		snap := randomSnapshot(int64(seed), 4+seed%40, 10+seed%150)
		if seed%3 != 0 {
			addTopology(t, snap, int64(seed))
		}
		if seed%2 == 0 {
			addFeatures(snap, int64(seed))
		}
		cfg := sched.Config{DefMemPerCPUMB: int64(seed % 3 * 500)}
		if seed%7 == 0 {
			cfg.MaxStarts = seed % 5
		}
		plan := sched.Schedule(snap, now, cfg)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { checkPlan(t, snap, plan) })
		if cfg.MaxStarts > 0 && len(plan.Starts) > cfg.MaxStarts {
			t.Errorf("seed %d: %d starts over MaxStarts %d", seed, len(plan.Starts), cfg.MaxStarts)
		}
		starts += len(plan.Starts)
		for _, sp := range plan.Starts {
			if j := jobByID(snap, sp.JobID); j != nil && j.Constraint != "" {
				constrained++
			}
			switch {
			case strings.Contains(sp.Why, " under "):
				underSwitch++
			case strings.Contains(sp.Why, "no single switch"):
				crossRoots++
			}
			if strings.Contains(sp.Why, "link score") || strings.Contains(sp.Why, "least linked") {
				linked++
			}
		}
		pending += len(plan.Pending)
		for _, d := range plan.Pending {
			reasons[d.Reason]++
		}
	}
	// The generator must exercise the interesting paths, or the
	// properties above hold vacuously.
	for _, r := range []api.ReasonCode{api.ReasonResources, api.ReasonPriority, api.ReasonBadConstraints,
		api.ReasonPartitionDown, api.ReasonPartitionTimeLimit, api.ReasonJobHeldUser, api.ReasonBeginTime,
		api.ReasonReqNodeNotAvail, api.ReasonPartitionNodeLimit} {
		if reasons[r] == 0 {
			t.Errorf("no job pending for %s over %d seeds", r, seeds)
		}
	}
	if starts < seeds {
		t.Errorf("only %d starts over %d seeds", starts, seeds)
	}
	if constrained == 0 {
		t.Errorf("no job with --constraint started over %d seeds", seeds)
	}
	if underSwitch == 0 || crossRoots == 0 || linked == 0 {
		t.Errorf("topology paths not exercised: %d starts under a switch, %d across roots, %d by link score",
			underSwitch, crossRoots, linked)
	}
	t.Logf("%d starts (%d under a switch, %d across roots, %d by link score, %d with -C), %d pending: %v",
		starts, underSwitch, crossRoots, linked, constrained, pending, reasons)
}

// jobByID finds a pending job of snap.
func jobByID(snap *sched.Snapshot, id uint64) *api.Job {
	for _, j := range snap.Pending {
		if j.ID == id {
			return j
		}
	}
	return nil
}

// randomSubset keeps each name with probability p percent, and at least
// the first one.
func randomSubset(rng *rand.Rand, names []string, p int) []string {
	var out []string
	for _, n := range names {
		if rng.IntN(100) < p {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		out = append(out, names[0])
	}
	return out
}
