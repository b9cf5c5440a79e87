// Package slurmfmttest holds the canned cluster that the golden tests of
// squeue, sinfo and scancel print: four nodes gpu[01-04] with eight A100s
// each (gpu04 drained, one GPU of gpu03 unhealthy), two partitions, and a
// job in every state, seen at a fixed instant.
package slurmfmttest

import (
	"fmt"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// Now is the controller's clock in the canned cluster.
var Now = time.Date(2026, 11, 29, 19, 31, 17, 0, time.UTC)

// at returns Now's day at h:m:s.
func at(h, m, s int) time.Time {
	return time.Date(2026, 11, 29, h, m, s, 0, time.UTC)
}

func gpus(node string, unhealthy ...int) []gres.Device {
	d, err := gres.Fake(node, gres.FakeConfig{Count: 8, Model: "a100", MemoryMB: 81920})
	if err != nil {
		panic(err)
	}
	for _, i := range unhealthy {
		d[i].Health = gres.Unhealthy
	}
	return d
}

// Nodes returns the four nodes.
func Nodes() []api.Node {
	base := func(name string) api.Node {
		return api.Node{
			Name: name, Addr: "10.0.0." + name[len(name)-1:], Hostname: name,
			State: api.NodeIdle, Responding: true,
			CPUs: 64, MemoryMB: 512000, GPUs: gpus(name),
			Features: []string{"a100", "nvlink"}, Partitions: []string{"gpu"},
			Version: "0.1.0", OS: "Linux", Arch: "x86_64",
			BootTime: at(8, 0, 0), Registered: at(8, 0, 5), LastSeen: at(19, 31, 15),
			CPULoad: 1.5, FreeMemMB: 400000,
		}
	}
	n1 := base("gpu01")
	n1.State, n1.AllocCPUs, n1.AllocMemMB, n1.AllocGPUs = api.NodeMixed, 36, 136000, []int{0, 1, 2, 3}
	n1.Partitions = []string{"gpu", "debug"}
	n1.CPULoad = 35.25
	n2 := base("gpu02")
	n2.State, n2.AllocCPUs, n2.AllocMemMB, n2.AllocGPUs = api.NodeMixed, 34, 132000, []int{0, 1, 2, 3}
	n2.Partitions = []string{"gpu", "debug"}
	n3 := base("gpu03")
	n3.State, n3.AllocCPUs, n3.AllocMemMB, n3.AllocGPUs = api.NodeMixed, 8, 64000, []int{0, 1}
	n3.GPUs = gpus("gpu03", 7)
	n4 := base("gpu04")
	n4.Drain = true
	n4.Reason, n4.ReasonUser, n4.ReasonTime = "xid 79 on gpu 3", "root", at(18, 0, 0)
	return []api.Node{n1, n2, n3, n4}
}

// Partitions returns "gpu" (default, all nodes, no time limit) and
// "debug" (two nodes, one hour, one node per job).
func Partitions() []api.Partition {
	return []api.Partition{
		{Name: "gpu", NodesExpr: "gpu[01-04]", Nodes: []string{"gpu01", "gpu02", "gpu03", "gpu04"},
			Default: true, DefaultTime: api.Infinite, MaxTime: api.Infinite, State: "UP"},
		{Name: "debug", NodesExpr: "gpu[01-02]", Nodes: []string{"gpu01", "gpu02"},
			DefaultTime: 1800, MaxTime: 3600, MaxNodes: 1, State: "UP"},
	}
}

type user struct {
	name string
	uid  uint32
}

var (
	alice = user{"alice", 1000}
	bob   = user{"bob", 1001}
	carol = user{"carol", 1002}
)

func job(id uint64, name string, u user, part string, st api.JobState) api.Job {
	return api.Job{
		ID: id,
		JobSpec: api.JobSpec{
			Name: name, Partition: part, WorkDir: "/home/" + u.name + "/exp",
			SubmitDir: "/home/" + u.name + "/exp", SubmitHost: "login1", TimeLimit: 3600,
		},
		UserID: u.uid, GroupID: 100, User: u.name, Group: "users",
		State: st, Reason: api.ReasonNone, Cluster: "tide",
		SubmitTime: at(17, 0, 0).Add(time.Duration(id-100) * time.Minute),
	}
}

func alloc(node string, cpus int, memMB int64, gpus ...int) api.NodeAlloc {
	return api.NodeAlloc{Node: node, CPUs: cpus, MemoryMB: memMB, GPUs: gpus, Tasks: 1}
}

// Jobs returns fifteen jobs: six finished (COMPLETED, FAILED, CANCELLED,
// TIMEOUT, NODE_FAIL, OUT_OF_MEMORY), one COMPLETING, three RUNNING (a
// two-node GPU job, a one-GPU-pair job, a CPU job) and five PENDING for
// Resources, JobHeldUser, BeginTime, Dependency and Priority.
func Jobs() []api.Job {
	var js []api.Job
	add := func(j api.Job, edit func(*api.Job)) {
		j.EligibleTime = j.SubmitTime
		edit(&j)
		js = append(js, j)
	}
	add(job(101, "prep", alice, "gpu", api.StateCompleted), func(j *api.Job) {
		j.EffPriority = 1000
		j.StartTime, j.EndTime = at(19, 1, 0), at(19, 5, 30)
		j.Alloc = []api.NodeAlloc{alloc("gpu01", 4, 16000)}
	})
	add(job(102, "bad", bob, "gpu", api.StateFailed), func(j *api.Job) {
		j.EffPriority = 990
		j.Reason = api.ReasonNonZeroExit
		j.StartTime, j.EndTime = at(19, 2, 0), at(19, 2, 5)
		j.Alloc = []api.NodeAlloc{alloc("gpu02", 1, 4000)}
		j.Exit = api.ExitStatus{Code: 1}
	})
	add(job(103, "cx", alice, "gpu", api.StateCancelled), func(j *api.Job) {
		j.EffPriority = 980
		j.EndTime = at(19, 10, 0)
	})
	add(job(104, "long", bob, "debug", api.StateTimeout), func(j *api.Job) {
		j.EffPriority = 970
		j.Reason = api.ReasonTimeLimit
		j.StartTime, j.EndTime = at(18, 0, 0), at(19, 0, 0)
		j.Alloc = []api.NodeAlloc{alloc("gpu01", 1, 4000)}
		j.Exit = api.ExitStatus{Signal: 15}
		j.TimedOut = true
	})
	add(job(105, "nf", carol, "gpu", api.StateNodeFail), func(j *api.Job) {
		j.EffPriority = 960
		j.StartTime, j.EndTime = at(18, 30, 0), at(19, 15, 0)
		j.Alloc = []api.NodeAlloc{alloc("gpu03", 2, 8000)}
	})
	add(job(106, "oom", carol, "gpu", api.StateOOM), func(j *api.Job) {
		j.EffPriority = 950
		j.Reason = "OutOfMemory"
		j.StartTime, j.EndTime = at(19, 3, 0), at(19, 4, 30)
		j.Alloc = []api.NodeAlloc{alloc("gpu02", 1, 4000)}
		j.Exit = api.ExitStatus{Signal: 9}
	})
	add(job(107, "wrapup", alice, "gpu", api.StateCompleting), func(j *api.Job) {
		j.EffPriority = 1000
		j.StartTime, j.EndTime = at(19, 20, 0), at(19, 31, 10)
		j.Alloc = []api.NodeAlloc{alloc("gpu02", 2, 4000)}
	})
	add(job(108, "train", alice, "gpu", api.StateRunning), func(j *api.Job) {
		j.Account, j.QOS, j.Comment = "ml", "normal", "llm pretraining"
		j.Nodes, j.TasksPerNode, j.CPUsPerTask, j.GPUsPerNode = 2, 4, 8, 4
		j.MemPerNodeMB, j.TimeLimit = 128000, 86400
		j.Stdout = "train-%j.out"
		j.EffPriority = 6000
		j.StartTime = at(18, 31, 17)
		j.LastSchedEval = j.StartTime
		a1, a2 := alloc("gpu01", 32, 128000, 0, 1, 2, 3), alloc("gpu02", 32, 128000, 0, 1, 2, 3)
		a1.Tasks, a2.Tasks = 4, 4
		j.Alloc = []api.NodeAlloc{a1, a2}
	})
	add(job(109, "infer", bob, "gpu", api.StateRunning), func(j *api.Job) {
		j.Account = "ml"
		j.GPUs, j.GPUType, j.CPUsPerTask, j.TimeLimit = 2, "a100", 8, 7200
		j.EffPriority = 5500
		j.StartTime = at(19, 26, 0)
		j.Alloc = []api.NodeAlloc{alloc("gpu03", 8, 64000, 0, 1)}
	})
	add(job(110, "preprocessing_step", carol, "debug", api.StateRunning), func(j *api.Job) {
		j.Tasks, j.TimeLimit = 4, 1800
		j.EffPriority = 2000
		j.StartTime = at(19, 30, 0)
		a := alloc("gpu01", 4, 8000)
		a.Tasks = 4
		j.Alloc = []api.NodeAlloc{a}
	})
	add(job(111, "big", alice, "gpu", api.StatePending), func(j *api.Job) {
		j.Account = "ml"
		j.Nodes, j.GPUsPerNode, j.Exclusive, j.TimeLimit = 4, 8, true, 43200
		j.MemPerNodeMB = 512000
		j.EffPriority = 5000
		j.Reason = api.ReasonResources
		j.ReasonDetail = "0/4 nodes available: 3 InsufficientGPU, 1 NodeDrained"
		j.LastSchedEval = at(19, 31, 0)
	})
	add(job(112, "held", bob, "gpu", api.StatePending), func(j *api.Job) {
		j.Hold, j.HoldKind, j.TimeLimit = true, api.HoldUser, api.Infinite
		j.Reason = api.ReasonJobHeldUser
		j.EligibleTime = time.Time{}
	})
	add(job(113, "later", carol, "gpu", api.StatePending), func(j *api.Job) {
		j.BeginTime, j.TimeLimit = at(20, 31, 17), 600
		j.EffPriority = 4000
		j.Reason = api.ReasonBeginTime
		j.EligibleTime = j.BeginTime
	})
	add(job(114, "dep", alice, "gpu", api.StatePending), func(j *api.Job) {
		j.Dependency = "afterok:108"
		j.EffPriority = 4500
		j.Reason = api.ReasonDependency
		j.EligibleTime = time.Time{}
	})
	add(job(115, "prio", bob, "debug", api.StatePending), func(j *api.Job) {
		j.Tasks, j.GPUsPerTask, j.MemPerCPUMB, j.TimeLimit = 2, 1, 2048, 1800
		j.NodeList = []string{"gpu01"}
		j.EffPriority = 3000
		j.Reason = api.ReasonPriority
	})
	return js
}

// Cluster returns a fake controller serving the canned cluster.
func Cluster() *clitest.FakeAPI {
	return &clitest.FakeAPI{
		Now:        Now,
		JobRecs:    Jobs(),
		NodeRecs:   Nodes(),
		Partitions: Partitions(),
	}
}

// PendingJobs returns n held jobs of assorted users, names and
// priorities, for benchmarks of squeue with a long queue.
func PendingJobs(n int) []api.Job {
	users := []user{alice, bob, carol}
	js := make([]api.Job, n)
	for i := range js {
		u := users[i%len(users)]
		j := job(uint64(1000+i), fmt.Sprintf("wrap%d", i%97), u, "gpu", api.StatePending)
		j.SubmitTime = Now.Add(-time.Duration(n-i) * time.Second)
		j.Hold, j.HoldKind = true, api.HoldUser
		j.Reason = api.ReasonJobHeldUser
		j.EffPriority = uint32(100000 - i%5000)
		js[i] = j
	}
	return js
}
