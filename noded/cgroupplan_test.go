package noded

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/cgroup"
	"github.com/tide-hpc/tide/noded/stepd"
)

func TestCgroupConfig(t *testing.T) {
	tests := []struct {
		name       string
		yaml       string
		wantMode   string
		wantParent string
		wantErr    string
	}{
		{name: "defaults", yaml: "version: 1\n", wantMode: CgroupsAuto, wantParent: "tide"},
		{name: "off unquoted", yaml: "cgroups: off\n", wantMode: CgroupsOff, wantParent: "tide"},
		{name: "required with parent", yaml: "cgroups: required\ncgroup_parent: system.slice/tide\n", wantMode: CgroupsRequired, wantParent: "system.slice/tide"},
		{name: "unknown mode", yaml: "cgroups: sometimes\n", wantErr: `cgroups: "sometimes" must be auto, off or required`},
		{name: "absolute parent", yaml: "cgroup_parent: /sys/fs/cgroup/tide\n", wantErr: `cgroup_parent: "/sys/fs/cgroup/tide" must be a relative path`},
		{name: "parent leaves the hierarchy", yaml: "cgroup_parent: ../x\n", wantErr: `cgroup_parent: "../x" must be a relative path`},
		{name: "empty parent", yaml: "cgroup_parent: \"\"\n", wantErr: `cgroup_parent: "" must be a relative path`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			err = validateCgroups(&c)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("validateCgroups = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Cgroups != tt.wantMode || c.CgroupParent != tt.wantParent {
				t.Errorf("cgroups %q, parent %q; want %q, %q", c.Cgroups, c.CgroupParent, tt.wantMode, tt.wantParent)
			}
		})
	}
}

