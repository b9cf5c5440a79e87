// Package topology is the pure data model behind topology-aware placement:
// the switch Tree between nodes and the GPU link Matrix inside one node.
//
// The Tree comes from the `topology.switches` list of tidectld's config,
// from a standalone etc/topology.yaml, or from Slurm's topology.conf as-is
// (ParseSlurmConf, LoadFile). Build validates it once and precomputes the
// maps that placement queries read, so that Parent, NodesUnder, Ancestors,
// CommonSwitch and HopDistance cost O(tree depth) or less per call.
//
// The Matrix says how each pair of GPUs on a node is linked (NVLink count,
// PCIe path) and scores pairs and sets the way NVIDIA's go-gpuallocator
// does, so that allocation policies can prefer NVLink-connected sets.
//
// The package imports nothing from Tide except hostlist; it holds no
// locks, does no I/O beyond LoadFile, and a built Tree or Matrix is never
// modified, so both are safe for concurrent readers. Canned machines and
// trees for tests live in topology/topotest.
package topology
