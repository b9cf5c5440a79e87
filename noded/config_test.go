package noded

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/tide-hpc/tide/gres"
)

// writeKey writes a cluster key file with the given mode.
func writeKey(t testing.TB, dir string, mode os.FileMode, content string) string {
	t.Helper()
	p := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func validConfig(t *testing.T) Config {
	c := DefaultConfig()
	c.Name = "n1"
	c.KeyFile = writeKey(t, t.TempDir(), 0o600, "s3cret\n")
	c.StateDir = t.TempDir()
	return c
}

func TestParseExampleConfig(t *testing.T) {
	f, err := os.Open("../etc/tided.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := Parse(f)
	if err != nil {
		t.Fatalf("etc/tided.yaml: %v", err)
	}
	want := Config{
		Version: 1, Name: "gpu01", Controller: "127.0.0.1:6817", KeyFile: "/etc/tide/cluster.key",
		TLSDir: DefaultTLSDir, StateDir: "/run/tided", Supervisor: "shared", CPUs: 64, Memory: "512G", TmpDiskMB: 1800000,
		GPUs:     GPUConfig{Source: "none", Fake: gres.FakeConfig{Count: 0, Model: "h100", MemoryMB: 81920, Topology: "dgx", Load: gres.FakeLoadBusy}},
		Features: []string{"nvlink", "ib"}, Heartbeat: 10 * time.Second, KillWait: 30 * time.Second,
		LaunchTimeout: time.Minute, OutputGrace: 5 * time.Second, Cgroups: CgroupsAuto, CgroupParent: "tide",
		LogLevel: "info",
		Containerd: ContainerdConfig{Namespace: "tide", Snapshotter: "overlayfs", NvidiaHook: NvidiaHookAuto,
			Pull: "auto", PullTimeout: 30 * time.Minute, CDISpecDirs: []string{"/etc/cdi", "/var/run/cdi"}},
		StepAddr: DefaultStepAddr,
		MPS:      MPSAuto,
		// usage.go
		AcctGatherFrequency: DefaultAcctGatherFrequency,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{name: "unknown top-level key", yaml: "nmae: x\n", want: []string{`unknown key "nmae"`}},
		{name: "unknown nested keys", yaml: "gpus:\n  fake:\n    cnt: 2\n  sauce: none\n",
			want: []string{`unknown key "gpus.fake.cnt"`, `unknown key "gpus.sauce"`}},
		{name: "wrong type", yaml: "cpus: many\n", want: []string{"cpus"}},
		{name: "bad duration", yaml: "heartbeat: soon\n", want: []string{"heartbeat"}},
		{name: "not yaml", yaml: "name: [\n", want: []string{"parse config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.yaml))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(t *testing.T, c *Config)
		want []string // substrings; nil means valid
	}{
		{name: "valid", edit: func(*testing.T, *Config) {}},
		{name: "fake gpus", edit: func(_ *testing.T, c *Config) {
			c.GPUs = GPUConfig{Source: GPUSourceFake, Fake: gres.FakeConfig{Count: 8}}
		}},
		{name: "no temporary disk", edit: func(_ *testing.T, c *Config) { c.TmpDiskMB = 0 }},
		{name: "negative temporary disk", edit: func(_ *testing.T, c *Config) { c.TmpDiskMB = -1 },
			want: []string{"tmp_disk_mb: -1 must be between 0 and"}},
		{name: "huge temporary disk", edit: func(_ *testing.T, c *Config) { c.TmpDiskMB = 1 << 41 },
			want: []string{"tmp_disk_mb: 2199023255552 must be between 0 and"}},
		{name: "key file missing", edit: func(_ *testing.T, c *Config) { c.KeyFile = "/nonexistent/key" },
			want: []string{"key_file:", "no such file"}},
		{name: "key file world-readable", edit: func(t *testing.T, c *Config) {
			c.KeyFile = writeKey(t, t.TempDir(), 0o644, "k")
		}, want: []string{"world-readable", "chmod o-rwx"}},
		{name: "key file empty", edit: func(t *testing.T, c *Config) {
			c.KeyFile = writeKey(t, t.TempDir(), 0o600, " \n")
		}, want: []string{"is empty"}},
		{name: "mps off with a control path", edit: func(_ *testing.T, c *Config) {
			c.MPS, c.MPSControl = MPSOff, "/usr/bin/nvidia-cuda-mps-control"
		}},
		{name: "bad mps keys", edit: func(_ *testing.T, c *Config) { c.MPS, c.MPSControl = "on", "bin/mps" },
			want: []string{`mps: "on" must be auto or off`, `mps_control: "bin/mps" must be an absolute path`}},
		{name: "containerd socket", edit: func(_ *testing.T, c *Config) { c.Containerd.Socket = "/run/containerd/containerd.sock" }},
		{name: "containerd relative socket", edit: func(_ *testing.T, c *Config) { c.Containerd.Socket = "containerd.sock" },
			want: []string{"containerd.socket:", "absolute"}},
		{name: "containerd bad namespace", edit: func(_ *testing.T, c *Config) {
			c.Containerd = ContainerdConfig{Socket: "/s", Namespace: "-tide", Snapshotter: "overlayfs"}
		}, want: []string{"containerd.namespace:"}},
		{name: "containerd no snapshotter", edit: func(_ *testing.T, c *Config) {
			c.Containerd = ContainerdConfig{Socket: "/s", Namespace: "tide"}
		}, want: []string{"containerd.snapshotter:"}},
		{name: "registry and CDI keys", edit: func(_ *testing.T, c *Config) {
			c.Containerd.Socket = "/s"
			c.Containerd.Pull = "never"
			c.Containerd.InsecureRegistries = []string{"127.0.0.1:5000", "registry.local", "[::1]:5000"}
			c.Containerd.AuthFile = "/etc/tide/registry-auth.json"
			c.Containerd.CDISpecDirs = nil
		}},
		{name: "bad registry and CDI keys", edit: func(_ *testing.T, c *Config) {
			c.Containerd.Socket = "/s"
			c.Containerd.Pull = "always"
			c.Containerd.PullTimeout = time.Millisecond
			c.Containerd.InsecureRegistries = []string{"http://r.local", "r.local:99999", ""}
			c.Containerd.AuthFile = "auth.json"
			c.Containerd.CDISpecDirs = []string{"cdi"}
		}, want: []string{`containerd.pull: "always"`, "containerd.pull_timeout: 1ms", `"http://r.local" is not host`,
			`"r.local:99999" is not host`, `"" is not host`, `containerd.auth_file: "auth.json"`, `containerd.cdi_spec_dirs: "cdi"`}},
		{name: "namespace unchecked without socket", edit: func(_ *testing.T, c *Config) { c.Containerd.Namespace = "" }},
		{name: "every problem at once", edit: func(_ *testing.T, c *Config) {
			c.Version = 2
			c.Name = "bad name"
			c.Controller = "nohost"
			c.StateDir = "relative/dir"
			c.CPUs = 0
			c.Memory = "lots"
			c.GPUs.Source = "cuda"
			c.Features = []string{"ok", "a,b"}
			c.Heartbeat = time.Millisecond
			c.KillWait = -time.Second
			c.LogLevel = "chatty"
		}, want: []string{"version:", "name:", "controller:", "state_dir:", "cpus:", "memory:",
			`gpus.source: unknown source "cuda"`, "features:", "heartbeat:", "kill_wait:", "log_level:"}},
		{name: "fake gpu count out of range", edit: func(_ *testing.T, c *Config) {
			c.GPUs = GPUConfig{Source: GPUSourceFake, Fake: gres.FakeConfig{Count: 65}}
		}, want: []string{"gpus.fake.count"}},
		{name: "fake gpu load unknown", edit: func(_ *testing.T, c *Config) {
			c.GPUs = GPUConfig{Source: GPUSourceFake, Fake: gres.FakeConfig{Count: 2, Load: "heavy"}}
		}, want: []string{`gpus.fake.load: "heavy" is not busy or idle`}},
		{name: "controller port", edit: func(_ *testing.T, c *Config) { c.Controller = "ctl:99999" },
			want: []string{"invalid port"}},
		{name: "unknown supervisor", edit: func(_ *testing.T, c *Config) { c.Supervisor = "systemd" },
			want: []string{`supervisor: "systemd" must be shared or per-job`}},
		{name: "state dir too long for the shared socket", edit: func(_ *testing.T, c *Config) {
			c.StateDir = "/" + strings.Repeat("d", 100)
		}, want: []string{"too long for the shared supervisor's socket stepd.sock", "supervisor: per-job"}},
		{name: "long state dir with per-job supervisors", edit: func(_ *testing.T, c *Config) {
			c.StateDir, c.Supervisor = "/"+strings.Repeat("d", 100), SupervisorPerJob
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig(t)
			tt.edit(t, &c)
			err := c.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate succeeded, want errors")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
			if n := strings.Count(err.Error(), "\n") + 1; len(tt.want) > 2 && n < len(tt.want) {
				t.Errorf("got %d problems, want at least %d:\n%v", n, len(tt.want), err)
			}
		})
	}
}

// TestLoadConfigOrder checks defaults < file < TIDED_* environment < flags.
func TestLoadConfigOrder(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tided.yaml")
	yaml := "name: from-file\ncpus: 8\nmemory: 16G\nheartbeat: 5s\nfeatures: [a]\ngpus:\n  source: fake\n  fake:\n    count: 2\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TIDED_CPUS", "16")
	t.Setenv("TIDED_NAME", "from-env")
	t.Setenv("TIDED_GPUS_FAKE_COUNT", "4")
	fs := pflag.NewFlagSet("tided", pflag.ContinueOnError)
	addConfigFlags(fs)
	if err := fs.Parse([]string{"--config", file, "--name", "from-flag", "--kill-wait", "3s"}); err != nil {
		t.Fatal(err)
	}
	got, err := LoadConfig(fs)
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultConfig()
	want := def
	want.Name = "from-flag"          // flag beats env and file
	want.CPUs = 16                   // env beats file
	want.Memory = "16G"              // file beats default
	want.Heartbeat = 5 * time.Second // file
	want.KillWait = 3 * time.Second  // flag beats default
	want.Features = []string{"a"}    // file
	want.GPUs.Source = GPUSourceFake // file
	want.GPUs.Fake.Count = 4         // env beats file
	want.Controller = def.Controller // default
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	fs := pflag.NewFlagSet("tided", pflag.ContinueOnError)
	addConfigFlags(fs)
	if err := fs.Parse([]string{"--config", "/nonexistent/tided.yaml"}); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(fs); err == nil || !strings.Contains(err.Error(), "/nonexistent/tided.yaml") {
		t.Errorf("LoadConfig with a missing explicit file: %v, want an error naming it", err)
	}
}

func TestParseMemory(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int64
		wantErr bool
	}{
		{name: "bare MiB", in: "4096", want: 4096},
		{name: "G", in: "512G", want: 512 * 1024},
		{name: "GB lower case", in: "2gb", want: 2048},
		{name: "GiB", in: "1GiB", want: 1024},
		{name: "T", in: "1T", want: 1024 * 1024},
		{name: "M", in: "100M", want: 100},
		{name: "K", in: "2048K", want: 2},
		{name: "fraction", in: "1.5G", want: 1536},
		{name: "empty", in: "", wantErr: true},
		{name: "word", in: "lots", wantErr: true},
		{name: "zero", in: "0", wantErr: true},
		{name: "tiny", in: "1K", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMemory(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseMemory(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseMemory(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestWriteYAML(t *testing.T) {
	c := Config{
		Version: 1, Name: "gpu07", Controller: "ctl.example:6817", KeyFile: "/etc/tide/cluster.key",
		TLSDir: "/var/lib/tide/tided", StateDir: "/var/spool/tided", Supervisor: "per-job", CPUs: 96, Memory: "1T", TmpDiskMB: 3500000,
		GPUs:     GPUConfig{Source: GPUSourceFake, Fake: gres.FakeConfig{Count: 8, Model: "h200", MemoryMB: 144384}},
		Features: []string{"nvlink", "yes"}, Heartbeat: 15 * time.Second, KillWait: time.Minute,
		LaunchTimeout: 90 * time.Second, OutputGrace: 2 * time.Second, AllowRootJobs: true, LogLevel: "debug", Cgroups: CgroupsOff, CgroupParent: "tide/jobs",
		Containerd: ContainerdConfig{Socket: "/run/containerd/containerd.sock", Namespace: "tide", Snapshotter: "native",
			Pull: "never", PullTimeout: 5 * time.Minute, InsecureRegistries: []string{"127.0.0.1:5000", "registry.local"},
			AuthFile: "/etc/tide/registry-auth.json", CDISpecDirs: []string{"/etc/cdi"}},
		MPS: MPSOff, MPSControl: "/opt/cuda/bin/nvidia-cuda-mps-control", AcctGatherFrequency: 45 * time.Second,
	}
	var b bytes.Buffer
	if err := c.WriteYAML(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "config-dump", b.String())
	back, err := Parse(&b)
	if err != nil {
		t.Fatalf("dump does not parse back: %v", err)
	}
	if diff := cmp.Diff(c, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestConfigCommands(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tided.yaml")
	if err := os.WriteFile(file, []byte("name: cmdnode\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "dump reads the file", args: []string{"config", "dump", "--config", file}, want: "name: cmdnode\n"},
		{name: "dump applies flags", args: []string{"config", "dump", "--config", file, "--cpus", "3"}, want: "cpus: 3\n"},
		{name: "default ignores the file", args: []string{"config", "default", "--config", file}, want: "version: 1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := NewCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetArgs(tt.args)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output does not contain %q:\n%s", tt.want, out.String())
			}
		})
	}
}

func TestRootRefusesInvalidConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tided.yaml")
	key := writeKey(t, dir, 0o644, "k")
	if err := os.WriteFile(file, []byte("key_file: "+key+"\nstate_dir: "+dir+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := NewCommand()
	var errb bytes.Buffer
	cmd.SetErr(&errb)
	cmd.SetArgs([]string{"--config", file})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "world-readable") {
		t.Fatalf("tided with a world-readable key: %v, want a refusal", err)
	}
}

func TestGPUSources(t *testing.T) {
	tests := []struct {
		name, yaml, wantErr string
		gpus                int
	}{
		{name: "fake islands", yaml: "gpus: {source: fake, fake: {count: 8, topology: islands}}", gpus: 8},
		{name: "static with links", yaml: `
gpus:
  source: static
  static:
    - {index: 0, uuid: GPU-a, model: h100, memory_mb: 81920, links: "-1,18"}
    - {index: 1, uuid: GPU-b, model: h100, memory_mb: 81920, links: "18,-1"}
`, gpus: 2},
		{name: "static asymmetric links", yaml: `
gpus:
  source: static
  static:
    - {index: 0, uuid: GPU-a, model: h100, memory_mb: 81920, links: "-1,18"}
    - {index: 1, uuid: GPU-b, model: h100, memory_mb: 81920, links: "4,-1"}
`, wantErr: "gpus.static"},
		{name: "unknown key in a static GPU", yaml: `
gpus:
  source: static
  static:
    - {index: 0, uuid: GPU-a, model: h100, memory_mb: 81920, colour: red}
`, wantErr: "colour"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := filepath.Join(t.TempDir(), "key")
			if err := os.WriteFile(key, []byte("0123456789abcdef0123"), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Parse(strings.NewReader("version: 1\nname: n1\nstate_dir: /tmp/x\nkey_file: " + key + "\n" + tt.yaml))
			if err == nil {
				err = c.Validate()
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d := &Daemon{cfg: c}
			if err := d.openGPUs(); err != nil {
				t.Fatal(err)
			}
			if len(d.gpus) != tt.gpus {
				t.Fatalf("%d GPUs, want %d", len(d.gpus), tt.gpus)
			}
			if d.gpuHeartbeat(true) == nil {
				t.Fatal("no GPU status")
			}
		})
	}
}

// TestTmpDiskDefault: tmp_disk_mb defaults to the size of /tmp's file
// system, as slurmd measures its TmpFS, and a file or TIDED_TMP_DISK_MB
// replaces it.
func TestTmpDiskDefault(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs(DefaultTmpFS, &st); err != nil {
		t.Skipf("statfs %s: %v", DefaultTmpFS, err)
	}
	want := int64(st.Blocks * uint64(st.Frsize) >> 20)
	if got := DefaultConfig().TmpDiskMB; got != want || got <= 0 {
		t.Errorf("default tmp_disk_mb = %d, want %d (the size of %s)", got, want, DefaultTmpFS)
	}
	if got := fsSizeMB("/nonexistent/dir"); got != 0 {
		t.Errorf("fsSizeMB of a missing path = %d, want 0", got)
	}
	c, err := Parse(strings.NewReader("tmp_disk_mb: 4096\n"))
	if err != nil || c.TmpDiskMB != 4096 {
		t.Errorf("tmp_disk_mb: 4096 in the file: %d, %v", c.TmpDiskMB, err)
	}
	t.Setenv("TIDED_TMP_DISK_MB", "123")
	if c, err := Parse(strings.NewReader("")); err != nil || c.TmpDiskMB != 123 {
		t.Errorf("TIDED_TMP_DISK_MB=123: %d, %v", c.TmpDiskMB, err)
	}
}
