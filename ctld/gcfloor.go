package ctld

import (
	"runtime/debug"
	rtmetrics "runtime/metrics"

	"github.com/tide-hpc/tide/internal/gcfloor"
)

// The controller runs with a low GC target (gcPercent) so that its
// memory stays near its live set when it holds many jobs. With few jobs
// the same target makes the collector run after every couple of
// megabytes of garbage, and a busy controller (a thousand job
// submissions, launches and completions a second) then spends a tenth of
// its CPU collecting a heap of a few megabytes. So internal/gcfloor
// raises the target for small and medium heaps: the next collection
// comes when the heap reaches max(live × (1 + gcPercent/100),
// gcFloorBytes, live + min(live, gcHeadroomBytes)).
//
// The floor was 12 MiB. A short job costs the controller about 80 KB of
// allocation, and the finished jobs it keeps for min_job_age (3.4 KB
// each) grow the live set towards the floor: after a few thousand jobs
// a collection came every 2 MiB, 15 of them per thousand jobs, a tenth
// of the controller's CPU again. At 32 MiB they are a handful.
//
// The headroom: at 2,000 nodes and a backlog of a few tens of thousands
// of jobs (a live heap of 100–200 MB) a storm of submissions collected
// every 40–80 MB, twice a second, and each collection marks the whole
// live set: 13–14 % of the controller's CPU. Up to gcHeadroomBytes such
// a heap now gathers as much garbage as it holds (Go's default), which
// costs at most that much memory, and nothing once the live heap passes
// 320 MiB (100,000 pending jobs: some 450 MB, where gcPercent decides
// and the RSS target is).
var gcTarget = gcfloor.Target{Percent: gcPercent, Floor: gcFloorBytes, Headroom: gcHeadroomBytes}

const (
	gcPercent       = 40
	gcFloorBytes    = 32 << 20
	gcHeadroomBytes = 128 << 20
)

// idleReturnBytes is how much free heap the runtime may keep before the
// once-a-second housekeeping hands it back to the OS. After a burst (a
// storm of submissions, a large squeue) the heap shrinks back to the
// live set, but the runtime's background scavenger returns the pages
// over many seconds; an operator reading the controller's RSS meanwhile
// sees the burst, not the state it holds.
//
// Handing pages back forces a collection, which at a large live set is
// the costliest thing the controller does: at 100,000 pending jobs (a
// 450 MB live heap) every ordinary collection left more than
// idleReturnBytes free and was followed by a forced one, doubling the
// collector's share of the CPU and stretching the scheduling passes it
// overlapped. So the free heap must also exceed half of the live heap:
// more than the ordinary garbage of a gcPercent cycle (40 % of it), as
// after a real burst.
const idleReturnBytes = 16 << 20

// heapSamples are the free heap not returned to the OS and the live
// heap of the last collection.
var heapSamples = []rtmetrics.Sample{{Name: "/memory/classes/heap/free:bytes"}, {Name: "/gc/heap/live:bytes"}}

// heapFreeBytes is the free heap memory the runtime holds and has not
// returned to the OS, and the live heap of the last collection.
func heapFreeBytes() (free, live uint64) {
	rtmetrics.Read(heapSamples)
	read := func(s rtmetrics.Sample) uint64 {
		if s.Value.Kind() != rtmetrics.KindUint64 {
			return 0
		}
		return s.Value.Uint64()
	}
	return read(heapSamples[0]), read(heapSamples[1])
}

// returnIdleMemory returns free heap pages to the OS when more than
// idleReturnBytes and more than half the live heap are held (a forced
// collection: at most once a second, and only after the heap shrank),
// and reports whether it did.
func returnIdleMemory() bool {
	if free, live := heapFreeBytes(); free <= max(idleReturnBytes, live/2) {
		return false
	}
	debug.FreeOSMemory()
	return true
}
