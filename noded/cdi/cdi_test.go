package cdi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestCDIParseSpec(t *testing.T) {
	tests := []struct {
		name    string
		json    bool
		data    string
		wantErr string
	}{
		{name: "json", json: true, data: `{"cdiVersion":"0.6.0","kind":"nvidia.com/gpu","devices":[{"name":"0","containerEdits":{"env":["A=1"]}}]}`},
		{name: "yaml", data: "cdiVersion: 0.3.0\nkind: vendor.example/dev\ndevices:\n- name: mig-0:1\n  containerEdits: {env: [A=1]}\n"},
		{name: "two-part version", data: "cdiVersion: \"0.4\"\nkind: a.b/c\ndevices: [{name: x}]\n"},
		{name: "version too new", data: "cdiVersion: 0.8.0\nkind: a.b/c\ndevices: [{name: x}]\n", wantErr: "0.8.0 is not supported"},
		{name: "version too old", data: "cdiVersion: 0.2.0\nkind: a.b/c\ndevices: [{name: x}]\n", wantErr: "not supported"},
		{name: "no version", data: "kind: a.b/c\ndevices: [{name: x}]\n", wantErr: "no cdiVersion"},
		{name: "bad kind", data: "cdiVersion: 0.5.0\nkind: gpu\ndevices: [{name: x}]\n", wantErr: "invalid kind"},
		{name: "no devices", data: "cdiVersion: 0.5.0\nkind: a.b/c\n", wantErr: "no devices"},
		{name: "bad device name", data: "cdiVersion: 0.5.0\nkind: a.b/c\ndevices: [{name: -x}]\n", wantErr: "invalid device name"},
		{name: "device twice", data: "cdiVersion: 0.5.0\nkind: a.b/c\ndevices: [{name: x}, {name: x}]\n", wantErr: "defined twice"},
		{name: "env without =", data: "cdiVersion: 0.5.0\nkind: a.b/c\ndevices: [{name: x, containerEdits: {env: [A]}}]\n", wantErr: "KEY=VALUE"},
		{name: "relative device path", data: "cdiVersion: 0.5.0\nkind: a.b/c\ndevices: [{name: x, containerEdits: {deviceNodes: [{path: dev/x}]}}]\n", wantErr: "absolute path"},
		{name: "bad device type", data: "cdiVersion: 0.5.0\nkind: a.b/c\ndevices: [{name: x, containerEdits: {deviceNodes: [{path: /dev/x, type: z}]}}]\n", wantErr: "type \"z\""},
		{name: "bad permissions", data: "cdiVersion: 0.5.0\nkind: a.b/c\ndevices: [{name: x, containerEdits: {deviceNodes: [{path: /dev/x, permissions: rwx}]}}]\n", wantErr: "rwm"},
		{name: "relative mount", data: "cdiVersion: 0.5.0\nkind: a.b/c\ndevices: [{name: x}]\ncontainerEdits: {mounts: [{hostPath: /a, containerPath: a}]}\n", wantErr: "containerEdits: mount"},
		{name: "unknown hook", data: "cdiVersion: 0.5.0\nkind: a.b/c\ndevices: [{name: x, containerEdits: {hooks: [{hookName: never, path: /bin/true}]}}]\n", wantErr: "hookName"},
		{name: "relative hook", data: "cdiVersion: 0.5.0\nkind: a.b/c\ndevices: [{name: x, containerEdits: {hooks: [{hookName: poststop, path: true}]}}]\n", wantErr: "not absolute"},
		{name: "not yaml", data: "cdiVersion: [\n", wantErr: "yaml"},
		{name: "not json", json: true, data: "{", wantErr: "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSpec([]byte(tt.data), tt.json)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Devices) == 0 {
				t.Fatal("no devices parsed")
			}
		})
	}
}

