package scontroltest

import (
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// Now is the controller clock of the canned cluster (UTC).
var Now = time.Date(2026, 11, 29, 19, 31, 17, 0, time.UTC)

// at returns Now shifted by d.
func at(d time.Duration) time.Time { return Now.Add(d) }

func gpus(node string, n int) []gres.Device {
	devs, err := gres.Fake(node, gres.FakeConfig{Count: n, Model: "h100", MemoryMB: 81559})
	if err != nil {
		panic(err)
	}
	return devs
}

func node(name string, state api.NodeState, allocCPUs int, allocMem int64, allocGPUs []int) api.Node {
	return api.Node{
		Name: name, Addr: "10.0.0." + name[len(name)-1:] + ":6818", Hostname: name,
		State: state, Responding: true,
		CPUs: 64, MemoryMB: 512000, GPUs: gpus(name, 8),
		Features:   []string{"h100", "nvlink"},
		Partitions: []string{"gpu"},
		AllocCPUs:  allocCPUs, AllocMemMB: allocMem, AllocGPUs: allocGPUs,
		Version: "0.1.0", OS: "Linux 6.1.0-28-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)",
		Arch:     "x86_64",
		BootTime: at(-72 * time.Hour), Registered: at(-2 * time.Hour), LastSeen: at(-3 * time.Second),
		CPULoad: 3.5, FreeMemMB: 401234,
	}
}

// Nodes returns gpu[01-04]: gpu01-03 busy, gpu04 idle and drained.
func Nodes() []api.Node {
	n1 := node("gpu01", api.NodeMixed, 12, 96000, []int{0, 1, 2})
	n1.Partitions = []string{"gpu", "debug"}
	n2 := node("gpu02", api.NodeMixed, 16, 128000, []int{0, 1, 2, 3})
	n2.Partitions = []string{"gpu", "debug"}
	// gpu03: GPUs 0-2 whole, GPU 3 shared by three slices.
	n3 := node("gpu03", api.NodeMixed, 16, 128000, []int{0, 1, 2, 3, 3, 3})
	n3.SharedGPUs = []api.GPUShare{{Index: 3, Slices: 3, MemMB: 24 * 1024, ComputePct: 30}}
	n4 := node("gpu04", api.NodeIdle, 0, 0, nil)
	n4.Drain = true
	n4.Reason = "nvlink errors"
	n4.ReasonUser = "root"
	n4.ReasonTime = at(-30 * time.Minute)
	n4.CPULoad = 0.02
	return []api.Node{n1, n2, n3, n4}
}

// Partitions returns "gpu" (default, all nodes) and "debug" (gpu[01-02]).
func Partitions() []api.Partition {
	return []api.Partition{
		{Name: "gpu", NodesExpr: "gpu[01-04]", Nodes: []string{"gpu01", "gpu02", "gpu03", "gpu04"},
			Default: true, DefaultTime: 3600, MaxTime: 2 * 86400, State: "UP", Priority: 1},
		{Name: "debug", NodesExpr: "gpu[01-02]", Nodes: []string{"gpu01", "gpu02"},
			DefaultTime: 600, MaxTime: 1800, MaxNodes: 1, State: "UP", Priority: 2},
	}
}

func spec(name, account, partition string) api.JobSpec {
	return api.JobSpec{
		Name: name, Account: account, Partition: partition,
		WorkDir: "/home/alice/exp", SubmitDir: "/home/alice/exp", SubmitHost: "login1",
		TimeLimit: 4 * 3600,
	}
}

func alice(j api.Job) api.Job {
	j.UserID, j.GroupID, j.User, j.Group = 1000, 1000, "alice", "alice"
	return j
}

func bob(j api.Job) api.Job {
	j.UserID, j.GroupID, j.User, j.Group = 1001, 100, "bob", "users"
	j.WorkDir, j.SubmitDir = "/home/bob", "/home/bob"
	return j
}

// Live returns the jobs the controller still holds (squeue's view).
func Live() []api.Job {
	// 100: completing on gpu01, one GPU.
	s := spec("wrapup", "physics", "gpu")
	s.GPUs = 1
	s.CPUsPerTask = 4
	s.MemPerNodeMB = 32000
	j100 := bob(api.Job{ID: 100, JobSpec: s, State: api.StateCompleting, Reason: api.ReasonNone,
		EffPriority: 4294901700, SubmitTime: at(-50 * time.Minute), EligibleTime: at(-50 * time.Minute),
		StartTime: at(-45 * time.Minute), EndTime: at(-5 * time.Second), LastSchedEval: at(-45 * time.Minute),
		Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 4, MemoryMB: 32000, GPUs: []int{2}, Tasks: 1}}})

	// 101: running, two GPUs on gpu01, output patterns with %x and %N.
	s = spec("train", "ml", "gpu")
	s.GPUs = 2
	s.CPUsPerTask = 8
	s.MemPerNodeMB = 64000
	s.Stdout = "logs/%x-%j.out"
	s.Stderr = "logs/%x-%j-%N.err"
	s.Comment = "sweep 3/10"
	s.Constraint = "h100"
	j101 := alice(api.Job{ID: 101, JobSpec: s, State: api.StateRunning, Reason: api.ReasonNone,
		EffPriority: 4294901701, SubmitTime: at(-12 * time.Minute), EligibleTime: at(-12 * time.Minute),
		StartTime: at(-10 * time.Minute), LastSchedEval: at(-10 * time.Minute),
		Placement: "best fit on gpu01: 6/8 GPUs free left; gpu01: GPUs 0-1, link score 1800/1800, NUMA 0",
		Alloc:     []api.NodeAlloc{{Node: "gpu01", CPUs: 8, MemoryMB: 64000, GPUs: []int{0, 1}, Tasks: 1}}})

	// 102: running on two nodes, 4 GPUs per node, 2 tasks per node.
	s = spec("dist", "physics", "gpu")
	s.Nodes = 2
	s.TasksPerNode = 2
	s.CPUsPerTask = 8
	s.GPUsPerNode = 4
	s.MemPerNodeMB = 128000
	s.TimeLimit = api.Infinite
	s.Exclusive = true
	j102 := bob(api.Job{ID: 102, JobSpec: s, State: api.StateRunning, Reason: api.ReasonNone,
		EffPriority: 4294901702, SubmitTime: at(-2 * time.Hour), EligibleTime: at(-2 * time.Hour),
		StartTime: at(-90 * time.Minute), LastSchedEval: at(-90 * time.Minute),
		Placement: "exclusive on 2 nodes gpu[02-03] under leaf s1; link score 7200/7200 over 2 nodes; GPUs on 1 NUMA node per node",
		Alloc: []api.NodeAlloc{
			{Node: "gpu02", CPUs: 16, MemoryMB: 128000, GPUs: []int{0, 1, 2, 3}, Tasks: 2},
			{Node: "gpu03", CPUs: 16, MemoryMB: 128000, GPUs: []int{0, 1, 2, 3}, Tasks: 2},
		}})

	// 103: pending on resources, with the scheduler's diagnosis.
	s = spec("big", "ml", "gpu")
	s.Nodes = 2
	s.GPUsPerNode = 8
	s.CPUsPerTask = 16
	s.MemPerCPUMB = 4096
	s.NodeList = []string{"gpu01", "gpu02"}
	s.Exclude = []string{"gpu04"}
	j103 := alice(api.Job{ID: 103, JobSpec: s, State: api.StatePending, Reason: api.ReasonResources,
		ReasonDetail: "0/4 nodes available: 3 InsufficientGPU, 1 NodeDrained",
		EffPriority:  4294901703, SubmitTime: at(-5 * time.Minute), EligibleTime: at(-5 * time.Minute),
		LastSchedEval: at(-10 * time.Second)})

	// 104: held by its owner.
	s = spec("held", "ml", "gpu")
	s.Hold = true
	s.Stdout = "held-%j-%N.out"
	j104 := alice(api.Job{ID: 104, JobSpec: s, State: api.StatePending, Reason: api.ReasonJobHeldUser,
		HoldKind: api.HoldUser, EffPriority: 0, SubmitTime: at(-4 * time.Minute),
		LastSchedEval: at(-4 * time.Minute)})

	// 105: waiting for --begin; carol's job in the debug partition.
	s = spec("later", "", "debug")
	s.BeginTime = at(time.Hour)
	s.TimeLimit = 0
	s.Dependency = "afterok:101"
	s.MailUser = "carol@example.org"
	s.MailType = "END,FAIL"
	rq := false
	s.Requeue = &rq
	j105 := api.Job{ID: 105, JobSpec: s, UserID: 1002, GroupID: 1002, User: "carol", Group: "carol",
		State: api.StatePending, Reason: api.ReasonBeginTime, EffPriority: 4294901705,
		SubmitTime: at(-3 * time.Minute), EligibleTime: at(time.Hour), LastSchedEval: at(-3 * time.Minute)}
	j105.WorkDir, j105.SubmitDir = "/home/carol", "/home/carol"

	return []api.Job{j100, j101, j102, j103, j104, j105}
}

