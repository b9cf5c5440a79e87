package clitest

import (
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// SharingNow is the controller's clock in SharingCluster.
var SharingNow = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// sat returns SharingNow's day at h:m:s.
func sat(h, m, s int) time.Time { return time.Date(2026, 11, 30, h, m, s, 0, time.UTC) }

// SharingQueues is the queue and QOS answer of SharingCluster: research
// (moba and fps under it) and prod; moba borrows 32 GPUs, 16 of fps's
// share (which fps now reclaims) and 16 of prod's; prod's submission
// buffer holds a burst.
func SharingQueues() api.QueueList {
	return api.QueueList{
		Queues: []api.QueueStatus{
			{Name: "research", Guaranteed: 32, Cap: 64, LendLimit: -1, BorrowLimit: -1,
				UsedGPUs: 48, BorrowedGPUs: 16, LentGPUs: 0, Running: 2, Pending: 3, SubmitRate: 50},
			{Name: "prod", Users: []string{"carol"}, Groups: []string{"ops"}, Guaranteed: 32, LendLimit: 16, BorrowLimit: 0,
				UsedGPUs: 8, LentGPUs: 16, Running: 2, Pending: 2, SubmitRate: 50, Buffered: 120,
				MaxSubmitPerUser: 5000},
			{Name: "moba", Parent: "research", Users: []string{"alice", "bob"}, Guaranteed: 16, Cap: 48,
				LendLimit: -1, BorrowLimit: -1, UsedGPUs: 48, BorrowedGPUs: 32, Running: 2, Pending: 2,
				MaxRunningPerUser: 4, MaxGPUsPerUser: 32, SubmitRate: 50},
			{Name: "fps", Parent: "research", Users: []string{"dave"}, Guaranteed: 16, Cap: 32,
				LendLimit: -1, BorrowLimit: 8, LentGPUs: 16, Pending: 1, SubmitRate: 12.5},
		},
		QOS: []api.QOSStatus{
			{Name: api.QOSTraining, MinLevel: 3, MaxLevel: 8, DefaultLevel: 5, Mode: api.PreemptRequeue, PreemptGap: 2,
				GraceTime: 300, MinRuntime: 600, Open: true},
			{Name: api.QOSInference, MinLevel: 6, MaxLevel: 10, DefaultLevel: 8, Mode: api.PreemptNever,
				Users: []string{"carol"}, Groups: []string{"serving"}, Accounts: []string{"prod"}},
			{Name: api.QOSBatch, MinLevel: 1, MaxLevel: 6, DefaultLevel: 3, Mode: api.PreemptRequeue, PreemptGap: 1,
				GraceTime: 60, MinRuntime: 60, Open: true},
			{Name: api.QOSDebug, MinLevel: 1, MaxLevel: 4, DefaultLevel: 2, Mode: api.PreemptCancel, PreemptGap: 1,
				GraceTime: 10, MaxTime: 7200},
		},
		DefaultQOS:    api.QOSBatch,
		StarvationAge: 1800,
	}
}

func sharingAlloc(node string, gpus ...int) []api.NodeAlloc {
	return []api.NodeAlloc{{Node: node, CPUs: 8 * len(gpus), MemoryMB: 64000, GPUs: gpus, Tasks: 1}}
}

func sharingJob(id uint64, name, user string, uid uint32, queue, qos string, st api.JobState) api.Job {
	return api.Job{
		ID: id,
		JobSpec: api.JobSpec{Name: name, Account: queue, QOS: qos, Partition: "gpu", WorkDir: "/home/" + user,
			TimeLimit: 4 * 3600},
		UserID: uid, GroupID: uid, User: user, Group: user, State: st,
		SubmitTime: sat(8, 0, 0), EligibleTime: sat(8, 0, 0),
	}
}

// SharingJobs are the jobs of SharingCluster: running borrowers (one
// being preempted for a reclaim), a suspended CPU job, pending jobs with
// each sharing reason, and a debug job that was evicted.
func SharingJobs() []api.Job {
	all8 := []int{0, 1, 2, 3, 4, 5, 6, 7}

	j201 := sharingJob(201, "train-a", "alice", 1001, "moba", api.QOSTraining, api.StateRunning)
	j201.GPUsPerNode = 8
	j201.Alloc = sharingAlloc("gpu01", all8...)
	j201.StartTime = sat(9, 0, 0)
	j201.Restarts = 1
	j201.Level = 5
	j201.Borrowing = true
	j201.Preemptions = 1
	j201.PrevNodes = []string{"gpu03"}
	j201.LastCheckpoint = sat(9, 40, 0)
	j201.Preempting = &api.Preempting{By: 210, Reclaim: true, Mode: api.PreemptRequeue,
		Since: sat(9, 58, 0), Deadline: sat(10, 3, 0), Why: "queue fps reclaims 8 GPUs lent to moba"}
	j201.Placement = "best fit on gpu01"

	j202 := sharingJob(202, "train-b", "bob", 1002, "moba", api.QOSTraining, api.StateRunning)
	j202.GPUsPerNode = 8
	j202.Alloc = sharingAlloc("gpu02", all8...)
	j202.StartTime = sat(9, 30, 0)
	j202.Level = 5
	j202.Borrowing = true

	j203 := sharingJob(203, "serve", "carol", 1003, "prod", api.QOSInference, api.StateRunning)
	j203.GPUsPerNode = 8
	j203.Alloc = sharingAlloc("gpu04", all8...)
	j203.StartTime = sat(8, 10, 0)
	j203.Level = 8

	j204 := sharingJob(204, "etl", "carol", 1003, "prod", api.QOSBatch, api.StateSuspended)
	j204.Alloc = []api.NodeAlloc{{Node: "cpu01", CPUs: 16, MemoryMB: 32000, Tasks: 1}}
	j204.StartTime = sat(9, 45, 0)
	j204.Level = 3

	j210 := sharingJob(210, "fps-sim", "dave", 1004, "fps", api.QOSTraining, api.StatePending)
	j210.GPUsPerNode = 8
	j210.Priority = 6
	j210.Level = 6
	j210.SubmitTime, j210.EligibleTime = sat(9, 57, 0), sat(9, 57, 0)
	j210.Reason = api.ReasonWaitingForReclaim
	j210.ReasonDetail = "from queue moba (job 201 checkpointing until 10:03:00)"
	j210.ExpectedStart = sat(10, 3, 0)

	j211 := sharingJob(211, "train-big", "alice", 1001, "moba", api.QOSTraining, api.StatePending)
	j211.Nodes, j211.GPUsPerNode = 2, 8
	j211.Level = 5
	j211.SubmitTime, j211.EligibleTime = sat(8, 30, 0), sat(8, 30, 0)
	j211.Starving = sat(9, 0, 0)
	j211.Reason = api.ReasonQuotaExceeded
	j211.ReasonDetail = "queue moba 48/48 GPUs"

	j212 := sharingJob(212, "dbg", "bob", 1002, "moba", api.QOSDebug, api.StatePending)
	j212.GPUs = 1
	j212.Level = 2
	j212.TimeLimit = 1800
	j212.SubmitTime, j212.EligibleTime = sat(9, 50, 0), sat(9, 50, 0)
	j212.Reason = api.ReasonPriority
	j212.ReasonDetail = "3 jobs ahead"
	j212.ExpectedStart = sat(11, 15, 30)

	j213 := sharingJob(213, "sweep", "carol", 1003, "prod", api.QOSBatch, api.StatePending)
	j213.GPUs = 1
	j213.Level = 3
	j213.SubmitTime, j213.EligibleTime = sat(9, 59, 30), time.Time{}
	j213.Reason = api.ReasonBuffered
	j213.ReasonDetail = "120 submissions ahead in queue prod"

	j214 := sharingJob(214, "misc", "erin", 1005, "", "", api.StatePending)
	j214.GPUs = 4
	j214.SubmitTime, j214.EligibleTime = sat(9, 20, 0), sat(9, 20, 0)
	j214.Reason = api.ReasonResources
	j214.ReasonDetail = "0/4 nodes available: 4 InsufficientGPU"

	j220 := sharingJob(220, "dbg-old", "bob", 1002, "moba", api.QOSDebug, api.StatePreempted)
	j220.GPUs = 1
	j220.Alloc = sharingAlloc("gpu03", 0)
	j220.StartTime, j220.EndTime = sat(9, 10, 0), sat(9, 25, 0)
	j220.Exit = api.ExitStatus{Signal: 15}
	j220.Reason = api.ReasonPreempted
	j220.Level = 2
	j220.Preemptions = 1

	return []api.Job{j201, j202, j203, j204, j210, j211, j212, j213, j214, j220}
}

// SharingTrail is job 201's trail: a borrowing start, a preemption for
// a reclaim, its checkpoint, and a requeue and restart.
func SharingTrail() map[uint64][]api.Event {
	return map[uint64][]api.Event{
		201: {
			{Time: sat(8, 5, 0), Kind: api.EventSubmit, State: api.StatePending, Message: "queue moba, qos training, level 5"},
			{Time: sat(8, 6, 0), Kind: api.EventBorrow, State: api.StateRunning, Message: "borrows 8 GPUs of queue fps (moba 40/16 guaranteed)"},
			{Time: sat(8, 50, 0), Kind: api.EventPreempt, State: api.StateRunning, Reason: string(api.ReasonPreempted),
				Message: "for job 209 (queue prod, level 7): prod reclaims 8 GPUs lent to moba; SIGUSR1, grace 300s"},
			{Time: sat(8, 52, 10), Kind: api.EventCheckpoint, State: api.StateRunning, Message: "checkpoint acknowledged (tide checkpoint-done)", Actor: "alice"},
			{Time: sat(8, 52, 11), Kind: api.EventRequeue, State: api.StatePending, Reason: string(api.ReasonPreempted), Message: "requeued after preemption (restart 1)"},
			{Time: sat(9, 0, 0), Kind: api.EventStart, State: api.StateRunning, Message: "backfilled on gpu01 (prefers gpu03: previous node busy)"},
		},
	}
}

// SharingCluster is a fake controller with queues, job classes and jobs
// in every state of the sharing machinery, at SharingNow.
func SharingCluster() *FakeAPI {
	return &FakeAPI{Now: SharingNow, JobRecs: SharingJobs(), Sharing: SharingQueues(), Trail: SharingTrail()}
}