// writeSpecs writes files (relative path → content) under a new temp
// directory and returns it.
func writeSpecs(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func gpuSpec(version string, minor1 int, env string) string {
	return `{"cdiVersion":"` + version + `","kind":"nvidia.com/gpu","containerEdits":{"env":["` + env + `"]},"devices":[
 {"name":"0","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0","type":"c","major":195,"minor":0}]}},
 {"name":"1","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia1","type":"c","major":195,"minor":` + string(rune('0'+minor1)) + `}]}}]}`
}

func TestCDILoad(t *testing.T) {
	etc := writeSpecs(t, map[string]string{
		"nvidia.json":      gpuSpec("0.5.0", 1, "FROM=etc"),
		"sub/other.yaml":   "cdiVersion: 0.6.0\nkind: vendor.example/fpga\ndevices: [{name: a}]\n",
		"new.yaml":         "cdiVersion: 0.8.0\nkind: vendor.example/nic\ndevices: [{name: a}]\n",
		"README.txt":       "not a spec",
		"dup-a.yaml":       "cdiVersion: 0.5.0\nkind: vendor.example/dup\ndevices: [{name: d}]\n",
		"dup-b.yaml":       "cdiVersion: 0.5.0\nkind: vendor.example/dup\ndevices: [{name: d}, {name: e}]\n",
		"fixed-a.yaml":     "cdiVersion: 0.5.0\nkind: vendor.example/fixed\ndevices: [{name: f}]\n",
		"fixed-b.yaml":     "cdiVersion: 0.5.0\nkind: vendor.example/fixed\ndevices: [{name: f}]\n",
		"broken/spec.json": "{",
	})
	run := writeSpecs(t, map[string]string{
		"nvidia.json": gpuSpec("0.5.0", 7, "FROM=run"),
		"fixed.yaml":  "cdiVersion: 0.5.0\nkind: vendor.example/fixed\ndevices: [{name: f}]\n",
	})
	r := Load([]string{etc, filepath.Join(etc, "missing"), run})
	tests := []struct {
		name string
		dev  string
		want bool
	}{
		{name: "a GPU", dev: "nvidia.com/gpu=0", want: true},
		{name: "a spec in a subdirectory", dev: "vendor.example/fpga=a", want: true},
		{name: "an unsupported version is skipped", dev: "vendor.example/nic=a", want: false},
		{name: "a conflict at one priority drops the device", dev: "vendor.example/dup=d", want: false},
		{name: "the rest of a conflicting spec stays", dev: "vendor.example/dup=e", want: true},
		{name: "a higher priority settles a conflict", dev: "vendor.example/fixed=f", want: true},
		{name: "unknown", dev: "nvidia.com/gpu=9", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Has(tt.dev); got != tt.want {
				t.Fatalf("Has(%s) = %v, want %v", tt.dev, got, tt.want)
			}
		})
	}
	if !r.HasKind(GPUKind) || r.HasKind("vendor.example/nic") {
		t.Errorf("kinds: gpu %v nic %v", r.HasKind(GPUKind), r.HasKind("vendor.example/nic"))
	}
	var problems []string
	for _, p := range r.Problems {
		problems = append(problems, p.Error())
	}
	all := strings.Join(problems, "\n")
	for _, want := range []string{"0.8.0 is not supported", "broken/spec.json", "vendor.example/dup=d is defined in both"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	if len(problems) != 4 { // nic, broken, dup, fixed (settled later)
		t.Errorf("%d problems, want 4:\n%s", len(problems), all)
	}
	// /var/run/cdi wins: GPU 1's node and the spec's variable come from there.
	e, err := r.Resolve([]string{"nvidia.com/gpu=1"})
	if err != nil {
		t.Fatal(err)
	}
	if e.DeviceNodes[0].Minor != 7 || e.Env[0] != "FROM=run" {
		t.Errorf("resolved %+v %v, want the /var/run/cdi device", *e.DeviceNodes[0], e.Env)
	}
}

func TestCDIResolve(t *testing.T) {
	r := Load([]string{"testdata"})
	if len(r.Problems) != 0 {
		t.Fatalf("problems: %v", r.Problems)
	}
	tests := []struct {
		name      string
		devs      []string
		wantNodes []string
		wantErr   string
	}{
		{name: "spec edits come once, before the first device", devs: []string{"nvidia.com/gpu=0", "nvidia.com/gpu=GPU-8a1f0c52-5d2e-4b7a-9e1e-000000000001"},
			wantNodes: []string{"/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1"}},
		{name: "a device named twice counts once", devs: []string{"nvidia.com/gpu=0", "nvidia.com/gpu=0"},
			wantNodes: []string{"/dev/nvidiactl", "/dev/nvidia0"}},
		{name: "unknown device", devs: []string{"nvidia.com/gpu=5"}, wantErr: "nvidia.com/gpu=5 is not defined in testdata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := r.Resolve(tt.devs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var nodes []string
			for _, d := range e.DeviceNodes {
				nodes = append(nodes, d.Path)
			}
			if diff := cmp.Diff(tt.wantNodes, nodes); diff != "" {
				t.Fatalf("device nodes (-want +got):\n%s", diff)
			}
			if len(e.Env) != 1 || len(e.Mounts) != 1 || len(e.Hooks) != 1 {
				t.Fatalf("spec edits %d env %d mounts %d hooks, want 1 each", len(e.Env), len(e.Mounts), len(e.Hooks))
			}
		})
	}
}

