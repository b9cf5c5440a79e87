package noded

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"golang.org/x/sys/unix"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/noded/cdi"
	"github.com/tide-hpc/tide/noded/ctr"
	"github.com/tide-hpc/tide/noded/stepd"
)

// ConfigVersion is the only config layout this tided understands; the
// field lets a later layout be told apart instead of misread.
const ConfigVersion = 1

// DefaultConfigFile is read when --config is not given and it exists.
const DefaultConfigFile = "/etc/tide/tided.yaml"

// GPU inventory sources.
const (
	GPUSourceNone   = "none"
	GPUSourceFake   = "fake"
	GPUSourceStatic = "static"
	GPUSourceNVML   = "nvml"
)

// Config is tided's configuration (etc/tided.yaml documents every field).
// It is built from DefaultConfig, then the YAML file, then TIDED_*
// environment variables, then command-line flags.
type Config struct {
	Version int `mapstructure:"version"`
	// Name is the node's name in the cluster (default: short hostname).
	Name string `mapstructure:"name"`
	// Controller is tidectld's node address, host:port, or with standby
	// controllers every controller's, comma-separated (Controllers):
	// tided fails over among them.
	Controller string `mapstructure:"controller"`
	// KeyFile holds the cluster key; it must not be world-readable. A
	// node that joined the cluster CA (TLSDir) does not use it.
	KeyFile string `mapstructure:"key_file"`
	// TLSDir keeps the node's certificate and key and the cluster CA's
	// certificate (`tided join`); with them tided talks to the
	// controller over mutual TLS. It must survive reboots (state_dir is
	// on tmpfs).
	TLSDir string `mapstructure:"tls_dir"`
	// StateDir holds one directory per job (jobs/<id>.<restart>). It
	// must outlive tided but not the machine: tmpfs (/run) by default.
	StateDir string `mapstructure:"state_dir"`
	// Supervisor is "shared" (one supervisor process serves all of the
	// node's jobs) or "per-job" (one per job, like slurmstepd).
	Supervisor string `mapstructure:"supervisor"`
	CPUs       int    `mapstructure:"cpus"`
	// Memory is the node's memory for jobs, e.g. 512G or 4096M (a bare
	// number is MiB, as Slurm's RealMemory).
	Memory string `mapstructure:"memory"`
	// TmpDiskMB is the node's temporary disk in MB, what sbatch --tmp
	// asks for (Slurm's TmpDisk). The default is the size of the file
	// system holding /tmp (Slurm's TmpFS), measured when tided starts.
	TmpDiskMB int64     `mapstructure:"tmp_disk_mb"`
	GPUs      GPUConfig `mapstructure:"gpus"`
	// Features are the node's constraint tags (sbatch -C).
	Features []string `mapstructure:"features"`
	// Heartbeat is how long the controller may hold a sync request, and
	// so how often an idle node reports.
	Heartbeat time.Duration `mapstructure:"heartbeat"`
	// KillWait is the grace between SIGTERM and SIGKILL when the launch
	// does not say.
	KillWait time.Duration `mapstructure:"kill_wait"`
	// LaunchTimeout bounds a job's launch on the node: its job directory,
	// output patterns, MPS daemons and the start of its supervisor or
	// container (an image pull is not part of it: containerd.pull_timeout
	// bounds that). A launch past it fails the job with the reason, and
	// the node goes on reporting meanwhile whatever the launch does.
	LaunchTimeout time.Duration `mapstructure:"launch_timeout"`
	// OutputGrace is how long a launch waits for the directory of the
	// job's output or error file to appear (a workflow that creates it
	// just after sbatch returns) before the job fails on it: Slurm's
	// slower launch gives that grace by accident. 0 fails at once. It
	// counts towards LaunchTimeout, and at most half of it is used, so
	// that a job whose directory never comes fails on its file rather
	// than as a launch timeout.
	OutputGrace   time.Duration `mapstructure:"output_grace"`
	AllowRootJobs bool          `mapstructure:"allow_root_jobs"`
	LogLevel      string        `mapstructure:"log_level"`
	// Cgroups confines each process job in a cgroup of its own (limits,
	// OOM reporting, killing what left the job's process group): auto
	// where the node allows it, off, or required (a job fails rather
	// than run without one).
	Cgroups string `mapstructure:"cgroups"`
	// CgroupParent is the cgroup that holds the job cgroups, relative to
	// /sys/fs/cgroup (to each controller's hierarchy on cgroup v1).
	CgroupParent string `mapstructure:"cgroup_parent"`
	// Containerd runs jobs that ask for a container image; an empty
	// socket means the node runs no containers.
	Containerd ContainerdConfig `mapstructure:"containerd"`
	// StepAddr is where tided accepts srun's step connections (issue 7),
	// host:port; port 0 picks a free port (several tided on one host),
	// "" disables steps.
	StepAddr string `mapstructure:"step_addr"`
	// MPS runs one CUDA MPS control daemon per GPU shared by slices
	// while slices run on it (auto: where nvidia-cuda-mps-control is
	// found; off: never), so that CUDA enforces the slices' limits.
	MPS string `mapstructure:"mps"`
	// MPSControl is the nvidia-cuda-mps-control binary ("" looks it up
	// in tided's PATH).
	MPSControl string `mapstructure:"mps_control"`
	// AcctGatherFrequency is how often the running steps' usage is
	// sampled (Slurm's JobAcctGatherFrequency; usage.go): the peaks of
	// memory come from these samples. 0 samples nothing, and only what
	// the end of each task gives is recorded.
	AcctGatherFrequency time.Duration `mapstructure:"acct_gather_frequency"`
}

