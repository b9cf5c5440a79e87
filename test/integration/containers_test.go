package integration

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// containerEnv is the variable naming the containerd socket the
// container tests use (.ci/run starts a private containerd and sets it).
const containerEnv = "TIDE_TEST_CONTAINERD"

// ctrCluster starts a one-node cluster whose tided runs container jobs
// on the containerd of $TIDE_TEST_CONTAINERD, in a namespace of its own,
// with the busybox test image imported there.
func ctrCluster(t *testing.T) (*cluster, string, string) {
	t.Helper()
	sock := os.Getenv(containerEnv)
	if sock == "" {
		t.Skipf("%s is not set: container jobs need a containerd (the CI script starts one; "+
			"locally: sudo scripts/containerd-private.sh start /run/tide-ci and %s=/run/tide-ci/containerd.sock)", containerEnv, containerEnv)
	}
	if os.Getuid() != 0 {
		t.Skip("container jobs need tided to run as root")
	}
	b := make([]byte, 4)
	rand.Read(b)
	ns := "tide-it-" + hex.EncodeToString(b)
	snap := os.Getenv("TIDE_SNAPSHOTTER")
	if snap == "" {
		snap = "overlayfs"
	}
	c := newClusterWith(t, 1, fmt.Sprintf("containerd: {socket: %s, namespace: %s, snapshotter: %s}\n", sock, ns, snap))
	tar := filepath.Join(c.dir, "bb.tar")
	if out, err := exec.Command("../../scripts/build-test-image.sh", tar).CombinedOutput(); err != nil {
		t.Fatalf("build test image: %v\n%s", err, out)
	}
	r := c.cli("tide", "image", "--containerd-socket", sock, "--namespace", ns, "--snapshotter", snap, "import", tar)
	if r.code != 0 || !strings.Contains(r.out, "imported docker.io/tide-test/bb:latest") {
		t.Fatalf("tide image import: %d %s%s", r.code, r.out, r.err)
	}
	t.Cleanup(func() {
		c.cli("tide", "image", "--containerd-socket", sock, "--namespace", ns, "rm", "tide-test/bb")
	})
	return c, sock, ns
}

// readOut waits until path contains want and returns the content.
func (c *cluster) waitOutput(path, want string, d time.Duration) string {
	c.t.Helper()
	var b []byte
	c.eventually(d, fmt.Sprintf("%q in %s", want, filepath.Base(path)), func() bool {
		b, _ = os.ReadFile(path)
		return strings.Contains(string(b), want)
	})
	return string(b)
}

// procsWithArg lists the pids whose command line ends in arg (a sleep
// with a marker duration no other test uses).
func procsWithArg(arg string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) > 1 && args[len(args)-1] == arg && pidAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// ctrContainers lists the containers in ns (through the ctr tool that
// ships with containerd).
func ctrContainers(t *testing.T, sock, ns string) []string {
	out, err := exec.Command("ctr", "--address", sock, "-n", ns, "containers", "ls", "-q").Output()
	if err != nil {
		t.Fatalf("ctr containers ls: %v", err)
	}
	return strings.Fields(string(out))
}

