package sched_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
	"github.com/tide-hpc/tide/topology/topotest"
)

// shareCluster is n idle 8-GPU nodes gpu01… in partition gpu, with the
// default classes (batch by default).
func shareCluster(n int) *st.SnapshotWrapper {
	return st.Cluster("gpu", n, 64, 256000, 8).QOS(sched.DefaultQOS(), api.QOSBatch)
}

// sjob is a pending job of queue q and class qos asking gpus GPUs,
// submitted a minute before now (not starving).
func sjob(id uint64, q, qos string, gpus int) *st.JobWrapper {
	return st.MakeJob().ID(id).Account(q).QOS(qos).User("alice").GPUs(gpus).
		Submit(now.Add(-time.Minute + time.Duration(id)*time.Millisecond))
}

// srun is a running job of queue q and class qos holding GPUs idx of
// node.
func srun(id uint64, q, qos string, level int, node string, idx ...int) *st.RunWrapper {
	return st.MakeRun(id).Queue(q).QOS(qos).Level(level).User("bob").On(node, idx...)
}

// gpuRange is lo..hi inclusive.
func gpuRange(lo, hi int) []int {
	var out []int
	for g := lo; g <= hi; g++ {
		out = append(out, g)
	}
	return out
}

// shareOutcome renders a plan as lines sorted by job id: "id start
// nodes [borrowed=N] [backfilled]", "id Reason: detail" and "victim
// preempted for id mode [reclaim]".
func shareOutcome(p sched.Plan) []string {
	type row struct {
		id  uint64
		txt string
	}
	var rows []row
	for _, s := range p.Starts {
		var nodes []string
		for _, a := range s.Alloc {
			nodes = append(nodes, a.Node)
		}
		txt := fmt.Sprintf("%d start %s", s.JobID, strings.Join(nodes, ","))
		if s.Borrowed > 0 {
			txt += fmt.Sprintf(" borrowed=%d", s.Borrowed)
		}
		rows = append(rows, row{s.JobID, txt})
	}
	for _, d := range p.Pending {
		txt := fmt.Sprintf("%d %s", d.JobID, d.Reason)
		if d.Detail != "" && d.Reason != api.ReasonResources && d.Reason != api.ReasonPriority {
			txt += ": " + d.Detail
		}
		rows = append(rows, row{d.JobID, txt})
	}
	for _, pr := range p.Preemptions {
		txt := fmt.Sprintf("%d preempted for %d %s", pr.Victim, pr.For, pr.Mode)
		if pr.Reclaim {
			txt += " reclaim"
		}
		rows = append(rows, row{pr.Victim, txt})
	}
	slices.SortStableFunc(rows, func(a, b row) int { return int(a.id) - int(b.id) })
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.txt
	}
	return out
}

