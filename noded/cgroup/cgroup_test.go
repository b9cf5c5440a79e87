package cgroup

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// writeTree creates files (path → content) under root, with their
// directories: a fake cgroup hierarchy as the kernel would show it.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree reads the named files under root.
func readTree(t *testing.T, root string, names []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(root, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(data)
	}
	return out
}

// v1Files are the control files of a v1 cgroup directory per
// controller, with a fresh cgroup's content.
var v1Files = map[string]map[string]string{
	Memory: {"cgroup.procs": "", "memory.limit_in_bytes": "9223372036854771712\n",
		"memory.memsw.limit_in_bytes": "9223372036854771712\n",
		"memory.oom_control":          "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n", "memory.failcnt": "0\n"},
	CPU:     {"cgroup.procs": "", "cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "-1\n"},
	Cpuset:  {"cgroup.procs": "", "cpuset.cpus": "", "cpuset.mems": ""},
	Devices: {"cgroup.procs": "", "devices.allow": "", "devices.deny": ""},
	Pids:    {"cgroup.procs": "", "pids.max": "max\n"},
	Freezer: {"cgroup.procs": "", "freezer.state": "THAWED\n"},
}

// fakeV1 lays out a v1 hierarchy with controllers at the root and in
// parent.
func fakeV1(t *testing.T, controllers []string, parent string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{}
	for _, c := range controllers {
		for _, dir := range []string{"", parent} {
			for f, content := range v1Files[c] {
				files[filepath.Join(c, dir, f)] = content
			}
		}
	}
	if slices.Contains(controllers, Cpuset) {
		files["cpuset/cpuset.cpus"] = "0-3\n"
		files["cpuset/cpuset.mems"] = "0\n"
	}
	writeTree(t, root, files)
	return root
}

// fakeV2 lays out a v2 hierarchy offering controllers at the root, and
// parent.
func fakeV2(t *testing.T, controllers, parent string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"cgroup.controllers": controllers + "\n", "cgroup.subtree_control": "", "cgroup.procs": "",
	}
	for f, content := range v2Files {
		files[filepath.Join(parent, f)] = content
	}
	files[filepath.Join(parent, "cgroup.controllers")] = controllers + "\n"
	writeTree(t, root, files)
	return root
}

// v2Files are the files of a fresh v2 cgroup (whatever controllers its
// parent enabled: a fake needs no more).
var v2Files = map[string]string{
	"cgroup.controllers": "", "cgroup.subtree_control": "", "cgroup.procs": "",
	"cpu.max": "max 100000\n", "memory.max": "max\n", "memory.swap.max": "max\n", "pids.max": "max\n",
	"cpuset.cpus": "", "cpuset.mems": "", "cgroup.freeze": "0\n", "cgroup.events": "populated 0\nfrozen 0\n",
	"memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
}

