package ctld

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// featureConfig declares gpu01 with feature nvlink, so that -C nvlink is
// valid before any node registers.
const featureConfig = testConfigHeader + `
partitions:
  - {name: gpu, nodes: "gpu[01-02]", default: true, default_time: "10:00", max_time: "1:00:00"}
nodes:
  - {names: "gpu01", cpus: 8, memory: 64G, gpus: 8, features: [nvlink, r1]}
  - {names: "gpu02", cpus: 8, memory: 64G, gpus: 8, features: [r2]}
`

func TestConstraintSubmit(t *testing.T) {
	tests := []struct {
		name     string
		register bool // register gpu01 with ib,r1 and gpu02 with containerd,r2
		spec     api.JobSpec
		wantErr  string
	}{
		{name: "declared feature before registration", spec: api.JobSpec{Constraint: "nvlink"}},
		{name: "or of declared features", spec: api.JobSpec{Constraint: "r1|r2", Nodes: 2}},
		{name: "syntax error", spec: api.JobSpec{Constraint: "nvlink&"},
			wantErr: `Batch job submission failed: Invalid feature specification (invalid constraint "nvlink&" at offset 7: a feature name is missing at the end)`},
		{name: "counts are refused", spec: api.JobSpec{Constraint: "nvlink*2"}, wantErr: "node counts (feature*N) are not supported"},
		{name: "unknown feature", spec: api.JobSpec{Constraint: "roce"},
			wantErr: "Batch job submission failed: Invalid feature specification (no node of partition gpu has feature roce)"},
		{name: "unknown feature inside an or", spec: api.JobSpec{Constraint: "nvlink|roce"}, wantErr: "has feature roce"},
		{name: "matching or needs one rack to hold the job", spec: api.JobSpec{Constraint: "[r1|r2]", Nodes: 2},
			wantErr: "Batch job submission failed: Requested node configuration is not available (2 nodes with 1 CPUs requested, partition gpu has 1 that can hold it)"},
		{name: "registered features add to the declared ones", register: true, spec: api.JobSpec{Constraint: "nvlink&r1"}},
		{name: "registered feature", register: true, spec: api.JobSpec{Constraint: "ib&r1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessWith(t, featureConfig)
			if tt.register {
				h.registerWith("gpu01", "ib", "r1")
				h.registerWith("gpu02", "containerd", "r2")
			}
			spec := tt.spec
			spec.Script, spec.WorkDir = "#!/bin/sh\ntrue\n", "/home/alice"
			_, err := h.s.submit(context.Background(), h.alice, api.SubmitRequest{Spec: spec})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Errorf("err = %v is not ErrInvalidArgument (sbatch exit 1)", err)
			}
		})
	}
}

// TestConstraintScheduling: -C keeps a job off nodes without the feature,
// and a job whose feature nodes are busy pends for Resources with the
// other nodes counted as NodeFeatures.
func TestConstraintScheduling(t *testing.T) {
	h := newHarness(t)
	h.registerWith("gpu01", "containerd")
	h.registerWith("gpu02", "ib", "nvlink")

	first := h.submit(api.JobSpec{Constraint: "nvlink", GPUs: 8})
	second := h.submit(api.JobSpec{Constraint: "ib&nvlink", GPUs: 1})
	plain := h.submit(api.JobSpec{GPUs: 1})
	h.s.schedulePass()

	if j := h.job(first); j.State != api.StateRunning || j.BatchHost() != "gpu02" {
		t.Fatalf("job %d: %s on %q, want RUNNING on gpu02", first, j.State, j.BatchHost())
	}
	j := h.job(second)
	if j.State != api.StatePending || j.Reason != api.ReasonResources ||
		j.ReasonDetail != "0/2 nodes available: 1 InsufficientGPU, 1 NodeFeatures" {
		t.Fatalf("job %d: %s %s %q, want PENDING Resources with a NodeFeatures histogram", second, j.State, j.Reason, j.ReasonDetail)
	}
	if j := h.job(plain); j.State != api.StateRunning || j.BatchHost() != "gpu01" {
		t.Fatalf("job %d: %s on %q, want RUNNING on gpu01", plain, j.State, j.BatchHost())
	}
}
