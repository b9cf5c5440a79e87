package noded

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/cgroup"
	"github.com/tide-hpc/tide/noded/runtime"
	"github.com/tide-hpc/tide/noded/stepd"
)

// testNodeSeq numbers this process's test nodes.
var testNodeSeq atomic.Int64

// waitLimit bounds every wait of these tests. It only turns a hang into
// a failure; nothing asserts how fast anything is.
const waitLimit = 45 * time.Second

// waitUntil polls a local condition (files, processes) that no channel
// announces.
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

type testNode struct {
	cfg  Config
	fake *fakeCtld
	// d is the daemon start runs.
	d *Daemon
	// stepdIdle shortens the shared supervisor's idle exit.
	stepdIdle time.Duration
	// hook is the daemon's launch hook (launch.go), nil for none.
	hook launchHook
	// rt and ctrRT replace the process and the container runtime (nil:
	// the supervisor, and containerd where configured).
	rt, ctrRT runtime.Runtime
}

func newTestNode(t testing.TB, stateDir string) *testNode {
	key := "k-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	f := newFakeCtld(t, key)
	cfg := DefaultConfig()
	cfg.Name = "n1"
	cfg.Controller = f.addr()
	cfg.KeyFile = writeKey(t, t.TempDir(), 0o600, key+"\n")
	cfg.StateDir = stateDir
	// A long heartbeat: finish reports can only arrive in time through
	// the wake-up path.
	cfg.Heartbeat = time.Minute
	cfg.KillWait = time.Second
	cfg.AllowRootJobs = true
	cfg.GPUs = GPUConfig{Source: GPUSourceFake}
	cfg.GPUs.Fake.Count = 4
	// Job cgroups under a parent of this node's own: other test nodes
	// and clusters on this host reuse job ids, and cleaning up job_<id>
	// must never reach another one's job.
	cfg.CgroupParent = fmt.Sprintf("tide-unit-%d-%d", os.Getpid(), testNodeSeq.Add(1))
	parent := cfg.CgroupParent
	t.Cleanup(func() {
		if h, err := cgroup.Detect(cgroup.DefaultRoot); err == nil {
			h.RemoveParent(parent)
		}
	})
	// The shared supervisor outlives every tided of the test: stop it
	// (by the pid it recorded) before the state directory goes.
	t.Cleanup(func() { stopSharedStepd(t, stateDir); killLeftJobs(stateDir) })
	return &testNode{cfg: cfg, fake: f}
}

// stopSharedStepd kills the shared supervisor of a state directory, if
// one runs, and waits until it is gone.
func stopSharedStepd(t testing.TB, stateDir string) {
	id, err := readIdentity(stepd.ServePIDFile(stepd.ServeSocket(stateDir)))
	if err != nil || !id.Alive() {
		return
	}
	_ = syscall.Kill(id.PID, syscall.SIGKILL)
	deadline := time.Now().Add(waitLimit)
	for id.Alive() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if id.Alive() {
		t.Errorf("shared supervisor %d did not stop", id.PID)
	}
}

// killLeftJobs kills, by the pids their supervisors recorded, the
// process groups of jobs still running under stateDir when a test ends
// (a failed test leaves its jobs behind: they run in sessions of their
// own, by design, to outlive tided).
func killLeftJobs(stateDir string) {
	dirs, _ := filepath.Glob(filepath.Join(stateDir, "jobs", "*", filePID))
	for _, pf := range dirs {
		if id, err := readIdentity(pf); err == nil && id.Alive() {
			_ = syscall.Kill(-id.PID, syscall.SIGKILL)
			_ = syscall.Kill(id.PID, syscall.SIGKILL)
		}
	}
}

