package state

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

func testLedger() *Ledger {
	l := New(Limits{MemRatio: 1, ComputePct: 100})
	l.SetCapacity("a", Capacity{CPUs: 8, MemoryMB: 1000, GPUs: 4, GPUMemMB: 80})
	l.SetCapacity("b", Capacity{CPUs: 4, MemoryMB: 500, GPUs: 2, GPUMemMB: 40})
	return l
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		held  []api.NodeAlloc
		alloc []api.NodeAlloc
		want  error
	}{
		{name: "fits", alloc: []api.NodeAlloc{{Node: "a", CPUs: 8, MemoryMB: 1000, GPUs: []int{0, 1, 2, 3}}}},
		{name: "unknown node", alloc: []api.NodeAlloc{{Node: "zz", CPUs: 1}}, want: ErrUnknownNode},
		{name: "CPUs", held: []api.NodeAlloc{{Node: "a", CPUs: 6}}, alloc: []api.NodeAlloc{{Node: "a", CPUs: 3}}, want: ErrCPUs},
		{name: "memory", held: []api.NodeAlloc{{Node: "b", MemoryMB: 400}}, alloc: []api.NodeAlloc{{Node: "b", MemoryMB: 101}}, want: ErrMemory},
		{name: "a whole GPU twice", held: []api.NodeAlloc{{Node: "a", GPUs: []int{1}}}, alloc: []api.NodeAlloc{{Node: "a", GPUs: []int{1}}}, want: ErrGPU},
		{name: "one GPU twice in one entry", alloc: []api.NodeAlloc{{Node: "a", GPUs: []int{2, 2}}}, want: ErrGPU},
		{name: "GPU out of range", alloc: []api.NodeAlloc{{Node: "b", GPUs: []int{2}}}, want: ErrGPU},
		{name: "a slice on a whole GPU", held: []api.NodeAlloc{{Node: "a", GPUs: []int{0}}}, alloc: []api.NodeAlloc{{Node: "a", GPUs: []int{0}, GPUComputePct: 10}}, want: ErrGPU},
		{name: "a whole GPU on a sliced one", held: []api.NodeAlloc{{Node: "a", GPUs: []int{0}, GPUComputePct: 10}}, alloc: []api.NodeAlloc{{Node: "a", GPUs: []int{0}}}, want: ErrGPU},
		{name: "slices share a GPU", held: []api.NodeAlloc{{Node: "a", GPUs: []int{0}, GPUComputePct: 60, GPUMemMB: 40}}, alloc: []api.NodeAlloc{{Node: "a", GPUs: []int{0}, GPUComputePct: 40, GPUMemMB: 40}}},
		{name: "slices over compute", held: []api.NodeAlloc{{Node: "a", GPUs: []int{0}, GPUComputePct: 60}}, alloc: []api.NodeAlloc{{Node: "a", GPUs: []int{0}, GPUComputePct: 41}}, want: ErrSlice},
		{name: "slices over memory", held: []api.NodeAlloc{{Node: "a", GPUs: []int{0}, GPUMemMB: 50}}, alloc: []api.NodeAlloc{{Node: "a", GPUs: []int{0}, GPUMemMB: 31}}, want: ErrSlice},
		{name: "one node twice counts together", alloc: []api.NodeAlloc{{Node: "b", CPUs: 3}, {Node: "b", CPUs: 2}}, want: ErrCPUs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := testLedger()
			l.Record(tt.held)
			before := dump(l)
			err := l.Check(tt.alloc)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Check = %v, want %v", err, tt.want)
			}
			if diff := cmp.Diff(before, dump(l), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("Check changed the ledger:\n%s", diff)
			}
		})
	}
}