// Finished returns jobs only accounting still knows: one per final state,
// plus one that ended yesterday (outside sacct's default window).
func Finished() []api.Job {
	ended := func(id uint64, name string, st api.JobState, r api.ReasonCode, ex api.ExitStatus, start, end time.Duration) api.Job {
		s := spec(name, "ml", "gpu")
		s.CPUsPerTask = 2
		s.MemPerNodeMB = 16000
		j := alice(api.Job{ID: id, JobSpec: s, State: st, Reason: r, Exit: ex,
			EffPriority: 4294901000 + uint32(id), SubmitTime: at(start - time.Minute),
			EligibleTime: at(start - time.Minute), StartTime: at(start), EndTime: at(end),
			LastSchedEval: at(start), Cluster: "tide",
			Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 2, MemoryMB: 16000, Tasks: 1}}})
		return j
	}
	j80 := ended(80, "yesterday", api.StateCompleted, api.ReasonNone, api.ExitStatus{}, -26*time.Hour, -25*time.Hour)
	j90 := ended(90, "prep", api.StateCompleted, api.ReasonNone, api.ExitStatus{}, -90*time.Minute, -60*time.Minute)
	j91 := ended(91, "crash", api.StateFailed, api.ReasonNonZeroExit, api.ExitStatus{Code: 3}, -80*time.Minute, -79*time.Minute)
	j92 := ended(92, "slow", api.StateTimeout, api.ReasonTimeLimit, api.ExitStatus{Signal: 15}, -3*time.Hour, -1*time.Hour)
	j92.TimeLimit = 2 * 3600
	j92.TimedOut = true
	j92 = bob(j92)
	j92.Account = "physics"
	j93 := ended(93, "oops", api.StateCancelled, api.ReasonCancelled, api.ExitStatus{Signal: 15}, -40*time.Minute, -30*time.Minute)
	j93.CancelRequested = true
	canceller := uint32(1000)
	j93.CancelledBy = &canceller
	j94 := ended(94, "lost", api.StateNodeFail, api.ReasonNone, api.ExitStatus{Code: 1}, -70*time.Minute, -65*time.Minute)
	j94.Alloc = []api.NodeAlloc{
		{Node: "gpu03", CPUs: 2, MemoryMB: 16000, GPUs: []int{5}, Tasks: 1},
		{Node: "gpu04", CPUs: 2, MemoryMB: 16000, GPUs: []int{7}, Tasks: 1},
	}
	j94.Nodes = 2
	j94.GPUsPerNode = 1
	j95 := ended(95, "hungry_preprocessing", api.StateOOM, api.ReasonNone, api.ExitStatus{Code: 0, Signal: 9}, -20*time.Minute, -19*time.Minute)
	// 96 was cancelled while pending: it never started.
	j96 := ended(96, "never", api.StateCancelled, api.ReasonCancelled, api.ExitStatus{}, 0, -15*time.Minute)
	j96.SubmitTime = at(-16 * time.Minute)
	j96.EligibleTime = at(-16 * time.Minute)
	j96.StartTime = time.Time{}
	j96.Alloc = nil
	return []api.Job{j80, j90, j91, j92, j93, j94, j95, j96}
}

