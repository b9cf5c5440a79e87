package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	containerd "github.com/containerd/containerd/v2/client"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/noded/ctr"
	"github.com/tide-hpc/tide/noded/stepd"
)

// TestPullAndRunEnds covers the ways a job waiting for its image ends
// without running: the pull fails, the job is cancelled or times out
// meanwhile, tided stops. None of them needs containerd.
func TestPullAndRunEnds(t *testing.T) {
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	blocked := func(ctx context.Context, _ string) (containerd.Image, error) {
		select {
		case <-never:
		case <-ctx.Done():
		}
		return nil, errors.New("released")
	}
	refused := func(context.Context, string) (containerd.Image, error) {
		return nil, errors.New("pull 127.0.0.1:1/tide-test/bb:latest: dial tcp 127.0.0.1:1: connect: connection refused")
	}
	tests := []struct {
		name     string
		pull     ctr.PullFunc
		marker   string
		signal   int
		stopping bool
		want     *stepd.Status // nil: no status written
		wantErr  string
	}{
		{name: "a failed pull fails the launch with the registry's reason", pull: refused,
			want: &stepd.Status{Exit: api.ExitStatus{Code: 1}},
			wantErr: "start container: container image 127.0.0.1:1/tide-test/bb:latest is not on node n1 and cannot be pulled: " +
				"pull 127.0.0.1:1/tide-test/bb:latest: dial tcp 127.0.0.1:1: connect: connection refused"},
		{name: "scancel while pulling", pull: blocked, marker: stepd.MarkKilled, signal: 9, want: &stepd.Status{Exit: api.ExitStatus{Signal: 9}}},
		{name: "time limit while pulling", pull: blocked, marker: stepd.MarkTimedOut, want: &stepd.Status{Exit: api.ExitStatus{Signal: 15}}},
		{name: "tided stopping leaves the job", pull: blocked, stopping: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Containerd{cfg: ContainerdConfig{Node: "n1"}, log: testLogger(), puller: ctr.NewPuller(tt.pull, 0),
				tasks: map[api.JobRef]containerd.Task{}, cdiWarned: map[string]bool{}}
			r.closed.Store(tt.stopping)
			j := Job{Ref: api.JobRef{JobID: 5}, Dir: t.TempDir(),
				Spec: &api.LaunchSpec{ContainerImage: "127.0.0.1:1/tide-test/bb:latest"}}
			if tt.marker != "" {
				if err := stepd.WriteJSONAtomic(filepath.Join(j.Dir, tt.marker), &stepd.KillMarker{Signal: tt.signal}, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r.pullAndRun(j, &ctrJobSpec{}) // returns once the job's end is decided
			var st stepd.Status
			err := stepd.ReadJSON(filepath.Join(j.Dir, stepd.FileStatus), &st)
			if tt.want == nil {
				if !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("status written (%v): %+v", err, st)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Exit != tt.want.Exit || st.Error != tt.wantErr || st.EndTime.IsZero() {
				t.Fatalf("status %+v, want exit %s error %q", st, tt.want.Exit, tt.wantErr)
			}
		})
	}
}

// TestContainerdCDIEdits: GPUs come through CDI only where the specs
// define nvidia.com/gpu devices; specs that do not cover a job's GPU
// fail its launch, naming the device.
func TestContainerdCDIEdits(t *testing.T) {
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "fpga.yaml"), []byte("cdiVersion: 0.5.0\nkind: vendor.example/fpga\ndevices: [{name: a}]\n"), 0o644)
	tests := []struct {
		name      string
		dirs      []string
		gpus      []int
		wantNodes int // device nodes in the edits; -1: no edits
		wantErr   string
	}{
		{name: "no GPUs", dirs: []string{"../cdi/testdata"}, gpus: nil, wantNodes: -1},
		{name: "no spec dirs", dirs: nil, gpus: []int{0}, wantNodes: -1},
		{name: "specs of other devices only", dirs: []string{other, "/nonexistent"}, gpus: []int{0}, wantNodes: -1},
		{name: "GPU by index", dirs: []string{"../cdi/testdata"}, gpus: []int{0}, wantNodes: 2},
		{name: "GPU by UUID", dirs: []string{"../cdi/testdata"}, gpus: []int{1}, wantNodes: 2},
		{name: "GPU the specs lack", dirs: []string{"../cdi/testdata"}, gpus: []int{0, 2}, wantErr: "nvidia.com/gpu=2 is not defined in ../cdi/testdata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gpus := []gres.Device{{Index: 0, UUID: "GPU-0000"}, {Index: 1, UUID: "GPU-8a1f0c52-5d2e-4b7a-9e1e-000000000001"}, {Index: 2}}
			r := &Containerd{cfg: ContainerdConfig{CDISpecDirs: tt.dirs, GPUs: gpus}, log: testLogger(), cdiWarned: map[string]bool{}}
			e, err := r.cdiEdits(tt.gpus)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := -1
			if e != nil {
				got = len(e.DeviceNodes)
			}
			if got != tt.wantNodes {
				t.Fatalf("%d device nodes, want %d", got, tt.wantNodes)
			}
		})
	}
}