// ContainerdConfig says how tided reaches containerd for container jobs.
type ContainerdConfig struct {
	// Socket is containerd's gRPC socket ("" = no container support).
	Socket string `mapstructure:"socket"`
	// Namespace keeps Tide's containers and images apart from those of
	// other containerd users (Docker, Kubernetes).
	Namespace string `mapstructure:"namespace"`
	// Snapshotter unpacks images for jobs (overlayfs; native where
	// overlay on overlay fails, as in some CI containers).
	Snapshotter string `mapstructure:"snapshotter"`
	// NvidiaHook injects the NVIDIA driver libraries into GPU jobs'
	// containers: auto (the hook on PATH, on a node with real GPUs),
	// off, or the hook's absolute path (nvidiahook.go).
	NvidiaHook string `mapstructure:"nvidia_hook"`
	// Pull says what a launch does when the job's image is not on the
	// node: auto pulls it from its registry (the job waits, other jobs
	// do not), never fails the launch (images come from "tided image
	// import" only).
	Pull string `mapstructure:"pull"`
	// PullTimeout bounds one pull, so that a registry that hangs fails
	// the jobs waiting for it.
	PullTimeout time.Duration `mapstructure:"pull_timeout"`
	// InsecureRegistries are registries (host or host:port, as image
	// references spell them) reached over plain HTTP.
	InsecureRegistries []string `mapstructure:"insecure_registries"`
	// AuthFile is a docker-style config.json with registry credentials
	// ("" = anonymous pulls). It is read at each pull.
	AuthFile string `mapstructure:"auth_file"`
	// CDISpecDirs are where Container Device Interface specs are read,
	// lowest priority first. Where they define the node's GPUs
	// (nvidia.com/gpu), a container job's GPUs are injected through
	// them (device nodes, driver libraries, variables, hooks) instead of
	// bare device nodes and the NVIDIA hook.
	CDISpecDirs []string `mapstructure:"cdi_spec_dirs"`
}

// DefaultTmpFS is the file system whose size is tmp_disk_mb's default:
// /tmp, Slurm's default TmpFS (tided gives jobs no temporary directory
// of its own).
const DefaultTmpFS = "/tmp"

// fsSizeMB is the total size in MB of the file system holding path, as
// slurmd measures TmpDisk (statvfs: blocks × fragment size); 0 when it
// cannot be read.
func fsSizeMB(path string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0
	}
	unit := uint64(st.Frsize)
	if unit == 0 {
		unit = uint64(st.Bsize)
	}
	return int64(st.Blocks * unit >> 20)
}

// DefaultLaunchTimeout is launch_timeout's default: far above what a
// launch takes (milliseconds), and above the 30 s the shared
// supervisor's answer and each containerd call may take on their own.
const DefaultLaunchTimeout = time.Minute

// DefaultOutputGrace is output_grace's default: a few seconds, about
// what a workflow needs to create the directory after sbatch returns.
const DefaultOutputGrace = 5 * time.Second