// start runs a tided instance; the returned function stops it (jobs go
// on running) and is also registered as a cleanup.
func (n *testNode) start(t testing.TB) (stop func()) {
	t.Helper()
	d, err := Setup(context.Background(), n.cfg, Options{Logger: testLogger(), Executable: testExe, StepdIdle: n.stepdIdle,
		Runtime: n.rt, ContainerRuntime: n.ctrRT})
	if err != nil {
		t.Fatal(err)
	}
	n.d = d
	d.launchHook = n.hook
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func (n *testNode) spec(t testing.TB, id uint64, script, wd string) api.LaunchSpec {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return api.LaunchSpec{
		JobRef: api.JobRef{JobID: id}, Name: "job" + strconv.FormatUint(id, 10),
		UserID: uint32(uid), GroupID: uint32(gid), User: u.Username,
		Partition: "batch", Cluster: "test", Script: script,
		WorkDir: wd, SubmitDir: wd, SubmitHost: "submit",
		Env:       []string{"PATH=" + os.Getenv("PATH")},
		TimeLimit: api.Infinite, StartTime: time.Now(), KillWait: 1,
		Alloc:    []api.NodeAlloc{{Node: "n1", CPUs: 1, GPUs: []int{1, 3}, Tasks: 1}},
		NumTasks: 1, CPUsPerTask: 1,
	}
}

func (n *testNode) launch(specs ...api.LaunchSpec) {
	n.fake.queue(api.NodeSyncResponse{Launch: specs})
}

func jobDir(n *testNode, ref api.JobRef) string {
	return filepath.Join(n.cfg.StateDir, "jobs", dirName(ref))
}

func TestDaemonRunsJob(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.start(t)
	n.fake.waitFor(t, "registration", func() bool { return n.fake.registrations == 1 })
	if reg := n.fake.lastReg; reg.Name != "n1" || len(reg.GPUs) != 4 || reg.CPUs != n.cfg.CPUs || reg.Version == "" {
		t.Errorf("registration = %+v", reg)
	}

	wd := t.TempDir()
	spec := n.spec(t, 101, "#!/bin/sh\necho \"$SLURM_JOB_ID $CUDA_VISIBLE_DEVICES\"\nexit 3\n", wd)
	n.launch(spec)
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if r.Exit != (api.ExitStatus{Code: 3}) || r.Error != "" || r.TimedOut || r.Killed {
		t.Errorf("report = %+v, want exit 3:0", r)
	}
	if !r.StartTime.Equal(spec.StartTime) || r.EndTime.Before(r.StartTime) {
		t.Errorf("report times start=%v end=%v, launch start %v", r.StartTime, r.EndTime, spec.StartTime)
	}
	n.fake.mu.Lock()
	if reg, seq := n.fake.lastReg.Seq, n.fake.seq; reg == 0 || seq <= reg {
		t.Errorf("report sequence numbers: registration %d, newest sync %d; want both set and growing", reg, seq)
	}
	n.fake.mu.Unlock()
	if got := readFile(t, filepath.Join(wd, "slurm-101.out")); got != "101 1,3\n" {
		t.Errorf("output = %q, want %q", got, "101 1,3\n")
	}
	dir := jobDir(n, spec.JobRef)
	info, err := os.Stat(filepath.Join(dir, fileScript))
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("script file: %v, %v; want mode 0700", info, err)
	}

	// A launch repeated next to the ack of the job's end is ignored, and
	// so is a stale launch after the ack.
	n.fake.sendOnce(api.NodeSyncResponse{Launch: []api.LaunchSpec{spec}, Ack: []api.JobRef{spec.JobRef}})
	waitUntil(t, "job directory removed after ack", func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	})
	n.fake.sendOnce(api.NodeSyncResponse{Launch: []api.LaunchSpec{spec}})
	later := n.spec(t, 201, "#!/bin/sh\ntrue\n", wd)
	n.launch(later)
	n.fake.waitReport(t, later.JobRef, api.NodeJobFinished)
	if got := readFile(t, filepath.Join(wd, "slurm-101.out")); got != "101 1,3\n" {
		t.Errorf("a repeated launch ran the job again: output %q", got)
	}
	if exists(dir) {
		t.Error("a stale launch after the ack recreated the job directory")
	}
}

// TestDaemonLeanSyncs runs jobs one after another: each one's end must
// reach the controller without a new connection per job (the long poll
// stays held while a second connection carries the report) and without
// the unchanged GPU status in every sync.
func TestDaemonLeanSyncs(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.start(t)
	n.fake.waitFor(t, "registration", func() bool { return n.fake.registrations == 1 })
	wd := t.TempDir()
	const jobs = 6
	for i := range jobs {
		spec := n.spec(t, uint64(300+i), "#!/bin/sh\ntrue\n", wd)
		n.launch(spec)
		n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
		n.fake.queue(api.NodeSyncResponse{Ack: []api.JobRef{spec.JobRef}})
	}
	// Registration, the long poll and the reports.
	if c := n.fake.conns.Load(); c > 3 {
		t.Errorf("tided opened %d connections for %d jobs, want at most 3", c, jobs)
	}
	n.fake.mu.Lock()
	syncs, withGPUs := n.fake.syncs, n.fake.gpuSyncs
	n.fake.mu.Unlock()
	// One reading at the start, one more if a gpuStatusEvery passed.
	if withGPUs < 1 || withGPUs > 3 || syncs < jobs {
		t.Errorf("%d of %d syncs carried GPU status, want 1 to 3 of at least %d", withGPUs, syncs, jobs)
	}
}

