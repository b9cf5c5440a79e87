package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	"github.com/tide-hpc/tide/hostlist"
	"github.com/tide-hpc/tide/topology"
)

// ClusterSpec describes a generated cluster: Nodes identical nodes
// (Prefix001…) in one partition, and with Leaf > 0 a two-level switch
// tree: leaf switches s1, s2, … of Leaf nodes each under one "spine".
type ClusterSpec struct {
	Nodes        int
	GPUsPerNode  int
	CPUsPerNode  int
	MemPerNodeMB int64
	Leaf         int
	// Prefix names the nodes ("gpu" when empty); Partition names the
	// partition ("gpu" when empty).
	Prefix    string
	Partition string
	// GPUModel is the nodes' GPU model ("sim" when empty).
	GPUModel string
}

// Cluster is what the simulator runs on: the nodes as the scheduler sees
// them when idle, the partitions and the optional switch tree.
type Cluster struct {
	Nodes            []sched.NodeInfo
	Partitions       map[string]*sched.PartitionInfo
	DefaultPartition string
	Tree             *topology.Tree
	// GPUsPerNode, CPUsPerNode and MemPerNodeMB size the jobs' CPU and
	// memory asks (per GPU: the node's share; see jobSpec).
	GPUsPerNode  int
	CPUsPerNode  int
	MemPerNodeMB int64
	// Guarantees are the guaranteed shares of the cluster's GPUs of the
	// queues (Slurm accounts) that the controller config declares, by
	// name; the report sets each trace queue's share against them. Nil
	// for a generated cluster.
	Guarantees map[string]float64
}

// TotalGPUs is the cluster's GPU count.
func (c *Cluster) TotalGPUs() int {
	t := 0
	for i := range c.Nodes {
		t += c.Nodes[i].GPUs
	}
	return t
}

// Generate builds the cluster of spec.
func Generate(spec ClusterSpec) (*Cluster, error) {
	switch {
	case spec.Nodes < 1:
		return nil, api.Invalid("--nodes %d: need at least one node", spec.Nodes)
	case spec.GPUsPerNode < 1:
		return nil, api.Invalid("--gpus-per-node %d: need at least one GPU per node", spec.GPUsPerNode)
	case spec.CPUsPerNode < 1:
		return nil, api.Invalid("--cpus-per-node %d: need at least one CPU per node", spec.CPUsPerNode)
	case spec.MemPerNodeMB < 1:
		return nil, api.Invalid("--mem-per-node: need some memory per node")
	case spec.Leaf < 0:
		return nil, api.Invalid("--leaf %d must not be negative", spec.Leaf)
	}
	prefix, part, model := spec.Prefix, spec.Partition, spec.GPUModel
	if prefix == "" {
		prefix = "gpu"
	}
	if part == "" {
		part = "gpu"
	}
	if model == "" {
		model = "sim"
	}
	width := max(2, len(strconv.Itoa(spec.Nodes)))
	c := &Cluster{
		Nodes:            make([]sched.NodeInfo, spec.Nodes),
		DefaultPartition: part,
		GPUsPerNode:      spec.GPUsPerNode,
		CPUsPerNode:      spec.CPUsPerNode,
		MemPerNodeMB:     spec.MemPerNodeMB,
	}
	names := make([]string, spec.Nodes)
	for i := range c.Nodes {
		names[i] = fmt.Sprintf("%s%0*d", prefix, width, i+1)
		free := make([]int, spec.GPUsPerNode)
		for g := range free {
			free[g] = g
		}
		c.Nodes[i] = sched.NodeInfo{
			Name: names[i], Usable: true, Idle: true,
			CPUs: spec.CPUsPerNode, FreeCPUs: spec.CPUsPerNode,
			MemoryMB: spec.MemPerNodeMB, FreeMemMB: spec.MemPerNodeMB,
			GPUModel: model, GPUs: spec.GPUsPerNode, FreeGPUs: free,
		}
	}
	c.Partitions = map[string]*sched.PartitionInfo{
		part: {Name: part, Nodes: names, Up: true, DefaultTime: api.Infinite, MaxTime: api.Infinite},
	}
	if spec.Leaf > 0 {
		var cfg []topology.SwitchConfig
		var leaves []string
		for l := 0; l*spec.Leaf < spec.Nodes; l++ {
			name := "s" + strconv.Itoa(l+1)
			leaves = append(leaves, name)
			end := min((l+1)*spec.Leaf, spec.Nodes)
			cfg = append(cfg, topology.SwitchConfig{Name: name, Nodes: hostlist.Compress(names[l*spec.Leaf : end])})
		}
		cfg = append(cfg, topology.SwitchConfig{Name: "spine", Switches: hostlist.Compress(leaves)})
		tree, err := topology.Build(cfg, nil)
		if err != nil {
			return nil, fmt.Errorf("generate switch tree: %w", err)
		}
		c.Tree = tree
		for i := range c.Nodes {
			c.Nodes[i].Switch = tree.LeafOf(names[i])
		}
	}
	return c, nil
}

