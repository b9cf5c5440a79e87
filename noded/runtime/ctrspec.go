package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/noded/cdi"
)

// A container job's OCI spec is built from options in containerd's
// oci.SpecOpts style, applied after the image's own configuration
// (oci.WithImageConfig): containerd's own options where they exist, and
// the ones below (WithJobEnv, WithNoCapabilities, WithGroups,
// WithJobMemory, WithJobCPUs, WithGPUDevices, WithCDIEdits,
// WithNvidiaHook) where Tide needs more. ctrSpecOpts lists them for one
// job; the spec is then a pure function of the job (ctrJobSpec), tested
// without containerd.

// ScriptInContainer is where a container job's batch script is mounted
// (read-only) and run from.
const ScriptInContainer = "/.tide/script"

// ctrJobSpec is everything the OCI spec of a container job depends on,
// gathered by the containerd runtime so that building the spec is a pure
// function (and testable without containerd).
type ctrJobSpec struct {
	Script  string // host path of the batch script
	Args    []string
	Env     []string // the job's environment; the image's own variables win
	Cwd     string
	Files   Files
	WorkDir string
	Mounts  []api.ContainerMount
	Cred    User
	// MemoryMB and CPUs are the job's share of the node (0 = no limit).
	MemoryMB int64
	CPUs     int
	// GPUs are the job's GPU indices on the node (for the NVIDIA hook).
	GPUs []int
	// GPUDevices are host device nodes of the job's GPUs (and the
	// driver's control nodes) that exist on the node.
	GPUDevices []string
	// CDI holds the edits of the job's GPUs from the node's CDI specs,
	// applied last (nil: GPUDevices instead).
	CDI *cdi.ContainerEdits
	// CgroupsPath is the task's cgroup, where the OOM count is read.
	CgroupsPath string
	NoFile      *syscall.Rlimit
}

// systemDirs are never bound into a container even when they are a job's
// work or output directory: they would hide the image's own.
var systemDirs = map[string]bool{
	"/": true, "/bin": true, "/boot": true, "/dev": true, "/etc": true, "/lib": true, "/lib32": true,
	"/lib64": true, "/libx32": true, "/proc": true, "/run": true, "/sbin": true, "/sys": true,
	"/usr": true, "/var": true, "/tmp": true,
}

