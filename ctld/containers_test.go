package ctld

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

func (h *harness) registerWith(node string, features ...string) {
	h.t.Helper()
	gpus, _ := gres.Fake(node, gres.FakeConfig{Count: 8})
	if _, err := h.s.register(api.NodeRegistration{Name: node, CPUs: 8, MemoryMB: 64 * 1024, GPUs: gpus, Features: features}); err != nil {
		h.t.Fatal(err)
	}
}

func TestContainerSubmit(t *testing.T) {
	tests := []struct {
		name           string
		features       []string // of gpu01; gpu02 has none
		spec           api.JobSpec
		wantErr        string
		wantImage      string
		wantConstraint string
	}{
		{name: "no container node", spec: api.JobSpec{ContainerImage: "tide-test/bb"}, wantErr: "none has feature containerd"},
		{name: "mounts without image", features: []string{"containerd"},
			spec: api.JobSpec{ContainerMounts: []api.ContainerMount{{Source: "/a", Destination: "/a"}}}, wantErr: "needs --container-image"},
		{name: "bad image", features: []string{"containerd"}, spec: api.JobSpec{ContainerImage: "UPPER"}, wantErr: "invalid container image"},
		{name: "image implies the feature", features: []string{"containerd"}, spec: api.JobSpec{ContainerImage: "tide-test/bb"},
			wantImage: "docker.io/tide-test/bb:latest", wantConstraint: "containerd"},
		{name: "added to the user's constraint", features: []string{"containerd", "ib", "nvlink"}, spec: api.JobSpec{ContainerImage: "alpine", Constraint: "ib|nvlink"},
			wantImage: "docker.io/library/alpine:latest", wantConstraint: "(ib|nvlink)&containerd"},
		{name: "already asked for", features: []string{"containerd", "ib"}, spec: api.JobSpec{ContainerImage: "alpine", Constraint: "containerd&ib"},
			wantImage: "docker.io/library/alpine:latest", wantConstraint: "containerd&ib"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.registerWith("gpu01", tt.features...)
			h.registerWith("gpu02")
			spec := tt.spec
			spec.Script, spec.WorkDir = "#!/bin/sh\ntrue\n", "/home/alice"
			resp, err := h.s.submit(context.Background(), h.alice, api.SubmitRequest{Spec: spec})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			j := h.job(resp.JobID)
			if j.ContainerImage != tt.wantImage || j.Constraint != tt.wantConstraint {
				t.Fatalf("image %q constraint %q, want %q %q", j.ContainerImage, j.Constraint, tt.wantImage, tt.wantConstraint)
			}
		})
	}
}

// TestContainerLaunchAndOOM: the launch carries the image and mounts;
// an OOM report ends the job OUT_OF_MEMORY unless it was cancelled.
func TestContainerLaunchAndOOM(t *testing.T) {
	tests := []struct {
		name      string
		cancel    bool
		report    api.NodeJobReport
		wantState api.JobState
		wantWhy   api.ReasonCode
	}{
		{name: "oom", report: api.NodeJobReport{State: api.NodeJobFinished, Exit: api.ExitStatus{Signal: 9}, OOM: true},
			wantState: api.StateOOM, wantWhy: api.ReasonOutOfMemory},
		{name: "oom in a script that carried on", report: api.NodeJobReport{State: api.NodeJobFinished, OOM: true},
			wantState: api.StateOOM, wantWhy: api.ReasonOutOfMemory},
		{name: "cancel wins", cancel: true, report: api.NodeJobReport{State: api.NodeJobFinished, Exit: api.ExitStatus{Signal: 9}, OOM: true},
			wantState: api.StateCancelled, wantWhy: api.ReasonCancelled},
		{name: "no oom", report: api.NodeJobReport{State: api.NodeJobFinished, Exit: api.ExitStatus{Code: 2}},
			wantState: api.StateFailed, wantWhy: api.ReasonNonZeroExit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.registerWith("gpu01", "containerd")
			mounts := []api.ContainerMount{{Source: "/data", Destination: "/d", ReadOnly: true}}
			id := h.submit(api.JobSpec{ContainerImage: "tide-test/bb", ContainerMounts: mounts, NodeList: []string{"gpu01"}})
			h.s.schedulePass()
			resp := h.sync("gpu01")
			if len(resp.Launch) != 1 {
				t.Fatalf("launch = %+v", resp.Launch)
			}
			l := resp.Launch[0]
			if l.ContainerImage != "docker.io/tide-test/bb:latest" || !cmp.Equal(l.ContainerMounts, mounts) {
				t.Fatalf("launch image %q mounts %+v", l.ContainerImage, l.ContainerMounts)
			}
			h.sync("gpu01", running(id, 0))
			if tt.cancel {
				if _, err := h.s.cancel(h.alice, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{id}}}); err != nil {
					t.Fatal(err)
				}
			}
			rep := tt.report
			rep.JobID = id
			h.sync("gpu01", rep)
			if j := h.job(id); j.State != tt.wantState || j.Reason != tt.wantWhy {
				t.Fatalf("state %s reason %s, want %s %s", j.State, j.Reason, tt.wantState, tt.wantWhy)
			}
		})
	}
}
