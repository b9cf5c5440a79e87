package sched_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

// addSharing turns a random snapshot into a shared cluster: queues (one
// with a parent) with random guarantees, caps and limits, the default
// classes, a running job for what each node holds, and random queues,
// classes, levels and users on the pending jobs.
func addSharing(snap *sched.Snapshot, seed int64) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5ea7))
	names := []string{"fps", "moba", "rts", "sub"}
	snap.Queues = map[string]*sched.QueueInfo{}
	for _, n := range names {
		q := &sched.QueueInfo{Name: n, Guaranteed: rng.IntN(24), LendLimit: -1, BorrowLimit: -1}
		if rng.IntN(2) == 0 {
			q.Cap = q.Guaranteed + rng.IntN(16)
		}
		if rng.IntN(3) == 0 {
			q.LendLimit = rng.IntN(8)
		}
		if rng.IntN(3) == 0 {
			q.BorrowLimit = rng.IntN(8)
		}
		if rng.IntN(3) == 0 {
			q.MaxRunningPerUser = 1 + rng.IntN(3)
		}
		if rng.IntN(3) == 0 {
			q.MaxGPUsPerUser = 1 + rng.IntN(16)
		}
		snap.Queues[n] = q
	}
	snap.Queues["sub"].Parent = "moba"
	snap.QOS, snap.DefaultQOS = sched.DefaultQOS(), api.QOSBatch
	classes := []string{api.QOSTraining, api.QOSInference, api.QOSBatch, api.QOSDebug, ""}
	accounts := append(slices.Clone(names), "", "unknown")
	users := []string{"alice", "bob", "carol"}

	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		var used []int
		for g := range n.GPUs {
			if !slices.Contains(n.FreeGPUs, g) {
				used = append(used, g)
			}
		}
		if len(used) == 0 && n.FreeCPUs == n.CPUs && n.FreeMemMB == n.MemoryMB {
			continue
		}
		rj := sched.RunningJob{
			JobID: uint64(100000 + i), Queue: accounts[rng.IntN(len(accounts))], QOS: classes[rng.IntN(len(classes))],
			User: users[rng.IntN(len(users))], Level: 1 + rng.IntN(10), Start: now.Add(-time.Duration(rng.IntN(7200)) * time.Second),
			Alloc:     []api.NodeAlloc{{Node: n.Name, CPUs: n.CPUs - n.FreeCPUs, MemoryMB: n.MemoryMB - n.FreeMemMB, GPUs: used}},
			Borrowing: rng.IntN(3) == 0, NoRequeue: rng.IntN(5) == 0,
		}
		if rng.IntN(4) == 0 {
			rj.LastCheckpoint = now.Add(-time.Duration(rng.IntN(600)) * time.Second)
		}
		if rng.IntN(8) == 0 && len(snap.Pending) > 0 {
			rj.Preempting, rj.PreemptFor = true, snap.Pending[rng.IntN(len(snap.Pending))].ID
		}
		snap.Running = append(snap.Running, rj)
	}
	for _, j := range snap.Pending {
		j.Account = accounts[rng.IntN(len(accounts))]
		j.JobSpec.QOS = classes[rng.IntN(len(classes))]
		j.User = users[rng.IntN(len(users))]
		j.JobSpec.Priority = uint32(rng.IntN(11))
		j.Exclusive = false // quotas count the GPUs asked for
		if rng.IntN(4) == 0 {
			j.SubmitTime = now.Add(-time.Duration(rng.IntN(4)) * time.Hour)
		}
	}
}