// Supervisor modes (Config.Supervisor).
const (
	// SupervisorShared runs one long-lived supervisor process for all of
	// the node's jobs: a job start costs no process start besides the
	// job's own. It outlives tided like a per-job one, and exits when the
	// node has been idle for a while.
	SupervisorShared = "shared"
	// SupervisorPerJob starts a supervisor process per job (Slurm's
	// slurmstepd model): a supervisor crash touches one job only.
	SupervisorPerJob = "per-job"
)

// GPUConfig says where the GPU inventory comes from.
type GPUConfig struct {
	Source string          `mapstructure:"source"`
	Fake   gres.FakeConfig `mapstructure:"fake"`
	// Static lists the GPUs by hand (source static), like gres.conf.
	Static []gres.StaticGPU `mapstructure:"static"`
}

// DefaultConfig returns the built-in defaults, measured on this host
// (hostname, CPU count, memory).
func DefaultConfig() Config {
	name, _ := os.Hostname()
	name, _, _ = strings.Cut(name, ".")
	mem := "1024M"
	if mi, err := meminfo(); err == nil && mi["MemTotal"] > 0 {
		mem = strconv.FormatInt(mi["MemTotal"], 10) + "M"
	}
	return Config{
		Version:       ConfigVersion,
		Name:          name,
		Controller:    "127.0.0.1:6817",
		KeyFile:       "/etc/tide/cluster.key",
		TLSDir:        DefaultTLSDir,
		StateDir:      "/run/tided",
		Supervisor:    SupervisorShared,
		CPUs:          runtime.NumCPU(),
		Memory:        mem,
		TmpDiskMB:     fsSizeMB(DefaultTmpFS),
		GPUs:          GPUConfig{Source: GPUSourceNone},
		Features:      []string{},
		Heartbeat:     10 * time.Second,
		KillWait:      30 * time.Second,
		LaunchTimeout: DefaultLaunchTimeout,
		OutputGrace:   DefaultOutputGrace,
		LogLevel:      "info",
		Cgroups:       CgroupsAuto,
		CgroupParent:  "tide",
		Containerd:    ContainerdConfig{Namespace: "tide", Snapshotter: "overlayfs", NvidiaHook: NvidiaHookAuto, Pull: ctr.PullAuto, PullTimeout: ctr.DefaultPullTimeout, CDISpecDirs: slices.Clone(cdi.DefaultSpecDirs)},
		StepAddr:      defaultStepAddr,
		MPS:           MPSAuto,

		AcctGatherFrequency: DefaultAcctGatherFrequency, // usage.go
	}
}

// configKeys lists every leaf key with its value in c, in file order.
func configKeys(c Config) []struct {
	key string
	val any
} {
	return []struct {
		key string
		val any
	}{
		{"version", c.Version},
		{"name", c.Name},
		{"controller", c.Controller},
		{"key_file", c.KeyFile},
		{"tls_dir", c.TLSDir},
		{"state_dir", c.StateDir},
		{"supervisor", c.Supervisor},
		{"cpus", c.CPUs},
		{"memory", c.Memory},
		{"tmp_disk_mb", c.TmpDiskMB},
		{"gpus.source", c.GPUs.Source},
		{"gpus.fake.count", c.GPUs.Fake.Count},
		{"gpus.fake.model", c.GPUs.Fake.Model},
		{"gpus.fake.memory_mb", c.GPUs.Fake.MemoryMB},
		{"gpus.fake.topology", c.GPUs.Fake.Topology},
		{"gpus.fake.load", c.GPUs.Fake.Load},
		{"gpus.static", c.GPUs.Static},
		{"features", c.Features},
		{"heartbeat", c.Heartbeat},
		{"kill_wait", c.KillWait},
		{"launch_timeout", c.LaunchTimeout},
		{"output_grace", c.OutputGrace},
		{"allow_root_jobs", c.AllowRootJobs},
		{"log_level", c.LogLevel},
		{"cgroups", c.Cgroups},
		{"cgroup_parent", c.CgroupParent},
		{"containerd.socket", c.Containerd.Socket},
		{"containerd.namespace", c.Containerd.Namespace},
		{"containerd.snapshotter", c.Containerd.Snapshotter},
		{"containerd.nvidia_hook", c.Containerd.NvidiaHook},
		{"containerd.pull", c.Containerd.Pull},
		{"containerd.pull_timeout", c.Containerd.PullTimeout},
		{"containerd.insecure_registries", c.Containerd.InsecureRegistries},
		{"containerd.auth_file", c.Containerd.AuthFile},
		{"containerd.cdi_spec_dirs", c.Containerd.CDISpecDirs},
		{"step_addr", c.StepAddr},
		{"mps", c.MPS},
		{"mps_control", c.MPSControl},
		{"acct_gather_frequency", c.AcctGatherFrequency},
	}
}

