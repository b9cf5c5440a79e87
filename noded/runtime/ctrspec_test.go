package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/cdi"
)

func TestDefaultBinds(t *testing.T) {
	tests := []struct {
		name  string
		wd    string
		files Files
		want  []string
	}{
		{name: "outputs in the work dir", wd: "/home/a/run", files: Files{Stdout: "/home/a/run/o.txt"}, want: []string{"/home/a/run"}},
		{name: "outputs elsewhere", wd: "/home/a/run", files: Files{Stdout: "/scratch/a/o.txt", Stderr: "/logs/e.txt"},
			want: []string{"/home/a/run", "/logs", "/scratch/a"}},
		{name: "nested directories collapse", wd: "/home/a/run/sub", files: Files{Stdout: "/home/a/run/o.txt"}, want: []string{"/home/a/run"}},
		{name: "system directories are never bound", wd: "/", files: Files{Stdout: "/tmp/o.txt", Stderr: "/dev/null"}, want: nil},
		{name: "prefix is not nesting", wd: "/data", files: Files{Stdout: "/data2/o"}, want: []string{"/data", "/data2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, defaultBinds(tt.wd, tt.files)); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"PATH=/host/bin", "SLURM_JOB_ID=4", "HOME=/home/a"}, []string{"PATH=/bin", "LANG=C"})
	want := []string{"PATH=/bin", "SLURM_JOB_ID=4", "HOME=/home/a", "LANG=C"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestOOMKilled(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  bool
	}{
		{name: "v1 killed", files: map[string]string{"memory/tide/j/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"}, want: true},
		{name: "v1 not killed", files: map[string]string{"memory/tide/j/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"}},
		{name: "v2 killed", files: map[string]string{"tide/j/memory.events": "low 0\nhigh 0\nmax 12\noom 1\noom_kill 2\n"}, want: true},
		{name: "v2 oom without kill", files: map[string]string{"tide/j/memory.events": "oom 1\noom_kill 0\n"}},
		{name: "no cgroup", files: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, c := range tt.files {
				os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
				os.WriteFile(filepath.Join(root, p), []byte(c), 0o644)
			}
			if got := oomKilledIn(root, "/tide/j"); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGPUDevices(t *testing.T) {
	dev := t.TempDir()
	for _, n := range []string{"nvidia0", "nvidia1", "nvidia3", "nvidiactl", "nvidia-uvm"} {
		os.WriteFile(filepath.Join(dev, n), nil, 0o644)
	}
	tests := []struct {
		name string
		gpus []int
		want []string
	}{
		{name: "two GPUs and the control nodes", gpus: []int{1, 3}, want: []string{"nvidia1", "nvidia3", "nvidiactl", "nvidia-uvm"}},
		{name: "missing node skipped", gpus: []int{2, 0}, want: []string{"nvidia0", "nvidiactl", "nvidia-uvm"}},
		{name: "no GPU, no control nodes", gpus: []int{5}, want: nil},
		{name: "none asked", gpus: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []string
			for _, n := range tt.want {
				want = append(want, filepath.Join(dev, n))
			}
			if diff := cmp.Diff(want, gpuDevices(dev, tt.gpus)); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCtrSpecOpts builds a whole OCI spec from a job the way the
// containerd runtime does (minus the image) and checks what it enforces.
func TestCtrSpecOpts(t *testing.T) {
	in := &ctrJobSpec{
		Script: "/run/tided/jobs/7.0/script", Args: []string{"a1"},
		Env: []string{"PATH=/host/bin", "SLURM_JOB_ID=7"}, Cwd: "/home/a/run",
		Files: Files{Stdout: "/home/a/run/slurm-7.out", Stderr: "/scratch/a/err"}, WorkDir: "/home/a/run",
		Mounts:   []api.ContainerMount{{Source: "/data", Destination: "/data", ReadOnly: true}},
		Cred:     User{UID: 1000, GID: 100, Groups: []uint32{100, 27}, Umask: 0o027},
		MemoryMB: 512, CPUs: 2, GPUDevices: []string{"/dev/null"}, CgroupsPath: "/tide/tide-x-7-0",
		NoFile: &syscall.Rlimit{Cur: 4096, Max: 8192},
	}
	ctx := namespaces.WithNamespace(context.Background(), "tide")
	imageEnv := func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Process.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
		return nil
	}
	s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "tide-x-7-0"}, append([]oci.SpecOpts{imageEnv}, ctrSpecOpts(in)...)...)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Process
	if diff := cmp.Diff([]string{ScriptInContainer, "a1"}, p.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if p.Cwd != "/home/a/run" || p.User.UID != 1000 || p.User.GID != 100 || !slices.Equal(p.User.AdditionalGids, []uint32{100, 27}) {
		t.Errorf("cwd %q user %+v", p.Cwd, p.User)
	}
	if p.User.Umask == nil || *p.User.Umask != 0o027 {
		t.Errorf("umask %v", p.User.Umask)
	}
	if !p.NoNewPrivileges {
		t.Error("new privileges allowed")
	}
	c := p.Capabilities
	if c == nil || len(c.Bounding)+len(c.Effective)+len(c.Permitted)+len(c.Inheritable)+len(c.Ambient) != 0 {
		t.Errorf("capabilities %+v, want none", c)
	}
	wantEnv := []string{"PATH=/usr/bin:/bin", "SLURM_JOB_ID=7", "SLURM_TASK_PID=1", "TIDE_TASK_PID=1", "LANG=C.UTF-8"}
	if diff := cmp.Diff(wantEnv, p.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	var nofile *specs.POSIXRlimit
	for i := range p.Rlimits {
		if p.Rlimits[i].Type == "RLIMIT_NOFILE" {
			nofile = &p.Rlimits[i]
		}
	}
	if nofile == nil || nofile.Soft != 4096 || nofile.Hard != 8192 {
		t.Errorf("RLIMIT_NOFILE %+v", nofile)
	}
	r := s.Linux.Resources
	if r.Memory == nil || *r.Memory.Limit != 512<<20 {
		t.Errorf("memory %+v", r.Memory)
	}
	if r.CPU == nil || *r.CPU.Quota != 200000 || *r.CPU.Period != 100000 {
		t.Errorf("cpu %+v", r.CPU)
	}
	if s.Linux.CgroupsPath != "/tide/tide-x-7-0" {
		t.Errorf("cgroups path %q", s.Linux.CgroupsPath)
	}
	devOK := false
	for _, d := range s.Linux.Devices {
		devOK = devOK || d.Path == "/dev/null"
	}
	if !devOK {
		t.Errorf("GPU device node not in %+v", s.Linux.Devices)
	}
	for _, ns := range s.Linux.Namespaces {
		if ns.Type == specs.NetworkNamespace || ns.Type == specs.UTSNamespace {
			t.Errorf("private %s namespace: jobs use the host's network", ns.Type)
		}
	}
	mounts := map[string]specs.Mount{}
	for _, m := range s.Mounts {
		mounts[m.Destination] = m
	}
	for _, w := range []struct {
		dst, src, typ, mode string
	}{
		{ScriptInContainer, in.Script, "bind", "ro"},
		{"/home/a/run", "/home/a/run", "bind", "rw"},
		{"/scratch/a", "/scratch/a", "bind", "rw"},
		{"/data", "/data", "bind", "ro"},
		{"/sys/fs/cgroup", "cgroup", "cgroup", "ro"},
	} {
		m, ok := mounts[w.dst]
		if !ok || m.Source != w.src || m.Type != w.typ || !slices.Contains(m.Options, w.mode) {
			t.Errorf("mount %s = %+v, want %s %s %s", w.dst, m, w.typ, w.src, w.mode)
		}
	}
	if shm := mounts["/dev/shm"]; !slices.ContainsFunc(shm.Options, func(o string) bool { return strings.HasPrefix(o, "size=") && o == "size=524288k" }) {
		t.Errorf("/dev/shm options %v, want size=524288k", shm.Options)
	}
}

// TestCtrSpecOptsCDI: a job whose GPUs come through CDI gets the specs'
// device nodes, mounts, variables and hooks, applied after the image's
// configuration and the job's own settings, and no bare device nodes.
func TestCtrSpecOptsCDI(t *testing.T) {
	reg := cdi.Load([]string{"../cdi/testdata"})
	names, err := reg.GPUNames([]int{0}, func(int) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	edits, err := reg.Resolve(names)
	if err != nil {
		t.Fatal(err)
	}
	in := &ctrJobSpec{
		Script: "/run/tided/jobs/8.0/script", Env: []string{"PATH=/host/bin", "NVIDIA_VISIBLE_DEVICES=all"}, Cwd: "/home/a/run",
		Files: Files{Stdout: "/home/a/run/slurm-8.out"}, WorkDir: "/home/a/run",
		Cred: User{UID: 1000, GID: 100, Umask: -1}, CgroupsPath: "/tide/tide-x-8-0", CDI: edits,
	}
	ctx := namespaces.WithNamespace(context.Background(), "tide")
	s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "tide-x-8-0"}, ctrSpecOpts(in)...)
	if err != nil {
		t.Fatal(err)
	}
	var devs []string
	for _, d := range s.Linux.Devices {
		devs = append(devs, fmt.Sprintf("%s %s %d:%d", d.Path, d.Type, d.Major, d.Minor))
	}
	if diff := cmp.Diff([]string{"/dev/nvidiactl c 195:255", "/dev/nvidia0 c 195:0"}, devs); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
	allowed := map[string]string{}
	for _, r := range s.Linux.Resources.Devices {
		if r.Allow && r.Major != nil && r.Minor != nil {
			allowed[fmt.Sprintf("%d:%d", *r.Major, *r.Minor)] = r.Access
		}
	}
	if allowed["195:0"] != "rwm" || allowed["195:255"] != "rw" {
		t.Errorf("devices cgroup rules %v", allowed)
	}
	if !slices.Contains(s.Process.Env, "NVIDIA_VISIBLE_DEVICES=void") || slices.Contains(s.Process.Env, "NVIDIA_VISIBLE_DEVICES=all") {
		t.Errorf("env %v: the spec's variable must win", s.Process.Env)
	}
	lib := "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"
	if !slices.ContainsFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == lib && m.Source == lib && m.Type == "bind" }) {
		t.Errorf("driver library not mounted: %+v", s.Mounts)
	}
	if s.Hooks == nil || len(s.Hooks.CreateContainer) != 1 || s.Hooks.CreateContainer[0].Path != "/usr/bin/nvidia-ctk" {
		t.Errorf("hooks %+v", s.Hooks)
	}
}
