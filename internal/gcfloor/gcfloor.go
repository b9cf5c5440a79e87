// Package gcfloor keeps a daemon's garbage collector from running on a
// small heap after every few megabytes of garbage. A busy daemon whose
// live heap is a megabyte or two (tided; the controller holding few
// jobs) otherwise collects dozens of times per thousand short jobs,
// which costs more CPU than the memory it saves is worth. After each
// collection the target is set so that the next one comes when the heap
// reaches max(live × (1 + percent/100), floor, live + min(live,
// headroom)): a large heap keeps the daemon's own percentage.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
)

// Target says when the next collection comes: when the heap reaches
// max(live × (1 + Percent/100), Floor, live + min(live, Headroom))
// bytes.
type Target struct {
	// Percent is the daemon's GOGC for a large heap.
	Percent int
	// Floor is the heap size below which it never collects.
	Floor uint64
	// Headroom bounds the garbage a medium heap may gather between
	// collections as much as it holds live (Go's default, GOGC 100): a
	// low Percent makes such a heap collect too often for the memory it
	// saves. 0: none.
	Headroom uint64
}

var once sync.Once

// Start sets the GC percentage and installs the per-collection
// adjustment towards t (once per process; later calls do nothing).
func Start(t Target) {
	once.Do(func() {
		debug.SetGCPercent(t.Percent)
		sample := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
		var rearm func()
		rearm = func() {
			// A finalizer runs once per collection that frees its object;
			// a fresh object each time makes it a per-cycle hook.
			s := new([16]byte)
			runtime.SetFinalizer(s, func(*[16]byte) {
				rtmetrics.Read(sample)
				if sample[0].Value.Kind() == rtmetrics.KindUint64 {
					debug.SetGCPercent(t.GOGC(sample[0].Value.Uint64()))
				}
				rearm()
			})
		}
		rearm()
	})
}

// GOGC is the percentage that puts the next collection after a live
// heap of live bytes where t says.
//
// The runtime never collects below a heap minimum either, 4 MiB scaled
// by GOGC/100: for a live heap under 4 MiB the percentage that stretches
// it to the floor (thousands) would put that minimum, and the next
// collection, far above the floor (a 0.4 MiB heap after start-up went
// uncollected to 200 MiB). There the percentage is the one whose minimum
// is the goal.
func (t Target) GOGC(live uint64) int {
	if live == 0 {
		return t.Percent
	}
	goal := max(live*uint64(100+t.Percent)/100, t.Floor, live+min(live, t.Headroom))
	if goal <= live*uint64(100+t.Percent)/100 {
		return t.Percent
	}
	p := min((goal-live)*100/live, goal*100/runtimeHeapMinimum)
	return max(int(p), t.Percent)
}

// runtimeHeapMinimum is the Go runtime's heap minimum at GOGC=100
// (defaultHeapMinimum in runtime/mgcpacer.go).
const runtimeHeapMinimum = 4 << 20