// newViper returns a viper holding DefaultConfig and reading TIDED_*
// variables (TIDED_STATE_DIR, TIDED_GPUS_FAKE_COUNT…).
func newViper() *viper.Viper {
	v := viper.New()
	v.SetConfigType("yaml")
	for _, kv := range configKeys(DefaultConfig()) {
		v.SetDefault(kv.key, kv.val)
	}
	v.SetEnvPrefix("TIDED")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	return v
}

func unmarshal(v *viper.Viper) (Config, error) {
	known := make(map[string]bool)
	for _, kv := range configKeys(Config{}) {
		known[kv.key] = true
	}
	var unknown []error
	keys := v.AllKeys()
	slices.Sort(keys)
	for _, k := range keys {
		if !known[k] {
			unknown = append(unknown, fmt.Errorf("unknown key %q", k))
		}
	}
	if len(unknown) > 0 {
		return Config{}, fmt.Errorf("invalid configuration: %w", errors.Join(unknown...))
	}
	var c Config
	if err := v.UnmarshalExact(&c); err != nil {
		return Config{}, fmt.Errorf("invalid configuration: %w", err)
	}
	if len(c.GPUs.Static) == 0 {
		c.GPUs.Static = nil // "static: []" and no key mean the same
	}
	if len(c.Containerd.InsecureRegistries) == 0 {
		c.Containerd.InsecureRegistries = nil
	}
	if len(c.Containerd.CDISpecDirs) == 0 {
		c.Containerd.CDISpecDirs = nil // "cdi_spec_dirs: []": no CDI
	}
	return c, nil
}

// Parse reads a YAML config over the defaults (and TIDED_* variables).
// Unknown keys are errors that name the key.
func Parse(r io.Reader) (Config, error) {
	v := newViper()
	if err := v.ReadConfig(r); err != nil {
		return Config{}, fmt.Errorf("parse config: %w", err)
	}
	return unmarshal(v)
}

// flagKeys maps tided's override flags to config keys.
var flagKeys = map[string]string{
	"name":              "name",
	"controller":        "controller",
	"key-file":          "key_file",
	"tls-dir":           "tls_dir",
	"state-dir":         "state_dir",
	"supervisor":        "supervisor",
	"cpus":              "cpus",
	"memory":            "memory",
	"features":          "features",
	"gpu-source":        "gpus.source",
	"fake-gpus":         "gpus.fake.count",
	"heartbeat":         "heartbeat",
	"kill-wait":         "kill_wait",
	"allow-root-jobs":   "allow_root_jobs",
	"log-level":         "log_level",
	"containerd-socket": "containerd.socket",
	"step-addr":         "step_addr",
}

// addConfigFlags declares --config and the override flags.
func addConfigFlags(fs *pflag.FlagSet) {
	fs.String("config", DefaultConfigFile, "configuration file (YAML)")
	fs.String("name", "", "node name (default: short hostname)")
	fs.String("controller", "", "controller node address, host:port (standby controllers: all of them, comma-separated)")
	fs.String("key-file", "", "file holding the cluster key")
	fs.String("tls-dir", "", "directory of the node's certificate and the cluster CA (tided join)")
	fs.String("state-dir", "", "directory for job state")
	fs.String("supervisor", "", "job supervisor: shared or per-job")
	fs.Int("cpus", 0, "CPUs offered to jobs")
	fs.String("memory", "", "memory offered to jobs, e.g. 512G")
	fs.StringSlice("features", nil, "node features (comma-separated)")
	fs.String("gpu-source", "", "GPU inventory: none, fake, static or nvml")
	fs.Int("fake-gpus", 0, "number of fake GPUs (with --gpu-source=fake)")
	fs.Duration("heartbeat", 0, "longest sync interval")
	fs.Duration("kill-wait", 0, "grace between SIGTERM and SIGKILL")
	fs.Bool("allow-root-jobs", false, "run jobs of uid 0")
	fs.String("log-level", "", "debug, info, warn or error")
	fs.String("containerd-socket", "", "containerd socket for container jobs (empty: none)")
	fs.String("step-addr", "", "srun step listener, host:port (port 0: any free port)")
}