// Trail returns the event trails of jobs 101 and 103.
func Trail() map[uint64][]api.Event {
	return map[uint64][]api.Event{
		101: {
			{JobID: 101, Time: at(-12 * time.Minute), Kind: api.EventSubmit, State: api.StatePending, Actor: "alice", Message: "submitted from login1"},
			{JobID: 101, Time: at(-12 * time.Minute), Kind: api.EventPending, State: api.StatePending, Reason: string(api.ReasonResources), Message: "0/4 nodes available: 4 InsufficientGPU"},
			{JobID: 101, Time: at(-10 * time.Minute), Kind: api.EventStart, State: api.StateRunning, Message: "best fit on gpu01: 6/8 GPUs free left; gpu01: GPUs 0-1, link score 1800/1800, NUMA 0"},
			{JobID: 101, Time: at(-10 * time.Minute), Kind: api.EventLaunch, State: api.StateRunning, Message: "launched on gpu01"},
			{JobID: 101, Time: at(-2 * time.Minute), Kind: api.EventUpdate, State: api.StateRunning, Actor: "root", Message: "TimeLimit=04:00:00"},
		},
		103: {
			{JobID: 103, Time: at(-5 * time.Minute), Kind: api.EventSubmit, State: api.StatePending, Actor: "alice"},
			{JobID: 103, Time: at(-10 * time.Second), Kind: api.EventPending, State: api.StatePending, Reason: string(api.ReasonResources), Message: "0/4 nodes available: 3 InsufficientGPU, 1 NodeDrained"},
		},
	}
}

