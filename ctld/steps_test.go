package ctld

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepcred"
	"github.com/tide-hpc/tide/internal/stepio"
)

// twoNodeJob is a running job with tasks and GPUs on two nodes.
func twoNodeJob(tasks, cpus int, gpus ...[]int) *api.Job {
	j := &api.Job{ID: 9, State: api.StateRunning}
	for i, name := range []string{"gpu01", "gpu02"} {
		a := api.NodeAlloc{Node: name, CPUs: cpus, Tasks: tasks}
		if i < len(gpus) {
			a.GPUs = gpus[i]
		}
		j.Alloc = append(j.Alloc, a)
	}
	return j
}

func TestLayoutStep(t *testing.T) {
	eight := []int{0, 1, 2, 3, 4, 5, 6, 7}
	type node struct {
		Name  string
		Ranks []int
		GPUs  [][]int
	}
	tests := []struct {
		name    string
		job     *api.Job
		req     api.StepRequest
		want    []node
		wantErr string
	}{
		{name: "default: the job's own layout", job: twoNodeJob(2, 4),
			want: []node{{"gpu01", []int{0, 1}, nil}, {"gpu02", []int{2, 3}, nil}}},
		{name: "-N1 runs one task on the first node", job: twoNodeJob(2, 4), req: api.StepRequest{Nodes: 1},
			want: []node{{"gpu01", []int{0}, nil}}},
		{name: "-n1 uses one node", job: twoNodeJob(1, 4), req: api.StepRequest{Tasks: 1},
			want: []node{{"gpu01", []int{0}, nil}}},
		{name: "-m arbitrary: rank i on host i of the file", job: twoNodeJob(1, 4),
			req:  api.StepRequest{Distribution: "arbitrary", TaskHosts: []string{"gpu02", "gpu01", "gpu02"}},
			want: []node{{"gpu01", []int{1}, nil}, {"gpu02", []int{0, 2}, nil}}},
		{name: "-m arbitrary on one node leaves the others out", job: twoNodeJob(1, 4),
			req:  api.StepRequest{Distribution: "arbitrary", TaskHosts: []string{"gpu02", "gpu02"}},
			want: []node{{"gpu02", []int{0, 1}, nil}}},
		{name: "-m arbitrary outside the job", job: twoNodeJob(1, 4),
			req:     api.StepRequest{Distribution: "arbitrary", TaskHosts: []string{"gpu01", "gpu09"}},
			wantErr: "node gpu09 is not in the job's allocation"},
		{name: "-m arbitrary with another -n", job: twoNodeJob(1, 4),
			req:     api.StepRequest{Distribution: "arbitrary", Tasks: 3, TaskHosts: []string{"gpu01", "gpu02"}},
			wantErr: "3 tasks asked, the host list names 2"},
		{name: "-n3 spreads, first node takes the remainder", job: twoNodeJob(1, 4), req: api.StepRequest{Tasks: 3},
			want: []node{{"gpu01", []int{0, 1}, nil}, {"gpu02", []int{2}, nil}}},
		{name: "the job's task count takes the job's uneven layout", job: func() *api.Job {
			j := twoNodeJob(1, 8)
			j.Alloc[0].Tasks, j.Alloc[1].Tasks = 5, 1
			return j
		}(), req: api.StepRequest{Tasks: 6},
			want: []node{{"gpu01", []int{0, 1, 2, 3, 4}, nil}, {"gpu02", []int{5}, nil}}},
		{name: "--ntasks-per-node fills node 0 first", job: twoNodeJob(1, 4), req: api.StepRequest{Tasks: 3, TasksPerNode: 2},
			want: []node{{"gpu01", []int{0, 1}, nil}, {"gpu02", []int{2}, nil}}},
		{name: "--ntasks-per-node alone on every node", job: twoNodeJob(1, 4), req: api.StepRequest{TasksPerNode: 3},
			want: []node{{"gpu01", []int{0, 1, 2}, nil}, {"gpu02", []int{3, 4, 5}, nil}}},
		{name: "--gpus-per-task splits the node's GPUs", job: twoNodeJob(2, 8, []int{2, 5, 6, 7}, []int{0, 1, 2, 3}),
			req:  api.StepRequest{Tasks: 4, GPUsPerTask: 2},
			want: []node{{"gpu01", []int{0, 1}, [][]int{{2, 5}, {6, 7}}}, {"gpu02", []int{2, 3}, [][]int{{0, 1}, {2, 3}}}}},
		{name: "16 tasks, one GPU each, over two 8-GPU nodes", job: twoNodeJob(8, 64, eight, eight),
			req: api.StepRequest{Tasks: 16, GPUsPerTask: 1},
			want: []node{{"gpu01", []int{0, 1, 2, 3, 4, 5, 6, 7}, [][]int{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}},
				{"gpu02", []int{8, 9, 10, 11, 12, 13, 14, 15}, [][]int{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}}}},
		{name: "without --gpus-per-task every task sees the node's GPUs", job: twoNodeJob(2, 4, []int{1, 3}),
			req:  api.StepRequest{Nodes: 1, Tasks: 2},
			want: []node{{"gpu01", []int{0, 1}, [][]int{{1, 3}, {1, 3}}}}},
		{name: "pty is one task", job: twoNodeJob(2, 4), req: api.StepRequest{Pty: true},
			want: []node{{"gpu01", []int{0}, nil}}},
		{name: "pty ignores the counts", job: twoNodeJob(2, 4), req: api.StepRequest{Pty: true, Nodes: 2, Tasks: 4},
			want: []node{{"gpu01", []int{0}, nil}}},
		{name: "more nodes than the job has", job: twoNodeJob(1, 4), req: api.StepRequest{Nodes: 3}, wantErr: "3 nodes asked, the job has 2"},
		{name: "more CPUs than the job has", job: twoNodeJob(1, 2), req: api.StepRequest{Tasks: 2, CPUsPerTask: 2, Nodes: 1},
			wantErr: "More processors requested than permitted"},
		{name: "more GPUs than the node gives", job: twoNodeJob(1, 8, []int{0}), req: api.StepRequest{Nodes: 1, Tasks: 2, GPUsPerTask: 1},
			wantErr: "do not fit the 1 GPUs"},
		{name: "fewer tasks than nodes", job: twoNodeJob(1, 4), req: api.StepRequest{Nodes: 2, Tasks: 1}, wantErr: "1 tasks cannot use 2 nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lay, err := layoutStep(tt.job, tt.req)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, api.ErrInvalidArgument) {
					t.Fatalf("err = %v, want invalid argument containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []node
			n := 0
			for _, sn := range lay.nodes {
				got = append(got, node{sn.Name, sn.Ranks, sn.GPUs})
				n += len(sn.Ranks)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
			if lay.ntasks != n {
				t.Fatalf("ntasks %d, want %d", lay.ntasks, n)
			}
		})
	}
}

// stepHarness is a harness whose two nodes accept steps and a running
// two-node job of alice's.
func stepHarness(t *testing.T, spec api.JobSpec) (*harness, uint64) {
	t.Helper()
	h := newStepKeyHarness(t)
	for _, n := range []string{"gpu01", "gpu02"} {
		h.register(n)
		h.s.mu.Lock()
		h.s.nodes[n].StepAddr = "0.0.0.0:6818"
		h.s.nodes[n].Hostname = n + ".example"
		h.s.mu.Unlock()
	}
	id := h.submit(spec)
	h.s.schedulePass()
	if j := h.job(id); j.State != api.StateRunning {
		t.Fatalf("job %d %s", id, j.State)
	}
	return h, id
}

func TestCreateStep(t *testing.T) {
	h, id := stepHarness(t, api.JobSpec{Name: "train", Nodes: 2, TasksPerNode: 2, GPUsPerNode: 2, TimeLimit: 600})
	ctx := context.Background()
	req := api.StepRequest{Argv: []string{"/usr/bin/python", "train.py"}, Cwd: "/home/alice", GPUsPerTask: 1}
	resp, err := h.s.createStep(ctx, h.alice, id, req)
	if err != nil {
		t.Fatal(err)
	}
	g, idx, err := stepcred.Verify(h.stepKey(), resp.Grant, "gpu02", h.clock.now())
	if err != nil || idx != 1 {
		t.Fatalf("grant does not verify for gpu02: %v (index %d)", err, idx)
	}
	j := h.job(id)
	now := h.clock.now()
	if g.StepID != 0 || g.NTasks != 4 || g.UserID != 1000 || g.GroupID != 1000 || g.User != "alice" || g.Restart != j.Restarts ||
		!g.Issued.Equal(now) || !g.Expires.Equal(now.Add(grantTTL)) || !g.JobEnd.Equal(j.StartTime.Add(10*time.Minute)) {
		t.Fatalf("grant %+v", g)
	}
	if _, _, err := stepcred.Verify(h.stepKey(), resp.Grant, "gpu02", now.Add(grantTTL)); !errors.Is(err, stepcred.ErrExpired) {
		t.Fatalf("grant still good %s after it was made: %v", grantTTL, err)
	}
	if g.Nodes[0].Addr != "gpu01.example:6818" || len(g.Nodes[0].GPUs) != 2 || len(g.Nodes[0].GPUs[0]) != 1 {
		t.Fatalf("node 0 of the grant: %+v", g.Nodes[0])
	}
	// The first step holds every GPU and CPU of the job: a second one
	// waits for it (Slurm 22.05's steps share nothing by default).
	if _, err := h.s.createStep(ctx, h.alice, id, req); !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), api.StepBusy) {
		t.Fatalf("second step beside the first: %v, want %q", err, api.StepBusy)
	}
	if err := h.s.endStep(ctx, h.alice, id, 0, api.StepEnd{Exit: api.ExitStatus{Code: 3}}); err != nil {
		t.Fatal(err)
	}
	resp2, err := h.s.createStep(ctx, h.alice, id, req)
	if err != nil {
		t.Fatal(err)
	}
	if g2, _ := stepio.Decode(resp2.Grant); g2.StepID != 1 {
		t.Fatalf("second step id %d, want 1", g2.StepID)
	}
	steps, err := h.s.listSteps(ctx, []uint64{id})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0].Name != "python" || steps[0].State != api.StateFailed || steps[0].Exit.Code != 3 ||
		steps[1].State != api.StateRunning || steps[0].NTasks != 4 || steps[0].GPUs != 4 {
		t.Fatalf("steps %+v", steps)
	}

	bob := caller{uid: 1001, gid: 1001, user: "bob", known: true}
	tests := []struct {
		name  string
		c     caller
		id    uint64
		req   api.StepRequest
		class error
	}{
		{name: "another user's job", c: bob, id: id, req: req, class: api.ErrPermissionDenied},
		{name: "unknown job", c: h.alice, id: 999, req: req, class: api.ErrNotFound},
		{name: "no command", c: h.alice, id: id, req: api.StepRequest{Cwd: "/"}, class: api.ErrInvalidArgument},
		{name: "relative cwd", c: h.alice, id: id, req: api.StepRequest{Argv: []string{"x"}, Cwd: "rel"}, class: api.ErrInvalidArgument},
		{name: "not on the local socket", c: caller{}, id: id, req: req, class: api.ErrUnauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := h.s.createStep(ctx, tt.c, tt.id, tt.req); !errors.Is(err, tt.class) {
				t.Fatalf("err = %v, want %v", err, tt.class)
			}
		})
	}
	if err := h.s.endStep(ctx, bob, id, 1, api.StepEnd{}); !errors.Is(err, api.ErrPermissionDenied) {
		t.Fatalf("bob ends alice's step: %v", err)
	}

	// The job ends with step 1 still open: the step reads as cancelled.
	h.sync(j.BatchHost(), finished(id, 0))
	steps, _ = h.s.listSteps(ctx, []uint64{id})
	if steps[1].State != api.StateCancelled || steps[1].End.IsZero() {
		t.Fatalf("open step after the job ended: %+v", steps[1])
	}
	if _, err := h.s.createStep(ctx, h.alice, id, req); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("step of an ended job: %v", err)
	}
}

