package ctld

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepio"
)

// TestLayoutStepResources covers what a step holds of its allocation and
// when it must wait for the job's other steps (Slurm 22.05's rules):
// --exact, the whole-node default, --overlap, --mem, GPUs, -w/-x/-r,
// -m cyclic and --gpu-bind.
func TestLayoutStepResources(t *testing.T) {
	four := []int{0, 1, 2, 3}
	type node struct {
		Name  string
		Ranks []int
		CPUs  int
		Mem   int64
		Held  []int
		GPUs  [][]int
	}
	one := func(n int) *int { return &n }
	held := func(node string, cpus int, mem int64, gpus ...int) map[string]stepHold {
		h := stepHold{cpus: cpus, memMB: mem}
		if len(gpus) > 0 {
			h.gpus = map[int]bool{}
			for _, g := range gpus {
				h.gpus[g] = true
			}
		}
		return map[string]stepHold{node: h}
	}
	job := func() *api.Job {
		j := twoNodeJob(2, 4, four, four)
		j.Alloc[0].MemoryMB, j.Alloc[1].MemoryMB = 8000, 8000
		return j
	}
	tests := []struct {
		name     string
		req      api.StepRequest
		held     map[string]stepHold
		want     []node
		wantBusy bool
		wantErr  string
	}{
		{name: "without --exact a step holds every CPU of its nodes", req: api.StepRequest{Tasks: 1},
			want: []node{{"gpu01", []int{0}, 4, 0, nil, [][]int{four}}}},
		{name: "--exact holds what the tasks ask for", req: api.StepRequest{Tasks: 1, Exact: true},
			want: []node{{"gpu01", []int{0}, 1, 0, nil, [][]int{four}}}},
		{name: "-c implies --exact", req: api.StepRequest{Tasks: 1, CPUsPerTask: 2},
			want: []node{{"gpu01", []int{0}, 2, 0, nil, [][]int{four}}}},
		{name: "--whole overrides -c", req: api.StepRequest{Tasks: 1, CPUsPerTask: 2, Whole: true},
			want: []node{{"gpu01", []int{0}, 4, 0, nil, [][]int{four}}}},
		{name: "an --exact step goes where CPUs are free", req: api.StepRequest{Tasks: 1, Exact: true}, held: held("gpu01", 4, 0),
			want: []node{{"gpu02", []int{0}, 1, 0, nil, [][]int{four}}}},
		{name: "beside another exact step on the same node", req: api.StepRequest{Tasks: 1, Nodes: 1, Exact: true, NodeList: []string{"gpu01"}},
			held: held("gpu01", 3, 0), want: []node{{"gpu01", []int{0}, 1, 0, nil, [][]int{four}}}},
		{name: "the default step takes the CPUs left", req: api.StepRequest{Tasks: 1, NodeList: []string{"gpu01"}}, held: held("gpu01", 1, 0),
			want: []node{{"gpu01", []int{0}, 3, 0, nil, [][]int{four}}}},
		{name: "no CPU left: busy", req: api.StepRequest{Tasks: 1, NodeList: []string{"gpu01"}}, held: held("gpu01", 4, 0), wantBusy: true},
		{name: "--overlap ignores what others hold", req: api.StepRequest{Tasks: 1, Overlap: true, NodeList: []string{"gpu01"}}, held: held("gpu01", 4, 0),
			want: []node{{"gpu01", []int{0}, 4, 0, nil, [][]int{four}}}},
		{name: "the job's own layout waits for any node", req: api.StepRequest{}, held: held("gpu02", 4, 0), wantBusy: true},
		{name: "--mem is held", req: api.StepRequest{Tasks: 2, Exact: true, MemPerNodeMB: 3000},
			want: []node{{"gpu01", []int{0}, 1, 3000, nil, [][]int{four}}, {"gpu02", []int{1}, 1, 3000, nil, [][]int{four}}}},
		{name: "--mem-per-cpu times the CPUs", req: api.StepRequest{Tasks: 1, CPUsPerTask: 2, MemPerCPUMB: 1000},
			want: []node{{"gpu01", []int{0}, 2, 2000, nil, [][]int{four}}}},
		{name: "memory held by others: busy", req: api.StepRequest{Tasks: 1, Exact: true, Nodes: 1, MemPerNodeMB: 5000, NodeList: []string{"gpu01"}},
			held: held("gpu01", 1, 4000), wantBusy: true},
		{name: "more memory than the job has", req: api.StepRequest{Tasks: 1, MemPerNodeMB: 9000}, wantErr: "Memory required by task is not available"},
		{name: "--gpus-per-task holds the GPUs left", req: api.StepRequest{Tasks: 2, Nodes: 1, Exact: true, GPUsPerTask: 1}, held: held("gpu01", 1, 0, 0, 2),
			want: []node{{"gpu01", []int{0, 1}, 2, 0, []int{1, 3}, [][]int{{1}, {3}}}}},
		{name: "GPUs held by others: the next node", req: api.StepRequest{Tasks: 1, Exact: true, GPUsPerTask: 2}, held: held("gpu01", 1, 0, 0, 1, 2),
			want: []node{{"gpu02", []int{0}, 1, 0, []int{0, 1}, [][]int{{0, 1}}}}},
		{name: "--gpus spread over the nodes", req: api.StepRequest{Tasks: 2, Exact: true, GPUs: 3},
			want: []node{{"gpu01", []int{0}, 1, 0, []int{0, 1}, [][]int{{0, 1}}}, {"gpu02", []int{1}, 1, 0, []int{0}, [][]int{{0}}}}},
		{name: "--gpus-per-node", req: api.StepRequest{Nodes: 1, GPUsPerNode: 2, Exact: true},
			want: []node{{"gpu01", []int{0}, 1, 0, []int{0, 1}, [][]int{{0, 1}}}}},
		{name: "-x leaves a node out", req: api.StepRequest{Tasks: 1, Exclude: []string{"gpu01"}},
			want: []node{{"gpu02", []int{0}, 4, 0, nil, [][]int{four}}}},
		{name: "-r starts at a node", req: api.StepRequest{Nodes: 1, Relative: one(1)},
			want: []node{{"gpu02", []int{0}, 4, 0, nil, [][]int{four}}}},
		{name: "-r past the job's nodes", req: api.StepRequest{Nodes: 1, Relative: one(2)}, wantErr: "--relative=2"},
		{name: "-w names a node outside the job", req: api.StepRequest{NodeList: []string{"gpu09"}}, wantErr: "gpu09 is not in the job's allocation"},
		{name: "-m cyclic deals the ranks out", req: api.StepRequest{Tasks: 4, Nodes: 2, Distribution: "cyclic"},
			want: []node{{"gpu01", []int{0, 2}, 4, 0, nil, [][]int{four, four}}, {"gpu02", []int{1, 3}, 4, 0, nil, [][]int{four, four}}}},
		{name: "--gpu-bind=single:2", req: api.StepRequest{Tasks: 4, Nodes: 1, GPUs: 2, GPUBind: "single:2", Overcommit: true},
			want: []node{{"gpu01", []int{0, 1, 2, 3}, 4, 0, []int{0, 1}, [][]int{{0}, {0}, {1}, {1}}}}},
		{name: "--gpu-bind=map_gpu picks by position", req: api.StepRequest{Tasks: 2, Nodes: 1, GPUBind: "verbose,map_gpu:3,1"},
			want: []node{{"gpu01", []int{0, 1}, 4, 0, nil, [][]int{{3}, {1}}}}},
		{name: "--gpu-bind=mask_gpu", req: api.StepRequest{Tasks: 2, Nodes: 1, GPUBind: "mask_gpu:0x3,0xc"},
			want: []node{{"gpu01", []int{0, 1}, 4, 0, nil, [][]int{{0, 1}, {2, 3}}}}},
		{name: "--gpu-bind=per_task:2 is --gpus-per-task=2", req: api.StepRequest{Tasks: 2, Nodes: 1, GPUBind: "per_task:2"},
			want: []node{{"gpu01", []int{0, 1}, 4, 0, []int{0, 1, 2, 3}, [][]int{{0, 1}, {2, 3}}}}},
		{name: "--gpu-bind=map_gpu beyond the step's GPUs", req: api.StepRequest{Tasks: 1, GPUBind: "map_gpu:7"}, wantErr: "GPU 7 is not among"},
		{name: "a bad --gpu-bind", req: api.StepRequest{Tasks: 1, GPUBind: "bogus"}, wantErr: "Invalid --gpu-bind argument: gpu:bogus"},
		{name: "-O lets more tasks than CPUs run", req: api.StepRequest{Tasks: 6, Nodes: 1, Overcommit: true, Exact: true},
			want: []node{{"gpu01", []int{0, 1, 2, 3, 4, 5}, 4, 0, nil, [][]int{four, four, four, four, four, four}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lay, err := layoutStepIn(job(), tt.req, tt.held)
			switch {
			case tt.wantBusy:
				if !errors.Is(err, errStepBusy) {
					t.Fatalf("err = %v, want busy", err)
				}
				return
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, api.ErrInvalidArgument) {
					t.Fatalf("err = %v, want invalid argument containing %q", err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			var got []node
			for _, sn := range lay.nodes {
				got = append(got, node{sn.Name, sn.Ranks, sn.StepCPUs, sn.StepMemMB, sn.StepGPUs, sn.GPUs})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestDistribute(t *testing.T) {
	tests := []struct {
		dist   string
		counts []int
		want   [][]int
	}{
		{"", []int{3, 2}, [][]int{{0, 1, 2}, {3, 4}}},
		{"block", []int{2, 2}, [][]int{{0, 1}, {2, 3}}},
		{"cyclic", []int{3, 2}, [][]int{{0, 2, 4}, {1, 3}}},
		{"cyclic:block", []int{2, 2}, [][]int{{0, 2}, {1, 3}}},
		{"plane=2", []int{4, 3}, [][]int{{0, 1, 4, 5}, {2, 3, 6}}},
		{"arbitrary", []int{1, 2}, [][]int{{0}, {1, 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.dist, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, distribute(tt.counts, tt.dist)); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestLiveSteps drives steps through the controller: --exact steps side
// by side, a whole-node step that waits, an --overlap step, scancel J.S
// (the step's nodes get SIGKILL for it alone, it stops holding its
// resources, its end reads CANCELLED) and the records' layout.
func TestLiveSteps(t *testing.T) {
	h, id := stepHarness(t, api.JobSpec{Name: "train", Nodes: 2, TasksPerNode: 2, TimeLimit: 600})
	ctx := context.Background()
	run := func(req api.StepRequest) (*api.StepGrant, error) {
		req.Argv, req.Cwd = []string{"/bin/true"}, "/tmp"
		resp, err := h.s.createStep(ctx, h.alice, id, req)
		if err != nil {
			return nil, err
		}
		return stepio.Decode(resp.Grant)
	}
	busy := func(err error) bool {
		return errors.Is(err, api.ErrConflict) && strings.Contains(err.Error(), api.StepBusy)
	}

	var grants []*api.StepGrant
	for range 4 {
		g, err := run(api.StepRequest{Tasks: 1, Exact: true})
		if err != nil {
			t.Fatalf("exact step %d: %v", len(grants), err)
		}
		grants = append(grants, g)
	}
	if grants[0].Nodes[0].Name != "gpu01" || grants[1].Nodes[0].Name != "gpu01" || grants[2].Nodes[0].Name != "gpu02" || grants[3].Nodes[0].Name != "gpu02" {
		t.Fatalf("exact steps on %s %s %s %s", grants[0].Nodes[0].Name, grants[1].Nodes[0].Name, grants[2].Nodes[0].Name, grants[3].Nodes[0].Name)
	}
	if _, err := run(api.StepRequest{Tasks: 1, Exact: true}); !busy(err) {
		t.Fatalf("a fifth exact step: %v, want busy", err)
	}
	g, err := run(api.StepRequest{Tasks: 2, Overlap: true})
	if err != nil || g.StepID != 4 {
		t.Fatalf("overlap step: %+v %v", g, err)
	}

	// scancel 9.0: a SIGKILL for step 0 alone on its node.
	h.s.mu.Lock()
	for _, n := range h.s.nodes {
		n.signals = nil
	}
	h.s.mu.Unlock()
	resp, err := h.s.cancel(h.alice, api.CancelRequest{Steps: []api.StepRef{{JobID: id, StepID: 0}, {JobID: id, StepID: 9}}})
	if err != nil {
		t.Fatal(err)
	}
	wantRes := []api.JobResult{{JobID: id, ID: stepRef(id, 0)}, {JobID: id, ID: stepRef(id, 9), Error: "Invalid job step id specified"}}
	if diff := cmp.Diff(wantRes, resp.Results); diff != "" {
		t.Fatalf("cancel results (-want +got)\n%s", diff)
	}
	h.s.mu.Lock()
	sigs := h.s.nodes["gpu01"].signals
	other := h.s.nodes["gpu02"].signals
	h.s.mu.Unlock()
	want := []api.SignalCommand{{JobRef: api.JobRef{JobID: id}, Signal: int(syscall.SIGKILL), Steps: true, StepIDs: []uint32{0}}}
	if diff := cmp.Diff(want, sigs); diff != "" || len(other) != 0 {
		t.Fatalf("signals to gpu01 (-want +got)\n%s\ngpu02 got %+v", diff, other)
	}
	// Step 0 no longer holds its CPU: an exact step fits again.
	if _, err := run(api.StepRequest{Tasks: 1, Exact: true}); err != nil {
		t.Fatalf("exact step after scancel: %v", err)
	}
	if err := h.s.endStep(ctx, h.alice, id, 0, api.StepEnd{Exit: api.ExitStatus{Signal: 9}}); err != nil {
		t.Fatal(err)
	}
	recs, err := h.s.listSteps(ctx, []uint64{id})
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].State != api.StateCancelled || recs[1].State != api.StateRunning {
		t.Fatalf("records %+v", recs)
	}
	wantLayout := []api.StepNodeUse{{Node: "gpu01", Tasks: []int{0}, CPUs: 1}}
	if diff := cmp.Diff(wantLayout, recs[1].Layout); diff != "" || !recs[1].Exact || recs[1].CPUs != 1 || recs[4].Overlap != true {
		t.Fatalf("step 1's layout (-want +got)\n%s\nrecord %+v", diff, recs[1])
	}
	// A signal to a step is no cancel: it keeps its resources.
	if resp, _ := h.s.cancel(h.alice, api.CancelRequest{Signal: 10, Steps: []api.StepRef{{JobID: id, StepID: 1}}}); resp.Results[0].Error != "" {
		t.Fatalf("signal step 1: %+v", resp)
	}
	if _, err := run(api.StepRequest{Tasks: 1, Exact: true}); !busy(err) {
		t.Fatalf("step beside a signalled one: %v, want busy", err)
	}
	bob := caller{uid: 1001, gid: 1001, user: "bob", known: true}
	if resp, _ := h.s.cancel(bob, api.CancelRequest{Steps: []api.StepRef{{JobID: id, StepID: 1}}}); resp.Results[0].Error != "Access/permission denied" {
		t.Fatalf("bob cancels alice's step: %+v", resp)
	}
	// The job ends: its live steps go with it.
	j := h.job(id)
	h.sync(j.BatchHost(), finished(id, 0))
	h.s.mu.Lock()
	h.s.pruneLiveSteps()
	left := len(h.s.liveSteps)
	h.s.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d jobs still have live steps after the job ended", left)
	}
	if resp, _ := h.s.cancel(h.alice, api.CancelRequest{Steps: []api.StepRef{{JobID: id, StepID: 1}}}); resp.Results[0].Error == "" {
		t.Fatalf("cancel a step of an ended job: %+v", resp)
	}
}

func stepRef(j uint64, s uint32) string { return api.StepRef{JobID: j, StepID: s}.String() }

// TestCreateStepCarriesTaskOptions: the grant carries what the nodes do
// per task, the step's own time limit shortens its end, and
// --multi-prog must name every task.
func TestCreateStepCarriesTaskOptions(t *testing.T) {
	h, id := stepHarness(t, api.JobSpec{Name: "x", Nodes: 1, Tasks: 2, TimeLimit: 600})
	ctx := context.Background()
	req := api.StepRequest{Argv: []string{"conf"}, Cwd: "/tmp", Tasks: 2, CPUBind: "cores", GPUBind: "none", MPI: "pmi2",
		TaskProlog: "/p", TaskEpilog: "/e", PreserveEnv: true, TimeLimit: 60, TaskArgv: [][]string{{"a", "0"}, {"b", "1"}}}
	resp, err := h.s.createStep(ctx, h.alice, id, req)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := stepio.Decode(resp.Grant)
	if g.CPUBind != "cores" || g.GPUBind != "none" || g.MPI != "pmi2" || g.TaskProlog != "/p" || g.TaskEpilog != "/e" || !g.PreserveEnv ||
		len(g.TaskArgv) != 2 || !g.JobEnd.Equal(h.clock.now().Add(60e9)) {
		t.Fatalf("grant %+v", g)
	}
	if err := h.s.endStep(ctx, h.alice, id, g.StepID, api.StepEnd{}); err != nil {
		t.Fatal(err)
	}
	req.TaskArgv = req.TaskArgv[:1]
	if _, err := h.s.createStep(ctx, h.alice, id, req); err == nil || !strings.Contains(err.Error(), "--multi-prog names 1 tasks, the step has 2") {
		t.Fatalf("multi-prog of one task for two: %v", err)
	}
}

// TestLiveStepsAfterRestart: a restarted controller reads what the
// running steps hold from the store, and a step scancel ended stays
// ended there.
func TestLiveStepsAfterRestart(t *testing.T) {
	h, id := stepHarness(t, api.JobSpec{Name: "train", Nodes: 2, TasksPerNode: 2, TimeLimit: 600})
	ctx := context.Background()
	for range 3 {
		if _, err := h.s.createStep(ctx, h.alice, id, api.StepRequest{Argv: []string{"/bin/true"}, Cwd: "/tmp", Tasks: 1, Exact: true}); err != nil {
			t.Fatal(err)
		}
	}
	if resp, _ := h.s.cancel(h.alice, api.CancelRequest{Steps: []api.StepRef{{JobID: id, StepID: 2}}}); resp.Results[0].Error != "" {
		t.Fatalf("scancel: %+v", resp)
	}
	h.restart()
	h.s.mu.Lock()
	j := h.s.jobs[id]
	holds := h.s.stepHolds(j)
	h.s.mu.Unlock()
	if j == nil || j.State != api.StateRunning {
		t.Fatalf("job after restart: %+v", j)
	}
	want := map[string]stepHold{"gpu01": {cpus: 2}}
	if diff := cmp.Diff(want, holds, cmp.AllowUnexported(stepHold{})); diff != "" {
		t.Fatalf("holds after restart (-want +got)\n%s", diff)
	}
}