// checkShare checks the sharing rules on a plan: quotas hold for every
// queue that started a job, victims are legal and their jobs wait.
func checkShare(t *testing.T, snap *sched.Snapshot, plan sched.Plan) {
	t.Helper()
	parentOf := func(q string) string {
		if info := snap.Queues[q]; info != nil {
			return info.Parent
		}
		return ""
	}
	chain := func(q string) []string {
		var out []string
		for ; q != "" && snap.Queues[q] != nil && !slices.Contains(out, q); q = parentOf(q) {
			out = append(out, q)
		}
		return out
	}
	use, started := map[string]int{}, map[string]int{}
	userJobs := map[[2]string]int{}
	userGPUs := map[[2]string]int{}
	for _, rj := range snap.Running {
		g := 0
		for _, a := range rj.Alloc {
			g += len(a.GPUs)
		}
		for _, q := range chain(rj.Queue) {
			use[q] += g
			userJobs[[2]string{q, rj.User}]++
			userGPUs[[2]string{q, rj.User}] += g
		}
	}
	startedUser := map[[2]string]bool{}
	for _, s := range plan.Starts {
		j := jobByID(snap, s.JobID)
		g := 0
		for _, a := range s.Alloc {
			g += len(a.GPUs)
		}
		for _, q := range chain(j.Account) {
			use[q] += g
			started[q] += g
			userJobs[[2]string{q, j.User}]++
			userGPUs[[2]string{q, j.User}] += g
			startedUser[[2]string{q, j.User}] = true
		}
	}
	for q, info := range snap.Queues {
		if info.Cap > 0 && started[q] > 0 && use[q] > info.Cap {
			t.Errorf("queue %s holds %d GPUs over its cap %d after starting %d", q, use[q], info.Cap, started[q])
		}
	}
	for k := range startedUser {
		info := snap.Queues[k[0]]
		if info.MaxRunningPerUser > 0 && userJobs[k] > info.MaxRunningPerUser {
			t.Errorf("user %s runs %d jobs in queue %s, limit %d", k[1], userJobs[k], k[0], info.MaxRunningPerUser)
		}
	}

	decisions := map[uint64]sched.Decision{}
	for _, d := range plan.Pending {
		decisions[d.JobID] = d
		if d.Level < 1 || d.Level > 20 {
			t.Errorf("job %d: level %d", d.JobID, d.Level)
		}
	}
	running := map[uint64]*sched.RunningJob{}
	for k := range snap.Running {
		running[snap.Running[k].JobID] = &snap.Running[k]
	}
	seen := map[uint64]bool{}
	for _, pr := range plan.Preemptions {
		v := running[pr.Victim]
		switch {
		case v == nil:
			t.Errorf("victim %d is not running", pr.Victim)
			continue
		case seen[pr.Victim]:
			t.Errorf("victim %d chosen twice", pr.Victim)
		case v.Preempting:
			t.Errorf("victim %d was already preempting", pr.Victim)
		}
		seen[pr.Victim] = true
		q := snap.QOS[v.QOS]
		if q == nil {
			q = snap.QOS[snap.DefaultQOS]
		}
		if q.Mode == api.PreemptNever {
			t.Errorf("victim %d of class %s, never preempted", pr.Victim, q.Name)
		}
		if now.Sub(v.Start) < time.Duration(q.MinRuntime)*time.Second {
			t.Errorf("victim %d ran %v, less than its class's MinRuntime %ds", pr.Victim, now.Sub(v.Start), q.MinRuntime)
		}
		if v.NoRequeue && pr.Mode == api.PreemptRequeue {
			t.Errorf("victim %d is --no-requeue but requeued", pr.Victim)
		}
		d, pending := decisions[pr.For]
		if !pending || d.Reason != api.ReasonPreempting && d.Reason != api.ReasonWaitingForReclaim {
			t.Errorf("job %d preempts %d but is not waiting for it: %+v", pr.For, pr.Victim, d)
		}
		j := jobByID(snap, pr.For)
		jq := snap.QOS[j.JobSpec.QOS]
		if jq == nil {
			jq = snap.QOS[snap.DefaultQOS]
		}
		switch {
		case pr.Reclaim && !v.Borrowing && snap.Queues[v.Queue] != nil:
			t.Errorf("reclaim of %d, which does not borrow", pr.Victim)
		case !pr.Reclaim && v.Queue != j.Account && !(snap.Queues[v.Queue] == nil && snap.Queues[j.Account] == nil):
			t.Errorf("priority preemption of %d (queue %s) for %d (queue %s)", pr.Victim, v.Queue, pr.For, j.Account)
		case !pr.Reclaim && v.Level > sched.JobLevel(j, jq)-max(q.PreemptGap, 1):
			t.Errorf("victim %d level %d, preemptor %d level %d, gap %d", pr.Victim, v.Level, pr.For, sched.JobLevel(j, jq), q.PreemptGap)
		}
	}
}

func TestShareProperties(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	reasons := map[api.ReasonCode]int{}
	preemptions, borrowed := 0, 0
	for seed := range seeds {
		snap := randomSnapshot(int64(seed), 4+seed%30, 10+seed%120)
		if seed%3 == 0 {
			addTopology(t, snap, int64(seed))
		}
		addSharing(snap, int64(seed))
		cfg := sched.Config{DefMemPerCPUMB: int64(seed % 3 * 500), Policy: sched.Policy(seed % 4),
			Backfill: sched.BackfillConfig{MaxJobTest: seed % 5, MaxJobUser: seed % 3, Resolution: time.Duration(seed%3) * 30 * time.Second}}
		plan := sched.Schedule(snap, now, cfg)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			checkPlan(t, snap, plan)
			checkShare(t, snap, plan)
		})
		for _, d := range plan.Pending {
			reasons[d.Reason]++
		}
		preemptions += len(plan.Preemptions)
		for _, s := range plan.Starts {
			if s.Borrowed > 0 {
				borrowed++
			}
		}
	}
	for _, r := range []api.ReasonCode{api.ReasonQuotaExceeded, api.ReasonUserLimit, api.ReasonPreempting,
		api.ReasonWaitingForReclaim, api.ReasonResources, api.ReasonQOSTimeLimit} {
		if reasons[r] == 0 {
			t.Errorf("no job pending for %s over %d seeds", r, seeds)
		}
	}
	if preemptions == 0 || borrowed == 0 {
		t.Errorf("sharing not exercised: %d preemptions, %d borrowing starts", preemptions, borrowed)
	}
	t.Logf("%d preemptions, %d borrowing starts, reasons %v", preemptions, borrowed, reasons)
}
