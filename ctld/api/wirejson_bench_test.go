package api

import (
	"testing"

	"github.com/tide-hpc/tide/internal/jsonfast"
)

// The codecs' other hot documents: the answer every sbatch reads and the
// usage report every step's end carries (on the node protocol and in
// the supervisor's status.json).

func BenchmarkSubmitResponseDecodeJSON(b *testing.B) {
	data := []byte(`{"job_id":1234567}` + "\n")
	b.ReportAllocs()
	for b.Loop() {
		var r SubmitResponse
		if err := r.DecodeJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}

// typicalUsage is an 8-rank step's final report from one node.
func typicalUsage() *NodeUsage {
	u := &NodeUsage{JobID: 19278, StepID: 0, Node: "gpu07", UserID: 1000, Final: true, GPU: true, Samples: 12,
		Cgroup: &CgroupTotals{UserUsec: 81_234_567, SystemUsec: 2_345_678, ReadBytes: 1 << 30, WriteBytes: 1 << 28, HasIO: true}}
	for i := range 8 {
		u.Tasks = append(u.Tasks, TaskUsage{Task: i, UserUsec: 10_000_000 + uint64(i), SystemUsec: 290_000,
			RSS: 3 << 30, VMSize: 9 << 30, Pages: 12, ReadBytes: 1 << 27, WriteBytes: 1 << 25, GPUMem: 40 << 30, GPUUtil: 97})
	}
	return u
}

func BenchmarkNodeUsageJSON(b *testing.B) {
	u := typicalUsage()
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = u.AppendJSON(nil)
		}
	})
	data := u.AppendJSON(nil)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out NodeUsage
			if !DecodeNodeUsageJSON(jsonfast.New(data), &out) {
				b.Fatal("refused")
			}
		}
	})
}