func TestAllocationJobs(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	ctx := context.Background()
	submit := func(spec api.JobSpec) (uint64, error) {
		spec.Allocation, spec.WorkDir = true, "/home/alice"
		resp, err := h.s.submit(ctx, h.alice, api.SubmitRequest{Spec: spec})
		return resp.JobID, err
	}
	if _, err := submit(api.JobSpec{Script: "#!/bin/sh\n"}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("allocation with a script: %v", err)
	}
	ok, err := submit(api.JobSpec{Name: "a", TimeLimit: 60})
	if err != nil {
		t.Fatal(err)
	}
	fails, _ := submit(api.JobSpec{Name: "b", TimeLimit: 60})
	expires, _ := submit(api.JobSpec{Name: "c", TimeLimit: 60})
	h.s.schedulePass()
	for _, id := range []uint64{ok, fails, expires} {
		j := h.job(id)
		if j.State != api.StateRunning {
			t.Fatalf("allocation %d %s", id, j.State)
		}
		// Nothing is launched for an allocation.
		if resp := h.sync(j.BatchHost()); len(resp.Launch) != 0 {
			t.Fatalf("launch of allocation %d: %+v", id, resp.Launch)
		}
	}
	if err := h.s.releaseAllocation(caller{uid: 1001, user: "bob", known: true}, ok, api.ExitStatus{}); !errors.Is(err, api.ErrPermissionDenied) {
		t.Fatalf("bob releases alice's allocation: %v", err)
	}
	if err := h.s.releaseAllocation(h.alice, ok, api.ExitStatus{}); err != nil {
		t.Fatal(err)
	}
	if err := h.s.releaseAllocation(h.alice, fails, api.ExitStatus{Code: 2}); err != nil {
		t.Fatal(err)
	}
	h.clock.add(61 * time.Second)
	h.s.mu.Lock()
	h.s.checkNodes(h.clock.now())
	h.s.mu.Unlock()
	for _, c := range []struct {
		id    uint64
		state api.JobState
		exit  string
	}{{ok, api.StateCompleted, "0:0"}, {fails, api.StateFailed, "2:0"}, {expires, api.StateTimeout, "0:0"}} {
		if j := h.job(c.id); j.State != c.state || j.Exit.String() != c.exit {
			t.Errorf("allocation %d: %s %s, want %s %s", c.id, j.State, j.Exit, c.state, c.exit)
		}
	}
	batch := h.submit(api.JobSpec{Name: "batch"})
	if err := h.s.releaseAllocation(h.alice, batch, api.ExitStatus{}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("release of a batch job: %v", err)
	}
}

// TestLayoutStepCarriesNodeSizes: each node of a grant carries the job's
// memory and slice size there, so that a node that runs no batch script
// of the job can still fence the step's memory and point slice tasks at
// their MPS daemon.
func TestLayoutStepCarriesNodeSizes(t *testing.T) {
	j := twoNodeJob(1, 4, []int{0}, []int{3})
	for i := range j.Alloc {
		j.Alloc[i].MemoryMB, j.Alloc[i].GPUMemMB, j.Alloc[i].GPUComputePct = int64(1000*(i+1)), 8192, 25
	}
	lay, err := layoutStep(j, api.StepRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for i, sn := range lay.nodes {
		if sn.MemoryMB != int64(1000*(i+1)) || sn.GPUMemMB != 8192 || sn.GPUComputePct != 25 {
			t.Errorf("node %s: memory %d, slice %d MB/%d%%; want %d, 8192 MB/25%%", sn.Name, sn.MemoryMB, sn.GPUMemMB, sn.GPUComputePct, 1000*(i+1))
		}
	}
}
