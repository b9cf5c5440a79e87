package noded

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
