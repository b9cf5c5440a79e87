// Package state holds what the controller and the simulator both keep
// of the cluster between scheduling passes: every node's resources and
// what the running jobs hold of them (the ledger), and the one place a
// scheduling plan is applied to it. The core (ctld/sched) plans from a
// snapshot; Apply re-verifies each placement against the ledger as it
// is now before it takes anything (Nomad's plan applier), so a plan
// made from an older view never gives a CPU, a byte of memory or a GPU
// twice. The controller (ctld) and the trace-driven simulator (sim) go
// through this package alone, so the simulator replays exactly what
// the controller would do. It also holds the job lifecycle (Lifecycle,
// Transition): the one table of a job's state changes and the one
// function that makes them.
//
// The package is pure: no I/O, no clock, no locks (the caller
// serialises access, as the controller does under its mutex).
package state

import (
	"errors"
	"fmt"
	"slices"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

// Limits bound what slices of a shared GPU may commit together: memory
// up to the GPU's memory × MemRatio, compute up to ComputePct percent
// (100 × the oversubscription ratio).
type Limits struct {
	MemRatio   float64
	ComputePct int
}

// DefaultLimits are slices without oversubscription.
var DefaultLimits = Limits{MemRatio: 1, ComputePct: 100}

// Ledger is the cluster's nodes and their allocations.
type Ledger struct {
	nodes  []Node
	idx    map[string]int
	limits Limits
}

// New returns an empty ledger whose slices are bounded by lim.
func New(lim Limits) *Ledger {
	return &Ledger{idx: map[string]int{}, limits: lim}
}

// SetLimits changes the slice bounds (a reconfiguration); what is
// already allocated stays.
func (l *Ledger) SetLimits(lim Limits) { l.limits = lim }

// Limits returns the slice bounds.
func (l *Ledger) Limits() Limits { return l.limits }

// Capacity is what a node has.
type Capacity struct {
	CPUs     int
	MemoryMB int64
	// GPUs is the GPU count; the GPUs are indices 0..GPUs-1.
	GPUs int
	// GPUMemMB is the memory of each GPU (the smallest, when they
	// differ): what slices of one GPU share.
	GPUMemMB int64
}

// Node is one node of the ledger: its capacity and what is held.
type Node struct {
	Name string
	Capacity
	UsedCPUs  int
	UsedMemMB int64
	// whole marks the GPUs held whole; shared lists the GPUs held by
	// slices, by index, with what the slices commit.
	whole  []bool
	shared []sched.SharedGPU
}

// Add declares node name (capacity zero until SetCapacity) and returns
// it; adding a known name returns the node as it is.
func (l *Ledger) Add(name string) *Node {
	if i, ok := l.idx[name]; ok {
		return &l.nodes[i]
	}
	l.idx[name] = len(l.nodes)
	l.nodes = append(l.nodes, Node{Name: name})
	return &l.nodes[len(l.nodes)-1]
}

// Node returns node name, nil when the ledger does not have it. The
// pointer stays valid until the next Add.
func (l *Ledger) Node(name string) *Node {
	i, ok := l.idx[name]
	if !ok {
		return nil
	}
	return &l.nodes[i]
}

// Len is the number of nodes.
func (l *Ledger) Len() int { return len(l.nodes) }

// At returns the i-th node added.
func (l *Ledger) At(i int) *Node { return &l.nodes[i] }

// SetCapacity records what node name has (its registration). What jobs
// hold stays, even past a smaller capacity: the node's jobs are real
// whatever it now reports, and nothing new fits until they end.
func (l *Ledger) SetCapacity(name string, c Capacity) {
	n := l.Add(name)
	n.Capacity = c
	if len(n.whole) < c.GPUs {
		n.whole = append(n.whole, make([]bool, c.GPUs-len(n.whole))...)
	}
}

// Errors of Check, wrapped with the node and the numbers.
var (
	ErrUnknownNode = errors.New("unknown node")
	ErrCPUs        = errors.New("not enough free CPUs")
	ErrMemory      = errors.New("not enough free memory")
	ErrGPU         = errors.New("GPU not free")
	ErrSlice       = errors.New("GPU slices over the GPU's limits")
)

// Check reports whether alloc fits the nodes as they are now: the
// CPUs and memory are free, a whole GPU is held by nobody, a slice's
// GPU is held by slices alone and stays within the limits. Several
// entries for one node count together. nil means it fits.
func (l *Ledger) Check(alloc []api.NodeAlloc) error {
	if len(alloc) == 1 || !repeatsNode(alloc) {
		for i := range alloc {
			if err := l.checkOne(&alloc[i]); err != nil {
				return err
			}
		}
		return nil
	}
	// The same node twice: check against what the earlier entries take.
	if err := l.Take(alloc); err != nil {
		return err
	}
	l.Release(alloc)
	return nil
}

// Take checks alloc and, when it fits, records it; otherwise nothing
// changes and the error says why.
func (l *Ledger) Take(alloc []api.NodeAlloc) error {
	for i := range alloc {
		if err := l.checkOne(&alloc[i]); err != nil {
			l.Release(alloc[:i])
			return err
		}
		l.record(&alloc[i])
	}
	return nil
}

// Record takes alloc without checking it: a job the controller already
// runs, recovered from its store or reported by a node, holds what it
// holds whatever the ledger thinks. Unknown nodes are added.
func (l *Ledger) Record(alloc []api.NodeAlloc) {
	for i := range alloc {
		l.Add(alloc[i].Node)
		l.record(&alloc[i])
	}
}

// Release gives alloc back. Releasing more than is held stops at zero.
func (l *Ledger) Release(alloc []api.NodeAlloc) {
	for i := range alloc {
		a := &alloc[i]
		n := l.Node(a.Node)
		if n == nil {
			continue
		}
		n.UsedCPUs = max(0, n.UsedCPUs-a.CPUs)
		n.UsedMemMB = max(0, n.UsedMemMB-a.MemoryMB)
		for _, g := range a.GPUs {
			if !a.Sliced() {
				if g >= 0 && g < len(n.whole) {
					n.whole[g] = false
				}
				continue
			}
			k := n.sharedAt(g)
			if k < 0 {
				continue
			}
			sh := &n.shared[k]
			sh.MemMB -= a.GPUMemMB
			sh.ComputePct -= a.GPUComputePct
			sh.Slices--
			if sh.Slices <= 0 {
				n.shared = slices.Delete(n.shared, k, k+1)
			}
		}
	}
}

// checkOne checks one node's part of an allocation.
func (l *Ledger) checkOne(a *api.NodeAlloc) error {
	n := l.Node(a.Node)
	if n == nil {
		return fmt.Errorf("%s: %w", a.Node, ErrUnknownNode)
	}
	if a.CPUs > n.CPUs-n.UsedCPUs {
		return fmt.Errorf("%s: %w: %d asked, %d free", a.Node, ErrCPUs, a.CPUs, n.CPUs-n.UsedCPUs)
	}
	if a.MemoryMB > n.MemoryMB-n.UsedMemMB {
		return fmt.Errorf("%s: %w: %d MB asked, %d MB free", a.Node, ErrMemory, a.MemoryMB, n.MemoryMB-n.UsedMemMB)
	}
	for k, g := range a.GPUs {
		if g < 0 || g >= n.GPUs || slices.Contains(a.GPUs[:k], g) {
			return fmt.Errorf("%s: %w: GPU %d", a.Node, ErrGPU, g)
		}
		if n.whole[g] {
			return fmt.Errorf("%s: %w: GPU %d is held whole", a.Node, ErrGPU, g)
		}
		s := n.sharedAt(g)
		if !a.Sliced() {
			if s >= 0 {
				return fmt.Errorf("%s: %w: GPU %d is shared by slices", a.Node, ErrGPU, g)
			}
			continue
		}
		var mem int64
		var pct int
		if s >= 0 {
			mem, pct = n.shared[s].MemMB, n.shared[s].ComputePct
		}
		if float64(mem+a.GPUMemMB) > float64(n.GPUMemMB)*l.limits.MemRatio || pct+a.GPUComputePct > l.limits.ComputePct {
			return fmt.Errorf("%s: %w: GPU %d would commit %d MB and %d%%", a.Node, ErrSlice, g, mem+a.GPUMemMB, pct+a.GPUComputePct)
		}
	}
	return nil
}

// record takes a without checking.
func (l *Ledger) record(a *api.NodeAlloc) {
	n := l.Node(a.Node)
	n.UsedCPUs += a.CPUs
	n.UsedMemMB += a.MemoryMB
	for _, g := range a.GPUs {
		if g < 0 {
			continue
		}
		if !a.Sliced() {
			if g >= len(n.whole) {
				n.whole = append(n.whole, make([]bool, g+1-len(n.whole))...)
			}
			n.whole[g] = true
			continue
		}
		k := n.sharedAt(g)
		if k < 0 {
			k, _ = slices.BinarySearchFunc(n.shared, g, func(s sched.SharedGPU, g int) int { return s.Index - g })
			n.shared = slices.Insert(n.shared, k, sched.SharedGPU{Index: g})
		}
		sh := &n.shared[k]
		sh.MemMB += a.GPUMemMB
		sh.ComputePct += a.GPUComputePct
		sh.Slices++
	}
}

func repeatsNode(alloc []api.NodeAlloc) bool {
	for i := 1; i < len(alloc); i++ {
		for j := range i {
			if alloc[i].Node == alloc[j].Node {
				return true
			}
		}
	}
	return false
}

// sharedAt is the index of GPU g in n.shared, -1 when no slice holds it.
func (n *Node) sharedAt(g int) int {
	k, ok := slices.BinarySearchFunc(n.shared, g, func(s sched.SharedGPU, g int) int { return s.Index - g })
	if !ok {
		return -1
	}
	return k
}

// FreeCPUs is what no job holds of the node's CPUs (never negative).
func (n *Node) FreeCPUs() int { return max(0, n.CPUs-n.UsedCPUs) }

// FreeMemMB is what no job holds of the node's memory.
func (n *Node) FreeMemMB() int64 { return max(0, n.MemoryMB-n.UsedMemMB) }

// FreeGPUs appends to dst the GPUs nobody holds, ascending.
func (n *Node) FreeGPUs(dst []int) []int {
	for g := range n.GPUs {
		if !n.whole[g] && n.sharedAt(g) < 0 {
			dst = append(dst, g)
		}
	}
	return dst
}

// Shared is the GPUs held by slices, by index; the slice is the
// ledger's own until the next change, so callers that keep it clone it.
func (n *Node) Shared() []sched.SharedGPU { return n.shared }

// GPUsInUse counts the GPUs held, whole or by slices.
func (n *Node) GPUsInUse() int {
	c := len(n.shared)
	for _, w := range n.whole {
		if w {
			c++
		}
	}
	return c
}

// Idle reports whether no job holds anything of the node.
func (n *Node) Idle() bool {
	return n.UsedCPUs == 0 && n.UsedMemMB == 0 && len(n.shared) == 0 && !slices.Contains(n.whole, true)
}

// Holders lists the GPUs held, ascending, a shared GPU once per slice
// on it (api.Node.AllocGPUs' form).
func (n *Node) Holders() []int {
	var out []int
	k := 0
	for g := range max(len(n.whole), n.GPUs) {
		if g < len(n.whole) && n.whole[g] {
			out = append(out, g)
		}
		for k < len(n.shared) && n.shared[k].Index == g {
			for range n.shared[k].Slices {
				out = append(out, g)
			}
			k++
		}
	}
	for ; k < len(n.shared); k++ { // slices past the declared GPUs
		for range n.shared[k].Slices {
			out = append(out, n.shared[k].Index)
		}
	}
	return out
}

// Fill writes the node's free resources into the core's view of it:
// FreeCPUs, FreeMemMB, FreeGPUs (reusing its backing array), Shared (a
// copy: the core keeps the snapshot while the ledger moves on) and Idle.
// The node's other attributes (state, features, switch, capacity as
// declared) are the caller's.
func (n *Node) Fill(info *sched.NodeInfo) {
	info.FreeCPUs, info.FreeMemMB = n.CPUs-n.UsedCPUs, n.MemoryMB-n.UsedMemMB
	info.FreeGPUs = n.FreeGPUs(info.FreeGPUs[:0])
	info.Shared = slices.Clone(n.shared)
	info.Idle = n.Idle()
}

// Rejection is a start of a plan that Apply did not apply, and why.
type Rejection struct {
	Start sched.Start
	Err   error
}

// Apply applies a plan's starts in order: each is re-verified against
// the ledger as the starts before it left it, and taken when it fits.
// startable says whether the job may start at all (still pending, not
// cancelled meanwhile); nil allows every job. It returns the starts
// applied and the ones rejected.
func (l *Ledger) Apply(starts []sched.Start, startable func(jobID uint64) bool) (applied []sched.Start, rejected []Rejection) {
	for _, st := range starts {
		if startable != nil && !startable(st.JobID) {
			rejected = append(rejected, Rejection{Start: st, Err: fmt.Errorf("job %d: %w", st.JobID, ErrNotStartable)})
			continue
		}
		if err := l.Take(st.Alloc); err != nil {
			rejected = append(rejected, Rejection{Start: st, Err: fmt.Errorf("job %d: %w", st.JobID, err)})
			continue
		}
		applied = append(applied, st)
	}
	return applied, rejected
}

// ErrNotStartable: the plan starts a job that is no longer pending.
var ErrNotStartable = errors.New("not pending")