// PolicySpec is one scheduler configuration to compare.
type PolicySpec struct {
	Name  string
	Sched sched.Config
	// Topology gives the scheduler the cluster's switch tree.
	Topology bool
}

// ParsePolicies reads --compare: fifo (strict FIFO), priority (priority
// blocking, no backfill: Slurm's main scheduler alone), easy (textbook
// EASY backfill: one reservation), backfill (Slurm's backfill: a
// reservation for every tested job), tide (sched.PolicyTide: backfill in
// the multifactor order, with the switch tree). Only tide sees the
// switch tree. A suffix changes the placement
// (sched.SliceFit): "+bestfit" best fit, the default before
// fragmentation-aware placement; "+firstfit" GPU slices first fit;
// "+fgd" every job by the FGD heuristic alone.
func ParsePolicies(list []string) ([]PolicySpec, error) {
	return ParsePoliciesWith(list, nil)
}

// ParsePoliciesWith is ParsePolicies that also knows the policy named
// "config" (a controller config's scheduler settings, see ConfigPolicy)
// when cfg is not nil.
func ParsePoliciesWith(list []string, cfg *PolicySpec) ([]PolicySpec, error) {
	// Suffixes that change a policy's placement.
	suffixes := []struct {
		suffix string
		fit    sched.SliceFit
	}{{"+bestfit", sched.SliceBestFit}, {"+firstfit", sched.SliceFirstFit}, {"+fgd", sched.SliceFGD}}
	var out []PolicySpec
	seen := map[string]bool{}
	for _, name := range list {
		var p PolicySpec
		base, fit := name, sched.SliceFragAware
		for _, sfx := range suffixes {
			if b, ok := strings.CutSuffix(name, sfx.suffix); ok {
				base, fit = b, sfx.fit
				break
			}
		}
		switch base {
		case "fifo":
			p = PolicySpec{Name: name, Sched: sched.Config{Policy: sched.PolicyFIFO}}
		case "backfill":
			p = PolicySpec{Name: name, Sched: sched.Config{Policy: sched.PolicyBackfill}}
		case "easy":
			p = PolicySpec{Name: name, Sched: sched.Config{Policy: sched.PolicyEASY}}
		case "tide":
			p = PolicySpec{Name: name, Sched: sched.Config{Policy: sched.PolicyTide}, Topology: true}
		case "priority":
			p = PolicySpec{Name: name, Sched: sched.Config{}}
		case ConfigPolicyName:
			if cfg == nil {
				return nil, api.Invalid("--compare: policy %q needs --config", name)
			}
			p = *cfg
		default:
			want := "fifo, backfill, easy, tide or priority"
			if cfg != nil {
				want = "fifo, backfill, easy, tide, priority or config"
			}
			return nil, api.Invalid("--compare: unknown policy %q (want %s, each optionally with +bestfit, +firstfit or +fgd)", name, want)
		}
		if fit != sched.SliceFragAware {
			p.Name = name
			p.Sched.SliceFit = fit
		}
		if seen[name] {
			return nil, api.Invalid("--compare names %s twice", name)
		}
		seen[name] = true
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, api.Invalid("--compare: no policy given")
	}
	return out, nil
}

// partitionOf is the partition a trace job of queue goes to: mapped
// when the queue map named one, else the partition named like the
// queue, else the default partition.
func (c *Cluster) partitionOf(queue, mapped string) string {
	if mapped != "" {
		return mapped
	}
	if _, ok := c.Partitions[queue]; ok {
		return queue
	}
	return c.DefaultPartition
}

// maxTime is partition part's MaxTime in seconds, 0 when it has none
// (or there is no such partition).
func (c *Cluster) maxTime(part string) int64 {
	if p := c.Partitions[part]; p != nil && p.MaxTime > 0 {
		return p.MaxTime
	}
	return 0
}