// LoadConfig builds the effective configuration: defaults, then the file
// (--config, or DefaultConfigFile when it exists), then TIDED_* variables,
// then the flags that were set on fs (which may be nil).
func LoadConfig(flags *pflag.FlagSet) (Config, error) {
	v := newViper()
	path, explicit := DefaultConfigFile, false
	if flags != nil {
		if f := flags.Lookup("config"); f != nil {
			path, explicit = f.Value.String(), f.Changed
		}
		for name, key := range flagKeys {
			if f := flags.Lookup(name); f != nil && f.Changed {
				if err := v.BindPFlag(key, f); err != nil {
					return Config{}, fmt.Errorf("bind flag --%s: %w", name, err)
				}
			}
		}
	}
	if path != "" {
		f, err := os.Open(path)
		switch {
		case err == nil:
			defer f.Close()
			if err := v.ReadConfig(f); err != nil {
				return Config{}, fmt.Errorf("parse config %s: %w", path, err)
			}
		case explicit || !errors.Is(err, fs.ErrNotExist):
			return Config{}, fmt.Errorf("read config: %w", err)
		}
	}
	c, err := unmarshal(v)
	if err != nil && path != "" {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, err
}

// Controllers returns the controllers' node addresses: controller's
// comma-separated elements, in order.
func (c *Config) Controllers() []string {
	parts := strings.Split(c.Controller, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}

// checkControllers checks controller: host:port, or several,
// comma-separated, each named when it is wrong.
func checkControllers(v string) error {
	parts := strings.Split(v, ",")
	in := ""
	if len(parts) > 1 {
		in = fmt.Sprintf(" (in %q)", v)
	}
	seen := make(map[string]bool, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" && len(parts) > 1 {
			return fmt.Errorf("controller: element %d of %q is empty", i+1, v)
		}
		if host, port, err := net.SplitHostPort(p); err != nil || host == "" || port == "" {
			return fmt.Errorf("controller: %q%s is not host:port", p, in)
		} else if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("controller: %q%s has an invalid port", p, in)
		}
		if seen[p] {
			return fmt.Errorf("controller: %q names %s twice", v, p)
		}
		seen[p] = true
	}
	return nil
}

