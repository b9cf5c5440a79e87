package noded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/cdi"
)

// ScriptInContainer is where a container job's batch script is mounted
// (read-only) and run from.
const ScriptInContainer = "/.tide/script"

// ctrJobSpec is everything the OCI spec of a container job depends on,
// gathered by the containerd runtime so that building the spec is a pure
// function (and testable without containerd).
type ctrJobSpec struct {
	Script  string // host path of the batch script
	Args    []string
	Env     []string // BuildEnv's result; the image's own variables win
	Cwd     string
	Files   JobFiles
	WorkDir string
	Mounts  []api.ContainerMount
	Cred    userCred
	// MemoryMB and CPUs are the job's share of the node (0 = no limit).
	MemoryMB int64
	CPUs     int
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
func defaultBinds(workDir string, files JobFiles) []string {
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
func ctrSpecOpts(in *ctrJobSpec) []oci.SpecOpts {
	umask := uint32(0o022)
	if in.Cred.Umask >= 0 {
		umask = uint32(in.Cred.Umask)
	}
	opts := []oci.SpecOpts{
		oci.WithProcessArgs(append([]string{ScriptInContainer}, in.Args...)...),
		oci.WithProcessCwd(in.Cwd),
		func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
			if s.Process == nil {
				s.Process = &specs.Process{}
			}
			s.Process.Env = mergeEnv(append(in.Env, "SLURM_TASK_PID=1", "TIDE_TASK_PID=1"), s.Process.Env)
			// runc would otherwise keep the default capabilities for a
			// non-root user: DAC_OVERRIDE on bound host directories.
			s.Process.Capabilities = &specs.LinuxCapabilities{
				Bounding: []string{}, Effective: []string{}, Permitted: []string{}, Inheritable: []string{}, Ambient: []string{},
			}
			return nil
		},
		oci.WithUIDGID(in.Cred.UID, in.Cred.GID),
		func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
			s.Process.User.AdditionalGids = append([]uint32(nil), in.Cred.Groups...)
			return nil
		},
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
		opts = append(opts, oci.WithMemoryLimit(uint64(in.MemoryMB)<<20),
			// /dev/shm is tmpfs charged to the job's memory anyway.
			oci.WithDevShmSize(in.MemoryMB<<10))
	}
	if in.CPUs > 0 {
		opts = append(opts, oci.WithCPUCFS(int64(in.CPUs)*100000, 100000), oci.WithCPUShares(uint64(in.CPUs)*1024))
	}
	if in.NoFile != nil {
		opts = append(opts, oci.WithRlimit(&specs.POSIXRlimit{Type: "RLIMIT_NOFILE", Hard: in.NoFile.Max, Soft: in.NoFile.Cur}))
	}
	for _, dev := range in.GPUDevices {
		opts = append(opts, oci.WithLinuxDevice(dev, "rwm"))
	}
	if in.CDI != nil {
		opts = append(opts, func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
			return in.CDI.Apply(s)
		})
	}
	return opts
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