// defaultBinds are the host directories bound read-write into every
// container job: the work directory and the directories of its output
// files, without duplicates or directories inside another one, and
// without system directories.
func defaultBinds(workDir string, files Files) []string {
	var dirs []string
	for _, d := range []string{workDir, filepath.Dir(files.Stdout), filepath.Dir(files.Stderr)} {
		if d == "" || d == "." || !filepath.IsAbs(d) {
			continue
		}
		d = filepath.Clean(d)
		if systemDirs[d] || strings.HasPrefix(d, "/proc/") || strings.HasPrefix(d, "/sys/") || strings.HasPrefix(d, "/dev/") {
			continue
		}
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	var out []string
	for _, d := range dirs {
		if len(out) > 0 {
			last := out[len(out)-1]
			if d == last || strings.HasPrefix(d, last+"/") {
				continue
			}
		}
		out = append(out, d)
	}
	return out
}

// ctrMounts lists the job's mounts in order: the script, the default
// binds, the user's --container-mounts, and a read-only cgroup file
// system so that jobs can read their limits.
func ctrMounts(in *ctrJobSpec) []specs.Mount {
	ms := []specs.Mount{{Destination: ScriptInContainer, Type: "bind", Source: in.Script,
		Options: []string{"rbind", "ro", "nosuid", "nodev"}}}
	for _, d := range defaultBinds(in.WorkDir, in.Files) {
		ms = append(ms, specs.Mount{Destination: d, Type: "bind", Source: d, Options: []string{"rbind", "rw", "nosuid", "nodev"}})
	}
	for _, m := range in.Mounts {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		ms = append(ms, specs.Mount{Destination: m.Destination, Type: "bind", Source: m.Source,
			Options: []string{"rbind", mode, "nosuid", "nodev"}})
	}
	ms = append(ms, specs.Mount{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup",
		Options: []string{"ro", "nosuid", "noexec", "nodev"}})
	return ms
}

// mergeEnv returns base with over's variables replacing or added.
func mergeEnv(base, over []string) []string {
	idx := make(map[string]int, len(base))
	out := make([]string, 0, len(base)+len(over))
	for _, kv := range append(append([]string(nil), base...), over...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// ctrSpecOpts returns the OCI spec options of a container job, to be
// applied after the image's own configuration (oci.WithImageConfig).
// What they enforce: the job's uid, gid and groups, no capabilities and
// no new privileges, the memory limit and CPU quota of its allocation,
// only its GPUs' device nodes, the host network (jobs talk to each
// other and to storage as process jobs do), a read-only /sys/fs/cgroup.
// The NVIDIA hook (WithNvidiaHook) comes after them where CDI does not
// bring the job's GPUs.
func ctrSpecOpts(in *ctrJobSpec) []oci.SpecOpts {
	umask := uint32(0o022)
	if in.Cred.Umask >= 0 {
		umask = uint32(in.Cred.Umask)
	}
	opts := []oci.SpecOpts{
		oci.WithProcessArgs(append([]string{ScriptInContainer}, in.Args...)...),
		oci.WithProcessCwd(in.Cwd),
		WithJobEnv(append(in.Env, "SLURM_TASK_PID=1", "TIDE_TASK_PID=1")),
		WithNoCapabilities,
		oci.WithUIDGID(in.Cred.UID, in.Cred.GID),
		WithGroups(in.Cred.Groups),
		oci.WithUmask(umask),
		oci.WithNoNewPrivileges,
		oci.WithHostNamespace(specs.NetworkNamespace),
		oci.WithHostNamespace(specs.UTSNamespace),
		oci.WithHostHostsFile,
		oci.WithHostResolvconf,
		oci.WithMounts(ctrMounts(in)),
		oci.WithCgroup(in.CgroupsPath),
	}
	if in.MemoryMB > 0 {
		opts = append(opts, WithJobMemory(in.MemoryMB))
	}
	if in.CPUs > 0 {
		opts = append(opts, WithJobCPUs(in.CPUs))
	}
	if in.NoFile != nil {
		opts = append(opts, oci.WithRlimit(&specs.POSIXRlimit{Type: "RLIMIT_NOFILE", Hard: in.NoFile.Max, Soft: in.NoFile.Cur}))
	}
	opts = append(opts, WithGPUDevices(in.GPUDevices))
	if in.CDI != nil {
		opts = append(opts, WithCDIEdits(in.CDI))
	}
	return opts
}

// WithJobEnv sets the job's environment under the image's: a variable
// the image sets keeps the image's value (its PATH, its locale).
func WithJobEnv(env []string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		s.Process.Env = mergeEnv(env, s.Process.Env)
		return nil
	}
}

// WithNoCapabilities drops every capability: runc would otherwise keep
// its default set for a non-root user (DAC_OVERRIDE on bound host
// directories).
func WithNoCapabilities(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
	if s.Process == nil {
		s.Process = &specs.Process{}
	}
	s.Process.Capabilities = &specs.LinuxCapabilities{
		Bounding: []string{}, Effective: []string{}, Permitted: []string{}, Inheritable: []string{}, Ambient: []string{},
	}
	return nil
}

// WithGroups sets the process's supplementary groups (after
// oci.WithUIDGID, which sets the user).
func WithGroups(gids []uint32) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		s.Process.User.AdditionalGids = append([]uint32(nil), gids...)
		return nil
	}
}

// WithJobMemory limits the container's memory to the job's share of the
// node, and sizes its /dev/shm alike (tmpfs charged to the job's memory
// anyway).
func WithJobMemory(mb int64) oci.SpecOpts {
	return oci.Compose(oci.WithMemoryLimit(uint64(mb)<<20), oci.WithDevShmSize(mb<<10))
}