// TestDaemonGPUStatusAfterXID checks that a GPU error reaches the
// controller at once while the long poll is held (a minute here): the
// report that the wake sends carries the new reading.
func TestDaemonGPUStatusAfterXID(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.start(t)
	n.fake.waitFor(t, "the first GPU status", func() bool { return n.fake.gpuSyncs >= 1 })
	n.fake.mu.Lock()
	before := n.fake.gpuSyncs
	n.fake.mu.Unlock()
	// What watchGPUs does on an XID event.
	n.d.mu.Lock()
	n.d.gpuStatusAt = time.Time{}
	n.d.mu.Unlock()
	n.d.wake()
	n.fake.waitFor(t, "GPU status after the XID event", func() bool { return n.fake.gpuSyncs > before })
}

func TestDaemonTimeLimit(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.start(t)
	spec := n.spec(t, 102, "#!/bin/sh\nsleep 300\n", t.TempDir())
	spec.TimeLimit = 1
	n.launch(spec)
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if !r.TimedOut || r.Killed || r.Exit != (api.ExitStatus{Signal: 15}) {
		t.Errorf("report = %+v, want timed out with 0:15", r)
	}
	if !exists(filepath.Join(jobDir(n, spec.JobRef), markTimedOut)) {
		t.Error("no timedout marker in the job directory")
	}
}

// TestDaemonSignalWarning checks --signal=B: arrives at the batch shell
// before the limit and a Limits update extends the deadline (the steps'
// warning, without B:, is the controller's: stepsignal_test.go).
func TestDaemonSignalWarning(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.start(t)
	wd := t.TempDir()
	script := "#!/bin/sh\ntrap 'echo got USR1 >> warned' USR1\n" +
		"while [ ! -e release ]; do sleep 0.05; done\n"
	spec := n.spec(t, 103, script, wd)
	spec.TimeLimit = 3600
	spec.Signal = &api.SignalSpec{Signal: int(syscall.SIGUSR1), Seconds: 3599, BatchOnly: true}
	n.launch(spec)
	waitUntil(t, "USR1 delivered", func() bool { return exists(filepath.Join(wd, "warned")) })
	// Shorten the limit to one second: the job now times out.
	n.fake.queue(api.NodeSyncResponse{Limits: []api.LimitUpdate{{JobRef: spec.JobRef, TimeLimit: 1}}})
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if !r.TimedOut {
		t.Errorf("report = %+v, want timed out after the limit update", r)
	}
	if got := readFile(t, filepath.Join(wd, "warned")); got != "got USR1\n" {
		t.Errorf("warning delivered %q, want once", got)
	}
	var saved api.LaunchSpec
	if err := readJSON(filepath.Join(jobDir(n, spec.JobRef), fileLaunch), &saved); err != nil || saved.TimeLimit != 1 {
		t.Errorf("launch.json time limit = %d (%v), want the update persisted", saved.TimeLimit, err)
	}
}

func TestDaemonKill(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.start(t)
	wd := t.TempDir()
	// Both the script and its child ignore SIGTERM: only the SIGKILL
	// after the kill wait ends them.
	script := "#!/bin/sh\ntrap '' TERM\nsleep 300 &\necho $! > child.pid\nwait\n"
	spec := n.spec(t, 104, script, wd)
	n.launch(spec)
	n.fake.waitReport(t, spec.JobRef, api.NodeJobRunning)
	pidFile := filepath.Join(wd, "child.pid")
	waitUntil(t, "child pid file", func() bool {
		b, err := os.ReadFile(pidFile)
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, pidFile)))
	if err != nil {
		t.Fatal(err)
	}
	child, err := identityOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Kill: true}}})
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if !r.Killed || r.TimedOut || r.Exit != (api.ExitStatus{Signal: 9}) {
		t.Errorf("report = %+v, want killed with 0:9", r)
	}
	if child.Alive() {
		t.Errorf("child sleep %d survived the kill", pid)
	}
}

