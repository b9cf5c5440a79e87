package stepd

import (
	"os/exec"
	"testing"
)

// TestRusageTask reads a reaped process's usage: a shell that counts
// for a while leaves CPU time, in microseconds, and no memory figure
// (ru_maxrss holds the forking parent's pages).
func TestRusageTask(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; head -c 8000000 /dev/zero | tail -c 1 >/dev/null`)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	u := RusageTask(cmd.ProcessState, 4)
	if u.Task != 4 || u.UserUsec+u.SystemUsec == 0 {
		t.Errorf("usage %+v: want task 4 and some CPU time", u)
	}
	if u.RSS != 0 || u.VMSize != 0 {
		t.Errorf("memory from rusage: %+v", u)
	}
	if got := jobUsage(cmd.ProcessState, nil); got == nil || !got.Final || got.Cgroup != nil || len(got.Tasks) != 1 || got.Tasks[0] != RusageTask(cmd.ProcessState, 0) {
		t.Errorf("jobUsage without a cgroup = %+v", got)
	}
	if jobUsage(nil, nil) != nil {
		t.Error("jobUsage of a lost exit status is not nil")
	}
}