// fakeGPUDevices makes devDir hold nvidia0..nvidia2 as links to
// /dev/null, /dev/zero and /dev/full (1:3, 1:5, 1:7), plus the driver's
// shared nodes, which the fence leaves alone.
func fakeGPUDevices(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, target := range map[string]string{
		"nvidia0": "/dev/null", "nvidia1": "/dev/zero", "nvidia2": "/dev/full",
		"nvidiactl": "/dev/null", "nvidia-uvm": "/dev/null",
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCgroupPlan(t *testing.T) {
	devs := fakeGPUDevices(t)
	old := cgroupDevDir
	cgroupDevDir = devs
	t.Cleanup(func() { cgroupDevDir = old })
	spec := func(gpus []int) *api.LaunchSpec {
		return &api.LaunchSpec{JobRef: api.JobRef{JobID: 42}, Alloc: []api.NodeAlloc{
			{Node: "n0", CPUs: 1, MemoryMB: 1},
			{Node: "n1", CPUs: 4, MemoryMB: 20, GPUs: gpus},
		}}
	}
	cfg := DefaultConfig()
	tests := []struct {
		name  string
		spec  *api.LaunchSpec
		mode  string
		image string
		want  *stepd.CgroupPlan
	}{
		{
			name: "GPU 1 of 3", spec: spec([]int{1}), mode: CgroupsAuto,
			want: &stepd.CgroupPlan{Parent: "tide", Name: "job_42", Limits: cgroup.Limits{CPUs: 4, MemoryBytes: 20 << 20,
				Devices: &cgroup.DeviceFence{Policy: cgroup.DenyListed, Devices: []cgroup.Device{
					{Type: "c", Major: 1, Minor: 3, Access: "rwm"}, {Type: "c", Major: 1, Minor: 7, Access: "rwm"}}}}},
		},
		{
			name: "every GPU needs no fence", spec: spec([]int{0, 1, 2}), mode: CgroupsRequired,
			want: &stepd.CgroupPlan{Required: true, Parent: "tide", Name: "job_42", Limits: cgroup.Limits{CPUs: 4, MemoryBytes: 20 << 20}},
		},
		{
			name: "no GPU hides them all", spec: spec(nil), mode: CgroupsAuto,
			want: &stepd.CgroupPlan{Parent: "tide", Name: "job_42", Limits: cgroup.Limits{CPUs: 4, MemoryBytes: 20 << 20,
				Devices: &cgroup.DeviceFence{Policy: cgroup.DenyListed, Devices: []cgroup.Device{
					{Type: "c", Major: 1, Minor: 3, Access: "rwm"}, {Type: "c", Major: 1, Minor: 5, Access: "rwm"}, {Type: "c", Major: 1, Minor: 7, Access: "rwm"}}}}},
		},
		{name: "off", spec: spec(nil), mode: CgroupsOff},
		{name: "container job", spec: spec(nil), mode: CgroupsAuto, image: "docker.io/library/busybox:latest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg.Cgroups = tt.mode
			tt.spec.ContainerImage = tt.image
			got := cgroupPlan(tt.spec, "n1", cfg)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cgroupPlan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGPUFenceWithoutGPUs(t *testing.T) {
	if f := gpuFence(t.TempDir(), nil); f != nil {
		t.Errorf("a node without GPU device nodes got a fence %+v", f)
	}
}

func TestCgroupStatus(t *testing.T) {
	// fakeV2 lays out a v2 root offering ctrls, with the parent tide.
	fakeV2 := func(ctrls string) string {
		root := t.TempDir()
		for f, content := range map[string]string{
			"cgroup.controllers": ctrls, "cgroup.subtree_control": "", "cgroup.procs": "",
			"tide/cgroup.controllers": ctrls, "tide/cgroup.subtree_control": "", "tide/cgroup.procs": "",
		} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, f), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	full, noCPU := fakeV2("cpu memory pids io\n"), fakeV2("memory pids\n")
	none := t.TempDir()
	tests := []struct {
		name, mode, root string
		want             string
		wantErr          string
		wantLog          string
	}{
		{name: "off", mode: CgroupsOff, root: none, want: "off"},
		{name: "auto on v2", mode: CgroupsAuto, root: full, want: "v2 (cpu,memory,pids)"},
		{name: "required on v2", mode: CgroupsRequired, root: full, want: "v2 (cpu,memory,pids)"},
		{name: "auto without cpu controller", mode: CgroupsAuto, root: noCPU, want: "v2 (memory,pids)",
			wantLog: `msg="job cgroups lack controllers: their limits are not enforced" missing=cpu`},
		{name: "required without cpu controller", mode: CgroupsRequired, root: noCPU,
			wantErr: "cgroups: required, but job cgroups under " + noCPU + "/tide get no cpu controller"},
		{name: "auto without cgroups", mode: CgroupsAuto, root: none, want: "off", wantLog: "cgroups unusable"},
		{name: "required without cgroups", mode: CgroupsRequired, root: none,
			wantErr: "cgroups: required, but job cgroups cannot be made under " + none + "/tide: cgroups unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := cgroupRoot
			cgroupRoot = tt.root
			t.Cleanup(func() { cgroupRoot = old })
			var logBuf bytes.Buffer
			cfg := DefaultConfig()
			cfg.Cgroups = tt.mode
			got, err := cgroupStatus(cfg, slog.New(slog.NewTextHandler(&logBuf, nil)))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("cgroupStatus = %q, %v; want %q", got, err, tt.want)
			}
			if !strings.Contains(logBuf.String(), tt.wantLog) || tt.wantLog == "" && logBuf.Len() > 0 {
				t.Errorf("log %q, want %q", logBuf.String(), tt.wantLog)
			}
		})
	}
}

// TestSupervisorCgroupAsUser runs a job as nobody through the exec
// child in a real job cgroup (root with a writable hierarchy that has a
// memory controller, else skipped): the supervisor moves the child into
// the cgroup before the child gets its plan, so the script runs there,
// and its allocation over the 64M limit is reported as OOM. (The limit
// was 20M: under the race detector on a loaded machine the supervised
// child, a race-instrumented Go process, was killed by it before it
// opened the job's output, once in a CI run.)
func TestSupervisorCgroupAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root")
	}
	h, err := cgroup.Detect(cgroup.DefaultRoot)
	if err != nil || !h.Has(cgroup.Memory) {
		t.Skipf("no memory controller (%v)", err)
	}
	parent := fmt.Sprintf("tide-nodedtest-%d", os.Getpid())
	if err := h.Prepare(parent); err != nil {
		t.Skipf("cgroups not writable: %v", err)
	}
	t.Cleanup(func() { h.RemoveParent(parent) })
	dir, err := os.MkdirTemp("", "tided-cgroup-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, fileScript)
	if err := os.WriteFile(script, []byte("#!/bin/sh\nid -u\ncat /proc/self/cgroup\nhead -c 200M /dev/zero | tail\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(script, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	plan := execPlan{JobID: 88, Node: "n1", Script: script, Env: []string{"PATH=" + os.Getenv("PATH")},
		WorkDir: dir, Stdin: "/dev/null", Stdout: out, Umask: 0o022, SetUser: true, UID: 65534, GID: 65534,
		Cgroup: &stepd.CgroupPlan{Required: true, Parent: parent, Name: cgroup.JobName(88),
			Limits: cgroup.Limits{MemoryBytes: 64 << 20}}}
	if err := writeJSONNew(filepath.Join(dir, fileExec), &plan, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(testExe, "stepd", "--job-dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("stepd: %v\n%s", err, b)
	}
	var st jobStatus
	if err := readJSON(filepath.Join(dir, fileStatus), &st); err != nil {
		t.Fatal(err)
	}
	got := readFile(t, out)
	if !st.OOM || st.Error != "" {
		t.Errorf("status %+v, want OOM; output:\n%s", st, got)
	}
	rel := parent + "/" + cgroup.JobName(88)
	if !strings.HasPrefix(got, "65534\n") || !strings.Contains(got, ":/"+rel+"\n") {
		t.Errorf("output %q: want uid 65534 in cgroup %s", got, rel)
	}
	for _, d := range h.Paths(rel) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("job cgroup %s left behind (%v)", d, err)
		}
	}
}
