package noded

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
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

// removeJobCgroup kills what is left in the cgroup of a job whose
// supervisor is gone (a lost job) and removes it, so that neither its
// processes nor the cgroup outlive it. A job without a cgroup is not an
// error.
func removeJobCgroup(cfg Config, jobID uint64, log *slog.Logger) {
	if cfg.Cgroups == CgroupsOff {
		return
	}
	h, err := cgroup.Detect(cgroupRoot)
	if err != nil {
		return
	}
	c := h.Open(cfg.CgroupParent, cgroup.JobName(jobID))
	if len(c.Dirs()) == 0 {
		return
	}
	if err := c.KillAll(10 * time.Second); err != nil {
		log.Error("kill processes of a lost job's cgroup", "job_id", jobID, "err", err)
	}
	if err := c.Remove(10 * time.Second); err != nil {
		log.Error("remove a lost job's cgroup", "job_id", jobID, "err", err)
	}
}

// Steps inside the job's fences (issue 7). srun's tasks start as
// children of tided; they join a cgroup before they exec the command:
//
//   - where this node runs the job's batch script in its job cgroup
//     <cgroup_parent>/job_<id> (made by the supervisor), the tasks join
//     that cgroup, and live under the job's limits and device fence;
//     the supervisor kills what is left of them when the job ends;
//   - elsewhere (the other nodes of a multi-node job, and every node of
//     an allocation made by srun or salloc, which runs no batch
//     script), tided makes <cgroup_parent>/job_<id> itself with the
//     job's CPUs (and memory, where tided knows it) on this node, shared
//     by the job's steps here, and in it one cgroup per step,
//     job_<id>/step_<s>, with the step's device fence. The step cgroup
//     is killed and removed when the step ends, the job cgroup when the
//     last of the job's steps here ends.
//
// A job_<id> cgroup tided did not make and in which the job's batch
// script does not run (a second cluster's on the same host, or one left
// over) is never joined: the step then runs without a cgroup (cgroups:
// auto, with a warning) or is refused (cgroups: required).

// stepFence is the cgroup a step's tasks join on this node.
type stepFence struct {
	// join is the cgroup the tasks are moved into.
	join *cgroup.Cgroup
	// step is the step cgroup tided made (join), nil when the tasks
	// join the batch script's job cgroup.
	step *cgroup.Cgroup
	// jobID names the job cgroup tided made for the steps (0: none).
	jobID    uint64
	required bool
}

// stepJobCgroup is a job cgroup tided made for steps, and how many of
// the job's steps on this node use it.
type stepJobCgroup struct {
	cg   *cgroup.Cgroup
	refs int
}

// stepCgroupsUsable reports whether steps get cgroups: cgroups not off,
// and usable when tided started (Setup records that in d.cgroups).
func (d *Daemon) stepCgroupsUsable() bool {
	return d.cfg.Cgroups != CgroupsOff && d.cgroups != "" && d.cgroups != "off"
}

// openStepFence finds or makes the cgroup of step g's tasks on node
// index node. spec is the job's launch when this node runs its batch
// script (nil otherwise) and jobPID the batch script's pid (0 when
// unknown). It returns nil without an error where the step runs without
// a cgroup; an error means the step must not start.
func (s *stepServer) openStepFence(g *api.StepGrant, node int, spec *api.LaunchSpec, jobPID int) (*stepFence, error) {
	d := s.d
	if !d.stepCgroupsUsable() {
		return nil, nil
	}
	required := d.cfg.Cgroups == CgroupsRequired
	fail := func(err error) (*stepFence, error) {
		if required {
			return nil, fmt.Errorf("step cgroup (cgroups: required): %w", err)
		}
		s.log.Warn("step runs without a cgroup", "job_id", g.JobID, "step", g.StepID, "err", err)
		return nil, nil
	}
	h, err := cgroup.Detect(cgroupRoot)
	if err != nil {
		return fail(err)
	}
	parent, name := d.cfg.CgroupParent, cgroup.JobName(g.JobID)
	if jobPID > 0 && inCgroup(jobPID, filepath.Join(parent, name)) {
		return &stepFence{join: h.Open(parent, name), required: required}, nil
	}
	sn := g.Nodes[node]
	limits := cgroup.Limits{CPUs: sn.CPUs, MemoryBytes: sn.MemoryMB << 20}
	if spec != nil {
		limits.MemoryBytes = nodeAlloc(spec, sn.Name).MemoryMB << 20
	}
	if err := s.acquireJobCgroup(h, g.JobID, limits, required); err != nil {
		return fail(err)
	}
	f := &stepFence{jobID: g.JobID, required: required}
	stepName := "step_" + strconv.FormatUint(uint64(g.StepID), 10)
	cg, err := h.Create(filepath.Join(parent, name), stepName, cgroup.Limits{CPUs: sn.CPUs, Devices: gpuFence(cgroupDevDir, stepGPUs(sn))})
	if cg == nil {
		s.releaseJobCgroup(g.JobID)
		return fail(err)
	}
	f.join, f.step = cg, cg
	if err != nil {
		if required {
			s.closeStepFence(f)
			return nil, fmt.Errorf("step cgroup (cgroups: required): %w", err)
		}
		s.log.Warn("step cgroup lacks some limits", "cgroup", cg.Rel, "err", err)
	}
	return f, nil
}

