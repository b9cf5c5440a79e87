package steps

// The job a step belongs to: whether it runs here (waiting briefly for
// the batch script's pid), and the credential its tasks run with.

import (
	"os"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// scriptPIDWait bounds how long a step on the node of its job's batch
// script waits for the supervisor to record the script's pid.
const scriptPIDWait = 5 * time.Second

// batchJobAwait is Host.BatchJob for a step about to choose its cgroup,
// which is the job's own where the batch script is seen in it
// (openStepFence; a job cgroup of that name without the script may be
// another cluster's). The supervisor records the script's pid only once
// the script runs (a spawn gives the pid after the exec), and an srun
// the script starts at once can get here first: the step would then
// take the job's own cgroup for a foreign one and run outside it, or be
// refused with cgroups: required. So where the script's pid matters (a
// process job, step cgroups in use) and is not recorded yet, this waits
// for the record, looking again after a growing pause (sleep), up to
// wait; a launch that fails meanwhile finishes the job and ends the
// wait.
func (s *Server) batchJobAwait(id uint64, wait time.Duration, sleep func(time.Duration)) (*api.LaunchSpec, int) {
	spec, pid, recorded := s.host.BatchJob(id)
	if spec == nil || recorded || spec.ContainerImage != "" || !s.cfg.Cgroups {
		return spec, pid
	}
	deadline := time.Now().Add(wait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		left := time.Until(deadline)
		if left <= 0 {
			s.log.Warn("batch script's pid still not recorded: the step cannot join the job's cgroup", "job_id", id, "waited", wait)
			return spec, pid
		}
		sleep(min(pause, left))
		if spec, pid, recorded = s.host.BatchJob(id); spec == nil || recorded {
			return spec, pid
		}
	}
}

// stepCred is the credential a step's processes run with: the job's
// user when tided is root and the user differs, else tided's own.
func (s *Server) stepCred(g *api.StepGrant) (*syscall.Credential, error) {
	if !s.cfg.AsRoot || (g.UserID == uint32(os.Geteuid()) && g.GroupID == uint32(os.Getegid())) {
		return nil, nil
	}
	return &syscall.Credential{Uid: g.UserID, Gid: g.GroupID, Groups: s.host.Groups(g.UserID, g.GroupID)}, nil
}
