package noded

import (
	"fmt"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// BenchmarkDrain measures submit-to-finish throughput of one node: a
// batch of trivial jobs is launched in one sync answer and the benchmark
// waits for every finished report (then acks them).
func BenchmarkDrain(b *testing.B) {
	for _, batch := range []int{1, 50} {
		b.Run(fmt.Sprintf("jobs=%d", batch), func(b *testing.B) {
			n := newTestNode(b, b.TempDir())
			n.start(b)
			wd := b.TempDir()
			next := uint64(1)
			run := func() {
				var refs []api.JobRef
				var specs []api.LaunchSpec
				for range batch {
					s := n.spec(b, next, "#!/bin/sh\nexit 0\n", wd)
					s.Stdout = "/dev/null"
					specs = append(specs, s)
					refs = append(refs, s.JobRef)
					next++
				}
				n.launch(specs...)
				for _, r := range refs {
					if rep := n.fake.waitReport(b, r, api.NodeJobFinished); rep.Exit != (api.ExitStatus{}) {
						b.Fatalf("job %d: %+v", r.JobID, rep)
					}
				}
				n.fake.queue(api.NodeSyncResponse{Ack: refs})
			}
			run() // warm up and check
			b.ResetTimer()
			for b.Loop() {
				run()
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