// Validate checks every field and returns all problems at once.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Version != ConfigVersion {
		bad("version: %d is not supported (want %d)", c.Version, ConfigVersion)
	}
	if c.Name == "" {
		bad("name: must not be empty")
	} else if strings.ContainsAny(c.Name, " \t,[]/") {
		bad("name: %q may not contain spaces, commas, brackets or slashes", c.Name)
	}
	if err := checkControllers(c.Controller); err != nil {
		errs = append(errs, err)
	}
	if c.TLSDir == "" || !filepath.IsAbs(c.TLSDir) {
		bad("tls_dir: %q must be an absolute path", c.TLSDir)
	} else if !Joined(c.TLSDir) {
		if _, err := LoadKey(c.KeyFile); err != nil {
			errs = append(errs, fmt.Errorf("key_file: %w (or join the cluster CA: tided join)", err))
		}
	}
	if c.StateDir == "" || !filepath.IsAbs(c.StateDir) {
		bad("state_dir: %q must be an absolute path", c.StateDir)
	}
	switch c.Supervisor {
	case SupervisorShared:
		// A unix socket path must fit sockaddr_un (108 bytes with the NUL).
		if sock := stepd.ServeSocket(c.StateDir); len(sock) >= 108 {
			bad("state_dir: %q is too long for the shared supervisor's socket %s (%d bytes, at most 107): use a shorter state_dir or supervisor: %s",
				c.StateDir, filepath.Base(sock), len(sock), SupervisorPerJob)
		}
	case SupervisorPerJob:
	default:
		bad("supervisor: %q must be %s or %s", c.Supervisor, SupervisorShared, SupervisorPerJob)
	}
	if c.CPUs < 1 {
		bad("cpus: %d must be at least 1", c.CPUs)
	}
	if _, err := ParseMemory(c.Memory); err != nil {
		errs = append(errs, fmt.Errorf("memory: %w", err))
	}
	if c.TmpDiskMB < 0 || c.TmpDiskMB > api.MaxMemMB {
		bad("tmp_disk_mb: %d must be between 0 and %d", c.TmpDiskMB, int64(api.MaxMemMB))
	}
	switch c.GPUs.Source {
	case GPUSourceNone, "":
	case GPUSourceFake:
		if c.GPUs.Fake.Count < 0 || c.GPUs.Fake.Count > 64 {
			bad("gpus.fake.count: %d must be between 0 and 64", c.GPUs.Fake.Count)
		}
		if c.GPUs.Fake.MemoryMB < 0 {
			bad("gpus.fake.memory_mb: %d must not be negative", c.GPUs.Fake.MemoryMB)
		}
		if l := c.GPUs.Fake.Load; l != "" && l != gres.FakeLoadBusy && l != gres.FakeLoadIdle {
			bad("gpus.fake.load: %q is not %s or %s", l, gres.FakeLoadBusy, gres.FakeLoadIdle)
		}
	case GPUSourceStatic:
		if _, err := gres.StaticDevices(c.GPUs.Static); err != nil {
			errs = append(errs, fmt.Errorf("gpus.static: %w", err))
		}
	case GPUSourceNVML:
		// Checked when the daemon starts: NVML must initialise then.
	default:
		bad("gpus.source: unknown source %q (want none, fake, static or nvml)", c.GPUs.Source)
	}
	for _, f := range c.Features {
		if f == "" || strings.ContainsAny(f, " \t,&|[]") {
			bad("features: %q is not a valid feature name", f)
		}
	}
	if c.Heartbeat < 100*time.Millisecond {
		bad("heartbeat: %s must be at least 100ms", c.Heartbeat)
	}
	if c.KillWait < 0 {
		bad("kill_wait: %s must not be negative", c.KillWait)
	}
	if c.LaunchTimeout < time.Second {
		bad("launch_timeout: %s must be at least 1s", c.LaunchTimeout)
	}
	if c.OutputGrace < 0 {
		bad("output_grace: %s must not be negative", c.OutputGrace)
	}
	if f := c.AcctGatherFrequency; f < 0 || f > 0 && f < time.Second {
		bad("acct_gather_frequency: %s must be 0 (off) or at least 1s", f)
	}
	errs = append(errs, validateCgroups(c))
	if s := c.Containerd.Socket; s != "" && !filepath.IsAbs(s) {
		bad("containerd.socket: %q must be an absolute path", s)
	}
	if c.Containerd.Socket != "" {
		if !validNamespace(c.Containerd.Namespace) {
			bad("containerd.namespace: %q must be letters, digits, '.', '_' or '-', starting with a letter or digit", c.Containerd.Namespace)
		}
		if c.Containerd.Snapshotter == "" {
			bad("containerd.snapshotter: must not be empty")
		}
		if err := validateNvidiaHook(c.Containerd.NvidiaHook); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, validatePulls(&c.Containerd))
	}
	if c.StepAddr != "" {
		if _, port, err := net.SplitHostPort(c.StepAddr); err != nil {
			bad("step_addr: %q is not host:port", c.StepAddr)
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			bad("step_addr: %q has an invalid port", c.StepAddr)
		}
	}
	switch c.MPS {
	case MPSAuto, MPSOff:
	default:
		bad("mps: %q must be %s or %s", c.MPS, MPSAuto, MPSOff)
	}
	if p := c.MPSControl; p != "" && !filepath.IsAbs(p) {
		bad("mps_control: %q must be an absolute path", p)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("log_level: %w", err))
	}
	return errors.Join(errs...)
}

// LoadKey reads the cluster key. The file must exist, hold a key, and
// not be readable by others, since the key lets anyone pose as a node.
func LoadKey(path string) (string, error) {
	if path == "" {
		return "", errors.New("no key file configured")
	}
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("cluster key: %w", err)
	}
	if info.IsDir() {
		return "", fmt.Errorf("cluster key %s is a directory", path)
	}
	if info.Mode().Perm()&0o004 != 0 {
		return "", fmt.Errorf("cluster key %s is world-readable (mode %04o); run chmod o-rwx %s", path, info.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cluster key: %w", err)
	}
	key := strings.TrimSpace(string(data))
	if key == "" {
		return "", fmt.Errorf("cluster key %s is empty", path)
	}
	return key, nil
}

