// Package gcfloor keeps a daemon's garbage collector from running on a
// small heap after every few megabytes of garbage. A busy daemon whose
// live heap is a megabyte or two (tided; the controller holding few
// jobs) otherwise collects dozens of times per thousand short jobs,
// which costs more CPU than the memory it saves is worth. After each
// collection the target is set so that the next one comes when the heap
// reaches max(live × (1 + percent/100), floor): a large heap keeps the
// daemon's own percentage.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
)

var once sync.Once

// Start sets the GC percentage and installs the per-collection
// adjustment towards floor bytes (once per process; later calls do
// nothing).
func Start(percent int, floor uint64) {
	once.Do(func() {
		debug.SetGCPercent(percent)
		sample := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
		var rearm func()
		rearm = func() {
			// A finalizer runs once per collection that frees its object;
			// a fresh object each time makes it a per-cycle hook.
			s := new([16]byte)
			runtime.SetFinalizer(s, func(*[16]byte) {
				rtmetrics.Read(sample)
				if sample[0].Value.Kind() == rtmetrics.KindUint64 {
					debug.SetGCPercent(Percent(sample[0].Value.Uint64(), percent, floor))
				}
				rearm()
			})
		}
		rearm()
	})
}

// Percent is the GOGC that puts the next collection at
// max(live × (1 + percent/100), floor).
//
// The runtime never collects below a heap minimum either, 4 MiB scaled
// by GOGC/100: for a live heap under 4 MiB the percentage that stretches
// it to the floor (thousands) would put that minimum, and the next
// collection, far above the floor (a 0.4 MiB heap after start-up went
// uncollected to 200 MiB). There the percentage is the one whose minimum
// is the floor.
func Percent(live uint64, percent int, floor uint64) int {
	if live == 0 || live*uint64(100+percent)/100 >= floor {
		return percent
	}
	p := min((floor-live)*100/live, floor*100/runtimeHeapMinimum)
	return max(int(p), percent)
}

// runtimeHeapMinimum is the Go runtime's heap minimum at GOGC=100
// (defaultHeapMinimum in runtime/mgcpacer.go).
const runtimeHeapMinimum = 4 << 20