// detectFake detects the fake hierarchy at root and makes its mkdir act
// as the kernel's: a new v1 cgroup gets its hierarchy's files (with an
// empty cpuset), a new v2 one the v2 files with the controllers its
// parent enabled.
func detectFake(t *testing.T, root string) *Hierarchy {
	t.Helper()
	h, err := Detect(root)
	if err != nil {
		t.Fatal(err)
	}
	h.mkdir = func(dir string) error {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		files := map[string]string{}
		if h.Version == V2 {
			maps.Copy(files, v2Files)
			enabled, _ := os.ReadFile(filepath.Join(filepath.Dir(dir), "cgroup.subtree_control"))
			files["cgroup.controllers"] = strings.ReplaceAll(strings.TrimSpace(string(enabled)), "+", "")
		} else {
			rel, _ := filepath.Rel(root, dir)
			ctrl, _, _ := strings.Cut(rel, "/")
			maps.Copy(files, v1Files[ctrl])
		}
		for f, content := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	h.rmdir = func(dir string) error {
		if procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil && len(strings.TrimSpace(string(procs))) > 0 {
			return syscall.EBUSY
		}
		if _, err := os.Stat(dir); err != nil {
			return syscall.ENOENT
		}
		return os.RemoveAll(dir)
	}
	return h
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		want    *Hierarchy
		wantErr error
	}{
		{
			name:  "v2",
			files: map[string]string{"cgroup.controllers": "pids memory cpu io\n", "cgroup.procs": ""},
			want:  &Hierarchy{Version: V2, Controllers: []string{"cpu", "io", "memory", "pids"}},
		},
		{
			name:  "v2 without controllers",
			files: map[string]string{"cgroup.controllers": "", "cgroup.procs": ""},
			want:  &Hierarchy{Version: V2, Controllers: []string{}},
		},
		{
			name: "v1 hybrid",
			files: map[string]string{"memory/cgroup.procs": "", "cpu/cgroup.procs": "", "freezer/cgroup.procs": "",
				"cpuacct/cgroup.procs": "", "unified/cgroup.controllers": "", "unified/cgroup.procs": ""},
			want: &Hierarchy{Version: V1, Controllers: []string{"cpu", "freezer", "memory"}},
		},
		{
			name:    "nothing mounted",
			files:   map[string]string{"README": ""},
			wantErr: ErrUnavailable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, tt.files)
			got, err := Detect(root)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.want != nil {
				tt.want.Root = root
				if got.Controllers == nil {
					got.Controllers = []string{}
				}
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreUnexported(Hierarchy{})); diff != "" {
				t.Errorf("Detect (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrepareRejectsParent(t *testing.T) {
	h := &Hierarchy{Root: t.TempDir(), Version: V2}
	for _, p := range []string{"", "/tide", "../tide", "tide/../x", "tide/", "."} {
		if err := h.Prepare(p); err == nil {
			t.Errorf("Prepare(%q) accepted", p)
		}
	}
}

func TestCreateV1(t *testing.T) {
	all := []string{Memory, CPU, Cpuset, Devices, Pids, Freezer}
	tests := []struct {
		name   string
		ctrls  []string
		limits Limits
		// want is the content of the files Create writes.
		want map[string]string
		// wantDirs are the hierarchies joined.
		wantDirs []string
		wantErr  string
	}{
		{
			name:  "every limit",
			ctrls: all,
			limits: Limits{CPUs: 2, Cpuset: "1-2", MemoryBytes: 20 << 20, Pids: 100,
				Devices: &DeviceFence{Policy: AllowListed, Devices: []Device{{Type: "c", Major: 1, Minor: 3}, {Type: "c", Major: 136, Minor: Any, Access: "rw"}}}},
			want: map[string]string{
				"cpu/tide/job_7/cpu.cfs_quota_us":               "200000",
				"cpuset/tide/cpuset.cpus":                       "0-3",
				"cpuset/tide/cpuset.mems":                       "0",
				"cpuset/tide/job_7/cpuset.cpus":                 "1-2",
				"cpuset/tide/job_7/cpuset.mems":                 "0",
				"memory/tide/job_7/memory.limit_in_bytes":       "20971520",
				"memory/tide/job_7/memory.memsw.limit_in_bytes": "20971520",
				"pids/tide/job_7/pids.max":                      "100",
				"devices/tide/job_7/devices.deny":               "a\n",
				"devices/tide/job_7/devices.allow":              "c 1:3 rwm\nc 136:* rw\n",
			},
			wantDirs: []string{"memory", "freezer", "pids", "cpu", "cpuset", "devices"},
		},
		{
			name:   "deny-listed devices",
			ctrls:  all,
			limits: Limits{Devices: &DeviceFence{Policy: DenyListed, Devices: []Device{{Type: "c", Major: 195, Minor: 1}}}},
			want: map[string]string{
				"devices/tide/job_7/devices.allow": "a\n",
				"devices/tide/job_7/devices.deny":  "c 195:1 rwm\n",
			},
			wantDirs: []string{"memory", "freezer", "devices"},
		},
		{
			name:     "no limits joins memory and freezer",
			ctrls:    all,
			want:     map[string]string{"memory/tide/job_7/memory.limit_in_bytes": "9223372036854771712\n"},
			wantDirs: []string{"memory", "freezer"},
		},
		{
			name:     "missing controller",
			ctrls:    []string{Memory, Freezer},
			limits:   Limits{CPUs: 4, MemoryBytes: 1 << 30},
			want:     map[string]string{"memory/tide/job_7/memory.limit_in_bytes": "1073741824"},
			wantDirs: []string{"memory", "freezer"},
			wantErr:  "no cpu controller for cgroup tide/job_7",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeV1(t, tt.ctrls, "tide")
			h := detectFake(t, root)
			if h.Version != V1 {
				t.Fatalf("version %v", h.Version)
			}
			if err := h.Prepare("tide"); err != nil {
				t.Fatal(err)
			}
			c, err := h.Create("tide", JobName(7), tt.limits)
			if c == nil {
				t.Fatalf("Create: %v", err)
			}
			if (err != nil) != (tt.wantErr != "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Create error = %v, want %q", err, tt.wantErr)
			}
			got := readTree(t, root, slices.Collect(mapKeys(tt.want)))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			var dirs []string
			for _, d := range c.Dirs() {
				rel, _ := filepath.Rel(root, d)
				dirs = append(dirs, strings.TrimSuffix(rel, "/tide/job_7"))
			}
			if diff := cmp.Diff(tt.wantDirs, dirs); diff != "" {
				t.Errorf("joined hierarchies (-want +got):\n%s", diff)
			}
			if err := c.AddProc(4242); err != nil {
				t.Fatal(err)
			}
			for _, f := range c.ProcsFiles() {
				if data, _ := os.ReadFile(f); string(data) != "4242\n" {
					t.Errorf("%s = %q, want the pid", f, data)
				}
			}
			if pids, err := c.Procs(); err != nil || !slices.Equal(pids, []int{4242}) {
				t.Errorf("Procs = %v, %v", pids, err)
			}
		})
	}
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestCreateV2(t *testing.T) {
	tests := []struct {
		name    string
		ctrls   string
		limits  Limits
		want    map[string]string
		wantErr string
	}{
		{
			name:   "every limit",
			ctrls:  "cpu cpuset io memory pids",
			limits: Limits{CPUs: 3, Cpuset: "0,2", Mems: "0", MemoryBytes: 20 << 20, Pids: 64},
			want: map[string]string{
				"cgroup.subtree_control":      "+cpu\n+cpuset\n+memory\n+pids\n",
				"tide/cgroup.subtree_control": "+cpu\n+cpuset\n+memory\n+pids\n",
				"tide/job_7/cpu.max":          "300000 100000",
				"tide/job_7/cpuset.cpus":      "0,2",
				"tide/job_7/cpuset.mems":      "0",
				"tide/job_7/memory.max":       "20971520",
				"tide/job_7/memory.swap.max":  "0",
				"tide/job_7/pids.max":         "64",
			},
		},
		{
			name:   "memory controller not offered",
			ctrls:  "cpu pids",
			limits: Limits{CPUs: 1, MemoryBytes: 20 << 20},
			want: map[string]string{
				"cgroup.subtree_control": "+cpu\n+pids\n",
				"tide/job_7/cpu.max":     "100000 100000",
				"tide/job_7/memory.max":  "max\n",
			},
			wantErr: "no memory controller for cgroup tide/job_7",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeV2(t, tt.ctrls, "tide")
			h := detectFake(t, root)
			if err := h.Prepare("tide"); err != nil {
				t.Fatal(err)
			}
			c, err := h.Create("tide", JobName(7), tt.limits)
			if c == nil {
				t.Fatalf("Create: %v", err)
			}
			if (err != nil) != (tt.wantErr != "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Create error = %v, want %q", err, tt.wantErr)
			}
			got := readTree(t, root, slices.Collect(mapKeys(tt.want)))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{filepath.Join(root, "tide/job_7/cgroup.procs")}, c.ProcsFiles()); diff != "" {
				t.Errorf("procs files (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOOMKills(t *testing.T) {
	tests := []struct {
		name  string
		v2    bool
		files map[string]string
		want  uint64
	}{
		{name: "v2 killed", v2: true, files: map[string]string{"memory.events": "low 0\nhigh 0\nmax 12\noom 1\noom_kill 2\noom_group_kill 0\n"}, want: 2},
		{name: "v2 oom without kill", v2: true, files: map[string]string{"memory.events": "oom 1\noom_kill 0\n"}},
		{name: "v1 killed", files: map[string]string{"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n", "memory.failcnt": "57\n"}, want: 1},
		{name: "v1 not killed", files: map[string]string{"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n", "memory.failcnt": "57\n"}},
		{name: "v1 old kernel counts limit hits", files: map[string]string{"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\n", "memory.failcnt": "3\n"}, want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			h := &Hierarchy{Root: root, Version: V1, Controllers: []string{Memory}}
			dir := filepath.Join(root, "memory", "tide", "job_1")
			if tt.v2 {
				h.Version, h.Controllers = V2, []string{Memory}
				dir = filepath.Join(root, "tide", "job_1")
			}
			c := h.open("tide/job_1", func(string) bool { return true })
			files := map[string]string{}
			for f, v := range tt.files {
				files[filepath.Join(dir, f)[len(root):]] = v
			}
			writeTree(t, root, files)
			got, err := c.OOMKills()
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("OOMKills = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestMemoryCurrent(t *testing.T) {
	tests := []struct {
		name    string
		v2      bool
		files   map[string]string
		want    uint64
		wantErr bool
	}{
		{name: "v2", v2: true, files: map[string]string{"memory.current": "1052672\n"}, want: 1052672},
		{name: "v1", files: map[string]string{"memory.usage_in_bytes": "4096\n"}, want: 4096},
		{name: "v1 without the file", files: map[string]string{"memory.failcnt": "0\n"}, wantErr: true},
		{name: "v2 garbage", v2: true, files: map[string]string{"memory.current": "lots\n"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			h := &Hierarchy{Root: root, Version: V1, Controllers: []string{Memory}}
			dir := filepath.Join(root, "memory", "tide", "job_1")
			if tt.v2 {
				h.Version = V2
				dir = filepath.Join(root, "tide", "job_1")
			}
			c := h.open("tide/job_1", func(string) bool { return true })
			files := map[string]string{}
			for f, v := range tt.files {
				files[filepath.Join(dir, f)[len(root):]] = v
			}
			writeTree(t, root, files)
			got, err := c.MemoryCurrent()
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("MemoryCurrent = %d, %v; want %d (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// fakeKernel stands in for the kernel in the kill-all loop: a killed
// pid leaves cgroup.procs, and the first kill lets a child forked
// meanwhile appear, which the next round must catch.
type fakeKernel struct {
	t      *testing.T
	procs  string
	killed []int
	forked bool
}

func (k *fakeKernel) kill(pid int) error {
	k.killed = append(k.killed, pid)
	data, err := os.ReadFile(k.procs)
	if err != nil {
		k.t.Fatal(err)
	}
	var left []string
	for _, f := range strings.Fields(string(data)) {
		if f != strconv.Itoa(pid) {
			left = append(left, f)
		}
	}
	if !k.forked {
		k.forked = true
		left = append(left, "303")
	}
	if err := os.WriteFile(k.procs, []byte(strings.Join(left, "\n")), 0o644); err != nil {
		k.t.Fatal(err)
	}
	if pid == 202 {
		return syscall.ESRCH // exited before the kill: not an error
	}
	return nil
}

func TestKillAllLoop(t *testing.T) {
	tests := []struct {
		name string
		v2   bool
	}{
		{name: "v1 with freezer"},
		{name: "v2 without cgroup.kill", v2: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var root string
			if tt.v2 {
				root = fakeV2(t, "memory", "tide")
			} else {
				root = fakeV1(t, []string{Memory, Freezer}, "tide")
			}
			c, err := detectFake(t, root).Create("tide", JobName(9), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			procs := c.ProcsFiles()[0]
			if err := os.WriteFile(procs, []byte("101\n202\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			k := &fakeKernel{t: t, procs: procs}
			c.kill = k.kill
			if err := c.KillAll(time.Minute); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]int{101, 202, 303}, k.killed); diff != "" {
				t.Errorf("killed (-want +got):\n%s", diff)
			}
			if !tt.v2 {
				// Frozen for the first round, thawed after it.
				if got, _ := readTrim(filepath.Join(root, "freezer/tide/job_9/freezer.state")); got != "THAWED" {
					t.Errorf("freezer.state = %q after KillAll", got)
				}
			}
			if err := c.Remove(time.Second); err != nil {
				t.Fatal(err)
			}
			for _, d := range c.Dirs() {
				if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s left after Remove (%v)", d, err)
				}
			}
		})
	}
}

func TestKillAllGivesUp(t *testing.T) {
	root := fakeV1(t, []string{Memory}, "tide")
	c, err := detectFake(t, root).Create("tide", JobName(3), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.ProcsFiles()[0], []byte("77\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := 0
	c.kill = func(int) error { n++; return nil } // a process that never dies
	err = c.KillAll(0)
	if err == nil || !strings.Contains(err.Error(), "still has 1 processes") {
		t.Errorf("KillAll = %v, want a timeout", err)
	}
	if n != 1 {
		t.Errorf("%d kill rounds, want 1 with no time left", n)
	}
	if err := c.Remove(0); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("Remove of a populated cgroup = %v, want EBUSY", err)
	}
}

func TestFreezeThaw(t *testing.T) {
	t.Run("v1", func(t *testing.T) {
		root := fakeV1(t, []string{Memory, Freezer}, "tide")
		c, err := detectFake(t, root).Create("tide", JobName(5), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		state := filepath.Join(root, "freezer/tide/job_5/freezer.state")
		if err := c.Freeze(time.Minute); err != nil {
			t.Fatal(err)
		}
		if got, _ := readTrim(state); got != "FROZEN" {
			t.Errorf("freezer.state = %q after Freeze", got)
		}
		if err := c.Thaw(time.Minute); err != nil {
			t.Fatal(err)
		}
		if got, _ := readTrim(state); got != "THAWED" {
			t.Errorf("freezer.state = %q after Thaw", got)
		}
	})
	t.Run("v2", func(t *testing.T) {
		root := fakeV2(t, "memory", "tide")
		h := detectFake(t, root)
		if err := h.Prepare("tide"); err != nil {
			t.Fatal(err)
		}
		c, err := h.Create("tide", JobName(5), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		// The fake kernel reports frozen at once.
		writeTree(t, root, map[string]string{"tide/job_5/cgroup.events": "populated 1\nfrozen 1\n"})
		if err := c.Freeze(time.Minute); err != nil {
			t.Fatal(err)
		}
		if got, _ := readTrim(filepath.Join(root, "tide/job_5/cgroup.freeze")); got != "1" {
			t.Errorf("cgroup.freeze = %q after Freeze", got)
		}
		// Still frozen by the kernel's account: Thaw times out.
		if err := c.Thaw(0); err == nil || !strings.Contains(err.Error(), "still 1") {
			t.Errorf("Thaw = %v, want a timeout", err)
		}
	})
}

func TestOpenSkipsMissing(t *testing.T) {
	root := fakeV1(t, []string{Memory, Freezer, CPU}, "tide")
	h := detectFake(t, root)
	if _, err := h.Create("tide", JobName(4), Limits{}); err != nil {
		t.Fatal(err)
	}
	c := h.Open("tide", JobName(4))
	var got []string
	for _, d := range c.Dirs() {
		rel, _ := filepath.Rel(root, d)
		got = append(got, rel)
	}
	if diff := cmp.Diff([]string{"memory/tide/job_4", "freezer/tide/job_4"}, got); diff != "" {
		t.Errorf("dirs (-want +got):\n%s", diff)
	}
}

func TestCreateInUse(t *testing.T) {
	root := fakeV1(t, []string{Memory, Freezer, Pids}, "tide")
	h := detectFake(t, root)
	// Another job's cgroup, in the freezer hierarchy only so far.
	if err := h.mkdir(filepath.Join(root, "freezer/tide/job_6")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "freezer/tide/job_6/cgroup.procs"), []byte("999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := h.Create("tide", JobName(6), Limits{})
	if !errors.Is(err, ErrInUse) || c != nil {
		t.Fatalf("Create = %v, %v; want ErrInUse", c, err)
	}
	// What Create made before it found out is gone; the other's stays.
	if _, err := os.Stat(filepath.Join(root, "memory/tide/job_6")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("memory/tide/job_6 left behind (%v)", err)
	}
	if got, _ := readTrim(filepath.Join(root, "freezer/tide/job_6/cgroup.procs")); got != "999" {
		t.Errorf("the other cgroup's procs = %q", got)
	}
}

func TestDeviceString(t *testing.T) {
	tests := []struct {
		name string
		d    Device
		want string
	}{
		{name: "char", d: Device{Type: "c", Major: 195, Minor: 0}, want: "c 195:0 rwm"},
		{name: "wildcard minor", d: Device{Type: "c", Major: 136, Minor: Any, Access: "rw"}, want: "c 136:* rw"},
		{name: "block any", d: Device{Type: "b", Major: Any, Minor: Any, Access: "m"}, want: "b *:* m"},
		{name: "all", d: Device{Type: "a"}, want: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.String(); got != tt.want {
				t.Errorf("String = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDeviceOf(t *testing.T) {
	d, err := DeviceOf("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Device{Type: "c", Major: 1, Minor: 3, Access: "rwm"}); d != want {
		t.Errorf("DeviceOf(/dev/null) = %+v, want %+v", d, want)
	}
	if _, err := DeviceOf(t.TempDir()); err == nil {
		t.Error("a directory is not a device node")
	}
}

// TestRemoveParent: the counterpart of Prepare removes the parent from
// every hierarchy (v1) or the one tree (v2), and ignores a parent that
// would leave the hierarchy.
func TestRemoveParent(t *testing.T) {
	for _, v := range []string{"v1", "v2"} {
		t.Run(v, func(t *testing.T) {
			var root string
			if v == "v1" {
				root = fakeV1(t, []string{Memory, Freezer}, "tide")
			} else {
				root = fakeV2(t, "memory pids", "tide")
			}
			h := detectFake(t, root)
			if err := h.Prepare("tide"); err != nil {
				t.Fatal(err)
			}
			h.RemoveParent("../" + filepath.Base(root))
			if _, err := os.Stat(root); err != nil {
				t.Fatalf("a parent outside the hierarchy was acted on: %v", err)
			}
			h.RemoveParent("tide")
			dirs := []string{filepath.Join(root, "tide")}
			if v == "v1" {
				dirs = []string{filepath.Join(root, Memory, "tide"), filepath.Join(root, Freezer, "tide")}
			}
			for _, d := range dirs {
				if _, err := os.Stat(d); err == nil {
					t.Errorf("%s is still there", d)
				}
			}
		})
	}
}

// An empty cgroup (every process ended with the job) is not frozen and
// thawed: on v1 that round trip costs more than creating the cgroup.
func TestKillAllEmptyLeavesFreezer(t *testing.T) {
	root := fakeV1(t, []string{Memory, Freezer}, "tide")
	c, err := detectFake(t, root).Create("tide", JobName(4), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(root, "freezer/tide/job_4/freezer.state")
	if err := os.WriteFile(state, []byte("THAWED\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(state, old, old); err != nil {
		t.Fatal(err)
	}
	c.kill = func(pid int) error { t.Errorf("killed %d in an empty cgroup", pid); return nil }
	if err := c.KillAll(time.Second); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(state); err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("freezer.state written by KillAll of an empty cgroup (%v)", err)
	}
}

// A cgroup removed under a thaw (the job ended and its supervisor
// removed the cgroup) holds nothing frozen: Thaw succeeds, while Freeze
// of it still fails.
func TestThawRemovedCgroup(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		var root string
		if v2 {
			root = fakeV2(t, "memory", "tide")
		} else {
			root = fakeV1(t, []string{Memory, Freezer}, "tide")
		}
		c, err := detectFake(t, root).Create("tide", JobName(5), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range c.Dirs() {
			if err := os.RemoveAll(d); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Thaw(time.Second); err != nil {
			t.Errorf("v2=%v: Thaw of a removed cgroup = %v, want nil", v2, err)
		}
		if err := c.Freeze(time.Second); err == nil {
			t.Errorf("v2=%v: Freeze of a removed cgroup succeeded", v2)
		}
	}
}