func TestQuotas(t *testing.T) {
	tests := []struct {
		name string
		snap *sched.Snapshot
		want []string
	}{
		{
			name: "cap",
			snap: shareCluster(4).Queues(st.Queue("moba", 8, 16), st.Queue("fps", 16, 0)).
				Run(srun(1, "moba", "batch", 3, "gpu01", gpuRange(0, 7)...).Obj(),
					srun(2, "moba", "batch", 3, "gpu02", gpuRange(0, 7)...).Obj()).
				Jobs(sjob(10, "moba", "batch", 1).Obj(), sjob(11, "fps", "batch", 1).Obj()).Obj(),
			want: []string{"10 QuotaExceeded: queue moba 16/16 GPUs", "11 start gpu03"},
		},
		{
			name: "hierarchy cap counts a child's use for its parent",
			snap: shareCluster(4).Queues(st.Queue("vision", 16, 16),
				&sched.QueueInfo{Name: "det", Parent: "vision", Guaranteed: 8, LendLimit: -1, BorrowLimit: -1},
				&sched.QueueInfo{Name: "moba", Parent: "vision", Guaranteed: 8, LendLimit: -1, BorrowLimit: -1}).
				Run(srun(1, "det", "batch", 3, "gpu01", gpuRange(0, 7)...).Obj(),
					srun(2, "det", "batch", 3, "gpu02", gpuRange(0, 7)...).Borrowing().Obj()).
				Jobs(sjob(10, "moba", "batch", 2).Obj()).Obj(),
			want: []string{"10 QuotaExceeded: queue vision 16/16 GPUs"},
		},
		{
			name: "per-user running jobs",
			snap: shareCluster(4).Queues(&sched.QueueInfo{Name: "moba", Guaranteed: 32, LendLimit: -1, BorrowLimit: -1, MaxRunningPerUser: 1}).
				Run(srun(1, "moba", "batch", 3, "gpu01", 0).User("alice").Obj()).
				Jobs(sjob(10, "moba", "batch", 1).Obj(), sjob(11, "moba", "batch", 1).User("carol").Obj(),
					sjob(12, "moba", "batch", 1).User("carol").Obj()).Obj(),
			want: []string{"10 UserLimit: user alice runs 1/1 jobs in queue moba (MaxRunningPerUser)", "11 start gpu01",
				"12 UserLimit: user carol runs 1/1 jobs in queue moba (MaxRunningPerUser)"},
		},
		{
			name: "per-user GPUs",
			snap: shareCluster(4).Queues(&sched.QueueInfo{Name: "moba", Guaranteed: 32, LendLimit: -1, BorrowLimit: -1, MaxGPUsPerUser: 8}).
				Run(srun(1, "moba", "batch", 3, "gpu01", 0, 1, 2, 3).User("alice").Obj()).
				Jobs(sjob(10, "moba", "batch", 8).Obj(), sjob(11, "moba", "batch", 4).Obj()).Obj(),
			want: []string{"10 UserLimit: user alice holds 4/8 GPUs in queue moba, job needs 8 (MaxGPUsPerUser)", "11 start gpu01"},
		},
		{
			name: "borrow within the lender's LendLimit",
			snap: shareCluster(4).Queues(st.Queue("a", 8, 0),
				&sched.QueueInfo{Name: "b", Guaranteed: 24, LendLimit: 8, BorrowLimit: -1}).
				Run(srun(1, "a", "batch", 3, "gpu01", gpuRange(0, 7)...).Obj()).
				Jobs(sjob(10, "a", "batch", 8).Obj(), sjob(11, "a", "batch", 8).Obj()).Obj(),
			want: []string{"10 start gpu02 borrowed=8", "11 QuotaExceeded: queue a 16/8 GPUs guaranteed, 8 to borrow, 0 lendable"},
		},
		{
			name: "borrow within the borrower's BorrowLimit",
			snap: shareCluster(4).Queues(&sched.QueueInfo{Name: "a", Guaranteed: 8, LendLimit: -1, BorrowLimit: 4},
				st.Queue("b", 24, 0)).
				Run(srun(1, "a", "batch", 3, "gpu01", gpuRange(0, 3)...).Obj()).
				Jobs(sjob(10, "a", "batch", 16).Obj(), sjob(11, "a", "batch", 4).Obj()).Obj(),
			want: []string{"10 QuotaExceeded: queue a would borrow 12 GPUs, BorrowLimit 4", "11 start gpu01"},
		},
		{
			name: "a class never preempted never borrows",
			snap: shareCluster(4).Queues(st.Queue("a", 8, 0), st.Queue("b", 24, 0)).
				Run(srun(1, "a", "inference", 8, "gpu01", gpuRange(0, 7)...).Obj()).
				Jobs(sjob(10, "a", "inference", 1).Obj(), sjob(11, "a", "batch", 1).Obj()).Obj(),
			want: []string{"10 QuotaExceeded: queue a would borrow 1 GPUs; class inference is never preempted", "11 start gpu02 borrowed=1"},
		},
		{
			name: "jobs outside any queue have no quota",
			snap: shareCluster(2).Queues(st.Queue("a", 8, 8)).
				Run(srun(1, "a", "batch", 3, "gpu01", gpuRange(0, 7)...).Obj()).
				Jobs(sjob(10, "", "batch", 8).Obj()).Obj(),
			want: []string{"10 start gpu02"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := sched.Schedule(tt.snap, now, sched.Config{NoPreemption: true})
			if diff := cmp.Diff(tt.want, shareOutcome(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			checkPlan(t, tt.snap, plan)
		})
	}
}

// modelJob is sjob with --comm=model (its GPUs inside one NVLink set).
func modelJob(w *st.JobWrapper) *api.Job {
	j := w.Obj()
	j.Comm = "model"
	return j
}

func TestPreemption(t *testing.T) {
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	suspendQOS := sched.DefaultQOS()
	suspendQOS["susp"] = &sched.QOSInfo{Name: "susp", MinLevel: 1, MaxLevel: 10, DefaultLevel: 2, Mode: api.PreemptSuspend, PreemptGap: 1, GraceTime: 30}
	tests := []struct {
		name string
		snap *sched.Snapshot
		cfg  sched.Config
		want []string
	}{
		{
			name: "reclaim takes borrowers first",
			snap: shareCluster(4).Queues(st.Queue("fps", 16, 0), st.Queue("moba", 16, 0)).
				Run(srun(1, "fps", "batch", 1, "gpu01", gpuRange(0, 7)...).Obj(),
					srun(2, "moba", "batch", 3, "gpu02", gpuRange(0, 7)...).Obj(),
					srun(3, "moba", "batch", 3, "gpu03", gpuRange(0, 7)...).Obj(),
					srun(4, "moba", "batch", 5, "gpu04", gpuRange(0, 7)...).Borrowing().Obj()).
				Jobs(sjob(10, "fps", "batch", 8).Level(5).Obj()).Obj(),
			want: []string{"4 preempted for 10 requeue reclaim", "10 WaitingForReclaim: from queue moba: job 4 checkpointing"},
		},
		{
			name: "reclaim never takes a lender's own guaranteed jobs",
			snap: shareCluster(2).Queues(st.Queue("fps", 8, 0), st.Queue("moba", 8, 0)).
				Run(srun(1, "moba", "batch", 1, "gpu01", gpuRange(0, 7)...).Obj(),
					srun(2, "fps", "batch", 1, "gpu02", gpuRange(0, 3)...).Obj(),
					srun(3, "moba", "batch", 1, "gpu02", gpuRange(4, 7)...).Obj()).
				Jobs(sjob(10, "fps", "batch", 4).Level(1).Obj()).Obj(),
			want: []string{"10 Resources"},
		},
		{
			name: "victims free a placeable node, not scattered GPUs",
			snap: shareCluster(3).Queues(st.Queue("q", 24, 0)).
				Run(srun(1, "q", "batch", 2, "gpu01", gpuRange(0, 3)...).Obj(),
					srun(2, "q", "batch", 1, "gpu02", gpuRange(0, 3)...).Obj(),
					srun(3, "q", "batch", 1, "gpu03", gpuRange(0, 7)...).Obj()).
				Jobs(sjob(10, "q", "batch", 8).Level(5).Obj()).Obj(),
			want: []string{"2 preempted for 10 requeue", "10 Preempting: job 2 checkpointing"},
		},
		{
			name: "victims free an NVLink set, the minimal set",
			snap: shareCluster(1).Matrix(topotest.TwoIslands().Matrix).Queues(st.Queue("q", 8, 0)).
				Run(srun(1, "q", "batch", 2, "gpu01", 2, 3).Obj(),
					srun(2, "q", "batch", 1, "gpu01", 6).Obj(),
					srun(3, "q", "batch", 3, "gpu01", 7).Obj()).
				Jobs(modelJob(sjob(10, "q", "batch", 4).Level(5))).Obj(),
			want: []string{"1 preempted for 10 requeue", "10 Preempting: job 1 checkpointing"},
		},
		{
			name: "min runtime protects a fresh victim",
			snap: shareCluster(1).Queues(st.Queue("q", 16, 0)).
				Run(srun(1, "q", "training", 3, "gpu01", gpuRange(0, 7)...).Start(ago(5 * time.Minute)).Obj()).
				Jobs(sjob(10, "q", "training", 8).Level(8).Obj()).Obj(),
			want: []string{"10 Resources"},
		},
		{
			name: "min runtime passed",
			snap: shareCluster(1).Queues(st.Queue("q", 8, 0)).
				Run(srun(1, "q", "training", 3, "gpu01", gpuRange(0, 7)...).Start(ago(20 * time.Minute)).Obj()).
				Jobs(sjob(10, "q", "training", 8).Level(8).Obj()).Obj(),
			want: []string{"1 preempted for 10 requeue", "10 Preempting: job 1 checkpointing"},
		},
		{
			name: "a job that started starving is not preempted by priority",
			snap: shareCluster(1).Queues(st.Queue("q", 8, 0)).
				Run(srun(1, "q", "batch", 1, "gpu01", gpuRange(0, 7)...).Starved().Obj()).
				Jobs(sjob(10, "q", "batch", 8).Level(8).Obj()).Obj(),
			want: []string{"10 QuotaExceeded: queue q 8/8 GPUs guaranteed, 8 to borrow, 0 lendable"},
		},
		{
			name: "the same job started without starving is",
			snap: shareCluster(1).Queues(st.Queue("q", 8, 0)).
				Run(srun(1, "q", "batch", 1, "gpu01", gpuRange(0, 7)...).Obj()).
				Jobs(sjob(10, "q", "batch", 8).Level(8).Obj()).Obj(),
			want: []string{"1 preempted for 10 requeue", "10 Preempting: job 1 checkpointing"},
		},
		{
			name: "a job that started starving on borrowed GPUs is still reclaimed",
			snap: shareCluster(2).Queues(st.Queue("fps", 8, 0), st.Queue("moba", 8, 0)).
				Run(srun(1, "moba", "batch", 1, "gpu01", gpuRange(0, 7)...).Obj(),
					srun(2, "moba", "batch", 1, "gpu02", gpuRange(0, 7)...).Borrowing().Starved().Obj()).
				Jobs(sjob(10, "fps", "batch", 8).Level(5).Obj()).Obj(),
			want: []string{"2 preempted for 10 requeue reclaim", "10 WaitingForReclaim: from queue moba: job 2 checkpointing"},
		},
		{
			name: "training needs a job two levels higher",
			snap: shareCluster(1).Queues(st.Queue("q", 16, 0)).
				Run(srun(1, "q", "training", 5, "gpu01", gpuRange(0, 7)...).Obj()).
				Jobs(sjob(10, "q", "training", 8).Level(6).Obj()).Obj(),
			want: []string{"10 Resources"},
		},
		{
			name: "training preempted by a job two levels higher",
			snap: shareCluster(1).Queues(st.Queue("q", 8, 0)).
				Run(srun(1, "q", "training", 5, "gpu01", gpuRange(0, 7)...).Obj()).
				Jobs(sjob(10, "q", "training", 8).Level(7).Obj()).Obj(),
			want: []string{"1 preempted for 10 requeue", "10 Preempting: job 1 checkpointing"},
		},
		{
			name: "inference is never preempted",
			snap: shareCluster(1).Queues(st.Queue("q", 16, 0)).
				Run(srun(1, "q", "inference", 6, "gpu01", gpuRange(0, 7)...).Obj()).
				Jobs(sjob(10, "q", "training", 8).Level(8).Obj()).Obj(),
			want: []string{"10 Resources"},
		},
		{
			name: "debug is evicted before training",
			snap: shareCluster(1).Queues(st.Queue("q", 8, 0)).
				Run(srun(1, "q", "training", 3, "gpu01", gpuRange(0, 3)...).Obj(),
					srun(2, "q", "debug", 2, "gpu01", gpuRange(4, 7)...).Obj()).
				Jobs(sjob(10, "q", "training", 4).Level(7).Obj()).Obj(),
			want: []string{"2 preempted for 10 cancel", "10 Preempting: job 2 stopping"},
		},
		{
			name: "victims already preempting are not chosen again",
			snap: shareCluster(2).Queues(st.Queue("q", 16, 0)).
				Run(srun(1, "q", "batch", 1, "gpu01", gpuRange(0, 7)...).PreemptingFor(10).Obj(),
					srun(2, "q", "batch", 1, "gpu02", gpuRange(0, 7)...).Obj()).
				Jobs(sjob(10, "q", "batch", 8).Level(5).Obj(), sjob(11, "q", "batch", 8).Level(5).Obj()).Obj(),
			want: []string{"2 preempted for 11 requeue", "10 Preempting: job 1 checkpointing", "11 Preempting: job 2 checkpointing"},
		},
		{
			name: "victims already preempting get company only when they do not suffice",
			snap: shareCluster(1).Queues(st.Queue("q", 8, 0)).
				Run(srun(1, "q", "batch", 1, "gpu01", gpuRange(0, 3)...).PreemptingFor(10).Obj(),
					srun(2, "q", "batch", 1, "gpu01", gpuRange(4, 7)...).Obj()).
				Jobs(sjob(10, "q", "batch", 8).Level(5).Obj()).Obj(),
			want: []string{"2 preempted for 10 requeue", "10 Preempting: jobs 1,2 checkpointing"},
		},
		{
			name: "the preemptor's nodes are held from lower jobs",
			snap: shareCluster(2).Queues(st.Queue("q", 16, 0)).
				Run(srun(1, "q", "batch", 1, "gpu01", gpuRange(0, 3)...).Obj(),
					srun(2, "q", "inference", 8, "gpu02", gpuRange(0, 7)...).Obj()).
				Jobs(sjob(10, "q", "batch", 8).Level(5).Obj(), sjob(11, "q", "batch", 4).Level(5).Obj()).Obj(),
			want: []string{"1 preempted for 10 requeue", "10 Preempting: job 1 checkpointing", "11 Priority"},
		},
		{
			name: "no requeue means cancel, suspended GPU jobs are requeued",
			snap: shareCluster(1).QOS(suspendQOS, api.QOSBatch).Queues(st.Queue("q", 8, 0)).
				Run(srun(1, "q", "batch", 1, "gpu01", gpuRange(0, 3)...).NoRequeue().Obj(),
					srun(2, "q", "susp", 1, "gpu01", gpuRange(4, 7)...).Obj()).
				Jobs(sjob(10, "q", "batch", 8).Level(5).Obj()).Obj(),
			want: []string{"1 preempted for 10 cancel", "2 preempted for 10 requeue", "10 Preempting: jobs 1,2 checkpointing"},
		},
		{
			name: "a queue at its cap preempts its own lower jobs though GPUs are free",
			snap: shareCluster(2).Queues(st.Queue("q", 8, 8)).
				Run(srun(1, "q", "batch", 1, "gpu01", gpuRange(0, 7)...).Obj()).
				Jobs(sjob(10, "q", "batch", 8).Level(5).Obj(), sjob(11, "", "batch", 8).Level(5).Obj()).Obj(),
			want: []string{"1 preempted for 10 requeue", "10 Preempting: job 1 checkpointing", "11 start gpu02"},
		},
		{
			name: "preemption off",
			cfg:  sched.Config{NoPreemption: true},
			snap: shareCluster(1).Queues(st.Queue("q", 16, 0)).
				Run(srun(1, "q", "batch", 1, "gpu01", gpuRange(0, 7)...).Obj()).
				Jobs(sjob(10, "q", "batch", 8).Level(5).Obj()).Obj(),
			want: []string{"10 Resources"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := sched.Schedule(tt.snap, now, tt.cfg)
			if diff := cmp.Diff(tt.want, shareOutcome(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			checkPlan(t, tt.snap, plan)
			for _, pr := range plan.Preemptions {
				for _, word := range []string{fmt.Sprintf("job %d", pr.Victim), fmt.Sprintf("job %d", pr.For), "queue ", "level "} {
					if !strings.Contains(pr.Why, word) {
						t.Errorf("preemption of %d: Why %q lacks %q", pr.Victim, pr.Why, word)
					}
				}
			}
		})
	}
}

func TestJobLevel(t *testing.T) {
	classes := sched.DefaultQOS()
	tests := []struct {
		name string
		job  *api.Job
		qos  *sched.QOSInfo
		want int
	}{
		{"no class, no level", st.MakeJob().Obj(), nil, 5},
		{"class default", st.MakeJob().Obj(), classes[api.QOSInference], 8},
		{"asked level", st.MakeJob().SpecPriority(7).Obj(), classes[api.QOSTraining], 7},
		{"asked level clamped to the class", st.MakeJob().SpecPriority(10).Obj(), classes[api.QOSTraining], 8},
		{"asked level raised to the class", st.MakeJob().SpecPriority(1).Obj(), classes[api.QOSInference], 6},
		{"legacy priority is not a level", st.MakeJob().SpecPriority(1000).Obj(), classes[api.QOSBatch], 3},
		{"controller's level wins", st.MakeJob().SpecPriority(2).Level(4).Obj(), classes[api.QOSBatch], 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sched.JobLevel(tt.job, tt.qos); got != tt.want {
				t.Errorf("JobLevel = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestAgedLevel(t *testing.T) {
	tests := []struct {
		name      string
		waited    time.Duration
		eligible  time.Duration // before now; 0 = use the submit time
		age       time.Duration
		want      int
		wantSince time.Duration // before now; -1 = not starving
	}{
		{name: "fresh", waited: 10 * time.Minute, want: 5, wantSince: -1},
		{name: "just starving", waited: 30 * time.Minute, want: 5, wantSince: 0},
		{name: "not a full period beyond", waited: 59 * time.Minute, want: 5, wantSince: 29 * time.Minute},
		{name: "one period beyond", waited: time.Hour, want: 6, wantSince: 30 * time.Minute},
		{name: "hours", waited: 5 * time.Hour, want: 14, wantSince: 270 * time.Minute},
		{name: "capped", waited: 24 * time.Hour, want: 20, wantSince: 1410 * time.Minute},
		{name: "eligible later than submitted", waited: 5 * time.Hour, eligible: 20 * time.Minute, want: 5, wantSince: -1},
		{name: "own threshold", waited: time.Hour, age: 10 * time.Minute, want: 10, wantSince: 50 * time.Minute},
		{name: "aging off", waited: 24 * time.Hour, age: -1, want: 5, wantSince: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jw := st.MakeJob().Submit(now.Add(-tt.waited))
			if tt.eligible > 0 {
				jw.Eligible(now.Add(-tt.eligible))
			}
			got, since := sched.AgedLevel(5, jw.Obj(), now, tt.age)
			var want time.Time
			if tt.wantSince >= 0 {
				want = now.Add(-tt.wantSince)
			}
			if got != tt.want || !since.Equal(want) {
				t.Errorf("AgedLevel = %d since %v, want %d since %v", got, since, tt.want, want)
			}
		})
	}
}

// TestAgingOrder: starving jobs rise above fresh ones of their queue, and
// every pending decision says its level, starvation and place.
func TestAgingOrder(t *testing.T) {
	snap := shareCluster(1).Queues(st.Queue("q", 16, 0)).
		Run(srun(1, "q", "batch", 3, "gpu01", gpuRange(0, 6)...).Obj()).
		Jobs(sjob(11, "q", "batch", 1).Level(5).Obj(),
			sjob(12, "q", "batch", 1).Level(3).Submit(now.Add(-2*time.Hour)).Obj(),
			sjob(13, "q", "batch", 1).Level(2).Submit(now.Add(-time.Hour)).Obj(),
			sjob(14, "q", "batch", 1).Level(1).Hold(api.HoldUser).Obj()).Obj()
	plan := sched.Schedule(snap, now, sched.Config{NoPreemption: true})
	if got := shareOutcome(plan); !slices.Equal(got, []string{"11 Resources", "12 start gpu01", "13 Priority", "14 JobHeldUser"}) {
		t.Fatalf("plan %q: the starving job 12 (level 3 aged to 6) should go first", got)
	}
	want := []sched.Decision{
		{JobID: 11, Reason: api.ReasonResources, Level: 5},
		{JobID: 13, Reason: api.ReasonPriority, Level: 3, StarvingSince: now.Add(-30 * time.Minute),
			More: []string{"Starving since " + now.Add(-30*time.Minute).UTC().Format(time.RFC3339), "Priority: 1 job ahead in queue q"}},
		// A held job waits for its release, not for the jobs ahead.
		{JobID: 14, Reason: api.ReasonJobHeldUser, Level: 1},
	}
	for k := range plan.Pending {
		plan.Pending[k].Detail = ""
	}
	if diff := cmp.Diff(want, plan.Pending); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
}

// TestWeightedRoundRobin: a queue with a small guarantee gets its share
// although a bigger queue's jobs have higher levels and came first.
func TestWeightedRoundRobin(t *testing.T) {
	tests := []struct {
		name   string
		queues []*sched.QueueInfo
		small  string // queue of the small group's jobs
		want   map[string]int
	}{
		{name: "queues by guarantee", queues: []*sched.QueueInfo{st.Queue("big", 24, 0), st.Queue("small", 8, 0)},
			small: "small", want: map[string]int{"big": 24, "small": 8}},
		{name: "jobs outside any queue share the unguaranteed GPUs", queues: []*sched.QueueInfo{st.Queue("big", 16, 0)},
			small: "", want: map[string]int{"big": 16, "": 16}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := shareCluster(4).Queues(tt.queues...)
			for i := range 40 {
				w.Jobs(sjob(uint64(100+i), "big", "batch", 1).Level(6).Submit(now.Add(-20 * time.Minute)).Obj())
			}
			for i := range 40 {
				w.Jobs(sjob(uint64(200+i), tt.small, "batch", 1).Level(1).Obj())
			}
			snap := w.Obj()
			plan := sched.Schedule(snap, now, sched.Config{})
			got := map[string]int{}
			for _, s := range plan.Starts {
				got[jobByID(snap, s.JobID).Account] += len(s.Alloc[0].GPUs)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("GPUs started per queue (-want +got):\n%s", diff)
			}
			// The small group is served early, not after the big one.
			for _, s := range plan.Starts[:4] {
				if jobByID(snap, s.JobID).Account == tt.small {
					return
				}
			}
			t.Errorf("none of the first 4 starts is of the small group")
		})
	}
}

func TestPrevNodes(t *testing.T) {
	tests := []struct {
		name string
		snap *sched.Snapshot
		want string
	}{
		{"without previous nodes the lowest name", st.Cluster("gpu", 3, 64, 256000, 8).
			Jobs(st.MakeJob().GPUs(1).Obj()).Obj(), "1 start gpu01"},
		{"a requeued job gets its previous node among equals", st.Cluster("gpu", 3, 64, 256000, 8).
			Jobs(st.MakeJob().GPUs(1).PrevNodes("gpu03").Obj()).Obj(), "1 start gpu03"},
		{"a better fit still wins", st.MakeSnapshot().Nodes(
			st.MakeNode("gpu01").GPUs(8).Obj(), st.MakeNode("gpu02").GPUs(8).UsedGPUs(0, 1).Obj(), st.MakeNode("gpu03").GPUs(8).Obj()).
			Partitions(st.MakePartition("gpu", "gpu01", "gpu02", "gpu03").Obj()).
			Jobs(st.MakeJob().GPUs(1).PrevNodes("gpu03").Obj()).Obj(), "1 start gpu02"},
		{"share mode too", shareCluster(3).Jobs(st.MakeJob().GPUs(1).PrevNodes("gpu02").Obj()).Obj(), "1 start gpu02"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shareOutcome(sched.Schedule(tt.snap, now, sched.Config{}))
			if !slices.Equal(got, []string{tt.want}) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestBorrowingReason: a job that would start on borrowed GPUs but does
// not fit says so after its decisive reason.
func TestBorrowingReason(t *testing.T) {
	snap := shareCluster(2).Queues(st.Queue("a", 4, 0), st.Queue("b", 4, 0)).
		Run(srun(1, "", "batch", 3, "gpu01", 0, 1, 2, 3).Obj(), srun(2, "", "batch", 3, "gpu02", 0, 1, 2, 3).Obj()).
		Jobs(sjob(10, "a", "batch", 8).Obj()).Obj()
	plan := sched.Schedule(snap, now, sched.Config{NoPreemption: true})
	if len(plan.Pending) != 1 {
		t.Fatalf("plan %q, want job 10 pending", shareOutcome(plan))
	}
	d := plan.Pending[0]
	want := []string{"Borrowing: queue a would borrow 4 GPUs of idle share"}
	if d.Reason != api.ReasonResources || !slices.Equal(d.More, want) || d.Level != 3 {
		t.Errorf("decision %+v, want Resources, level 3, More %q", d, want)
	}
}

// renderSharePlan prints everything a shared pass decides, the way the
// controller passes it on (events, squeue reasons, scontrol show job).
func renderSharePlan(p sched.Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "now %s\n", p.Now.Format(time.RFC3339))
	for _, s := range p.Starts {
		var nodes []string
		for _, a := range s.Alloc {
			nodes = append(nodes, fmt.Sprintf("%s:%v", a.Node, a.GPUs))
		}
		fmt.Fprintf(&b, "start %d on %s borrowed=%d backfilled=%v\n", s.JobID, strings.Join(nodes, " "), s.Borrowed, s.Backfilled)
	}
	for _, d := range p.Pending {
		fmt.Fprintf(&b, "pending %d level=%d %s", d.JobID, d.Level, d.Reason)
		if d.Detail != "" {
			fmt.Fprintf(&b, " (%s)", d.Detail)
		}
		if !d.StarvingSince.IsZero() {
			fmt.Fprintf(&b, " starving=%s", d.StarvingSince.Format(time.RFC3339))
		}
		if !d.ExpectedStart.IsZero() {
			fmt.Fprintf(&b, " expected=%s", d.ExpectedStart.Format(time.RFC3339))
		}
		b.WriteByte('\n')
		for _, m := range d.More {
			fmt.Fprintf(&b, "  more: %s\n", m)
		}
	}
	for _, pr := range p.Preemptions {
		fmt.Fprintf(&b, "preempt %d for %d mode=%s grace=%d reclaim=%v\n  why: %s\n", pr.Victim, pr.For, pr.Mode, pr.Grace, pr.Reclaim, pr.Why)
	}
	return b.String()
}

func TestGoldenShare(t *testing.T) {
	w := shareCluster(6).Queues(
		&sched.QueueInfo{Name: "fps", Guaranteed: 16, Cap: 24, LendLimit: -1, BorrowLimit: -1},
		&sched.QueueInfo{Name: "moba", Guaranteed: 16, Cap: 32, LendLimit: 8, BorrowLimit: -1, MaxRunningPerUser: 3},
		&sched.QueueInfo{Name: "rts", Guaranteed: 16, LendLimit: -1, BorrowLimit: -1}).
		Run(srun(1, "moba", "batch", 3, "gpu01", gpuRange(0, 7)...).User("alice").Obj(),
			srun(2, "moba", "batch", 3, "gpu02", gpuRange(0, 7)...).User("alice").Obj(),
			srun(3, "moba", "batch", 4, "gpu03", gpuRange(0, 7)...).User("alice").Borrowing().Checkpoint(now.Add(-5*time.Minute)).Obj(),
			srun(4, "rts", "debug", 2, "gpu04", gpuRange(0, 3)...).Obj(),
			srun(5, "rts", "training", 4, "gpu04", gpuRange(4, 7)...).Obj(),
			srun(6, "rts", "inference", 8, "gpu05", gpuRange(0, 5)...).Obj(),
			srun(7, "", "batch", 3, "gpu06", gpuRange(0, 7)...).Obj())
	s := w.Obj()
	for i := range s.Nodes {
		n := &s.Nodes[i]
		held := gpuRange(0, 7-len(n.FreeGPUs))
		n.Releases = []sched.Release{{At: now.Add(time.Duration(600*(i+1)) * time.Second), CPUs: len(held), GPUs: held}}
	}
	w.Jobs(
		sjob(10, "fps", "training", 8).Level(6).Obj(),                               // reclaims from moba's borrower
		sjob(11, "moba", "batch", 4).Obj(),                                          // UserLimit (alice runs 3)
		sjob(12, "rts", "training", 4).Level(8).Obj(),                               // over the pool: evicts rts's debug job
		sjob(13, "rts", "batch", 4).Submit(now.Add(-2*time.Hour)).Obj(),             // starving, over the pool
		sjob(14, "fps", "batch", 16).Nodes(2).TimeLimit(3600).Obj(),                 // waits for two nodes
		sjob(15, "rts", "batch", 8).Level(1).Obj(),                                  // behind 13 in rts
		sjob(16, "", "batch", 2).TimeLimit(300).Submit(now.Add(-time.Second)).Obj(), // outside any queue, short
	)
	plan := sched.Schedule(w.Obj(), now, sched.Config{Policy: sched.PolicyBackfill})
	golden(t, "share", renderSharePlan(plan))
}

// TestStarvingHoldsQuota: a job turned away by its queue's cap that is
// Starving holds the queue's quota, so the smaller jobs behind it stop
// taking what its queue's running jobs give back; a job that is not
// starving holds nothing (quota-blocked jobs do not block others).
func TestStarvingHoldsQuota(t *testing.T) {
	tests := []struct {
		name   string
		submit time.Time
		want   []string
	}{
		{name: "not starving: the small job passes", submit: now.Add(-time.Minute),
			want: []string{"10 QuotaExceeded: queue q 16/16 GPUs", "11 start gpu02"}},
		{name: "starving: the queue waits for it", submit: now.Add(-2 * time.Hour),
			want: []string{"10 QuotaExceeded: queue q 8/16 GPUs", "11 QuotaExceeded: queue q held for starving job 10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := shareCluster(2).Queues(st.Queue("q", 0, 16)).
				Run(srun(1, "q", "batch", 3, "gpu01", gpuRange(0, 7)...).Obj()).
				Jobs(sjob(10, "q", "batch", 16).Level(1).Submit(tt.submit).Obj(),
					sjob(11, "q", "batch", 8).Level(3).Obj()).Obj()
			plan := sched.Schedule(snap, now, sched.Config{NoPreemption: true})
			got := shareOutcome(plan)
			for i := range got {
				got[i] = strings.TrimSuffix(got[i], " borrowed=8")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