// AuditLog returns a few audit records, newest first, as the controller
// answers "the newest N".
func AuditLog() []api.AuditRecord {
	return []api.AuditRecord{
		{Time: at(-2 * time.Minute), UID: 0, User: "root", Action: "job.update", Target: "job 101", Detail: "TimeLimit=04:00:00"},
		{Time: at(-4 * time.Minute), UID: 1000, User: "alice", Action: "job.hold", Target: "job 104", Detail: "user hold"},
		{Time: at(-5 * time.Minute), UID: 1000, User: "alice", Action: "job.submit", Target: "job 103"},
		{Time: at(-12 * time.Minute), UID: 1000, User: "alice", Action: "job.submit", Target: "job 101"},
		{Time: at(-30 * time.Minute), UID: 0, User: "", Action: "node.drain", Target: "gpu04", Detail: "Reason=nvlink errors"},
	}
}

// Config returns the settings `scontrol show config` prints.
func Config() map[string]string {
	return map[string]string{
		"ClusterName":           "tide",
		"SlurmctldHost[0]":      "ctl1(10.0.0.100)",
		"SlurmctldPort":         "6817",
		"SLURM_VERSION":         "22.05.8",
		"TideVersion":           "0.1.0",
		"GresTypes":             "gpu",
		"JobRequeue":            "1",
		"KillWait":              "30 sec",
		"MinJobAge":             "300 sec",
		"MaxArraySize":          "10001",
		"MaxTasksPerNode":       "64",
		"SchedulerType":         "sched/builtin",
		"SelectType":            "select/cons_tres",
		"SelectTypeParameters":  "CR_CPU_MEMORY",
		"AccountingStorageType": "accounting_storage/tide_sqlite",
		"DefMemPerNode":         "UNLIMITED",
		"TideSocket":            "/run/tide/tidectld.sock",
	}
}

// Cluster returns a fake API serving the whole canned cluster.
func Cluster() *clitest.FakeAPI {
	return &clitest.FakeAPI{
		Now:        Now,
		JobRecs:    Live(),
		Finished:   Finished(),
		NodeRecs:   Nodes(),
		Partitions: Partitions(),
		Trail:      Trail(),
		AuditLog:   AuditLog(),
		Info: api.ClusterInfo{Name: "tide", Version: "0.1.0", StartTime: at(-2 * time.Hour),
			Config: Config(), CallerUID: 1000, CallerUser: "alice"},
	}
}
