package integration

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/noded/cgroup"
	"github.com/tide-hpc/tide/noded/stepd"
)

// devCluster is a local cluster that scripts/up.sh started under a
// temporary TIDE_RUN.
type devCluster struct {
	t     *testing.T
	run   string
	env   []string
	nodes []string
	api   *client.Client
}

// script runs scripts/NAME against the cluster and returns its output
// and exit code.
func (d *devCluster) script(name string) (string, int) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../../scripts/"+name)
	cmd.Env = d.env
	// The daemons it starts write to their logs; should one keep the
	// pipe, the output so far is still enough.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	d.t.Logf("%s:\n%s", name, out)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatalf("%s: %v", name, err)
	}
	return string(out), code
}

// up runs up.sh and fails the test unless it exits 0.
func (d *devCluster) up() string {
	d.t.Helper()
	out, code := d.script("up.sh")
	if code != 0 {
		d.logs()
		d.t.Fatalf("up.sh exited %d", code)
	}
	return out
}

// pid reads the pid a pid file under the run directory records.
func (d *devCluster) pid(rel string) int {
	d.t.Helper()
	b, err := os.ReadFile(filepath.Join(d.run, rel))
	if err != nil {
		d.t.Fatalf("pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		d.t.Fatalf("pid file %s: %q", rel, b)
	}
	return pid
}

// stateDir is where up.sh put the nodes' job directories ("" when it
// has not recorded one).
func (d *devCluster) stateDir() string {
	b, _ := os.ReadFile(filepath.Join(d.run, "nodes", "state-dir"))
	return strings.TrimSpace(string(b))
}

func (d *devCluster) logs() {
	for _, f := range []string{"tidectld.log", "nodes/gpu01.log", "nodes/gpu02.log"} {
		b, _ := os.ReadFile(filepath.Join(d.run, f))
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		d.t.Logf("--- %s (tail)\n%s", f, b)
	}
}

// procArgs lists the running processes (zombies excluded) with their
// arguments.
func procArgs() map[int][]string {
	out := map[int][]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !pidAlive(pid) {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		out[pid] = strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	}
	return out
}

// procsMentioning returns the processes with an argument that contains
// one of dirs, and their command lines.
func procsMentioning(dirs ...string) map[int]string {
	out := map[int]string{}
	for pid, args := range procArgs() {
		if pid == os.Getpid() {
			continue
		}
		line := strings.Join(args, " ")
		for _, d := range dirs {
			if d != "" && strings.Contains(line, d) {
				out[pid] = line
			}
		}
	}
	return out
}

// daemons checks that exactly one tided runs on each node's config and
// one tidectld on the controller's (by the command lines that end in
// the config's path, procsWithArg), and returns their pids by name
// ("tidectld", "gpu01", ...).
func (d *devCluster) daemons() map[string]int {
	d.t.Helper()
	got := map[string]int{}
	cfgs := map[string]string{"tidectld": filepath.Join(d.run, "tide.yaml")}
	for _, n := range d.nodes {
		cfgs[n] = filepath.Join(d.run, "nodes", n+".yaml")
	}
	for name, cfg := range cfgs {
		pids := procsWithArg(cfg)
		if len(pids) != 1 {
			d.t.Fatalf("%d processes run on %s (pids %v), want exactly 1", len(pids), cfg, pids)
		}
		got[name] = pids[0]
	}
	return got
}

// killWait SIGKILLs pid (not our child: up.sh started it) and waits
// until it is gone.
func killWait(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
	for deadline := time.Now().Add(10 * time.Second); pidAlive(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still runs after SIGKILL", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// removeCgroupTree removes the local cluster's cgroup parent with the
// job cgroups that its killed nodes left in it (down.sh removes only the
// empty parent; a test that failed half-way may leave jobs' cgroups),
// and reports whether none is left.
func removeCgroupTree(parent string) bool {
	h, err := cgroup.Detect(cgroup.DefaultRoot)
	if err != nil {
		return true
	}
	gone := true
	for _, dir := range h.Paths(parent) {
		var dirs []string
		filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		// Deepest first: a cgroup goes only once its children have.
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = syscall.Rmdir(dirs[i])
		}
		if _, err := os.Stat(dir); err == nil {
			gone = false
		}
	}
	return gone
}

// startTime reads a process's start time as up.sh records it.
func startTime(t *testing.T, pid int) uint64 {
	t.Helper()
	st, err := stepd.ReadProcStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.StartTime
}

// TestDevScripts checks that the local cluster's scripts survive
// crashes: up.sh after a controller's SIGKILL restarts only the
// controller (no second tided per node) and the running job lives on;
// after a tided's SIGKILL it restarts only that tided; down.sh stops
// nothing that a pid file merely names (an unrelated process that has
// the recorded pid) and everything up.sh started.
func TestDevScripts(t *testing.T) {
	onlyOnce(t)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	run := t.TempDir()
	port := freePort(t)
	// up.sh compares the tide.yaml it would write with the one there
	// as $(cat) reads it, without the final newline.
	storeYAML, _ := newStore(t, false)
	storeYAML = strings.TrimSuffix(storeYAML, "\n")
	d := &devCluster{
		t:     t,
		run:   run,
		nodes: []string{"gpu01", "gpu02"},
		env: append(os.Environ(),
			"TIDE_BIN="+binDir,
			"TIDE_RUN="+run,
			"TIDE_PORT="+strconv.Itoa(port),
			"TIDE_NODES=2",
			"TIDE_CONTAINERD=off",
			"TIDE_CTLD_EXTRA="+storeYAML,
			"TIDE_TIDED_EXTRA=",
		),
		api: client.NewUnix(filepath.Join(run, "tidectld.sock")),
	}
	work := filepath.Join(run, "work")
	release := filepath.Join(work, "release")
	var stateDir string
	t.Cleanup(func() {
		// Whatever happened: the job may end, and every process of this
		// cluster is killed by pid.
		os.WriteFile(release, nil, 0o644)
		if stateDir == "" {
			stateDir = d.stateDir()
		}
		var killed []int
		for pid := range procsMentioning(run, stateDir) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, pid)
			}
		}
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			if !slices.ContainsFunc(killed, pidAlive) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if strings.HasPrefix(stateDir, "/dev/shm/tide-") {
			os.RemoveAll(stateDir)
		}
		// A job's last children (a sleep) may take a moment to go.
		for deadline := time.Now().Add(5 * time.Second); !removeCgroupTree(fmt.Sprintf("tide-dev-%d", port)) && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		if t.Failed() {
			d.logs()
		}
	})

	// A fresh start.
	d.up()
	stateDir = d.stateDir()
	if stateDir == "" {
		t.Fatal("up.sh recorded no node state directory")
	}
	first := d.daemons()

	// A job that runs until the test releases it.
	if err := os.MkdirAll(work, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(work, 0o777)
	script := filepath.Join(work, "wait.sh")
	body := fmt.Sprintf("#!/bin/sh\nwhile [ ! -e %s ]; do sleep 0.1; done\necho released\n", release)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	sb := exec.Command(filepath.Join(binDir, "sbatch"), "--parsable", script)
	sb.Dir = work
	sb.Env = append(os.Environ(), "TIDE_SOCKET="+filepath.Join(run, "tidectld.sock"))
	var sbErr bytes.Buffer
	sb.Stderr = &sbErr
	out, err := sb.Output()
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, sbErr.String())
	}
	id, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("sbatch printed %q", out)
	}
	job := func() (api.Job, error) { return d.api.Job(context.Background(), id) }
	waitJob := func(what string, ok func(api.Job) bool) api.Job {
		t.Helper()
		var j api.Job
		for deadline := time.Now().Add(30 * time.Second); ; {
			var err error
			if j, err = job(); err == nil && ok(j) {
				return j
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %d: timed out waiting for %s (last: %+v, %v)", id, what, j.State, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	j := waitJob("RUNNING", func(j api.Job) bool { return j.State == api.StateRunning })
	host := j.BatchHost()

	// The controller crashes; up.sh brings back only the controller.
	killWait(t, first["tidectld"])
	out1 := d.up()
	second := d.daemons()
	if second["tidectld"] == first["tidectld"] {
		t.Fatalf("tidectld pid %d after its SIGKILL and up.sh", second["tidectld"])
	}
	for _, n := range d.nodes {
		if second[n] != first[n] {
			t.Errorf("tided %s: pid %d, then %d: up.sh restarted a live tided", n, first[n], second[n])
		}
	}
	if !strings.Contains(out1, "restarted tidectld\n") {
		t.Errorf("up.sh does not say it restarted the controller alone")
	}
	if d.pid("tidectld.pid") != second["tidectld"] {
		t.Errorf("tidectld.pid names %d, not the running controller %d", d.pid("tidectld.pid"), second["tidectld"])
	}
	if j, err := job(); err != nil || j.State != api.StateRunning {
		t.Fatalf("job %d after the controller's restart: %v %v, want RUNNING", id, j.State, err)
	}

	// The job's node crashes; up.sh brings back only that tided.
	killWait(t, second[host])
	d.up()
	third := d.daemons()
	for name, pid := range third {
		switch {
		case name == host && pid == second[name]:
			t.Errorf("tided %s still pid %d after its SIGKILL and up.sh", name, pid)
		case name != host && pid != second[name]:
			t.Errorf("%s: pid %d, then %d: up.sh restarted a live daemon", name, second[name], pid)
		}
	}
	if d.pid("nodes/"+host+".pid") != third[host] {
		t.Errorf("nodes/%s.pid names %d, not the running tided %d", host, d.pid("nodes/"+host+".pid"), third[host])
	}

	// The job is still the controller's and finishes.
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	j = waitJob("the end", func(j api.Job) bool { return j.State.Terminal() })
	if j.State != api.StateCompleted {
		t.Fatalf("job %d ended %s, want COMPLETED", id, j.State)
	}

	// Pid files that name an unrelated live process: one with its real
	// start time (another command line), one with a start time of
	// another process (a pid reused since), one with none at all.
	sleep := exec.Command("sleep", "300")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kill(sleep, syscall.SIGKILL) })
	sp := sleep.Process.Pid
	st := startTime(t, sp)
	fakes := []struct{ pidFile, start string }{
		{"nodes/gpu09.pid", fmt.Sprint(st)},
		{"nodes/gpu08.pid", fmt.Sprint(st + 1)},
		{"nodes/gpu07.pid", ""},
		{"containerd/containerd.pid", fmt.Sprint(st + 1)},
	}
	os.MkdirAll(filepath.Join(run, "containerd"), 0o755)
	for _, f := range fakes {
		p := filepath.Join(run, f.pidFile)
		if err := os.WriteFile(p, []byte(fmt.Sprintf("%d\n", sp)), 0o644); err != nil {
			t.Fatal(err)
		}
		if f.start != "" {
			if err := os.WriteFile(p+".start", []byte(f.start+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	downOut, code := d.script("down.sh")
	if code != 0 {
		t.Fatalf("down.sh exited %d", code)
	}
	if !pidAlive(sp) {
		t.Fatalf("down.sh killed pid %d, an unrelated process its pid files named", sp)
	}
	for _, f := range fakes {
		if _, err := os.Stat(filepath.Join(run, f.pidFile)); err == nil {
			t.Errorf("down.sh left the stale pid file %s", f.pidFile)
		}
	}
	if n := strings.Count(downOut, "stale pid file removed"); n != len(fakes) {
		t.Errorf("down.sh reported %d stale pid files, want %d", n, len(fakes))
	}
	// Everything of the cluster stops (the shared supervisors on their
	// own, after SIGTERM).
	var left map[int]string
	for deadline := time.Now().Add(15 * time.Second); ; {
		if left = procsMentioning(run, stateDir); len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the cluster left after down.sh: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, rel := range []string{"tidectld.pid", "nodes/gpu01.pid", "nodes/gpu02.pid"} {
		if _, err := os.Stat(filepath.Join(run, rel)); err == nil {
			t.Errorf("down.sh left %s", rel)
		}
	}
}
