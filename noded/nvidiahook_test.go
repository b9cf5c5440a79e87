package noded

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/tide-hpc/tide/gres"
)

func TestValidateNvidiaHook(t *testing.T) {
	tests := []struct {
		name, value string
		wantErr     bool
	}{
		{name: "auto", value: "auto"},
		{name: "empty is auto", value: ""},
		{name: "off", value: "off"},
		{name: "absolute path", value: "/usr/bin/nvidia-container-runtime-hook"},
		{name: "relative path", value: "nvidia-container-runtime-hook", wantErr: true},
		{name: "typo", value: "Auto", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateNvidiaHook(tt.value)
			if (err != nil) != tt.wantErr {
				t.Fatalf("validateNvidiaHook(%q) = %v, want error %v", tt.value, err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "containerd.nvidia_hook") {
				t.Fatalf("error %q does not name the key", err)
			}
		})
	}
}

func TestResolveNvidiaHook(t *testing.T) {
	dir := t.TempDir()
	hook := filepath.Join(dir, "nvidia-container-runtime-hook")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(dir, "plain")
	if err := os.WriteFile(notExec, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// onPath finds only the names it is given, in a fake PATH.
	onPath := func(names ...string) func(string) (string, error) {
		return func(n string) (string, error) {
			for _, m := range names {
				if m == n {
					return "/usr/bin/" + n, nil
				}
			}
			return "", exec.ErrNotFound
		}
	}
	tests := []struct {
		name, setting, source string
		gpus                  int
		path                  func(string) (string, error)
		want                  string
		wantErr               bool
	}{
		{name: "auto finds the hook", setting: "auto", source: GPUSourceNVML, gpus: 8,
			path: onPath("nvidia-container-runtime-hook", "nvidia-container-toolkit"), want: "/usr/bin/nvidia-container-runtime-hook"},
		{name: "auto finds the old name", setting: "auto", source: GPUSourceStatic, gpus: 2,
			path: onPath("nvidia-container-toolkit"), want: "/usr/bin/nvidia-container-toolkit"},
		{name: "auto without the hook", setting: "auto", source: GPUSourceNVML, gpus: 8, path: onPath()},
		{name: "auto without GPUs", setting: "auto", source: GPUSourceNone, path: onPath("nvidia-container-runtime-hook")},
		{name: "auto with fake GPUs", setting: "auto", source: GPUSourceFake, gpus: 4, path: onPath("nvidia-container-runtime-hook")},
		{name: "off", setting: "off", source: GPUSourceNVML, gpus: 8, path: onPath("nvidia-container-runtime-hook")},
		{name: "explicit path, fake GPUs", setting: hook, source: GPUSourceFake, gpus: 4, path: onPath(), want: hook},
		{name: "explicit path missing", setting: filepath.Join(dir, "gone"), source: GPUSourceNVML, gpus: 1, path: onPath(),
			want: filepath.Join(dir, "gone"), wantErr: true},
		{name: "explicit path not executable", setting: notExec, source: GPUSourceNVML, gpus: 1, path: onPath(),
			want: notExec, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why, err := resolveNvidiaHook(tt.setting, tt.source, tt.gpus, tt.path)
			if got != tt.want || (err != nil) != tt.wantErr || why == "" {
				t.Fatalf("resolveNvidiaHook = %q, %q, %v; want %q, error %v", got, why, err, tt.want, tt.wantErr)
			}
		})
	}
}

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
			opts := append([]oci.SpecOpts{imageEnv(tt.image...)}, nvidiaHookOpts(tt.hook, tt.visible)...)
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
