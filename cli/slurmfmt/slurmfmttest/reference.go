package slurmfmttest

import (
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// RefNow is the instant the reference Slurm 22.05 samples were taken
// (/work/shared/slurm-reference/samples: squeue.txt, sinfo.txt, …).
var RefNow = time.Unix(1795980677, 0).UTC()

// Reference rebuilds the cluster that printed the Slurm samples: nodes
// n[1-4] with 8 CPUs, 4000 MB and 8 untyped GPUs, partition batch, and
// the jobs of the sample run except the array job (Tide has no arrays
// yet). With afterCancel it is the moment of squeue-t-all-after-cancel:
// one second later, job 4 completing and the finished jobs 1-3 listed.
func Reference(afterCancel bool) *clitest.FakeAPI {
	now := RefNow
	if afterCancel {
		now = now.Add(time.Second)
	}
	ts := func(u int64) time.Time { return time.Unix(u, 0).UTC() }
	mk := func(id uint64, name string, st api.JobState, prio uint32) api.Job {
		return api.Job{
			ID: id,
			JobSpec: api.JobSpec{Name: name, Partition: "batch", WorkDir: "/home/alice/exp",
				TimeLimit: api.Infinite, MemPerNodeMB: 4000},
			User: "root", Group: "root", State: st, Reason: api.ReasonNone, EffPriority: prio, Cluster: "bench",
			SubmitTime: ts(1795980665), EligibleTime: ts(1795980665),
		}
	}
	one := func(node string, gpus ...int) []api.NodeAlloc {
		return []api.NodeAlloc{{Node: node, CPUs: 1, GPUs: gpus, Tasks: 1}}
	}
	running := func(j api.Job) api.Job {
		j.StartTime = ts(1795980667)
		return j
	}
	var jobs []api.Job
	if afterCancel {
		for _, id := range []uint64{1, 2} {
			j := mk(id, "wrap", api.StateCompleted, uint32(4294901760-id))
			j.StartTime, j.EndTime, j.Alloc = ts(1795980664), ts(1795980665), one("n1")
			jobs = append(jobs, j)
		}
		j := mk(3, "wrap", api.StateFailed, 4294901757)
		j.GPUsPerNode = 9
		j.Reason = api.ReasonBadConstraints
		j.StartTime, j.EndTime = ts(1795980662), ts(1795980662)
		jobs = append(jobs, j)
	}
	j4 := running(mk(4, "sleeper", api.StateRunning, 4294901756))
	j4.Alloc = one("n1")
	if afterCancel {
		j4.State, j4.EndTime = api.StateCompleting, ts(1795980677)
	}
	j5 := running(mk(5, "gpu2", api.StateRunning, 4294901755))
	j5.GPUs, j5.Alloc = 2, one("n1", 0, 1)
	j6 := running(mk(6, "multi", api.StateRunning, 4294901754))
	j6.Nodes, j6.TasksPerNode, j6.GPUsPerNode = 2, 2, 4
	j6.Alloc = []api.NodeAlloc{
		{Node: "n1", CPUs: 2, GPUs: []int{2, 3, 4, 5}, Tasks: 2},
		{Node: "n2", CPUs: 2, GPUs: []int{0, 1, 2, 3}, Tasks: 2},
	}
	j8 := mk(8, "held", api.StatePending, 0)
	j8.Hold, j8.HoldKind, j8.Reason = true, api.HoldUser, api.ReasonJobHeldUser
	j9 := mk(9, "later", api.StatePending, 4294901752)
	j9.BeginTime, j9.Reason = ts(1795984265), api.ReasonBeginTime
	j10 := mk(10, "dep", api.StatePending, 4294901751)
	j10.Dependency, j10.Reason = "afterok:4(unfulfilled)", api.ReasonDependency
	j11 := mk(11, "excl4", api.StatePending, 4294901750)
	j11.Nodes, j11.Exclusive, j11.Reason = 4, true, api.ReasonResources
	j12 := mk(12, "envdump", api.StatePending, 4294901749)
	j12.Reason = api.ReasonPriority
	jobs = append(jobs, j4, j5, j6, j8, j9, j10, j11, j12)

	var nodes []api.Node
	for i, alloc := range []int{7, 2, 0, 0} {
		name := "n" + string(rune('1'+i))
		devs := make([]gres.Device, 8)
		for k := range devs {
			devs[k] = gres.Device{Index: k, Health: gres.Healthy}
		}
		n := api.Node{Name: name, Addr: "127.0.0.1", Hostname: "localhost", State: api.NodeIdle,
			Responding: true, CPUs: 8, MemoryMB: 4000, GPUs: devs, Partitions: []string{"batch"},
			AllocCPUs: alloc}
		if alloc > 0 {
			n.State = api.NodeMixed
		}
		nodes = append(nodes, n)
	}
	return &clitest.FakeAPI{
		Now:      now,
		JobRecs:  jobs,
		NodeRecs: nodes,
		Partitions: []api.Partition{{Name: "batch", NodesExpr: "n[1-4]", Nodes: []string{"n1", "n2", "n3", "n4"},
			Default: true, MaxTime: api.Infinite, DefaultTime: api.Infinite, State: "UP"}},
	}
}
