package noded

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/cgroup"
	"github.com/tide-hpc/tide/noded/stepd"
)

// Cgroup modes (Config.Cgroups).
const (
	// CgroupsAuto confines process jobs in cgroups where the node allows
	// it; where it does not (no hierarchy, read-only in a container),
	// tided says so once at start and jobs run without.
	CgroupsAuto = "auto"
	// CgroupsOff never makes job cgroups.
	CgroupsOff = "off"
	// CgroupsRequired refuses to start tided without usable cgroups, and
	// fails a job whose cgroup cannot be made.
	CgroupsRequired = "required"
)

// cgroupRoot is where tided finds the cgroup hierarchy and cgroupDevDir
// the GPU device nodes (tests change them).
var (
	cgroupRoot   = cgroup.DefaultRoot
	cgroupDevDir = "/dev"
)

// validateCgroups checks the cgroups and cgroup_parent keys.
func validateCgroups(c *Config) error {
	var errs []error
	switch c.Cgroups {
	case CgroupsAuto, CgroupsOff, CgroupsRequired:
	default:
		errs = append(errs, fmt.Errorf("cgroups: %q must be %s, %s or %s", c.Cgroups, CgroupsAuto, CgroupsOff, CgroupsRequired))
	}
	p := c.CgroupParent
	if p == "" || filepath.IsAbs(p) || filepath.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") {
		errs = append(errs, fmt.Errorf("cgroup_parent: %q must be a relative path below /sys/fs/cgroup, such as tide", p))
	}
	return errors.Join(errs...)
}

// cgroupStatus finds out at start whether tided can make job cgroups,
// creating the parent, and says what it found for the startup line:
// "off", or the hierarchy and the controllers job cgroups get, such as
// "v2 (cpu,memory,pids)". With cgroups: auto an unusable hierarchy, or
// one without the cpu or memory controller for jobs, is one warning here
// (jobs then run without cgroups, or without those limits); with
// cgroups: required it is an error, and tided must not start.
func cgroupStatus(cfg Config, log *slog.Logger) (string, error) {
	if cfg.Cgroups == CgroupsOff {
		return "off", nil
	}
	h, err := cgroup.Detect(cgroupRoot)
	if err == nil {
		err = h.Prepare(cfg.CgroupParent)
	}
	if err != nil {
		if cfg.Cgroups == CgroupsRequired {
			return "", fmt.Errorf("cgroups: required, but job cgroups cannot be made under %s: %w", filepath.Join(cgroupRoot, cfg.CgroupParent), err)
		}
		log.Warn("cgroups unusable: process jobs run without cgroup limits, OOM reports or cgroup kills (set cgroups: off to silence this)", "err", err)
		return "off", nil
	}
	ctrls := h.JobControllers(cfg.CgroupParent)
	var missing []string
	for _, c := range []string{cgroup.CPU, cgroup.Memory} {
		if !slices.Contains(ctrls, c) {
			missing = append(missing, c)
		}
	}
	status := fmt.Sprintf("%s (%s)", h.Version, strings.Join(ctrls, ","))
	if len(missing) > 0 {
		if cfg.Cgroups == CgroupsRequired {
			return "", fmt.Errorf("cgroups: required, but job cgroups under %s get no %s controller", filepath.Join(cgroupRoot, cfg.CgroupParent), strings.Join(missing, " or "))
		}
		log.Warn("job cgroups lack controllers: their limits are not enforced", "missing", strings.Join(missing, ","), "cgroups", status)
	}
	return status, nil
}

// cgroupPlan is the cgroup the supervisor makes for a process job on
// node: the job's CPUs as a CPU quota, its memory (swap included), and
// a device fence that hides the node's GPUs the job was not given, as
// Slurm's ConstrainDevices does (the job keeps every other device: a
// process job runs on the host and may need InfiniBand or FUSE). Job CPU
// ids are not allocated yet, so there is no cpuset. It is nil for
// cgroups: off and for container jobs, which runc confines.
//
// tided's launch puts it in the job's plan:
//
//	plan.Cgroup = cgroupPlan(&j.spec, d.cfg.Name, d.cfg)
func cgroupPlan(spec *api.LaunchSpec, node string, cfg Config) *stepd.CgroupPlan {
	if cfg.Cgroups == CgroupsOff || spec.ContainerImage != "" {
		return nil
	}
	alloc := nodeAlloc(spec, node)
	cp := &stepd.CgroupPlan{
		Required: cfg.Cgroups == CgroupsRequired,
		Parent:   cfg.CgroupParent,
		Name:     cgroup.JobName(spec.JobID),
		Limits: cgroup.Limits{
			CPUs:        alloc.CPUs,
			MemoryBytes: alloc.MemoryMB << 20,
			Devices:     gpuFence(cgroupDevDir, alloc.GPUs),
		},
	}
	if cgroupRoot != cgroup.DefaultRoot {
		cp.Root = cgroupRoot
	}
	return cp
}

// gpuFence denies the NVIDIA GPU device nodes under devDir (nvidia0,
// nvidia1…) whose index is not in gpus; nil when the node has no GPU
// device nodes, or the job has them all. The driver's shared nodes
// (nvidiactl, nvidia-uvm) stay open: without a GPU node they give
// nothing.
func gpuFence(devDir string, gpus []int) *cgroup.DeviceFence {
	f := &cgroup.DeviceFence{Policy: cgroup.DenyListed}
	for _, n := range gpuDeviceNodes(devDir) {
		if !slices.Contains(gpus, n.index) {
			f.Devices = append(f.Devices, n.dev)
		}
	}
	if len(f.Devices) == 0 {
		return nil
	}
	return f
}

// gpuNode is one NVIDIA GPU device node: nvidia<index>.
type gpuNode struct {
	index int
	dev   cgroup.Device
}

// gpuNodeCache keeps the GPU device nodes of a device directory for
// gpuNodeTTL: every job launch asks, and reading /dev (and a stat per
// GPU) for each of a thousand short jobs costs more than the answer is
// worth; device nodes appear and go only with the driver.
var gpuNodeCache struct {
	sync.Mutex
	dir   string
	at    time.Time
	nodes []gpuNode
}

const gpuNodeTTL = 2 * time.Second

// gpuDeviceNodes lists devDir's GPU device nodes by index.
func gpuDeviceNodes(devDir string) []gpuNode {
	c := &gpuNodeCache
	c.Lock()
	defer c.Unlock()
	if c.dir == devDir && time.Since(c.at) < gpuNodeTTL {
		return c.nodes
	}
	ents, err := os.ReadDir(devDir)
	if err != nil {
		return nil
	}
	var nodes []gpuNode
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), "nvidia")
		if !ok || n == "" {
			continue
		}
		i, err := strconv.Atoi(n)
		if err != nil || strconv.Itoa(i) != n {
			continue
		}
		d, err := cgroup.DeviceOf(filepath.Join(devDir, e.Name()))
		if err != nil {
			continue // not a device node (a test directory, a stale name)
		}
		nodes = append(nodes, gpuNode{index: i, dev: d})
	}
	sort.Slice(nodes, func(a, b int) bool { return nodes[a].index < nodes[b].index })
	c.dir, c.at, c.nodes = devDir, time.Now(), nodes
	return nodes
}

// stepCgroupsUsable reports whether steps get cgroups: cgroups not off,
// and usable when tided started (Setup records that in d.cgroups).
func (d *Daemon) stepCgroupsUsable() bool {
	return d.cfg.Cgroups != CgroupsOff && d.cgroups != "" && d.cgroups != "off"
}