// TestContainerJobs runs batch scripts in the busybox image on a real
// containerd: user, exit code, output files, environment and limits; the
// OOM killer; scancel and scancel --full --signal; a tided restart while a job
// runs and while one ends.
func TestContainerJobs(t *testing.T) {
	c, sock, ns := ctrCluster(t)
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	wd := c.workDir()

	t.Run("exit code, user, output files, environment and limits", func(t *testing.T) {
		script := `#!/bin/sh
echo "uid=$(id -u) gid=$(id -g) job=$SLURM_JOB_ID node=$SLURMD_NODENAME pwd=$(pwd)"
cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max
ls /.tide/script
echo to-stderr >&2
exit 3
`
		id := c.submitAs(nobody, script, "--container-image=tide-test/bb", "--mem=64M", "-o", "c-%j.out", "-e", "c-%j.err")
		j := c.waitTerminal(id, 60*time.Second)
		if j.State != api.StateFailed || j.Exit.Code != 3 {
			t.Fatalf("state %s exit %s reason %s", j.State, j.Exit, j.Reason)
		}
		if !strings.Contains(j.Constraint, api.FeatureContainerd) || j.ContainerImage != "docker.io/tide-test/bb:latest" {
			t.Fatalf("constraint %q image %q", j.Constraint, j.ContainerImage)
		}
		outPath := filepath.Join(wd, fmt.Sprintf("c-%d.out", id))
		out, err := os.ReadFile(outPath)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("uid=65534 gid=65534 job=%d node=gpu01 pwd=%s\n%d\n/.tide/script\n", id, wd, 64<<20)
		if string(out) != want {
			t.Fatalf("stdout %q, want %q", out, want)
		}
		errb, _ := os.ReadFile(filepath.Join(wd, fmt.Sprintf("c-%d.err", id)))
		if string(errb) != "to-stderr\n" {
			t.Fatalf("stderr %q", errb)
		}
		for _, p := range []string{outPath, filepath.Join(wd, fmt.Sprintf("c-%d.err", id))} {
			fi, _ := os.Stat(p)
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 {
				t.Fatalf("%s owned by uid %d, want 65534", p, st.Uid)
			}
		}
		if got, want := c.sacctLine(id), fmt.Sprintf("%d|FAILED|3:0", id); got != want {
			t.Fatalf("sacct = %q, want %q", got, want)
		}
		if left := ctrContainers(t, sock, ns); len(left) != 0 {
			t.Fatalf("containers left after the job: %v", left)
		}
	})

	t.Run("memory limit ends the job OUT_OF_MEMORY", func(t *testing.T) {
		id := c.submitAs(nobody, "#!/bin/sh\ndd if=/dev/zero of=/dev/null bs=200M count=1\necho survived\n",
			"--container-image=tide-test/bb", "--mem=32M", "-o", "oom-%j.out")
		j := c.waitTerminal(id, 60*time.Second)
		if j.State != api.StateOOM || j.Reason != api.ReasonOutOfMemory {
			out, _ := os.ReadFile(filepath.Join(wd, fmt.Sprintf("oom-%d.out", id)))
			t.Fatalf("state %s reason %s exit %s; output %q", j.State, j.Reason, j.Exit, out)
		}
		// Slurm records an OOM kill as SIG_OOM, which sacct prints 0:125.
		if got, want := c.sacctLine(id), fmt.Sprintf("%d|OUT_OF_MEMORY|0:125", id); got != want {
			t.Fatalf("sacct = %q, want %q", got, want)
		}
	})

	t.Run("scancel --full --signal reaches a trapping script", func(t *testing.T) {
		id := c.submitAs(nobody, "#!/bin/sh\ntrap 'echo got-usr1; exit 5' USR1\necho ready\nwhile :; do sleep 1; done\n",
			"--container-image=tide-test/bb", "-o", "sig-%j.out")
		out := filepath.Join(wd, fmt.Sprintf("sig-%d.out", id))
		c.waitOutput(out, "ready", 60*time.Second)
		// Without -f (or -b) the signal would go to the job's steps
		// only, as in Slurm (signals_test.go).
		if r := c.cli("scancel", "--full", "--signal=USR1", strconv.FormatUint(id, 10)); r.code != 0 {
			t.Fatalf("scancel --signal: %s%s", r.out, r.err)
		}
		j := c.waitTerminal(id, 30*time.Second)
		if j.State != api.StateFailed || j.Exit.Code != 5 {
			t.Fatalf("state %s exit %s", j.State, j.Exit)
		}
		c.waitOutput(out, "got-usr1", time.Second)
	})

	t.Run("scancel kills every process of the task", func(t *testing.T) {
		// sh as PID 1 has no SIGTERM handler and ignores SIGTERM: only
		// the SIGKILL after the kill wait ends it.
		id := c.submitAs(nobody, "#!/bin/sh\nsleep 3001 &\nsleep 3002 &\necho started\nwait\n",
			"--container-image=tide-test/bb", "-o", "kill-%j.out")
		c.waitOutput(filepath.Join(wd, fmt.Sprintf("kill-%d.out", id)), "started", 60*time.Second)
		var pids []int
		c.eventually(10*time.Second, "both sleeps running", func() bool {
			pids = append(procsWithArg("3001"), procsWithArg("3002")...)
			return len(pids) == 2
		})
		if r := c.cli("scancel", strconv.FormatUint(id, 10)); r.code != 0 {
			t.Fatalf("scancel: %s%s", r.out, r.err)
		}
		j := c.waitTerminal(id, 30*time.Second)
		if j.State != api.StateCancelled {
			t.Fatalf("state %s", j.State)
		}
		for _, p := range pids {
			if pidAlive(p) {
				t.Errorf("process %d of the cancelled job still runs", p)
			}
		}
		c.eventually(10*time.Second, "container removed", func() bool { return len(ctrContainers(t, sock, ns)) == 0 })
	})

	t.Run("tided restarted mid-job reattaches and reports the end", func(t *testing.T) {
		id := c.submitAs(nobody, "#!/bin/sh\necho begin\nsleep 3\necho end\nexit 7\n",
			"--container-image=tide-test/bb", "-o", "re-%j.out")
		out := filepath.Join(wd, fmt.Sprintf("re-%d.out", id))
		c.waitOutput(out, "begin", 60*time.Second)
		kill(c.tided["gpu01"], syscall.SIGKILL)
		c.startTided("gpu01")
		j := c.waitTerminal(id, 60*time.Second)
		if j.State != api.StateFailed || j.Exit.Code != 7 {
			t.Fatalf("state %s exit %s", j.State, j.Exit)
		}
		if got := c.waitOutput(out, "end", time.Second); got != "begin\nend\n" {
			t.Fatalf("output %q", got)
		}
	})

	t.Run("a job that ends while tided is down is reported", func(t *testing.T) {
		id := c.submitAs(nobody, "#!/bin/sh\necho begin\nsleep 1\necho end\nexit 9\n",
			"--container-image=tide-test/bb", "-o", "down-%j.out")
		out := filepath.Join(wd, fmt.Sprintf("down-%d.out", id))
		c.waitOutput(out, "begin", 60*time.Second)
		kill(c.tided["gpu01"], syscall.SIGTERM)
		c.waitOutput(out, "end", 30*time.Second)
		time.Sleep(200 * time.Millisecond) // let the shim see the exit
		c.startTided("gpu01")
		j := c.waitTerminal(id, 60*time.Second)
		if j.State != api.StateFailed || j.Exit.Code != 9 {
			t.Fatalf("state %s exit %s", j.State, j.Exit)
		}
		c.eventually(10*time.Second, "container removed", func() bool { return len(ctrContainers(t, sock, ns)) == 0 })
	})

	t.Run("a missing image fails the launch with a clear reason", func(t *testing.T) {
		id := c.submitAs(nobody, "#!/bin/sh\necho hi\n", "--container-image=tide-test/nope")
		j := c.waitTerminal(id, 60*time.Second)
		if j.State != api.StateFailed || j.Reason != api.ReasonLaunchFailed {
			t.Fatalf("state %s reason %s", j.State, j.Reason)
		}
		ev := c.cli("tide", "events", strconv.FormatUint(id, 10))
		if !strings.Contains(ev.out, "docker.io/tide-test/nope:latest is not on node gpu01") {
			t.Fatalf("events do not say why:\n%s", ev.out)
		}
	})
}

// TestContainerImageNeedsContainerNode: without a node running
// containerd, a container job is refused at submit.
func TestContainerImageNeedsContainerNode(t *testing.T) {
	c := newCluster(t, 1)
	f := filepath.Join(c.workDir(), "ctr.sh")
	os.WriteFile(f, []byte("#!/bin/sh\ntrue\n"), 0o755)
	r := c.cli("sbatch", "--container-image=tide-test/bb", f)
	if r.code == 0 || !strings.Contains(r.err, "feature containerd") {
		t.Fatalf("sbatch: %d %q %q", r.code, r.out, r.err)
	}
}
