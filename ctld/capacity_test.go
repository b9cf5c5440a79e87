package ctld

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// scaleServer is a controller of nodes registered nodes (gpuNNN, 64
// CPUs, 512 GB, 8 A100 each) in one partition.
func scaleServer(b testing.TB, nodes int) *Server {
	b.Helper()
	s := benchServerOf(b, fmt.Sprintf(`
version: 1
cluster_name: t
state_dir: /unused
socket: /unused.sock
node_addr: 127.0.0.1:0
partitions:
  - {name: gpu, nodes: "gpu[001-%03d]", default: true, default_time: "1:00:00"}
nodes:
  - {names: "gpu[001-%03d]", cpus: 64, memory: 512G, gpus: 8}
`, nodes, nodes))
	for i := 1; i <= nodes; i++ {
		name := fmt.Sprintf("gpu%03d", i)
		gpus, _ := gres.Fake(name, gres.FakeConfig{Count: 8, Model: "NVIDIA A100-SXM4-80GB", MemoryMB: 81920})
		if _, err := s.register(api.NodeRegistration{Name: name, CPUs: 64, MemoryMB: 512 << 10, GPUs: gpus}); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkValidateSpec times the checks every submission passes before
// it is stored, on a registered cluster of 512 nodes × 8 GPUs: they look
// at every node of the partition (is the request possible at all?), so
// their cost grows with the cluster while the commit's does not.
func BenchmarkValidateSpec(b *testing.B) {
	s := scaleServer(b, 512)
	alice := caller{uid: 1000, gid: 1000, user: "alice", known: true}
	check := func() {
		spec := api.JobSpec{Script: "#!/bin/sh\ntrue\n", WorkDir: "/w", GPUs: 2}
		var warn []string
		if err := s.validateSpec(&spec, alice, &warn); err != nil {
			b.Fatal(err)
		}
	}
	check() // the first after the registrations builds the capacity list
	for b.Loop() {
		check()
	}
}

// TestSubmitCapacityFollowsRegistration: the capacity a submission is
// checked against is kept between submissions, and a registration that
// reports other hardware than declared retires it. gpu[01-02] declare 8
// GPUs each and register with 4.
func TestSubmitCapacityFollowsRegistration(t *testing.T) {
	h := newHarness(t)
	try := func(gpus int) error {
		_, err := h.submitAs(h.alice, api.JobSpec{GPUsPerNode: gpus, Nodes: 1})
		return err
	}
	if err := try(8); err != nil {
		t.Fatalf("8 GPUs on declared 8-GPU nodes: %v", err)
	}
	for _, node := range []string{"gpu01", "gpu02"} {
		gpus, _ := gres.Fake(node, gres.FakeConfig{Count: 4})
		if _, err := h.s.register(api.NodeRegistration{Name: node, CPUs: 8, MemoryMB: 64 * 1024, GPUs: gpus}); err != nil {
			t.Fatal(err)
		}
	}
	err := try(8)
	if err == nil || !strings.Contains(err.Error(), "not available") {
		t.Fatalf("8 GPUs after the nodes registered with 4: %v, want a refusal", err)
	}
	if err := try(4); err != nil {
		t.Fatalf("4 GPUs: %v", err)
	}
	// A node registering again with its 8 GPUs makes room once more.
	gpus, _ := gres.Fake("gpu02", gres.FakeConfig{Count: 8})
	if _, err := h.s.register(api.NodeRegistration{Name: "gpu02", CPUs: 8, MemoryMB: 64 * 1024, GPUs: gpus}); err != nil {
		t.Fatal(err)
	}
	if err := try(8); err != nil {
		t.Fatalf("8 GPUs after gpu02 came back with 8: %v", err)
	}
}

// BenchmarkSchedulePassScale times the controller's scheduling pass (its
// snapshot, the pure core, applying the plan) on 512 nodes × 8 GPUs, all
// busy with 4,096 one-GPU jobs, and 10,000 pending jobs that cannot
// start: the steady state of a full cluster.
func BenchmarkSchedulePassScale(b *testing.B) {
	s := scaleServer(b, 512)
	alice := caller{uid: 1000, gid: 1000, user: "alice", known: true}
	submit := func(spec api.JobSpec) {
		spec.Script, spec.WorkDir = "#!/bin/sh\n", "/w"
		if _, err := s.submit(context.Background(), alice, api.SubmitRequest{Spec: spec}); err != nil {
			b.Fatal(err)
		}
	}
	for range 512 * 8 {
		submit(api.JobSpec{GPUs: 1, CPUsPerTask: 4})
	}
	s.schedulePass()
	for range 10000 {
		submit(api.JobSpec{GPUs: 1, CPUsPerTask: 4})
	}
	s.schedulePass()
	s.mu.Lock()
	running := 0
	for _, j := range s.jobs {
		if j.State == api.StateRunning {
			running++
		}
	}
	s.mu.Unlock()
	if running != 512*8 {
		b.Fatalf("%d jobs running, want %d: the cluster is not full", running, 512*8)
	}
	for b.Loop() {
		s.schedulePass()
	}
}
