package sched_test

import (
	"fmt"
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
	"github.com/tide-hpc/tide/gres"
)

// renderPlan prints a plan the way an operator reads it, one line per
// job, so that golden files show every reason and detail text.
func renderPlan(p sched.Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "now %s\n", p.Now.Format(time.RFC3339))
	for _, s := range p.Starts {
		fmt.Fprintf(&b, "start %d limit=%s why=%q\n", s.JobID, api.FormatTimeLimit(s.TimeLimit), s.Why)
		for _, a := range s.Alloc {
			fmt.Fprintf(&b, "  %s cpus=%d mem=%d gpus=%s tasks=%d\n", a.Node, a.CPUs, a.MemoryMB, gres.FormatIndices(a.GPUs), a.Tasks)
		}
	}
	for _, d := range p.Pending {
		fmt.Fprintf(&b, "pending %d %s", d.JobID, d.Reason)
		if d.Detail != "" {
			fmt.Fprintf(&b, " (%s)", d.Detail)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func golden(t testing.TB, name, got string) {
	t.Helper()
	goldenpkg.Check(t, name, got)
}

func TestGoldenPlans(t *testing.T) {
	tests := []struct {
		name string
		snap *sched.Snapshot
		cfg  sched.Config
	}{
		{
			// A small mixed cluster with one job per interesting case, in
			// the order the scheduler takes them.
			name: "mixed",
			cfg:  sched.Config{DefMemPerCPUMB: 1000},
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("gpu01").GPUs(8).UsedGPUs(0, 1, 2, 3, 4, 5).UsedCPUs(12).Obj(),
				st.MakeNode("gpu02").GPUs(8).UsedGPUs(0, 1).Obj(),
				st.MakeNode("gpu03").GPUs(8).Obj(),
				st.MakeNode("gpu04").GPUs(8).Drained().Obj(),
				st.MakeNode("h01").CPUs(128).Mem(1024000).GPUs(8).Model("h100").Obj(),
				st.MakeNode("cpu01").CPUs(32).Obj(),
			).Partitions(
				st.MakePartition("gpu", "gpu01", "gpu02", "gpu03", "gpu04", "h01").DefaultTime(3600).MaxTime(86400).Obj(),
				st.MakePartition("cpu", "cpu01").Obj(),
				st.MakePartition("maint", "cpu01").Down().Obj(),
			).Jobs(
				st.MakeJob().ID(1).Priority(100).GPUs(2).Obj(),
				st.MakeJob().ID(2).Priority(90).Nodes(2).GPUsPerNode(4).TasksPerNode(4).CPUsPerTask(2).Obj(),
				st.MakeJob().ID(3).Priority(80).GPUs(4).GPUType("H100").MemPerGPU(100000).Obj(),
				st.MakeJob().ID(4).Priority(70).Partition("cpu").Tasks(8).Obj(),
				st.MakeJob().ID(5).Priority(60).Partition("maint").Obj(),
				st.MakeJob().ID(6).Priority(50).Hold(api.HoldUser).Obj(),
				st.MakeJob().ID(7).Priority(50).Begin(now.Add(time.Hour)).Obj(),
				st.MakeJob().ID(8).Priority(40).TimeLimit(2*86400).Obj(),
				st.MakeJob().ID(9).Priority(30).GPUsPerNode(16).Obj(),
				st.MakeJob().ID(10).Priority(20).NodeList("gpu04").Obj(),
				st.MakeJob().ID(11).Priority(15).Exclusive().GPUType("a100").Obj(),
				st.MakeJob().ID(12).Priority(10).GPUs(1).Obj(),
				st.MakeJob().ID(13).Priority(5).Partition("cpu").Tasks(32).Obj(),
			).Obj(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			golden(t, tt.name, renderPlan(sched.Schedule(tt.snap, now, tt.cfg)))
		})
	}
}