func TestDaemonReattachAfterRestart(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	stopA := n.start(t)
	wd := t.TempDir()
	spec := n.spec(t, 105, "#!/bin/sh\nwhile [ ! -e release ]; do sleep 0.05; done\nexit 7\n", wd)
	n.launch(spec)
	n.fake.waitReport(t, spec.JobRef, api.NodeJobRunning)
	dir := jobDir(n, spec.JobRef)
	waitUntil(t, "job pid recorded", func() bool { return exists(filepath.Join(dir, filePID)) })
	stopA()

	jobPID, err := readIdentity(filepath.Join(dir, filePID))
	if err != nil || !jobPID.Alive() {
		t.Fatalf("job did not survive tided's stop: %+v, %v", jobPID, err)
	}
	n.start(t)
	n.fake.waitFor(t, "second registration with the running job", func() bool {
		return n.fake.registrations == 2 && len(n.fake.lastReg.Jobs) == 1 &&
			n.fake.lastReg.Jobs[0].State == api.NodeJobRunning
	})
	if err := os.WriteFile(filepath.Join(wd, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if r.Exit != (api.ExitStatus{Code: 7}) || r.Error != "" {
		t.Errorf("report = %+v, want exit 7:0", r)
	}
}

// TestDaemonControllerOutage: a job that ends while the controller is
// unreachable is reported once it is back, and a controller that lost
// the registration gets it again.
func TestDaemonControllerOutage(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.start(t)
	wd := t.TempDir()
	spec := n.spec(t, 106, "#!/bin/sh\nwhile [ ! -e release ]; do sleep 0.05; done\nexit 5\n", wd)
	n.launch(spec)
	n.fake.waitReport(t, spec.JobRef, api.NodeJobRunning)
	n.fake.setDown(true)
	if err := os.WriteFile(filepath.Join(wd, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	status := filepath.Join(jobDir(n, spec.JobRef), fileStatus)
	waitUntil(t, "status written during the outage", func() bool { return exists(status) })
	n.fake.restart()
	n.fake.setDown(false)
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if r.Exit != (api.ExitStatus{Code: 5}) {
		t.Errorf("report = %+v, want exit 5:0", r)
	}
	n.fake.waitFor(t, "registration again", func() bool { return n.fake.registrations >= 2 })
}

func TestDaemonForget(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.start(t)
	wd := t.TempDir()
	spec := n.spec(t, 107, "#!/bin/sh\nsleep 300\n", wd)
	n.launch(spec)
	n.fake.waitReport(t, spec.JobRef, api.NodeJobRunning)
	dir := jobDir(n, spec.JobRef)
	waitUntil(t, "job pid recorded", func() bool { return exists(filepath.Join(dir, filePID)) })
	jobPID, err := readIdentity(filepath.Join(dir, filePID))
	if err != nil {
		t.Fatal(err)
	}
	n.fake.queue(api.NodeSyncResponse{Forget: []api.JobRef{spec.JobRef}})
	waitUntil(t, "forgotten job dropped", func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	})
	if jobPID.Alive() {
		t.Error("forgotten job still runs")
	}
	n.fake.mu.Lock()
	defer n.fake.mu.Unlock()
	if r := n.fake.reports[spec.JobRef]; r.State != api.NodeJobRunning {
		t.Errorf("forgotten job was reported %+v, want no report after the running one", r)
	}
}

func TestDaemonRootJobs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root jobs are refused only when tided runs as root")
	}
	n := newTestNode(t, t.TempDir())
	n.cfg.AllowRootJobs = false
	n.start(t)
	wd := t.TempDir()
	spec := n.spec(t, 108, "#!/bin/sh\necho ran\n", wd)
	spec.UserID, spec.GroupID, spec.User = 0, 0, "root"
	n.launch(spec)
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	want := "root jobs are not allowed on node n1"
	if r.Error != want || r.Exit != (api.ExitStatus{Code: 1}) {
		t.Errorf("report = %+v, want exit 1:0 and error %q", r, want)
	}
	if exists(filepath.Join(wd, "slurm-108.out")) {
		t.Error("refused job ran")
	}
}

// TestDaemonRunsAsUser runs a job as nobody: the output file must be
// created by (and owned by) that user.
func TestDaemonRunsAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root")
	}
	// Job users must traverse the state and work directories.
	state, err := os.MkdirTemp("", "tided-state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	wd, err := os.MkdirTemp("", "tided-wd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(wd) })
	for _, d := range []string{state, wd} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	n := newTestNode(t, state)
	n.start(t)
	spec := n.spec(t, 109, "#!/bin/sh\nid -u\nid -g\n", wd)
	spec.UserID, spec.GroupID, spec.User = 65534, 65534, "nobody"
	n.launch(spec)
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if r.Exit != (api.ExitStatus{}) || r.Error != "" {
		t.Fatalf("report = %+v, want 0:0", r)
	}
	out := filepath.Join(wd, "slurm-109.out")
	if got := readFile(t, out); got != "65534\n65534\n" {
		t.Errorf("output = %q, want uid and gid 65534", got)
	}
	info, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st := info.Sys().(*syscall.Stat_t); st.Uid != 65534 {
		t.Errorf("output owned by uid %d, want 65534", st.Uid)
	}
	script, err := os.Stat(filepath.Join(jobDir(n, spec.JobRef), fileScript))
	if err != nil {
		t.Fatal(err)
	}
	if st := script.Sys().(*syscall.Stat_t); st.Uid != 65534 {
		t.Errorf("script owned by uid %d, want 65534", st.Uid)
	}
}

