package steps

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/cgroup"
	"github.com/tide-hpc/tide/noded/jobenv"
)

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

// openStepFence finds or makes the cgroup of step g's tasks on node
// index node. spec is the job's launch when this node runs its batch
// script (nil otherwise) and jobPID the batch script's pid (0 when
// unknown). It returns nil without an error where the step runs without
// a cgroup; an error means the step must not start.
func (s *Server) openStepFence(g *api.StepGrant, node int, spec *api.LaunchSpec, jobPID int) (*stepFence, error) {
	if !s.cfg.Cgroups {
		return nil, nil
	}
	required := s.cfg.CgroupsRequired
	fail := func(err error) (*stepFence, error) {
		if required {
			return nil, fmt.Errorf("step cgroup (cgroups: required): %w", err)
		}
		s.log.Warn("step runs without a cgroup", "job_id", g.JobID, "step", g.StepID, "err", err)
		return nil, nil
	}
	h, err := cgroup.Detect(s.cfg.CgroupRoot)
	if err != nil {
		return fail(err)
	}
	parent, name := s.cfg.CgroupParent, cgroup.JobName(g.JobID)
	if jobPID > 0 && inCgroup(jobPID, filepath.Join(parent, name)) {
		return &stepFence{join: h.Open(parent, name), required: required}, nil
	}
	sn := g.Nodes[node]
	limits := cgroup.Limits{CPUs: sn.CPUs, MemoryBytes: sn.MemoryMB << 20}
	if spec != nil {
		limits.MemoryBytes = jobenv.NodeAlloc(spec, sn.Name).MemoryMB << 20
	}
	if err := s.acquireJobCgroup(h, g.JobID, limits, required); err != nil {
		return fail(err)
	}
	f := &stepFence{jobID: g.JobID, required: required}
	stepName := "step_" + strconv.FormatUint(uint64(g.StepID), 10)
	cg, err := h.Create(filepath.Join(parent, name), stepName, cgroup.Limits{CPUs: sn.CPUs, Devices: s.deviceFence(stepGPUs(sn))})
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
func (s *Server) acquireJobCgroup(h *cgroup.Hierarchy, jobID uint64, l cgroup.Limits, required bool) error {
	s.cgMu.Lock()
	defer s.cgMu.Unlock()
	if jc := s.jobCgroups[jobID]; jc != nil {
		jc.refs++
		return nil
	}
	parent, name := s.cfg.CgroupParent, cgroup.JobName(jobID)
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
func (s *Server) releaseJobCgroup(jobID uint64) {
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
func (s *Server) closeStepFence(f *stepFence) {
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

// deviceFence is Config.DeviceFence for a step whose tasks see gpus.
func (s *Server) deviceFence(gpus []int) *cgroup.DeviceFence {
	if s.cfg.DeviceFence == nil {
		return nil
	}
	return s.cfg.DeviceFence(gpus)
}