// ParseMemory parses a memory size into MiB: a bare number is MiB (as
// Slurm's RealMemory); K, M, G, T suffixes (optionally followed by B or
// iB) are binary units.
func ParseMemory(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "IB"), "B")
	if t == "" {
		return 0, fmt.Errorf("%q is not a memory size", s)
	}
	mult := map[byte]float64{'K': 1.0 / 1024, 'M': 1, 'G': 1024, 'T': 1024 * 1024}
	m := 1.0
	if f, ok := mult[t[len(t)-1]]; ok {
		m, t = f, t[:len(t)-1]
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a memory size (e.g. 512G, 4096M)", s)
	}
	mb := int64(n * m)
	if mb < 1 {
		return 0, fmt.Errorf("%q is less than 1M", s)
	}
	return mb, nil
}

// parseLevel maps log_level to a slog level.
func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q is not one of debug, info, warn, error", s)
	}
	return l, nil
}

// WriteYAML writes c as YAML in file order, suitable as a config file.
func (c *Config) WriteYAML(w io.Writer) error {
	var b strings.Builder
	indent := func(key string) (string, string) {
		parts := strings.Split(key, ".")
		return strings.Repeat("  ", len(parts)-1), parts[len(parts)-1]
	}
	opened := map[string]bool{}
	for _, kv := range configKeys(*c) {
		parts := strings.Split(kv.key, ".")
		for i := 1; i < len(parts); i++ {
			p := strings.Join(parts[:i], ".")
			if !opened[p] {
				opened[p] = true
				fmt.Fprintf(&b, "%s%s:\n", strings.Repeat("  ", i-1), parts[i-1])
			}
		}
		pad, name := indent(kv.key)
		fmt.Fprintf(&b, "%s%s: %s\n", pad, name, yamlValue(kv.val))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// yamlValue renders a scalar or string list as YAML.
func yamlValue(v any) string {
	switch x := v.(type) {
	case []gres.StaticGPU:
		// JSON is YAML: one flow list keeps the dump short and exact.
		if len(x) == 0 {
			return "[]"
		}
		b, _ := json.Marshal(x)
		return string(b)
	case string:
		return yamlString(x)
	case time.Duration:
		return x.String()
	case []string:
		q := make([]string, len(x))
		for i, s := range x {
			q[i] = yamlString(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// yamlString quotes s unless it is a plain word YAML reads back as the
// same string.
func yamlString(s string) string {
	plain := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._/-", r)) {
			plain = false
			break
		}
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "null", "~", "y", "n":
		plain = false
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		plain = false
	}
	if plain && s[0] != '-' {
		return s
	}
	return strconv.Quote(s)
}

// validatePulls checks the registry and CDI keys of containerd.
func validatePulls(c *ContainerdConfig) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	// Zero values (a Config built in code) mean the defaults.
	switch c.Pull {
	case "", ctr.PullAuto, ctr.PullNever:
	default:
		bad("containerd.pull: %q must be %s or %s", c.Pull, ctr.PullAuto, ctr.PullNever)
	}
	if c.PullTimeout != 0 && c.PullTimeout < time.Second {
		bad("containerd.pull_timeout: %s must be at least 1s", c.PullTimeout)
	}
	for _, r := range c.InsecureRegistries {
		host, port, err := net.SplitHostPort(r)
		if err != nil {
			host, port = r, ""
		}
		n, perr := strconv.Atoi(port)
		if host == "" || strings.ContainsAny(host, "/ \t@") || (port != "" && (perr != nil || n <= 0 || n > 65535)) {
			bad("containerd.insecure_registries: %q is not host or host:port (no scheme, no path)", r)
		}
	}
	if c.AuthFile != "" && !filepath.IsAbs(c.AuthFile) {
		bad("containerd.auth_file: %q must be an absolute path", c.AuthFile)
	}
	for _, d := range c.CDISpecDirs {
		if !filepath.IsAbs(d) {
			bad("containerd.cdi_spec_dirs: %q must be an absolute path", d)
		}
	}
	return errors.Join(errs...)
}

// validNamespace accepts containerd's namespace syntax (a subset of DNS
// labels joined by dots).
func validNamespace(ns string) bool {
	if ns == "" || len(ns) > 76 {
		return false
	}
	for i, r := range ns {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._-", r)) {
			return false
		}
	}
	return true
}