// TestApplyRepeatedCommands checks that commands the controller repeats
// until it sees their effect change nothing the second time, so the sync
// loop does not spin on them.
func TestApplyRepeatedCommands(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	d, err := Setup(context.Background(), n.cfg, Options{Logger: testLogger(), API: nopAPI{}, Executable: testExe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	spec := n.spec(t, 301, "#!/bin/sh\nsleep 300\n", t.TempDir())
	ref := spec.JobRef
	kill := api.SignalCommand{JobRef: ref, Kill: true}
	steps := []struct {
		name string
		resp api.NodeSyncResponse
		want bool
	}{
		{name: "ack of an unknown job", resp: api.NodeSyncResponse{Ack: []api.JobRef{{JobID: 9}}}, want: false},
		{name: "forget of an unknown job", resp: api.NodeSyncResponse{Forget: []api.JobRef{{JobID: 9}}}, want: false},
		{name: "launch", resp: api.NodeSyncResponse{Launch: []api.LaunchSpec{spec}}, want: true},
		{name: "repeated launch", resp: api.NodeSyncResponse{Launch: []api.LaunchSpec{spec}}, want: false},
		{name: "new limit", resp: api.NodeSyncResponse{Limits: []api.LimitUpdate{{JobRef: ref, TimeLimit: 600}}}, want: true},
		{name: "same limit", resp: api.NodeSyncResponse{Limits: []api.LimitUpdate{{JobRef: ref, TimeLimit: 600}}}, want: false},
		{name: "ack of a running job", resp: api.NodeSyncResponse{Ack: []api.JobRef{ref}}, want: false},
		{name: "kill", resp: api.NodeSyncResponse{Signals: []api.SignalCommand{kill}}, want: true},
		{name: "repeated kill", resp: api.NodeSyncResponse{Signals: []api.SignalCommand{kill}}, want: false},
		{name: "unregistered", resp: api.NodeSyncResponse{Unregistered: true}, want: true},
	}
	for _, st := range steps {
		if got := d.apply(st.resp); got != st.want {
			t.Errorf("%s: apply = %v, want %v", st.name, got, st.want)
		}
	}
	waitUntil(t, "killed job finished", func() bool {
		jobs := d.Jobs()
		return len(jobs) == 1 && jobs[0].State == api.NodeJobFinished
	})
	if r := d.Jobs()[0]; !r.Killed {
		t.Errorf("report = %+v, want killed", r)
	}
	if !d.apply(api.NodeSyncResponse{Ack: []api.JobRef{ref}}) {
		t.Error("ack of the finished job changed nothing")
	}
	if d.apply(api.NodeSyncResponse{Ack: []api.JobRef{ref}}) {
		t.Error("repeated ack changed something")
	}
}

// TestDaemonRestartDuringKillWait stops tided between the SIGTERM of a
// cancel and the SIGKILL: the next tided reads the killed marker, sends
// the SIGKILL when it is due and reports the job killed.
func TestDaemonRestartDuringKillWait(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	stopA := n.start(t)
	wd := t.TempDir()
	// The script says when its trap is set: a kill before that ends the
	// shell at SIGTERM, and the test would not see the kill wait at all.
	ready := filepath.Join(wd, "trapped")
	spec := n.spec(t, 110, "#!/bin/sh\ntrap '' TERM\n: > "+ready+"\nwhile :; do sleep 0.05; done\n", wd)
	spec.KillWait = 2
	n.launch(spec)
	n.fake.waitReport(t, spec.JobRef, api.NodeJobRunning)
	dir := jobDir(n, spec.JobRef)
	waitUntil(t, "job pid recorded", func() bool { return exists(filepath.Join(dir, filePID)) })
	waitUntil(t, "trap set", func() bool { return exists(ready) })
	n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Kill: true}}})
	waitUntil(t, "killed marker", func() bool { return exists(filepath.Join(dir, markKilled)) })
	stopA()
	if st := filepath.Join(dir, fileStatus); exists(st) {
		t.Skip("the job ended before tided stopped; nothing to re-arm")
	}
	n.start(t)
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if !r.Killed || r.Exit != (api.ExitStatus{Signal: 9}) {
		t.Errorf("report = %+v, want killed with 0:9", r)
	}
}

