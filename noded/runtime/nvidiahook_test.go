package runtime

import (
	"context"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/tide-hpc/tide/gres"
)

func TestGPUUUIDs(t *testing.T) {
	devs := []gres.Device{{Index: 0, UUID: "GPU-aaa"}, {Index: 1, UUID: "GPU-bbb"}, {Index: 2}}
	got := gpuUUIDs(devs, []int{1, 2, 5})
	if diff := cmp.Diff([]string{"GPU-bbb", "2", "5"}, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// TestNvidiaHookOpts builds a GPU job's spec with a fake hook path: the
// hook is a prestart hook, and NVIDIA_VISIBLE_DEVICES names the job's
// GPUs whatever the image says; a job without GPUs or a node without a
// hook gets neither.
func TestNvidiaHookOpts(t *testing.T) {
	const hook = "/opt/fake/nvidia-container-runtime-hook"
	imageEnv := func(env ...string) oci.SpecOpts {
		return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
			s.Process.Env = append(s.Process.Env, env...)
			return nil
		}
	}
	tests := []struct {
		name      string
		hook      string
		visible   []string
		image     []string
		wantHooks []specs.Hook
		wantEnv   []string
		notEnv    []string
	}{
		{name: "GPU job", hook: hook, visible: []string{"GPU-a", "GPU-b"},
			image:     []string{"PATH=/usr/bin", "NVIDIA_VISIBLE_DEVICES=all"},
			wantHooks: []specs.Hook{{Path: hook, Args: []string{hook, "prestart"}}},
			wantEnv:   []string{"NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b", "NVIDIA_DRIVER_CAPABILITIES=compute,utility", "PATH=/usr/bin"},
			notEnv:    []string{"NVIDIA_VISIBLE_DEVICES=all"}},
		{name: "image capabilities kept", hook: hook, visible: []string{"GPU-a"},
			image:     []string{"NVIDIA_DRIVER_CAPABILITIES=all"},
			wantHooks: []specs.Hook{{Path: hook, Args: []string{hook, "prestart"}}},
			wantEnv:   []string{"NVIDIA_VISIBLE_DEVICES=GPU-a", "NVIDIA_DRIVER_CAPABILITIES=all"}},
		{name: "no GPUs", hook: hook, image: []string{"NVIDIA_VISIBLE_DEVICES=all"},
			notEnv: []string{"NVIDIA_DRIVER_CAPABILITIES=compute,utility"}},
		{name: "no hook", visible: []string{"GPU-a"}, notEnv: []string{"NVIDIA_VISIBLE_DEVICES=GPU-a"}},
	}
	ctx := namespaces.WithNamespace(context.Background(), "tide")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []oci.SpecOpts{imageEnv(tt.image...), WithNvidiaHook(tt.hook, tt.visible)}
			s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "tide-x-9-0"}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			var got []specs.Hook
			if s.Hooks != nil {
				got = s.Hooks.Prestart
				if len(s.Hooks.CreateRuntime)+len(s.Hooks.CreateContainer)+len(s.Hooks.StartContainer)+len(s.Hooks.Poststart) > 0 {
					t.Errorf("unexpected hooks %+v", s.Hooks)
				}
			}
			if diff := cmp.Diff(tt.wantHooks, got); diff != "" {
				t.Errorf("prestart hooks (-want +got):\n%s", diff)
			}
			for _, e := range tt.wantEnv {
				if !hasEnvValue(s.Process.Env, e) {
					t.Errorf("env lacks %s: %v", e, s.Process.Env)
				}
			}
			for _, e := range tt.notEnv {
				if hasEnvValue(s.Process.Env, e) {
					t.Errorf("env has %s: %v", e, s.Process.Env)
				}
			}
		})
	}
}

func hasEnvValue(env []string, kv string) bool {
	for _, e := range env {
		if e == kv {
			return true
		}
	}
	return false
}