func TestCDIGPUNames(t *testing.T) {
	r := Load([]string{"testdata"})
	uuids := map[int]string{1: "GPU-8a1f0c52-5d2e-4b7a-9e1e-000000000001", 2: "GPU-unknown"}
	tests := []struct {
		name    string
		gpus    []int
		want    []string
		wantErr string
	}{
		{name: "by index", gpus: []int{0}, want: []string{"nvidia.com/gpu=0"}},
		{name: "by uuid when the index is not named", gpus: []int{0, 1},
			want: []string{"nvidia.com/gpu=0", "nvidia.com/gpu=GPU-8a1f0c52-5d2e-4b7a-9e1e-000000000001"}},
		{name: "neither", gpus: []int{2}, wantErr: "nvidia.com/gpu=2 (or nvidia.com/gpu=GPU-unknown) is not defined"},
		{name: "no uuid", gpus: []int{3}, wantErr: "nvidia.com/gpu=3 is not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.GPUNames(tt.gpus, func(i int) string { return uuids[i] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func u32(v uint32) *uint32 { return &v }
func i64(v int64) *int64   { return &v }

func TestCDIApply(t *testing.T) {
	// Device numbers left out of a spec come from the host file; tests
	// describe a GPU they cannot create.
	old := hostDevice
	hostDevice = func(path string) (string, int64, int64, uint32, error) {
		if path == "/dev/nvidia-uvm" {
			return "c", 510, 0, 0o666, nil
		}
		return old(path)
	}
	t.Cleanup(func() { hostDevice = old })
	timeout := 5
	edits := &ContainerEdits{
		Env: []string{"NVIDIA_VISIBLE_DEVICES=void", "PATH=/cdi/bin"},
		DeviceNodes: []*DeviceNode{
			{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0, Permissions: "rw"},
			{Path: "/dev/nvidia-uvm"},                      // everything from the host
			{Path: "/dev/gpu-null", HostPath: "/dev/null"}, // a real host device, another path inside
			{Path: "/dev/shared", Type: "c", Major: 1, Minor: 3, FileMode: u32(0o600), UID: u32(0), GID: u32(44)},
		},
		Mounts: []*Mount{
			{HostPath: "/usr/lib/libcuda.so.1", ContainerPath: "/usr/lib/libcuda.so.1", Options: []string{"ro", "nosuid", "nodev", "bind"}},
			{HostPath: "/run/nvidia-persistenced/socket", ContainerPath: "/run/nvidia-persistenced/socket"}, // no type, no bind option
			{HostPath: "/host/tmp", ContainerPath: "/tmp"},                                                  // replaces the spec's /tmp
		},
		Hooks: []*Hook{
			{HookName: "createContainer", Path: "/usr/bin/nvidia-ctk", Args: []string{"nvidia-ctk", "hook", "update-ldcache"}, Timeout: &timeout},
			{HookName: "prestart", Path: "/usr/bin/legacy-hook"},
			{HookName: "poststop", Path: "/usr/bin/cleanup"},
		},
	}
	s := &specs.Spec{
		Process: &specs.Process{Env: []string{"PATH=/bin", "SLURM_JOB_ID=7"}},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/home/alice/run", Type: "bind", Source: "/home/alice/run", Options: []string{"rbind", "rw"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs"},
		},
		Linux: &specs.Linux{Devices: []specs.LinuxDevice{{Path: "/dev/nvidia0", Type: "c", Major: 1, Minor: 1}}},
	}
	if err := edits.Apply(s); err != nil {
		t.Fatal(err)
	}
	m666, m600 := os.FileMode(0o666), os.FileMode(0o600)
	wantDevices := []specs.LinuxDevice{
		{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0, FileMode: &m666},
		{Path: "/dev/nvidia-uvm", Type: "c", Major: 510, Minor: 0, FileMode: &m666},
		{Path: "/dev/gpu-null", Type: "c", Major: 1, Minor: 3, FileMode: &m666},
		{Path: "/dev/shared", Type: "c", Major: 1, Minor: 3, FileMode: &m600, UID: u32(0), GID: u32(44)},
	}
	if diff := cmp.Diff(wantDevices, s.Linux.Devices); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
	wantRules := []specs.LinuxDeviceCgroup{
		{Allow: true, Type: "c", Major: i64(195), Minor: i64(0), Access: "rw"},
		{Allow: true, Type: "c", Major: i64(510), Minor: i64(0), Access: "rwm"},
		{Allow: true, Type: "c", Major: i64(1), Minor: i64(3), Access: "rwm"},
		{Allow: true, Type: "c", Major: i64(1), Minor: i64(3), Access: "rwm"},
	}
	if diff := cmp.Diff(wantRules, s.Linux.Resources.Devices); diff != "" {
		t.Errorf("device rules (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"PATH=/cdi/bin", "SLURM_JOB_ID=7", "NVIDIA_VISIBLE_DEVICES=void"}, s.Process.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	wantMounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs"},
		{Destination: "/tmp", Type: "bind", Source: "/host/tmp", Options: []string{"bind"}},
		{Destination: "/home/alice/run", Type: "bind", Source: "/home/alice/run", Options: []string{"rbind", "rw"}},
		{Destination: "/usr/lib/libcuda.so.1", Type: "bind", Source: "/usr/lib/libcuda.so.1", Options: []string{"ro", "nosuid", "nodev", "bind"}},
		{Destination: "/run/nvidia-persistenced/socket", Type: "bind", Source: "/run/nvidia-persistenced/socket", Options: []string{"bind"}},
	}
	if diff := cmp.Diff(wantMounts, s.Mounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	wantHooks := &specs.Hooks{
		Prestart:        []specs.Hook{{Path: "/usr/bin/legacy-hook"}},
		CreateContainer: []specs.Hook{{Path: "/usr/bin/nvidia-ctk", Args: []string{"nvidia-ctk", "hook", "update-ldcache"}, Timeout: &timeout}},
		Poststop:        []specs.Hook{{Path: "/usr/bin/cleanup"}},
	}
	if diff := cmp.Diff(wantHooks, s.Hooks); diff != "" {
		t.Errorf("hooks (-want +got):\n%s", diff)
	}
}

func TestCDIApplyErrors(t *testing.T) {
	tests := []struct {
		name    string
		edits   ContainerEdits
		wantErr string
	}{
		{name: "device file missing on the host", edits: ContainerEdits{DeviceNodes: []*DeviceNode{{Path: "/dev/tide-no-such-device"}}},
			wantErr: "cdi device node /dev/tide-no-such-device"},
		{name: "host path is not a device", edits: ContainerEdits{DeviceNodes: []*DeviceNode{{Path: "/dev/x", HostPath: "/"}}},
			wantErr: "not a device file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.edits.Apply(&specs.Spec{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
