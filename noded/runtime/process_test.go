package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/stepd"
)

// waitLimit bounds every wait of these tests. It only turns a hang into
// a failure; nothing asserts how fast anything is.
const waitLimit = 45 * time.Second

// waitUntil polls a condition that no channel announces.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitClosed waits until ch is closed.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("gave up waiting for %s", what)
	}
}

// testJob writes a job directory the way tided does for a process job of
// the test's own user without a cgroup: the script and exec.json.
func testJob(t *testing.T, id uint64, script string) Job {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, stepd.FileScript)
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	plan := stepd.Plan{JobID: id, Node: "n1", Script: path, Env: []string{"PATH=" + os.Getenv("PATH")},
		WorkDir: dir, Stdin: "/dev/null", Stdout: filepath.Join(dir, "out"), Umask: -1,
		UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
	if err := stepd.WriteJSONNew(filepath.Join(dir, stepd.FileExec), &plan, 0o600); err != nil {
		t.Fatal(err)
	}
	// What is left when a test fails goes with it.
	t.Cleanup(func() {
		if id, err := stepd.ReadIdentity(filepath.Join(dir, stepd.FilePID)); err == nil && id.Alive() {
			_ = syscall.Kill(-id.PID, syscall.SIGKILL)
		}
	})
	return Job{Ref: api.JobRef{JobID: id}, Dir: dir}
}

// newTestProcess is a process runtime running this test binary as the
// supervisor, per job or shared (then stopped at the test's end).
func newTestProcess(t *testing.T, perJob bool) *Process {
	t.Helper()
	stateDir := t.TempDir()
	p := NewProcess(ProcessConfig{Executable: testExe, StateDir: stateDir, PerJob: perJob, Idle: time.Second, Logger: testLogger()})
	t.Cleanup(func() {
		p.Close()
		if id, err := stepd.ReadIdentity(stepd.ServePIDFile(stepd.ServeSocket(stateDir))); err == nil && id.Alive() {
			_ = syscall.Kill(id.PID, syscall.SIGKILL)
		}
	})
	return p
}

// readStatus reads the job's status.json.
func readStatus(t *testing.T, j Job) stepd.Status {
	t.Helper()
	st, err := stepd.ReadStatus(filepath.Join(j.Dir, stepd.FileStatus))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// loop is a job script that runs until a signal ends it; with a trap of
// USR1 it writes "got" and exits 3. It touches "trapped" once the trap
// is set.
const loop = "#!/bin/sh\ntrap 'echo got > got; exit 3' USR1\ntouch trapped\nwhile :; do sleep 0.02; done\n"

func TestProcessRunsAndSignalsJobs(t *testing.T) {
	tests := []struct {
		name      string
		sig       syscall.Signal
		batchOnly bool
		want      api.ExitStatus
		wantGot   bool
	}{
		{name: "the batch shell alone traps USR1", sig: syscall.SIGUSR1, batchOnly: true, want: api.ExitStatus{Code: 3}, wantGot: true},
		{name: "the whole group dies of TERM", sig: syscall.SIGTERM, want: api.ExitStatus{Signal: int(syscall.SIGTERM)}},
	}
	for _, mode := range []struct {
		name   string
		perJob bool
	}{{"per-job supervisor", true}, {"shared supervisor", false}} {
		t.Run(mode.name, func(t *testing.T) {
			p := newTestProcess(t, mode.perJob)
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					j := testJob(t, uint64(10+i), loop)
					if got := p.State(j); got != Starting {
						t.Errorf("State before the start = %s, want starting", got)
					}
					exited, err := p.Start(context.Background(), j)
					if err != nil {
						t.Fatal(err)
					}
					waitUntil(t, "the job to run", func() bool { return p.State(j) == Running })
					waitUntil(t, "the job's trap", func() bool { return stepd.Exists(filepath.Join(j.Dir, "trapped")) })
					if err := p.Signal(context.Background(), j, tt.sig, tt.batchOnly); err != nil {
						t.Fatal(err)
					}
					waitClosed(t, exited, "the job's end")
					if st := readStatus(t, j); st.Exit != tt.want || st.Error != "" {
						t.Errorf("status %+v, want exit %s", st, tt.want)
					}
					if _, err := os.Stat(filepath.Join(j.Dir, "got")); (err == nil) != tt.wantGot {
						t.Errorf("trap ran: %v, want %v", err == nil, tt.wantGot)
					}
					if got := p.State(j); got != Stopped {
						t.Errorf("State after the end = %s, want stopped", got)
					}
					if err := p.Signal(context.Background(), j, syscall.SIGTERM, false); !errors.Is(err, ErrNotRunning) {
						t.Errorf("Signal after the end = %v, want ErrNotRunning", err)
					}
				})
			}
		})
	}
}