// TestDaemonSupervisors runs jobs under both supervisor modes and checks
// the shared one's umask handling, idle exit and replacement.
func TestDaemonSupervisors(t *testing.T) {
	for _, mode := range []string{SupervisorShared, SupervisorPerJob} {
		t.Run(mode, func(t *testing.T) {
			state := t.TempDir()
			n := newTestNode(t, state)
			n.cfg.Supervisor = mode
			n.stepdIdle = 300 * time.Millisecond
			n.start(t)
			wd := t.TempDir()
			for i, umask := range []string{"0077", "0022"} {
				spec := n.spec(t, uint64(200+i), "#!/bin/sh\necho out; umask\n", wd)
				spec.Env = append(spec.Env, "SLURM_UMASK="+umask)
				spec.Stdout = filepath.Join(wd, "out-"+umask)
				n.launch(spec)
				r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
				if r.Exit != (api.ExitStatus{}) || r.Error != "" {
					t.Fatalf("umask %s: report = %+v", umask, r)
				}
				data, err := os.ReadFile(spec.Stdout)
				if err != nil {
					t.Fatal(err)
				}
				if want := "out\n" + umask + "\n"; string(data) != want {
					t.Errorf("output = %q, want %q", data, want)
				}
				fi, err := os.Stat(spec.Stdout)
				if err != nil {
					t.Fatal(err)
				}
				if want := os.FileMode(0o666) &^ os.FileMode(parseOctal(t, umask)); fi.Mode().Perm() != want {
					t.Errorf("umask %s: output mode %v, want %v", umask, fi.Mode().Perm(), want)
				}
			}
			pidFile := stepd.ServePIDFile(stepd.ServeSocket(state))
			if mode == SupervisorPerJob {
				if exists(pidFile) {
					t.Error("a per-job node started a shared supervisor")
				}
				return
			}
			first, err := readIdentity(pidFile)
			if err != nil || !first.Alive() {
				t.Fatalf("no shared supervisor recorded: %+v, %v", first, err)
			}
			// Idle, it exits and removes its socket; the next job starts
			// a new one.
			waitUntil(t, "the idle supervisor to exit", func() bool { return !first.Alive() })
			spec := n.spec(t, 210, "#!/bin/sh\nexit 4\n", wd)
			n.launch(spec)
			if r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished); r.Exit != (api.ExitStatus{Code: 4}) {
				t.Errorf("after the idle exit: report = %+v, want exit 4", r)
			}
			second, err := readIdentity(pidFile)
			if err != nil || second == first {
				t.Errorf("no new supervisor after the idle exit: %+v, %v", second, err)
			}
		})
	}
}

func parseOctal(t *testing.T, s string) int {
	v, err := strconv.ParseInt(s, 8, 32)
	if err != nil {
		t.Fatal(err)
	}
	return int(v)
}