// TestOversubscribedSlices: the limits scale what slices may commit.
func TestOversubscribedSlices(t *testing.T) {
	l := New(Limits{MemRatio: 1.5, ComputePct: 150})
	l.SetCapacity("a", Capacity{CPUs: 8, MemoryMB: 1000, GPUs: 1, GPUMemMB: 80})
	if err := l.Take([]api.NodeAlloc{{Node: "a", GPUs: []int{0}, GPUComputePct: 100, GPUMemMB: 80}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Take([]api.NodeAlloc{{Node: "a", GPUs: []int{0}, GPUComputePct: 50, GPUMemMB: 40}}); err != nil {
		t.Fatalf("within 1.5×: %v", err)
	}
	if err := l.Take([]api.NodeAlloc{{Node: "a", GPUs: []int{0}, GPUComputePct: 1, GPUMemMB: 1}}); !errors.Is(err, ErrSlice) {
		t.Fatalf("past 1.5×: %v", err)
	}
}

func TestApply(t *testing.T) {
	l := testLedger()
	starts := []sched.Start{
		{JobID: 1, Alloc: []api.NodeAlloc{{Node: "a", CPUs: 4, GPUs: []int{0, 1}}}},
		{JobID: 2, Alloc: []api.NodeAlloc{{Node: "a", CPUs: 2, GPUs: []int{1}}}}, // GPU 1 went to job 1
		{JobID: 3, Alloc: []api.NodeAlloc{{Node: "b", CPUs: 4}}},
		{JobID: 4, Alloc: []api.NodeAlloc{{Node: "b", CPUs: 1}}}, // b is full after job 3
		{JobID: 5, Alloc: []api.NodeAlloc{{Node: "a", CPUs: 1}}}, // not pending any more
	}
	applied, rejected := l.Apply(starts, func(id uint64) bool { return id != 5 })
	var got []uint64
	for _, a := range applied {
		got = append(got, a.JobID)
	}
	if !slices.Equal(got, []uint64{1, 3}) {
		t.Errorf("applied %v", got)
	}
	if len(rejected) != 3 || !errors.Is(rejected[0].Err, ErrGPU) || !errors.Is(rejected[1].Err, ErrCPUs) || !errors.Is(rejected[2].Err, ErrNotStartable) {
		t.Errorf("rejected %v", rejected)
	}
	if n := l.Node("a"); n.FreeCPUs() != 4 || !slices.Equal(n.FreeGPUs(nil), []int{2, 3}) {
		t.Errorf("node a: %d CPUs, GPUs %v free", n.FreeCPUs(), n.FreeGPUs(nil))
	}
}

// TestFill: the core's view of a node comes from the ledger.
func TestFill(t *testing.T) {
	l := testLedger()
	l.Record([]api.NodeAlloc{{Node: "a", CPUs: 2, MemoryMB: 100, GPUs: []int{1}}, {Node: "a", CPUs: 1, GPUs: []int{3}, GPUComputePct: 30, GPUMemMB: 10}})
	var info sched.NodeInfo
	l.Node("a").Fill(&info)
	want := sched.NodeInfo{FreeCPUs: 5, FreeMemMB: 900, FreeGPUs: []int{0, 2}, Shared: []sched.SharedGPU{{Index: 3, MemMB: 10, ComputePct: 30, Slices: 1}}}
	if diff := cmp.Diff(want, info); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if got := l.Node("a").Holders(); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("holders %v", got)
	}
	l.Release([]api.NodeAlloc{{Node: "a", CPUs: 2, MemoryMB: 100, GPUs: []int{1}}, {Node: "a", CPUs: 1, GPUs: []int{3}, GPUComputePct: 30, GPUMemMB: 10}})
	l.Node("a").Fill(&info)
	if !info.Idle || info.FreeCPUs != 8 || len(info.FreeGPUs) != 4 || len(info.Shared) != 0 {
		t.Fatalf("after release: %+v", info)
	}
}

// oracle is a naive model of the ledger: per node the holders of each
// GPU as a list of (whole, mem, pct), and the CPU and memory sums.
type oracle struct {
	cap  map[string]Capacity
	cpus map[string]int
	mem  map[string]int64
	gpu  map[string][][]oslice
	lim  Limits
}

type oslice struct {
	whole bool
	mem   int64
	pct   int
}

func (o *oracle) fits(alloc []api.NodeAlloc) bool {
	cpus, mem := map[string]int{}, map[string]int64{}
	type key struct {
		node string
		g    int
	}
	extra := map[key][]oslice{}
	for _, a := range alloc {
		c, ok := o.cap[a.Node]
		if !ok {
			return false
		}
		cpus[a.Node] += a.CPUs
		mem[a.Node] += a.MemoryMB
		if o.cpus[a.Node]+cpus[a.Node] > c.CPUs || o.mem[a.Node]+mem[a.Node] > c.MemoryMB {
			return false
		}
		seen := map[int]bool{}
		for _, g := range a.GPUs {
			if g < 0 || g >= c.GPUs || seen[g] {
				return false
			}
			seen[g] = true
			k := key{a.Node, g}
			holders := append(slices.Clone(o.gpu[a.Node][g]), extra[k]...)
			s := oslice{whole: !a.Sliced(), mem: a.GPUMemMB, pct: a.GPUComputePct}
			var m int64
			var p int
			for _, h := range holders {
				if h.whole || s.whole {
					return false
				}
				m, p = m+h.mem, p+h.pct
			}
			if !s.whole && (float64(m+s.mem) > float64(c.GPUMemMB)*o.lim.MemRatio || p+s.pct > o.lim.ComputePct) {
				return false
			}
			extra[k] = append(extra[k], s)
		}
	}
	return true
}

func (o *oracle) take(alloc []api.NodeAlloc) {
	for _, a := range alloc {
		o.cpus[a.Node] += a.CPUs
		o.mem[a.Node] += a.MemoryMB
		for _, g := range a.GPUs {
			o.gpu[a.Node][g] = append(o.gpu[a.Node][g], oslice{whole: !a.Sliced(), mem: a.GPUMemMB, pct: a.GPUComputePct})
		}
	}
}

func (o *oracle) release(alloc []api.NodeAlloc) {
	for _, a := range alloc {
		o.cpus[a.Node] -= a.CPUs
		o.mem[a.Node] -= a.MemoryMB
		for _, g := range a.GPUs {
			s := oslice{whole: !a.Sliced(), mem: a.GPUMemMB, pct: a.GPUComputePct}
			h := o.gpu[a.Node][g]
			if k := slices.Index(h, s); k >= 0 {
				o.gpu[a.Node][g] = slices.Delete(h, k, k+1)
			}
		}
	}
}

// view is what a node looks like from outside, for comparing.
type view struct {
	FreeCPUs int
	FreeMem  int64
	Free     []int
	Shared   []sched.SharedGPU
}

func (o *oracle) view(name string) view {
	c := o.cap[name]
	v := view{FreeCPUs: c.CPUs - o.cpus[name], FreeMem: c.MemoryMB - o.mem[name]}
	for g, h := range o.gpu[name] {
		switch {
		case len(h) == 0:
			v.Free = append(v.Free, g)
		case !h[0].whole:
			sh := sched.SharedGPU{Index: g, Slices: len(h)}
			for _, s := range h {
				sh.MemMB += s.mem
				sh.ComputePct += s.pct
			}
			v.Shared = append(v.Shared, sh)
		}
	}
	return v
}

func dump(l *Ledger) map[string]view {
	out := map[string]view{}
	for i := range l.Len() {
		n := l.At(i)
		out[n.Name] = view{FreeCPUs: n.CPUs - n.UsedCPUs, FreeMem: n.MemoryMB - n.UsedMemMB, Free: n.FreeGPUs(nil), Shared: slices.Clone(n.Shared())}
	}
	return out
}

// TestLedgerProperty drives random plans of whole GPUs, slices, CPUs and
// memory, some impossible, through Apply and random releases, and
// checks every step against the naive oracle: the same starts applied,
// the same free resources after, and nothing ever given twice.
func TestLedgerProperty(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		lim := Limits{MemRatio: []float64{1, 1.2, 2}[rng.IntN(3)], ComputePct: []int{100, 120, 200}[rng.IntN(3)]}
		l := New(lim)
		o := &oracle{cap: map[string]Capacity{}, cpus: map[string]int{}, mem: map[string]int64{}, gpu: map[string][][]oslice{}, lim: lim}
		names := []string{"n0", "n1", "n2"}
		for _, n := range names {
			c := Capacity{CPUs: 4 + rng.IntN(8), MemoryMB: int64(100 + rng.IntN(400)), GPUs: rng.IntN(5), GPUMemMB: int64(10 + rng.IntN(70))}
			l.SetCapacity(n, c)
			o.cap[n] = c
			o.gpu[n] = make([][]oslice, c.GPUs)
		}
		var running [][]api.NodeAlloc
		for step := range 60 {
			if len(running) > 0 && rng.IntN(3) == 0 {
				k := rng.IntN(len(running))
				l.Release(running[k])
				o.release(running[k])
				running = slices.Delete(running, k, k+1)
			} else {
				var starts []sched.Start
				var want []uint64
				for id := range 1 + rng.IntN(4) {
					alloc := randomAlloc(rng, names)
					starts = append(starts, sched.Start{JobID: uint64(id), Alloc: alloc})
					if o.fits(alloc) {
						o.take(alloc)
						want = append(want, uint64(id))
					}
				}
				applied, _ := l.Apply(starts, nil)
				var got []uint64
				for _, a := range applied {
					got = append(got, a.JobID)
					running = append(running, a.Alloc)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d step %d: applied %v, the oracle %v; plan %+v", seed, step, got, want, starts)
				}
			}
			for _, n := range names {
				if diff := cmp.Diff(o.view(n), dump(l)[n], cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("seed %d step %d node %s (-oracle +ledger):\n%s", seed, step, n, diff)
				}
				if ln := l.Node(n); ln.UsedCPUs > ln.CPUs || ln.UsedMemMB > ln.MemoryMB {
					t.Fatalf("seed %d step %d node %s over capacity: %+v", seed, step, n, ln)
				}
			}
		}
	}
}

func randomAlloc(rng *rand.Rand, names []string) []api.NodeAlloc {
	var out []api.NodeAlloc
	for range 1 + rng.IntN(2) {
		a := api.NodeAlloc{Node: names[rng.IntN(len(names))], CPUs: rng.IntN(5), MemoryMB: int64(rng.IntN(200))}
		if rng.IntN(8) == 0 {
			a.Node = "nowhere"
		}
		for range rng.IntN(3) {
			a.GPUs = append(a.GPUs, rng.IntN(5)-rng.IntN(2))
		}
		if len(a.GPUs) > 0 && rng.IntN(2) == 0 {
			a.GPUComputePct = 1 + rng.IntN(80)
			a.GPUMemMB = int64(rng.IntN(50))
		}
		out = append(out, a)
	}
	return out
}