// TestProcessKilledBeforeStart: a kill marker written before the start
// (a cancel during the launch) ends the job before its script runs.
func TestProcessKilledBeforeStart(t *testing.T) {
	p := newTestProcess(t, true)
	j := testJob(t, 20, "#!/bin/sh\necho ran > ran\n")
	m := stepd.KillMarker{Time: time.Now(), Signal: int(syscall.SIGKILL), KillAt: time.Now()}
	if err := stepd.WriteJSONAtomic(filepath.Join(j.Dir, stepd.MarkKilled), &m, 0o644); err != nil {
		t.Fatal(err)
	}
	exited, err := p.Start(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, exited, "the job's end")
	if st := readStatus(t, j); st.Exit != (api.ExitStatus{Signal: int(syscall.SIGKILL)}) {
		t.Errorf("status %+v, want killed by SIGKILL", st)
	}
	if _, err := os.Stat(filepath.Join(j.Dir, "ran")); err == nil {
		t.Error("the script ran")
	}
}

// procState is the state letter of pid in /proc.
func procState(pid int) byte {
	st, err := stepd.ReadProcStat(pid)
	if err != nil {
		return 0
	}
	return st.State
}

// TestProcessFreezeThaw: a job without a cgroup is frozen by SIGSTOP to
// its process group (the mark says so first) and thawed by SIGCONT.
func TestProcessFreezeThaw(t *testing.T) {
	p := newTestProcess(t, true)
	// No child that comes and goes: a process group without a parent in
	// its session (a job's) gets SIGHUP and SIGCONT from the kernel when
	// a member exits while another is stopped.
	j := testJob(t, 30, "#!/bin/sh\nexec sleep 300\n")
	exited, err := p.Start(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the job to run", func() bool { return p.State(j) == Running })
	pid := p.pid(j).PID
	var marked []string
	how, err := p.Freeze(context.Background(), j, func(how string) { marked = append(marked, how) })
	if err != nil || how != stepd.FreezeSignal {
		t.Fatalf("Freeze = %q, %v; want %q", how, err, stepd.FreezeSignal)
	}
	if diff := cmp.Diff([]string{stepd.FreezeSignal}, marked); diff != "" {
		t.Errorf("marks (-want +got):\n%s", diff)
	}
	waitUntil(t, "the job's shell stopped", func() bool { return procState(pid) == 'T' })
	if err := p.Thaw(context.Background(), j, how); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the job's shell continued", func() bool { return procState(pid) != 'T' })
	if err := p.Signal(context.Background(), j, syscall.SIGKILL, false); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, exited, "the job's end")
	if err := p.Thaw(context.Background(), Job{Ref: j.Ref, Dir: t.TempDir()}, ""); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Thaw of a job that never ran = %v, want ErrNotRunning", err)
	}
}

// TestProcessStats: a job without a cgroup is measured from its
// leader's /proc entry; one that ended has nothing to measure.
func TestProcessStats(t *testing.T) {
	p := newTestProcess(t, true)
	j := testJob(t, 40, loop)
	exited, err := p.Start(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the job to run", func() bool { return p.State(j) == Running })
	st, err := p.Stats(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	pid := p.pid(j).PID
	if st.Source != StatsProc || !st.HasCPU || !st.HasMemory || st.MemoryBytes == 0 || !cmp.Equal(st.Pids, []int{pid}) {
		t.Errorf("Stats = %+v, want the leader %d from /proc with CPU and memory", st, pid)
	}
	if err := p.Signal(context.Background(), j, syscall.SIGKILL, false); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, exited, "the job's end")
	if _, err := p.Stats(context.Background(), j); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Stats after the end = %v, want ErrNotRunning", err)
	}
}

