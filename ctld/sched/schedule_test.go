package sched_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
)

var now = st.Epoch.Add(time.Hour)

// fourNodes is the usual fixture: gpu01..gpu04, 64 CPUs, 256000 MB and
// 8 a100 GPUs each, in partition "gpu" (MaxTime one day).
func fourNodes() *st.SnapshotWrapper {
	s := st.Cluster("gpu", 4, 64, 256000, 8)
	s.Obj().Partitions["gpu"].MaxTime = 86400
	return s
}

func decision(t *testing.T, p sched.Plan, id uint64) (sched.Decision, bool) {
	t.Helper()
	for _, d := range p.Pending {
		if d.JobID == id {
			return d, true
		}
	}
	return sched.Decision{}, false
}

func start(p sched.Plan, id uint64) (sched.Start, bool) {
	for _, s := range p.Starts {
		if s.JobID == id {
			return s, true
		}
	}
	return sched.Start{}, false
}

func startedIDs(p sched.Plan) []uint64 {
	var ids []uint64
	for _, s := range p.Starts {
		ids = append(ids, s.JobID)
	}
	return ids
}

func TestScheduleReasons(t *testing.T) {
	tests := []struct {
		name string
		snap *sched.Snapshot
		cfg  sched.Config
		// want is the decision of job 1; a zero want means job 1 starts.
		want sched.Decision
	}{
		{
			name: "user hold",
			snap: fourNodes().Jobs(st.MakeJob().Hold(api.HoldUser).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonJobHeldUser},
		},
		{
			name: "admin hold",
			snap: fourNodes().Jobs(st.MakeJob().Hold(api.HoldAdmin).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonJobHeldAdmin},
		},
		{
			name: "sbatch -H without a hold kind is a user hold",
			snap: fourNodes().Jobs(func() *api.Job { j := st.MakeJob().Obj(); j.Hold = true; return j }()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonJobHeldUser},
		},
		{
			name: "begin time in the future",
			snap: fourNodes().Jobs(st.MakeJob().Begin(now.Add(time.Second)).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonBeginTime},
		},
		{
			name: "begin time reached starts",
			snap: fourNodes().Jobs(st.MakeJob().Begin(now).Obj()).Obj(),
		},
		{
			name: "missing partition",
			snap: fourNodes().Jobs(st.MakeJob().Partition("nope").Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonBadConstraints, Detail: "partition nope does not exist"},
		},
		{
			name: "partition down",
			snap: fourNodes().Partitions(st.MakePartition("gpu", "gpu01").Down().Obj()).
				Jobs(st.MakeJob().Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonPartitionDown},
		},
		{
			name: "time limit above partition max",
			snap: fourNodes().Jobs(st.MakeJob().TimeLimit(86401).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonPartitionTimeLimit,
				Detail: "time limit 1-00:00:01 exceeds partition gpu MaxTime 1-00:00:00"},
		},
		{
			name: "partition default above partition max",
			snap: fourNodes().Partitions(st.MakePartition("gpu", "gpu01").DefaultTime(7200).MaxTime(3600).Obj()).
				Jobs(st.MakeJob().Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonPartitionTimeLimit,
				Detail: "time limit 2:00:00 exceeds partition gpu MaxTime 1:00:00"},
		},
		{
			name: "unlimited partition takes any limit",
			snap: fourNodes().Partitions(st.MakePartition("gpu", "gpu01").Obj()).
				Jobs(st.MakeJob().TimeLimit(1 << 30).Obj()).Obj(),
		},
		{
			name: "more nodes than partition MaxNodes",
			snap: fourNodes().Partitions(st.MakePartition("gpu", "gpu01", "gpu02", "gpu03").MaxNodes(2).Obj()).
				Jobs(st.MakeJob().Nodes(3).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonPartitionNodeLimit,
				Detail: "3 nodes requested, partition gpu MaxNodes is 2"},
		},
		{
			name: "more nodes than the partition has",
			snap: fourNodes().Jobs(st.MakeJob().Nodes(5).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonPartitionNodeLimit,
				Detail: "5 nodes requested, partition gpu has 4"},
		},
		{
			name: "required node outside the partition",
			snap: fourNodes().Nodes(st.MakeNode("cpu01").Obj()).Jobs(st.MakeJob().NodeList("cpu01").Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonBadConstraints,
				Detail: "required node cpu01 is not in partition gpu"},
		},
		{
			name: "required node that does not exist",
			snap: fourNodes().Jobs(st.MakeJob().NodeList("gpu09").Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonBadConstraints,
				Detail: "required node gpu09 is not in partition gpu"},
		},
		{
			name: "required and excluded",
			snap: fourNodes().Jobs(st.MakeJob().NodeList("gpu02").Exclude("gpu02").Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonBadConstraints,
				Detail: "node gpu02 is both required and excluded"},
		},
		{
			name: "required node drained",
			snap: st.MakeSnapshot().
				Nodes(st.MakeNode("gpu01").GPUs(8).Drained().Obj(), st.MakeNode("gpu02").GPUs(8).Obj()).
				Partitions(st.MakePartition("gpu", "gpu01", "gpu02").Obj()).
				Jobs(st.MakeJob().NodeList("gpu01").Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonReqNodeNotAvail, Detail: "required node gpu01: NodeDrained"},
		},
		{
			name: "resources: busy, drained and short nodes",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("gpu01").GPUs(8).UsedGPUs(0, 1, 2, 3, 4).Obj(),
				st.MakeNode("gpu02").GPUs(8).UsedGPUs(0, 1, 2, 3, 4, 5).Obj(),
				st.MakeNode("gpu03").GPUs(8).UsedCPUs(62).Obj(),
				st.MakeNode("gpu04").GPUs(8).Drained().Obj(),
			).Partitions(st.MakePartition("gpu", "gpu01", "gpu02", "gpu03", "gpu04").Obj()).
				Jobs(st.MakeJob().GPUs(4).Tasks(1).CPUsPerTask(4).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonResources,
				Detail: "0/4 nodes available: 2 InsufficientGPU, 1 InsufficientCPU, 1 NodeDrained"},
		},
		{
			name: "resources: memory",
			snap: st.MakeSnapshot().Nodes(st.MakeNode("gpu01").GPUs(8).UsedMem(255000).Obj()).
				Partitions(st.MakePartition("gpu", "gpu01").Obj()).
				Jobs(st.MakeJob().Mem(2000).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonResources,
				Detail: "0/1 nodes available: 1 InsufficientMemory"},
		},
		{
			name: "resources: exclusive needs idle nodes",
			snap: st.MakeSnapshot().Nodes(st.MakeNode("gpu01").GPUs(8).UsedCPUs(1).Obj()).
				Partitions(st.MakePartition("gpu", "gpu01").Obj()).
				Jobs(st.MakeJob().Exclusive().Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonResources,
				Detail: "0/1 nodes available: 1 NodeNotIdle"},
		},
		{
			name: "resources: multi-node job short of nodes",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("gpu01").GPUs(8).Obj(),
				st.MakeNode("gpu02").GPUs(8).UsedGPUs(0).Obj(),
				st.MakeNode("gpu03").GPUs(8).Obj(),
			).Partitions(st.MakePartition("gpu", "gpu01", "gpu02", "gpu03").Obj()).
				Jobs(st.MakeJob().Nodes(3).GPUsPerNode(8).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonResources,
				Detail: "2/3 nodes available: 1 InsufficientGPU"},
		},
		{
			name: "resources: nodes hold the smaller slot but not the larger one",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("gpu01").GPUs(4).UsedGPUs(0, 1).Obj(),
				st.MakeNode("gpu02").GPUs(4).UsedGPUs(0, 1).Obj(),
			).Partitions(st.MakePartition("gpu", "gpu01", "gpu02").Obj()).
				Jobs(st.MakeJob().Nodes(2).GPUs(5).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonResources,
				Detail: "0/2 nodes available: 2 InsufficientGPU"},
		},
		{
			name: "bad constraints: more GPUs per node than any node has",
			snap: fourNodes().Jobs(st.MakeJob().GPUsPerNode(16).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonBadConstraints,
				Detail: "16 GPUs per node requested, nodes of partition gpu have at most 8"},
		},
		{
			name: "bad constraints: more CPUs per node than any node has",
			snap: fourNodes().Jobs(st.MakeJob().Nodes(1).Tasks(65).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonBadConstraints,
				Detail: "65 CPUs per node requested, nodes of partition gpu have at most 64"},
		},
		{
			name: "bad constraints: more memory than any node has",
			snap: fourNodes().Jobs(st.MakeJob().Mem(256001).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonBadConstraints,
				Detail: "256001 MB memory per node requested, nodes of partition gpu have at most 256000 MB"},
		},
		{
			name: "bad constraints: no such GPU model",
			snap: fourNodes().Jobs(st.MakeJob().GPUs(1).GPUType("h100").Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonBadConstraints,
				Detail: "no node of partition gpu has GPU model h100"},
		},
		{
			name: "bad constraints: every node excluded",
			snap: fourNodes().Jobs(st.MakeJob().Exclude("gpu01", "gpu02", "gpu03", "gpu04").Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonBadConstraints,
				Detail: "no node of partition gpu is left after -w/-x"},
		},
		{
			name: "bad constraints: required node too small",
			snap: fourNodes().Jobs(st.MakeJob().NodeList("gpu01").GPUsPerNode(9).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonBadConstraints,
				Detail: "required node gpu01 can never hold 1 CPUs, 9 GPUs: InsufficientGPU"},
		},
		{
			name: "bad constraints: too few nodes big enough",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("gpu01").GPUs(8).Obj(),
				st.MakeNode("gpu02").GPUs(4).Obj(),
			).Partitions(st.MakePartition("gpu", "gpu01", "gpu02").Obj()).
				Jobs(st.MakeJob().Nodes(2).GPUsPerNode(8).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonBadConstraints,
				Detail: "2 nodes with 1 CPUs, 8 GPUs requested, partition gpu has 1 that can hold it"},
		},
		{
			name: "node down: fits only once down nodes return",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("gpu01").GPUs(8).Obj(),
				st.MakeNode("gpu02").GPUs(8).Down().Obj(),
			).Partitions(st.MakePartition("gpu", "gpu01", "gpu02").Obj()).
				Jobs(st.MakeJob().Nodes(2).Obj()).Obj(),
			want: sched.Decision{JobID: 1, Reason: api.ReasonNodeDown,
				Detail: "1/2 nodes available: 1 NodeDown; needs nodes that are down or drained"},
		},
		{
			name: "max starts reached",
			snap: fourNodes().Jobs(st.MakeJob().ID(2).Priority(10).Obj(), st.MakeJob().Priority(1).Obj()).Obj(),
			cfg:  sched.Config{MaxStarts: 1},
			want: sched.Decision{JobID: 1, Reason: api.ReasonPriority,
				Detail: "start limit of this scheduling pass reached"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := sched.Schedule(tt.snap, now, tt.cfg)
			got, pending := decision(t, plan, 1)
			_, started := start(plan, 1)
			if tt.want.JobID == 0 && tt.want.Reason == "" {
				if !started || pending {
					t.Fatalf("job 1 did not start: %+v", got)
				}
				return
			}
			if started {
				t.Fatalf("job 1 started, want %+v", tt.want)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPriorityBlocking(t *testing.T) {
	// Two gpu01/gpu02 nodes with 8 a100 GPUs, half busy; an h100 node.
	mixed := func(jobs ...*api.Job) *sched.Snapshot {
		return st.MakeSnapshot().Nodes(
			st.MakeNode("gpu01").GPUs(8).UsedGPUs(0, 1, 2, 3).Obj(),
			st.MakeNode("gpu02").GPUs(8).UsedGPUs(0, 1, 2, 3).Obj(),
			st.MakeNode("h01").GPUs(8).Model("h100").Obj(),
		).Partitions(
			st.MakePartition("gpu", "gpu01", "gpu02", "h01").Obj(),
			st.MakePartition("other", "gpu02").Obj(),
			st.MakePartition("h", "h01").Obj(),
		).Jobs(jobs...).Obj()
	}
	big := st.MakeJob().ID(1).Priority(100).GPUs(8).GPUType("a100")
	tests := []struct {
		name        string
		snap        *sched.Snapshot
		wantStarted []uint64
		want        []sched.Decision
	}{
		{
			name: "lower job of the same model waits for Priority",
			snap: mixed(big.Obj(), st.MakeJob().ID(2).Priority(50).GPUs(1).GPUType("a100").Obj()),
			want: []sched.Decision{
				{JobID: 1, Reason: api.ReasonResources, Detail: "0/3 nodes available: 2 InsufficientGPU, 1 NoMatchingGPUModel"},
				{JobID: 2, Reason: api.ReasonPriority, Detail: "waiting for higher-priority jobs"},
			},
		},
		{
			name:        "a job that cannot compete for the blocked nodes still starts",
			snap:        mixed(big.Obj(), st.MakeJob().ID(2).Priority(50).GPUs(8).GPUType("H100").Obj()),
			wantStarted: []uint64{2},
			want: []sched.Decision{
				{JobID: 1, Reason: api.ReasonResources, Detail: "0/3 nodes available: 2 InsufficientGPU, 1 NoMatchingGPUModel"},
			},
		},
		{
			name: "overlapping partition is blocked on the shared node",
			snap: mixed(big.Obj(), st.MakeJob().ID(2).Priority(50).Partition("other").GPUs(1).Obj()),
			want: []sched.Decision{
				{JobID: 1, Reason: api.ReasonResources, Detail: "0/3 nodes available: 2 InsufficientGPU, 1 NoMatchingGPUModel"},
				{JobID: 2, Reason: api.ReasonPriority, Detail: "waiting for higher-priority jobs"},
			},
		},
		{
			name:        "disjoint partition runs",
			snap:        mixed(big.Obj(), st.MakeJob().ID(2).Priority(50).Partition("h").GPUs(1).Obj()),
			wantStarted: []uint64{2},
			want: []sched.Decision{
				{JobID: 1, Reason: api.ReasonResources, Detail: "0/3 nodes available: 2 InsufficientGPU, 1 NoMatchingGPUModel"},
			},
		},
		{
			name: "a job waiting for one required node blocks only that node",
			snap: mixed(
				st.MakeJob().ID(1).Priority(100).GPUs(8).NodeList("gpu01").Obj(),
				st.MakeJob().ID(2).Priority(50).GPUs(1).NodeList("gpu01").Obj(),
				st.MakeJob().ID(3).Priority(40).GPUs(1).GPUType("a100").Obj(),
			),
			wantStarted: []uint64{3},
			want: []sched.Decision{
				{JobID: 1, Reason: api.ReasonResources, Detail: "0/3 nodes available: 2 NodeNotRequested, 1 InsufficientGPU"},
				{JobID: 2, Reason: api.ReasonPriority, Detail: "waiting for higher-priority jobs"},
			},
		},
		{
			name: "held, future, over-limit and impossible jobs do not block",
			snap: mixed(
				st.MakeJob().ID(1).Priority(100).Hold(api.HoldUser).GPUs(8).Obj(),
				st.MakeJob().ID(2).Priority(99).Begin(now.Add(time.Hour)).GPUs(8).Obj(),
				st.MakeJob().ID(3).Priority(98).GPUs(64).Obj(),
				st.MakeJob().ID(4).Priority(97).GPUs(1).GPUType("v100").Obj(),
				st.MakeJob().ID(5).Priority(96).GPUs(1).GPUType("a100").Obj(),
			),
			wantStarted: []uint64{5},
			want: []sched.Decision{
				{JobID: 1, Reason: api.ReasonJobHeldUser},
				{JobID: 2, Reason: api.ReasonBeginTime},
				{JobID: 3, Reason: api.ReasonBadConstraints, Detail: "64 GPUs per node requested, nodes of partition gpu have at most 8"},
				{JobID: 4, Reason: api.ReasonBadConstraints, Detail: "no node of partition gpu has GPU model v100"},
			},
		},
		{
			name: "nodes too small for the blocked job stay open",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("gpu01").GPUs(8).UsedGPUs(0).Obj(),
				st.MakeNode("small01").GPUs(4).Obj(),
			).Partitions(st.MakePartition("gpu", "gpu01", "small01").Obj()).Jobs(
				st.MakeJob().ID(1).Priority(9).GPUs(8).Obj(),
				st.MakeJob().ID(2).Priority(5).GPUs(1).Obj(),
				st.MakeJob().ID(3).Priority(4).GPUs(5).Obj(),
			).Obj(),
			wantStarted: []uint64{2},
			want: []sched.Decision{
				{JobID: 1, Reason: api.ReasonResources, Detail: "0/2 nodes available: 2 InsufficientGPU"},
				{JobID: 3, Reason: api.ReasonPriority, Detail: "waiting for higher-priority jobs"},
			},
		},
		{
			name: "a node-down job does not block",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("gpu01").GPUs(8).Obj(),
				st.MakeNode("gpu02").GPUs(8).Down().Obj(),
			).Partitions(st.MakePartition("gpu", "gpu01", "gpu02").Obj()).Jobs(
				st.MakeJob().ID(1).Priority(9).Nodes(2).Obj(),
				st.MakeJob().ID(2).Priority(1).GPUs(8).Obj(),
			).Obj(),
			wantStarted: []uint64{2},
			want: []sched.Decision{
				{JobID: 1, Reason: api.ReasonNodeDown, Detail: "1/2 nodes available: 1 NodeDown; needs nodes that are down or drained"},
			},
		},
		{
			name: "higher jobs start first, then the partition blocks",
			snap: fourNodes().Jobs(
				st.MakeJob().ID(1).Priority(9).Nodes(3).GPUsPerNode(8).Obj(),
				st.MakeJob().ID(2).Priority(8).Nodes(2).GPUsPerNode(8).Obj(),
				st.MakeJob().ID(3).Priority(7).GPUs(1).Obj(),
				st.MakeJob().ID(4).Priority(6).Hold(api.HoldAdmin).Obj(),
			).Obj(),
			wantStarted: []uint64{1},
			want: []sched.Decision{
				// Job 1, started in the same pass, ends at its limit:
				// the estimate (squeue --start) of the blocked job.
				{JobID: 2, Reason: api.ReasonResources, Detail: "1/4 nodes available: 3 InsufficientGPU", ExpectedStart: now.Add(24 * time.Hour)},
				{JobID: 3, Reason: api.ReasonPriority, Detail: "waiting for higher-priority jobs"},
				{JobID: 4, Reason: api.ReasonJobHeldAdmin},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := sched.Schedule(tt.snap, now, sched.Config{})
			if diff := cmp.Diff(tt.wantStarted, startedIDs(plan)); diff != "" {
				t.Errorf("started (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, plan.Pending); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPriorityOrder(t *testing.T) {
	// One node with a single free GPU: only the first job in order starts,
	// and Starts/Pending follow the order.
	one := func(jobs ...*api.Job) *sched.Snapshot {
		return st.MakeSnapshot().Nodes(st.MakeNode("gpu01").GPUs(8).UsedGPUs(1, 2, 3, 4, 5, 6, 7).Obj()).
			Partitions(st.MakePartition("gpu", "gpu01").Obj()).Jobs(jobs...).Obj()
	}
	tests := []struct {
		name string
		jobs []*api.Job
		want []uint64 // order of all jobs: the start first, then pending
	}{
		{
			name: "effective priority, higher first",
			jobs: []*api.Job{st.MakeJob().ID(1).Priority(1).GPUs(1).Obj(), st.MakeJob().ID(2).Priority(5).GPUs(1).Obj()},
			want: []uint64{2, 1},
		},
		{
			name: "explicit priority when the effective one is zero",
			jobs: []*api.Job{st.MakeJob().ID(1).Priority(3).GPUs(1).Obj(), st.MakeJob().ID(2).SpecPriority(4).GPUs(1).Obj()},
			want: []uint64{2, 1},
		},
		{
			name: "earlier submit on equal priority",
			jobs: []*api.Job{
				st.MakeJob().ID(1).Submit(st.Epoch.Add(time.Second)).GPUs(1).Obj(),
				st.MakeJob().ID(2).Submit(st.Epoch).GPUs(1).Obj(),
			},
			want: []uint64{2, 1},
		},
		{
			name: "lower id last",
			jobs: []*api.Job{st.MakeJob().ID(7).GPUs(1).Obj(), st.MakeJob().ID(3).GPUs(1).Obj(), st.MakeJob().ID(5).GPUs(1).Obj()},
			want: []uint64{3, 5, 7},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := sched.Schedule(one(tt.jobs...), now, sched.Config{})
			got := startedIDs(plan)
			for _, d := range plan.Pending {
				got = append(got, d.JobID)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
			if len(plan.Starts) != 1 {
				t.Errorf("%d starts, want 1", len(plan.Starts))
			}
		})
	}
}

func TestMaxStarts(t *testing.T) {
	var jobs []*api.Job
	for i := range 6 {
		jobs = append(jobs, st.MakeJob().ID(uint64(i+1)).GPUs(1).Obj())
	}
	jobs = append(jobs, st.MakeJob().ID(7).Hold(api.HoldUser).Obj())
	plan := sched.Schedule(fourNodes().Jobs(jobs...).Obj(), now, sched.Config{MaxStarts: 4})
	if diff := cmp.Diff([]uint64{1, 2, 3, 4}, startedIDs(plan)); diff != "" {
		t.Errorf("started (-want +got):\n%s", diff)
	}
	want := []sched.Decision{
		{JobID: 5, Reason: api.ReasonPriority, Detail: "start limit of this scheduling pass reached"},
		{JobID: 6, Reason: api.ReasonPriority, Detail: "start limit of this scheduling pass reached"},
		{JobID: 7, Reason: api.ReasonJobHeldUser},
	}
	if diff := cmp.Diff(want, plan.Pending); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
}

func TestNilAndEmpty(t *testing.T) {
	if got := sched.Schedule(nil, now, sched.Config{}); !got.Now.Equal(now) || len(got.Starts)+len(got.Pending) != 0 {
		t.Errorf("Schedule(nil) = %+v", got)
	}
	plan := sched.Schedule(fourNodes().Jobs(nil, st.MakeJob().Obj()).Obj(), now, sched.Config{})
	if diff := cmp.Diff([]uint64{1}, startedIDs(plan)); diff != "" {
		t.Errorf("nil job entries must be skipped (-want +got):\n%s", diff)
	}
	if !plan.Now.Equal(now) {
		t.Errorf("Plan.Now = %v, want %v", plan.Now, now)
	}
}

// cloneSnapshot deep-copies a snapshot so a test can prove Schedule left
// the original alone.
func cloneSnapshot(s *sched.Snapshot) *sched.Snapshot {
	c := &sched.Snapshot{Partitions: map[string]*sched.PartitionInfo{}}
	for _, n := range s.Nodes {
		n.FreeGPUs = slices.Clone(n.FreeGPUs)
		c.Nodes = append(c.Nodes, n)
	}
	for k, p := range s.Partitions {
		cp := *p
		cp.Nodes = slices.Clone(p.Nodes)
		c.Partitions[k] = &cp
	}
	for _, j := range s.Pending {
		cj := *j
		cj.NodeList, cj.Exclude = slices.Clone(j.NodeList), slices.Clone(j.Exclude)
		c.Pending = append(c.Pending, &cj)
	}
	return c
}

func TestDeterministicAndPure(t *testing.T) {
	starts := 0
	for _, seed := range []int64{1, 2, 3, 4, 5, 6} {
		snap := randomSnapshot(seed, 24, 300)
		before := cloneSnapshot(snap)
		first := sched.Schedule(snap, now, sched.Config{DefMemPerCPUMB: 100})
		if diff := cmp.Diff(before, snap); diff != "" {
			t.Fatalf("seed %d: snapshot mutated (-before +after):\n%s", seed, diff)
		}
		second := sched.Schedule(snap, now, sched.Config{DefMemPerCPUMB: 100})
		if diff := cmp.Diff(first, second); diff != "" {
			t.Fatalf("seed %d: second pass differs (-first +second):\n%s", seed, diff)
		}
		// The input order of pending jobs must not matter either.
		shuffled := cloneSnapshot(snap)
		slices.Reverse(shuffled.Pending)
		third := sched.Schedule(shuffled, now, sched.Config{DefMemPerCPUMB: 100})
		if diff := cmp.Diff(first, third); diff != "" {
			t.Fatalf("seed %d: reversed input differs (-first +reversed):\n%s", seed, diff)
		}
		starts += len(first.Starts)
	}
	if starts == 0 {
		t.Fatal("nothing started in any pass: the test proves little")
	}
}

// TestScheduleOvercommitMinCPUsTmp: a pass places an overcommitted job
// with -c CPUs on one node for all its tasks, gives --mincpus CPUs per
// node, and leaves a job whose --tmp no node has pending as impossible
// while one that fits goes to the node with the disk.
func TestScheduleOvercommitMinCPUsTmp(t *testing.T) {
	snap := st.MakeSnapshot().
		Nodes(st.MakeNode("n1").CPUs(4).TmpDisk(1000).Obj(), st.MakeNode("n2").CPUs(8).TmpDisk(50000).Obj()).
		Partitions(st.MakePartition("p", "n1", "n2").Obj()).
		Jobs(
			st.MakeJob().ID(1).Partition("p").NodeList("n1").Tasks(10).CPUsPerTask(2).Overcommit().Obj(),
			st.MakeJob().ID(2).Partition("p").Nodes(2).MinCPUs(2).Obj(),
			st.MakeJob().ID(3).Partition("p").Tmp(60000).Obj(),
			st.MakeJob().ID(4).Partition("p").Tmp(20000).Obj(),
		).Obj()
	plan := sched.Schedule(snap, now, sched.Config{})
	s1, ok := start(plan, 1)
	if !ok || len(s1.Alloc) != 1 || s1.Alloc[0].Node != "n1" || s1.Alloc[0].CPUs != 2 || s1.Alloc[0].Tasks != 10 {
		t.Errorf("job 1 (-n10 -c2 -O on 4 CPUs): %+v, started %v", s1.Alloc, ok)
	}
	s2, ok := start(plan, 2)
	if !ok || len(s2.Alloc) != 2 || s2.Alloc[0].CPUs != 2 || s2.Alloc[1].CPUs != 2 {
		t.Errorf("job 2 (-N2 --mincpus=2): %+v, started %v", s2.Alloc, ok)
	}
	d3, ok := decision(t, plan, 3)
	if !ok || d3.Reason != api.ReasonBadConstraints ||
		d3.Detail != "60000 MB of temporary disk per node requested (--tmp), nodes of partition p have at most 50000 MB" {
		t.Errorf("job 3 (--tmp=60000): %+v, pending %v", d3, ok)
	}
	s4, ok := start(plan, 4)
	if !ok || len(s4.Alloc) != 1 || s4.Alloc[0].Node != "n2" {
		t.Errorf("job 4 (--tmp=20000): %+v, started %v", s4.Alloc, ok)
	}
}

// TestScheduleKnownFailureKeepsNodeProperties: a pass answers a job of
// the same shape as one that did not fit with that job's decision, but
// only when the node properties it asks for (--constraint, --tmp) are
// the same: a job whose constraint or --tmp a node has starts.
func TestScheduleKnownFailureKeepsNodeProperties(t *testing.T) {
	n1 := st.MakeNode("n1").TmpDisk(1000).Obj()
	n1.Features = []string{"b"}
	withConstraint := func(id uint64, c string) *api.Job {
		j := st.MakeJob().ID(id).Partition("p").Obj()
		j.Constraint = c
		return j
	}
	snap := st.MakeSnapshot().Nodes(n1).Partitions(st.MakePartition("p", "n1").Obj()).
		Jobs(withConstraint(1, "a"), withConstraint(2, "b"),
			st.MakeJob().ID(3).Partition("p").Tmp(2000).Obj(), st.MakeJob().ID(4).Partition("p").Tmp(1000).Obj()).Obj()
	plan := sched.Schedule(snap, now, sched.Config{})
	if got := startedIDs(plan); !slices.Equal(got, []uint64{2, 4}) {
		t.Errorf("started %v, want [2 4]; pending %+v", got, plan.Pending)
	}
}