// WithJobCPUs gives the container a CPU quota and shares of n CPUs (no
// cpuset: allocations have no CPU ids yet).
func WithJobCPUs(n int) oci.SpecOpts {
	return oci.Compose(oci.WithCPUCFS(int64(n)*100000, 100000), oci.WithCPUShares(uint64(n)*1024))
}

// WithGPUDevices adds host device nodes (a job's GPUs and the driver's
// control nodes, gpuDevices) to the container and its device cgroup.
func WithGPUDevices(paths []string) oci.SpecOpts {
	opts := make([]oci.SpecOpts, len(paths))
	for i, dev := range paths {
		opts[i] = oci.WithLinuxDevice(dev, "rwm")
	}
	return oci.Compose(opts...)
}

// WithCDIEdits applies the edits of the job's GPUs from the node's CDI
// specs (device nodes, mounts, variables, hooks); they come last, so
// that the specs' variables win.
func WithCDIEdits(e *cdi.ContainerEdits) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		return e.Apply(s)
	}
}

// gpuDevices lists the device nodes of the given GPU indices that exist
// under devDir, plus the driver's shared control nodes when any GPU is
// there. Index N is /dev/nvidiaN, which holds for nodes whose NVML
// indices follow the minor numbers (the default without
// CUDA_DEVICE_ORDER games).
func gpuDevices(devDir string, gpus []int) []string {
	var out []string
	for _, i := range gpus {
		p := filepath.Join(devDir, fmt.Sprintf("nvidia%d", i))
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil
	}
	for _, n := range []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"} {
		p := filepath.Join(devDir, n)
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// The NVIDIA container hook. A container job gets its GPUs' device
// nodes in any case, but a CUDA program also needs the user-space driver
// (libcuda, libnvidia-ml…) of the node's kernel module, which an image
// must not bring itself. The NVIDIA Container Toolkit's OCI hook mounts
// those libraries (and nvidia-smi) into the container before it starts,
// for the GPUs that NVIDIA_VISIBLE_DEVICES in the container's
// environment names. tided adds the hook as a prestart hook, as NVIDIA's
// own legacy runtime does, with NVIDIA_VISIBLE_DEVICES set to the UUIDs
// of the job's GPUs, overriding the image's value (CUDA base images say
// "all", which would make the hook expose every GPU of the node). Which
// hook a node uses (containerd.nvidia_hook) tided decides at start.

// gpuUUIDs names the GPUs of indices idx for NVIDIA_VISIBLE_DEVICES: by
// UUID, which names the same GPU inside and outside the container
// whatever the enumeration order, else by index.
func gpuUUIDs(devs []gres.Device, idx []int) []string {
	out := make([]string, 0, len(idx))
	for _, i := range idx {
		id := strconv.Itoa(i)
		for _, d := range devs {
			if d.Index == i && d.UUID != "" {
				id = d.UUID
				break
			}
		}
		out = append(out, id)
	}
	return out
}

// WithNvidiaHook adds the hook at path to the spec of a job with the
// GPUs visible, and the variables it reads. It must come after the
// options that set the environment. No hook or no GPUs changes nothing.
func WithNvidiaHook(path string, visible []string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if path == "" || len(visible) == 0 {
			return nil
		}
		if s.Hooks == nil {
			s.Hooks = &specs.Hooks{}
		}
		s.Hooks.Prestart = append(s.Hooks.Prestart, specs.Hook{Path: path, Args: []string{path, "prestart"}})
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		over := []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(visible, ",")}
		if !hasEnv(s.Process.Env, "NVIDIA_DRIVER_CAPABILITIES") {
			// Older hooks default to utility alone (nvidia-smi, no CUDA).
			over = append(over, "NVIDIA_DRIVER_CAPABILITIES=compute,utility")
		}
		s.Process.Env = mergeEnv(s.Process.Env, over)
		return nil
	}
}

// hasEnv reports whether env sets key.
func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			return true
		}
	}
	return false
}