func TestProcStats(t *testing.T) {
	root := t.TempDir()
	// pid 77, comm with a space and a parenthesis; utime 150, stime 50,
	// cutime 30, cstime 20 ticks; rss 25 pages.
	stat := "77 (a) b) S 1 77 77 0 -1 4194560 100 0 0 0 150 50 30 20 20 0 1 0 12345 8192000 25 18446744073709551615\n"
	if err := os.MkdirAll(filepath.Join(root, "77"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "77", "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := procStats(root, 77)
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{Source: StatsProc, Pids: []int{77}, HasCPU: true, UserUsec: 1_800_000, SystemUsec: 700_000,
		HasMemory: true, MemoryBytes: 25 * uint64(os.Getpagesize())}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := procStats(root, 78); err == nil {
		t.Error("no error for a pid without /proc entry")
	}
	if err := os.WriteFile(filepath.Join(root, "77", "stat"), []byte("77 (a) S 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := procStats(root, 77); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("short stat line: err = %v, want malformed", err)
	}
}

// TestProcessReattach: a second runtime (a restarted tided) watches the
// job of a supervisor that still runs until it ends; a job whose
// supervisor is gone is lost.
func TestProcessReattach(t *testing.T) {
	p := newTestProcess(t, false)
	j := testJob(t, 50, loop)
	if _, err := p.Start(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the job to run", func() bool { return p.State(j) == Running })
	next := NewProcess(ProcessConfig{Executable: testExe, StateDir: p.cfg.StateDir, Logger: testLogger()})
	defer next.Close()
	exited, st, err := next.Reattach(context.Background(), j)
	if err != nil || st != nil {
		t.Fatalf("Reattach = %v, %v; want the running job", st, err)
	}
	if err := next.Signal(context.Background(), j, syscall.SIGTERM, false); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, exited, "the reattached job's end")
	if st := readStatus(t, j); st.Exit != (api.ExitStatus{Signal: int(syscall.SIGTERM)}) {
		t.Errorf("status %+v, want SIGTERM", st)
	}

	gone := testJob(t, 51, loop)
	dead := stepd.ProcIdentity{PID: 1 << 22, StartTime: 1} // above pid_max's default: no such process
	if err := stepd.WriteJSONAtomic(filepath.Join(gone.Dir, stepd.FileStepdPID), dead, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := next.Reattach(context.Background(), gone); err == nil {
		t.Error("Reattach of a job whose supervisor is gone succeeded")
	}
	if _, _, err := next.Reattach(context.Background(), testJob(t, 52, loop)); err == nil {
		t.Error("Reattach of a job without a supervisor succeeded")
	}
}

// TestProcessDeleteRemovesJobCgroup: Delete of a lost job empties and
// removes its job cgroup in every hierarchy (empty directories stand in
// for cgroups without processes), and leaves the parent.
func TestProcessDeleteRemovesJobCgroup(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"memory/cgroup.procs", "freezer/cgroup.procs"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(d), "tide", "job_9"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, d), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := NewProcess(ProcessConfig{Executable: testExe, StateDir: t.TempDir(), CgroupRoot: root, CgroupParent: "tide", Logger: testLogger()})
	if err := p.Delete(context.Background(), Job{Ref: api.JobRef{JobID: 9}, Dir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"memory/tide/job_9", "freezer/tide/job_9"} {
		if _, err := os.Stat(filepath.Join(root, d)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left (%v)", d, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "memory/tide")); err != nil {
		t.Error(err)
	}
	// Idempotent: nothing left is no error.
	if err := p.Delete(context.Background(), Job{Ref: api.JobRef{JobID: 9}, Dir: t.TempDir()}); err != nil {
		t.Errorf("second Delete: %v", err)
	}
}

// TestProcessDeleteKillsLeftovers: Delete kills what still runs of the
// job's process group.
func TestProcessDeleteKillsLeftovers(t *testing.T) {
	p := newTestProcess(t, true)
	j := testJob(t, 60, "#!/bin/sh\ntrap '' TERM\nwhile :; do sleep 0.02; done\n")
	exited, err := p.Start(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the job to run", func() bool { return p.State(j) == Running })
	if err := p.Delete(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, exited, "the job's end")
	if st := readStatus(t, j); st.Exit != (api.ExitStatus{Signal: int(syscall.SIGKILL)}) {
		t.Errorf("status %+v, want SIGKILL", st)
	}
}

// TestProcessStartFails: a supervisor that cannot be started is an error
// of the node, not of the job.
func TestProcessStartFails(t *testing.T) {
	for _, perJob := range []bool{true, false} {
		t.Run(fmt.Sprintf("per-job=%v", perJob), func(t *testing.T) {
			p := NewProcess(ProcessConfig{Executable: filepath.Join(t.TempDir(), "no-such-stepd"), StateDir: t.TempDir(), PerJob: perJob, Logger: testLogger()})
			_, err := p.Start(context.Background(), testJob(t, 70, loop))
			if err == nil || IsJobFault(err) {
				t.Errorf("Start = %v, want a node error", err)
			}
		})
	}
}