// acquireJobCgroup makes the job cgroup for the job's steps on this
// node, or counts one more step in the one made already.
func (s *stepServer) acquireJobCgroup(h *cgroup.Hierarchy, jobID uint64, l cgroup.Limits, required bool) error {
	s.cgMu.Lock()
	defer s.cgMu.Unlock()
	if jc := s.jobCgroups[jobID]; jc != nil {
		jc.refs++
		return nil
	}
	parent, name := s.d.cfg.CgroupParent, cgroup.JobName(jobID)
	cg, err := h.Create(parent, name, l)
	if cg == nil {
		return err
	}
	if err != nil {
		if required {
			_ = cg.Remove(cgroupWait)
			return err
		}
		s.log.Warn("job cgroup for steps lacks some limits", "cgroup", cg.Rel, "err", err)
	}
	// The step cgroups below it need it in every hierarchy (v1; a step
	// cgroup joins cpu too, or the quota would not hold on v1), or its
	// controllers passed on (v2; it holds no process itself).
	if err := h.Prepare(filepath.Join(parent, name)); err != nil {
		_ = h.Open(parent, name).Remove(cgroupWait)
		return err
	}
	if s.jobCgroups == nil {
		s.jobCgroups = map[uint64]*stepJobCgroup{}
	}
	s.jobCgroups[jobID] = &stepJobCgroup{cg: h.Open(parent, name), refs: 1}
	return nil
}

// releaseJobCgroup counts one step of the job less, and removes the job
// cgroup made for its steps with the last.
func (s *stepServer) releaseJobCgroup(jobID uint64) {
	s.cgMu.Lock()
	defer s.cgMu.Unlock()
	jc := s.jobCgroups[jobID]
	if jc == nil {
		return
	}
	if jc.refs--; jc.refs > 0 {
		return
	}
	delete(s.jobCgroups, jobID)
	if err := jc.cg.KillAll(cgroupWait); err != nil {
		s.log.Error("kill what is left in the steps' job cgroup", "cgroup", jc.cg.Rel, "err", err)
	}
	if err := jc.cg.Remove(cgroupWait); err != nil {
		s.log.Error("remove the steps' job cgroup", "cgroup", jc.cg.Rel, "err", err)
	}
}

// closeStepFence kills what is left of a step in the step cgroup tided
// made and removes it (and the job cgroup with the job's last step). A
// step that joined the batch script's cgroup leaves it to the
// supervisor. It accepts nil.
func (s *stepServer) closeStepFence(f *stepFence) {
	if f == nil {
		return
	}
	if f.step != nil {
		if err := f.step.KillAll(cgroupWait); err != nil {
			s.log.Error("kill what is left in the step cgroup", "cgroup", f.step.Rel, "err", err)
		}
		if err := f.step.Remove(cgroupWait); err != nil {
			s.log.Error("remove step cgroup", "cgroup", f.step.Rel, "err", err)
		}
	}
	if f.jobID != 0 {
		s.releaseJobCgroup(f.jobID)
	}
}

// cgroupWait bounds the kernel's draining of a step or job cgroup.
const cgroupWait = 10 * time.Second

// admit moves a task started behind the cgroup gate (gateCmd) into the
// fence and opens the gate. A task that cannot join runs without the
// cgroup, unless cgroups are required: then the gate closes unopened,
// the task exits 126 without running its command, and admit fails.
func (f *stepFence) admit(pid int, gate *os.File) error {
	defer gate.Close()
	if err := f.enter(pid); err != nil {
		return err
	}
	_, err := gate.Write([]byte("\n"))
	return err
}

// enter moves pid into the step's cgroup; failing to is an error only
// where cgroups are required.
func (f *stepFence) enter(pid int) error {
	if err := f.join.AddProc(pid); err != nil && f.required {
		return fmt.Errorf("step cgroup (cgroups: required): %w", err)
	}
	return nil
}

// gateScript holds a task until tided opens the gate on fd 3, then execs
// the command ($0, with its arguments) in the shell's place.
const gateScript = `read _ <&3 || exit 126; exec 3<&-; exec "$0" "$@"`

// gateCmd rewrites cmd to start behind the cgroup gate: /bin/sh waits
// on gate (its fd 3) until tided has moved it into the step's cgroup,
// so nothing the task runs starts outside. The command then runs with
// its resolved path as argv[0], as Slurm's tasks do.
func gateCmd(cmd *exec.Cmd, gate *os.File) {
	cmd.Args = append([]string{"sh", "-c", gateScript, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = "/bin/sh"
	cmd.ExtraFiles = append([]*os.File{gate}, cmd.ExtraFiles...)
}

// inCgroup reports whether process pid is in the cgroup rel (relative to
// the hierarchy's root) in any hierarchy, as /proc/<pid>/cgroup shows
// it (a cgroup namespace may show a longer path ending in rel).
func inCgroup(pid int, rel string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && (f[2] == "/"+rel || strings.HasSuffix(f[2], "/"+rel)) {
			return true
		}
	}
	return false
}

// stepGPUs lists, ascending, the GPUs any task of a step sees on its
// node.
func stepGPUs(sn api.StepNode) []int {
	var out []int
	for _, gs := range sn.GPUs {
		for _, g := range gs {
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	sort.Ints(out)
	return out
}
