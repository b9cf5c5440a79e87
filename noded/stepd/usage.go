package stepd

import (
	"os"
	"syscall"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/cgroup"
)

// jobUsage is what the job used, as the supervisor sees it when the
// script has ended (issue 22, sacct's batch step): the script's
// resource usage from wait4, which counts it and every descendant it
// waited for, and the totals of its cgroup (cg, nil without one), which
// counts everything that ran in it. It must be called before the cgroup
// is removed. tided adds its periodic samples (noded/usage.go). It is
// nil when the job's exit status was lost.
func jobUsage(ps *os.ProcessState, cg *cgroup.Cgroup) *api.NodeUsage {
	if ps == nil {
		return nil
	}
	u := &api.NodeUsage{Final: true, Tasks: []api.TaskUsage{RusageTask(ps, 0)}}
	if cg != nil {
		if st, err := cg.Stats(); err == nil && st.HasCPU {
			u.Cgroup = &api.CgroupTotals{UserUsec: st.UserUsec, SystemUsec: st.SystemUsec,
				HasIO: st.HasIO, ReadBytes: st.ReadBytes, WriteBytes: st.WriteBytes}
		}
	}
	return u
}

// RusageTask is the usage of task (a global rank) as its reaped
// process's rusage tells it: the CPU time, major faults and block I/O
// (512-byte blocks) of the process and the descendants it waited for.
// Its peak resident size (ru_maxrss) is left out: a child forked by a
// daemon shares the daemon's pages until it execs, and the kernel
// counts them in the child's peak, so the figure says more about the
// daemon than about the task; memory comes from tided's samples.
func RusageTask(ps *os.ProcessState, task int) api.TaskUsage {
	t := api.TaskUsage{Task: task}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return t
	}
	t.UserUsec = usec(ru.Utime)
	t.SystemUsec = usec(ru.Stime)
	t.Pages = uint64(max(ru.Majflt, 0))
	t.ReadBytes = uint64(max(ru.Inblock, 0)) * 512
	t.WriteBytes = uint64(max(ru.Oublock, 0)) * 512
	return t
}

func usec(tv syscall.Timeval) uint64 {
	return uint64(max(tv.Sec, 0))*1e6 + uint64(max(tv.Usec, 0))
}
