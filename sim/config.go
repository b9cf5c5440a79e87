package sim

import (
	"fmt"
	"slices"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/config"
	"github.com/tide-hpc/tide/ctld/sched"
)

// ConfigPolicyName is the --compare name of the policy that a controller
// config sets (scheduler.policy, max_starts, def_mem_per_cpu_mb, and the
// switch tree when the config has one).
const ConfigPolicyName = "config"

// FromConfig builds the cluster of a validated controller config, so that
// a replay runs on the nodes, partitions and switch tree the controller
// would run with. The simulator cannot measure nodes, so every node must
// declare its cpus and memory (gpus may be 0: a CPU-only node), and at
// least one node must have GPUs. Jobs' per-GPU CPUs and memory are the
// share of the first node with the most GPUs.
func FromConfig(cl *config.Cluster) (*Cluster, error) {
	c := &Cluster{
		DefaultPartition: cl.DefaultPart,
		Partitions:       make(map[string]*sched.PartitionInfo, len(cl.Partitions)),
		Tree:             cl.Tree,
	}
	for _, name := range cl.NodeOrder {
		d := cl.NodeDecl[name]
		mem := cl.NodeMemoryMB[name]
		if d.CPUs < 1 || mem < 1 {
			return nil, api.Invalid("node %s: the simulator needs cpus and memory declared under nodes (%q has cpus %d, memory %q)",
				name, d.Names, d.CPUs, d.Memory)
		}
		free := make([]int, d.GPUs)
		for g := range free {
			free[g] = g
		}
		n := sched.NodeInfo{
			Name: name, Usable: true, Idle: true,
			CPUs: d.CPUs, FreeCPUs: d.CPUs, MemoryMB: mem, FreeMemMB: mem,
			GPUs: d.GPUs, FreeGPUs: free,
			Features: slices.Compact(slices.Sorted(slices.Values(d.Features))),
		}
		if d.GPUs > 0 {
			// The controller config does not name GPU models (nodes
			// report theirs); traces do not ask for one either.
			n.GPUModel = "sim"
		}
		if cl.Tree != nil {
			n.Switch = cl.Tree.LeafOf(name)
		}
		if d.GPUs > c.GPUsPerNode {
			c.GPUsPerNode, c.CPUsPerNode, c.MemPerNodeMB = d.GPUs, d.CPUs, mem
		}
		c.Nodes = append(c.Nodes, n)
	}
	if c.GPUsPerNode == 0 {
		return nil, api.Invalid("config declares no node with gpus: nothing to replay GPU jobs on")
	}
	// Queue guarantees, as shares of the whole cluster's GPUs (the
	// config resolves a percentage against the queue's partition).
	if total := cl.GPUTotal(""); total > 0 {
		for _, q := range cl.Sharing.Queues {
			if g := q.Guaranteed.Resolve(cl.GPUTotal(q.Partition)); g > 0 {
				if c.Guarantees == nil {
					c.Guarantees = map[string]float64{}
				}
				c.Guarantees[q.Name] = round6(float64(g) / float64(total))
			}
		}
	}
	for i := range cl.Partitions {
		p := &cl.Partitions[i]
		c.Partitions[p.Name] = &sched.PartitionInfo{Name: p.Name, Nodes: slices.Clone(p.Nodes), Up: p.State == "UP",
			DefaultTime: p.DefaultTime, MaxTime: p.MaxTime, MaxNodes: p.MaxNodes, Spread: p.Spread,
			NoGPUSlicing: !p.GPUSlicing, GPUMemRatio: p.GPUMemOversubscribe, GPUComputeRatio: p.GPUComputeOversubscribe}
	}
	return c, nil
}

// ConfigPolicy is the scheduler configuration of a controller config, as
// the policy named "config": what tidectld would schedule with.
func ConfigPolicy(cl *config.Cluster) PolicySpec {
	return PolicySpec{Name: ConfigPolicyName, Topology: cl.Tree != nil, Sched: sched.Config{
		Policy: cl.Policy, MaxStarts: cl.Scheduler.MaxStarts, DefMemPerCPUMB: cl.Scheduler.DefMemPerCPUMB,
		StarvationAge: cl.Scheduler.StarvationAge, Backfill: cl.Scheduler.Backfill(),
		Priority: cl.Scheduler.Priority(cl.Policy)}}
}

// LoadConfig reads and validates a controller config file and builds its
// cluster and "config" policy.
func LoadConfig(path string) (*Cluster, PolicySpec, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, PolicySpec{}, err
	}
	cl, err := cfg.Validate()
	if err != nil {
		return nil, PolicySpec{}, fmt.Errorf("config %s: %w", path, err)
	}
	c, err := FromConfig(cl)
	if err != nil {
		return nil, PolicySpec{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, ConfigPolicy(cl), nil
}
