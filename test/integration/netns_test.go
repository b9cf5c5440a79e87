package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/internal/munge/mungetest"
)

// netnsCluster is a local cluster that `TIDE_HOSTS=netns scripts/up.sh`
// started under a temporary TIDE_RUN: the controller, a login node and
// two compute nodes, each in a network namespace of its own.
type netnsCluster struct {
	t    *testing.T
	run  string
	port int
	env  []string
	work string
	api  *client.Client // root on the controller's host: its unix socket
}

// netnsNames are the namespaces and links the cluster makes on port.
func netnsNames(port int) (namespaces, links []string) {
	for _, h := range []string{"ctl", "login", "gpu01", "gpu02"} {
		namespaces = append(namespaces, fmt.Sprintf("tide-%d-%s", port, h))
		links = append(links, fmt.Sprintf("tide%d-%s", port, h))
	}
	return namespaces, append(links, fmt.Sprintf("tidebr%d", port))
}

// script runs scripts/NAME with the cluster's environment.
func (n *netnsCluster) script(name string) (string, int) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../../scripts/"+name)
	cmd.Env = n.env
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	n.t.Logf("%s:\n%s", name, out)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		n.t.Fatalf("%s: %v", name, err)
	}
	return string(out), code
}

// login runs args as user on the login node (scripts/login.sh) in the
// work directory.
func (n *netnsCluster) login(user string, args ...string) result {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{n.loginScript(), user}, args...)...)
	cmd.Dir = n.work
	cmd.Env = n.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		n.t.Fatalf("login.sh %s %v: %v", user, args, err)
	}
	return result{out: out.String(), err: errb.String(), code: code}
}

func (n *netnsCluster) loginScript() string {
	p, err := filepath.Abs("../../scripts/login.sh")
	if err != nil {
		n.t.Fatal(err)
	}
	return p
}

// submit runs sbatch --parsable as user on the login node.
func (n *netnsCluster) submit(user string, args ...string) uint64 {
	n.t.Helper()
	r := n.login(user, append([]string{"sbatch", "--parsable"}, args...)...)
	id, err := strconv.ParseUint(strings.TrimSpace(r.out), 10, 64)
	if r.code != 0 || err != nil {
		n.t.Fatalf("sbatch %v as %s: exit %d, out %q, err %q", args, user, r.code, r.out, r.err)
	}
	return id
}

// waitJob waits until job id is in a state that ok accepts.
func (n *netnsCluster) waitJob(id uint64, what string, ok func(api.Job) bool) api.Job {
	n.t.Helper()
	var j api.Job
	var err error
	for deadline := time.Now().Add(60 * time.Second); ; {
		if j, err = n.api.Job(context.Background(), id); err == nil && ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("job %d: timed out waiting for %s (last: %s, %v)", id, what, j.State, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (n *netnsCluster) waitEnd(id uint64) api.Job {
	n.t.Helper()
	return n.waitJob(id, "its end", func(j api.Job) bool { return j.State.Terminal() })
}

// nodeAddr is the address netns-up.sh gives node gpuNN.
func (n *netnsCluster) nodeAddr(node string) string {
	k, _ := strconv.Atoi(strings.TrimPrefix(node, "gpu"))
	return fmt.Sprintf("10.77.%d.%d", n.port%256, 10+k)
}

// onPty runs name args in a new pseudo-terminal (its controlling
// terminal) in dir with env, types input and returns what the terminal
// showed and the exit code.
func onPty(t *testing.T, dir string, env []string, input, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
	return runOnPty(t, cmd, input)
}

// capture records the frames that cross some links (the bridge sides of
// the hosts' veth pairs) with AF_PACKET sockets, as tcpdump would, until
// stop.
type capture struct {
	t       *testing.T
	mu      sync.Mutex
	data    bytes.Buffer
	frames  int
	stopped chan struct{}
	wg      sync.WaitGroup
}

// captureLimit bounds what a capture keeps.
const captureLimit = 256 << 20

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func startCapture(t *testing.T, links []string) *capture {
	t.Helper()
	c := &capture{t: t, stopped: make(chan struct{})}
	for _, l := range links {
		ifc, err := net.InterfaceByName(l)
		if err != nil {
			t.Fatalf("capture on %s: %v", l, err)
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			t.Fatalf("capture: AF_PACKET socket: %v", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
			unix.Close(fd)
			t.Fatalf("capture: bind to %s: %v", l, err)
		}
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
		// A timeout, so that the reader sees stop (closing a socket
		// does not wake a blocked recvfrom).
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer unix.Close(fd)
			b := make([]byte, 65536)
			for {
				select {
				case <-c.stopped:
					return
				default:
				}
				n, _, err := unix.Recvfrom(fd, b, 0)
				if err != nil {
					continue
				}
				c.mu.Lock()
				if c.data.Len() < captureLimit {
					c.data.Write(b[:n])
				}
				c.frames++
				c.mu.Unlock()
			}
		}()
	}
	return c
}

// stop ends the capture and returns what it saw.
func (c *capture) stop() ([]byte, int) {
	close(c.stopped)
	c.wg.Wait()
	return c.data.Bytes(), c.frames
}

// netnsInodes returns the network namespace inode ("net:[N]") of each
// of names that exists.
func netnsInodes(names []string) map[string]string {
	out := map[string]string{}
	for _, ns := range names {
		var st syscall.Stat_t
		if err := syscall.Stat("/run/netns/"+ns, &st); err == nil {
			out[fmt.Sprintf("net:[%d]", st.Ino)] = ns
		}
	}
	return out
}

// procsInNetns lists the processes whose network namespace is one of
// inodes, with their command lines.
func procsInNetns(inodes map[string]string) map[int]string {
	out := map[int]string{}
	for pid, args := range procArgs() {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			continue
		}
		if ns, ok := inodes[l]; ok {
			out[pid] = ns + ": " + strings.Join(args, " ")
		}
	}
	return out
}

// TestNetnsCluster is the acceptance scenario of issue 21 in the netns
// mode: from the login node, as two ordinary users (nobody and daemon),
// sbatch, squeue, scancel, scontrol, sacct, sinfo, srun (in a batch job,
// in an allocation of its own, with --pty) and salloc work over TCP with
// MUNGE credentials; jobs run as their submitters on the compute nodes,
// in the nodes' namespaces; neither user can act on the other's jobs,
// and the controller's unix socket is out of reach. A capture of every
// frame the hosts exchange holds no credential, script or key in clear
// when the cluster has its CA (TLS), and shows them without it. down.sh
// then leaves no namespace, link or process of the cluster.
func TestNetnsCluster(t *testing.T) {
	onlyOnce(t)
	if os.Getuid() != 0 {
		t.Skip("needs root: network namespaces, and jobs as nobody and daemon")
	}
	for _, tool := range []string{"ip", "nsenter", "setpriv", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (iproute2, util-linux): no netns cluster", tool)
		}
	}
	// Making a namespace needs more than root's uid (CAP_SYS_ADMIN, a
	// writable /run/netns): a container without them skips.
	probe := fmt.Sprintf("tide-probe-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		t.Skipf("ip netns add does not work here: %v %s", err, out)
	}
	if out, err := exec.Command("ip", "netns", "del", probe).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del %s: %v %s", probe, err, out)
	}
	if mungetest.Binary() == "" {
		t.Skip("munged is not installed (Debian package munge): the netns cluster runs one per host")
	}
	// A short directory: munged's socket paths must fit in 108 bytes.
	run, err := os.MkdirTemp("", "tide-netns-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(run, 0o755)
	port := freePort(t)
	for port > 65532 || port%256 == 0 {
		port = freePort(t)
	}
	// up.sh compares the tide.yaml it would write with the one there
	// as $(cat) reads it, without the final newline.
	storeYAML, _ := newStore(t, true)
	storeYAML = strings.TrimSuffix(storeYAML, "\n")
	n := &netnsCluster{
		t:    t,
		run:  run,
		port: port,
		env: append(os.Environ(),
			"TIDE_HOSTS=netns",
			"TIDE_BIN="+binDir,
			"TIDE_RUN="+run,
			"TIDE_PORT="+strconv.Itoa(port),
			"TIDE_NODES=2",
			"TIDE_CONTAINERD=off",
			"TIDE_CTLD_EXTRA="+storeYAML,
			"TIDE_TIDED_EXTRA=",
			"TIDE_NETNS_NET=",
		),
		work: filepath.Join(run, "work"),
		api:  client.NewUnix(filepath.Join(run, "hosts", "ctl", "private", "tidectld.sock")),
	}
	namespaces, links := netnsNames(port)
	stateDir := func() string {
		b, _ := os.ReadFile(filepath.Join(run, "hosts", "state-dir"))
		return strings.TrimSpace(string(b))
	}
	var inodes map[string]string
	downDone := false
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{"ctl/tidectld.log", "gpu01/tided.log", "gpu02/tided.log", "login/munged.log"} {
				b, _ := os.ReadFile(filepath.Join(run, "hosts", f))
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("--- %s (tail)\n%s", f, b)
			}
		}
		sd := stateDir()
		if !downDone {
			n.script("down.sh")
		}
		// Whatever is left of this cluster is killed by pid: what
		// mentions its directories, what runs in its namespaces.
		var killed []int
		for pid := range procsMentioning(run, sd) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, pid)
			}
		}
		for pid := range procsInNetns(inodes) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, pid)
			}
		}
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			alive := false
			for _, p := range killed {
				alive = alive || pidAlive(p)
			}
			if !alive {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, l := range links {
			if _, err := os.Stat("/sys/class/net/" + l); err == nil {
				exec.Command("ip", "link", "del", l).Run()
			}
		}
		for _, ns := range namespaces {
			if _, err := os.Stat("/run/netns/" + ns); err == nil {
				exec.Command("ip", "netns", "del", ns).Run()
			}
		}
		if strings.HasPrefix(sd, "/dev/shm/tide-") {
			os.RemoveAll(sd)
		}
		for deadline := time.Now().Add(5 * time.Second); !removeCgroupTree(fmt.Sprintf("tide-dev-%d", port)) && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		os.RemoveAll(run)
	})

	if out, code := n.script("up.sh"); code != 0 {
		t.Fatalf("TIDE_HOSTS=netns up.sh exited %d:\n%s", code, out)
	}
	inodes = netnsInodes(namespaces)
	if len(inodes) != len(namespaces) {
		t.Fatalf("namespaces after up.sh: %v, want %v", inodes, namespaces)
	}
	if err := os.MkdirAll(n.work, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(n.work, 0o1777)
	users := map[string]uint32{"nobody": 65534, "daemon": 1}

	// Everything that crosses the network from here on is recorded: the
	// hosts' links to the bridge.
	capt := startCapture(t, links[:len(links)-1])
	mb := make([]byte, 8)
	rand.Read(mb)
	marker := "netns-capture-" + hex.EncodeToString(mb)
	if j := n.waitEnd(n.submit("nobody", "-o", "/dev/null", "--wrap", "echo "+marker)); j.State != api.StateCompleted {
		t.Fatalf("the marker's job: %s", j.State)
	}

	t.Run("the login node is a host of its own", func(t *testing.T) {
		r := n.login("nobody", "sh", "-c", `id -u; hostname -I; echo "$TIDE_CONTROLLER"; echo "${TIDE_SOCKET:-unset}"`)
		want := fmt.Sprintf("65534\n10.77.%d.2 \n10.77.%d.1:%d\nunset\n", port%256, port%256, port+3)
		if r.code != 0 || r.out != want {
			t.Fatalf("login.sh nobody: exit %d, out %q (want %q), err %q", r.code, r.out, want, r.err)
		}
		// The controller's unix socket is out of reach from there (the
		// file system is shared: its directory is root's alone).
		sock := filepath.Join(run, "hosts", "ctl", "private", "tidectld.sock")
		r = n.login("nobody", "env", "-u", "TIDE_CONTROLLER", "TIDE_SOCKET="+sock, "squeue")
		if r.code == 0 || !strings.Contains(r.err, "permission denied") {
			t.Fatalf("squeue on the controller's socket from the login node: exit %d, out %q, err %q", r.code, r.out, r.err)
		}
	})

	t.Run("sinfo", func(t *testing.T) {
		r := n.login("daemon", "sinfo", "-h", "-N", "-o", "%N %t")
		if r.code != 0 || r.out != "gpu01 idle\ngpu02 idle\n" {
			t.Fatalf("sinfo as daemon: exit %d, out %q, err %q", r.code, r.out, r.err)
		}
	})

	t.Run("batch jobs run as their submitters in the nodes' namespaces", func(t *testing.T) {
		for user, uid := range users {
			id := n.submit(user, "-o", "whoami-%j.out", "--wrap", "id -u; hostname -I")
			j := n.waitEnd(id)
			if j.State != api.StateCompleted || j.User != user {
				t.Fatalf("%s's job %d: %s as %s", user, id, j.State, j.User)
			}
			f := filepath.Join(n.work, fmt.Sprintf("whoami-%d.out", id))
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("%d\n%s \n", uid, n.nodeAddr(j.BatchHost()))
			if string(b) != want {
				t.Errorf("%s's job %d printed %q, want %q", user, id, b, want)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(f, &st); err != nil || st.Uid != uid {
				t.Errorf("%s is owned by uid %d (%v), want %d", f, st.Uid, err, uid)
			}
		}
	})

	t.Run("squeue scontrol scancel sacct: each user acts on its own jobs only", func(t *testing.T) {
		mine := n.submit("nobody", "-H", "-J", "mine", "-o", "/dev/null", "--wrap", "true")
		theirs := n.submit("daemon", "-J", "theirs", "-o", "/dev/null", "--wrap", "sleep 300")
		n.waitJob(theirs, "RUNNING", func(j api.Job) bool { return j.State == api.StateRunning })

		r := n.login("nobody", "squeue", "-h", "-o", "%i %u %j %T")
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		sort.Strings(lines)
		want := []string{fmt.Sprintf("%d nobody mine PENDING", mine), fmt.Sprintf("%d daemon theirs RUNNING", theirs)}
		sort.Strings(want)
		if r.code != 0 || strings.Join(lines, "|") != strings.Join(want, "|") {
			t.Errorf("squeue as nobody: exit %d, out %q, err %q; want %q", r.code, r.out, r.err, want)
		}
		r = n.login("nobody", "scontrol", "show", "job", fmt.Sprint(mine))
		if r.code != 0 || !strings.Contains(r.out, "UserId=nobody(65534)") || !strings.Contains(r.out, "JobState=PENDING") {
			t.Errorf("scontrol show job %d as nobody: exit %d, out %q, err %q", mine, r.code, r.out, r.err)
		}
		if r := n.login("nobody", "scontrol", "update", fmt.Sprintf("JobId=%d", mine), "Name=renamed", "Comment=mine"); r.code != 0 {
			t.Errorf("scontrol update of nobody's own job: exit %d, %q", r.code, r.err)
		}
		if j := n.waitJob(mine, "renamed", func(j api.Job) bool { return true }); j.Name != "renamed" || j.Comment != "mine" {
			t.Errorf("job %d after its owner's update: name %q comment %q", mine, j.Name, j.Comment)
		}

		// Neither can touch the other's job, and nothing changes.
		denied := []struct {
			user string
			args []string
		}{
			{"nobody", []string{"scancel", fmt.Sprint(theirs)}},
			{"nobody", []string{"scontrol", "update", fmt.Sprintf("JobId=%d", theirs), "Name=stolen"}},
			{"nobody", []string{"scontrol", "hold", fmt.Sprint(theirs)}},
			{"daemon", []string{"scancel", fmt.Sprint(mine)}},
			{"daemon", []string{"scontrol", "release", fmt.Sprint(mine)}},
			{"daemon", []string{"scontrol", "update", fmt.Sprintf("JobId=%d", mine), "TimeLimit=1"}},
		}
		for _, d := range denied {
			if r := n.login(d.user, d.args...); r.code != 1 || !strings.Contains(r.err, "Access/permission denied") {
				t.Errorf("%s: %v: exit %d, out %q, err %q; want refused", d.user, d.args, r.code, r.out, r.err)
			}
		}
		if j, _ := n.api.Job(context.Background(), theirs); j.State != api.StateRunning || j.Name != "theirs" {
			t.Errorf("daemon's job after nobody's attempts: %s %q, want RUNNING theirs", j.State, j.Name)
		}
		if j, _ := n.api.Job(context.Background(), mine); j.State != api.StatePending || j.Name != "renamed" || j.TimeLimit == 60 {
			t.Errorf("nobody's job after daemon's attempts: %s %q limit %v", j.State, j.Name, j.TimeLimit)
		}

		// Each cancels its own.
		for user, id := range map[string]uint64{"nobody": mine, "daemon": theirs} {
			if r := n.login(user, "scancel", fmt.Sprint(id)); r.code != 0 {
				t.Errorf("scancel %d by its owner %s: exit %d, %q", id, user, r.code, r.err)
			}
			if j := n.waitEnd(id); j.State != api.StateCancelled {
				t.Errorf("job %d after its owner's scancel: %s", id, j.State)
			}
		}
		// sacct shows a user's own jobs by default.
		r = n.login("daemon", "sacct", "-n", "-X", "-P", "-o", "JobID,JobName,User,State", "-j", fmt.Sprintf("%d,%d", mine, theirs))
		if r.code != 0 || !strings.Contains(r.out, fmt.Sprintf("%d|theirs|daemon|CANCELLED", theirs)) {
			t.Errorf("sacct as daemon: exit %d, out %q, err %q", r.code, r.out, r.err)
		}
		r = n.login("daemon", "sacct", "-n", "-X", "-P", "-o", "JobID,User")
		if r.code != 0 || strings.Contains(r.out, "|nobody") {
			t.Errorf("sacct as daemon lists other users' jobs: exit %d, out %q, err %q", r.code, r.out, r.err)
		}
		// The controller knows where the requests came from: the login
		// node, authenticated by MUNGE.
		cmd := exec.Command(filepath.Join(binDir, "tide"), "audit")
		cmd.Env = append(os.Environ(), "TIDE_SOCKET="+filepath.Join(run, "hosts", "ctl", "private", "tidectld.sock"))
		audit, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tide audit as root on the controller's socket: %v\n%s", err, audit)
		}
		addr := fmt.Sprintf("auth=munge addr=10.77.%d.2", port%256)
		if !strings.Contains(string(audit), addr) {
			t.Errorf("tide audit does not name %q:\n%s", addr, audit)
		}
	})

	t.Run("srun in a batch job over two nodes", func(t *testing.T) {
		id := n.submit("nobody", "-N2", "-o", "steps-%j.out", "--wrap", "srun -l sh -c 'echo $(id -u) $(hostname -I)' | sort")
		j := n.waitEnd(id)
		f := filepath.Join(n.work, fmt.Sprintf("steps-%d.out", id))
		b, _ := os.ReadFile(f)
		want := fmt.Sprintf("0: 65534 %s\n1: 65534 %s\n", n.nodeAddr("gpu01"), n.nodeAddr("gpu02"))
		if j.State != api.StateCompleted || string(b) != want {
			t.Fatalf("job %d %s, output %q, want %q", id, j.State, b, want)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(f, &st); err != nil || st.Uid != 65534 {
			t.Errorf("%s owned by uid %d (%v), want nobody", f, st.Uid, err)
		}
	})

	t.Run("srun -N2 from the login node", func(t *testing.T) {
		r := n.login("daemon", "srun", "-N2", "-l", "sh", "-c", "echo $(id -u) $(hostname -I) $MASTER_ADDR")
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		sort.Strings(lines)
		a1, a2 := n.nodeAddr("gpu01"), n.nodeAddr("gpu02")
		want := fmt.Sprintf("0: 1 %s %s|1: 1 %s %s", a1, a1, a2, a1)
		if r.code != 0 || strings.Join(lines, "|") != want {
			t.Fatalf("srun -N2 as daemon: exit %d, out %q (want %q), err %q", r.code, r.out, want, r.err)
		}
	})

	ptyEnv := append(append([]string(nil), n.env...), "TERM=dumb")
	t.Run("srun --pty", func(t *testing.T) {
		out, code := onPty(t, n.work, ptyEnv, "tty; echo PTY=$SLURMD_NODENAME:$(id -u)\nexit 3\n",
			"bash", n.loginScript(), "nobody", "srun", "--pty", "-N2", "/bin/sh")
		if code != 3 || !regexp.MustCompile(`(?m)/dev/pts/\d+\r?$`).MatchString(out) || !strings.Contains(out, "PTY=gpu01:65534") {
			t.Fatalf("srun --pty as nobody: exit %d, terminal:\n%s", code, out)
		}
	})

	t.Run("salloc, and srun in it", func(t *testing.T) {
		out, code := onPty(t, n.work, ptyEnv, "echo JOBID=$SLURM_JOB_ID NODES=$SLURM_JOB_NODELIST; srun -l id -u | sort; exit\n",
			"bash", n.loginScript(), "daemon", "env", "SHELL=/bin/sh", "PS1=$ ", "ENV=", "salloc", "-N2")
		m := regexp.MustCompile(`JOBID=(\d+) NODES=gpu\[01-02\]`).FindStringSubmatch(out)
		if code != 0 || m == nil || !regexp.MustCompile(`(?m)^0: 1\r?$`).MatchString(out) || !regexp.MustCompile(`(?m)^1: 1\r?$`).MatchString(out) {
			t.Fatalf("salloc as daemon: exit %d, terminal:\n%s", code, out)
		}
		id, _ := strconv.ParseUint(m[1], 10, 64)
		if j := n.waitEnd(id); j.State != api.StateCompleted || j.User != "daemon" {
			t.Fatalf("salloc's job %d: %s as %s", id, j.State, j.User)
		}
	})

	// What crossed the network: with the cluster CA (TLS), no
	// credential, script or key in clear; without it, the capture must
	// show them (else it missed the traffic).
	data, frames := capt.stop()
	key, err := os.ReadFile(filepath.Join(run, "hosts", "cluster.key"))
	if err != nil || len(bytes.TrimSpace(key)) == 0 {
		t.Fatalf("cluster key: %v", err)
	}
	clear := []struct {
		what string
		b    []byte
	}{
		{"a MUNGE credential", []byte("MUNGE:")},
		{"a job's script", []byte(marker)},
		{"the cluster key", bytes.TrimSpace(key)},
		{"plain HTTP", []byte("HTTP/1.1")},
	}
	if frames < 100 {
		t.Fatalf("the capture saw %d frames of the whole scenario", frames)
	}
	if _, err := os.Stat(filepath.Join(run, "hosts", "login", "ca.crt")); err == nil {
		for _, c := range clear {
			if bytes.Contains(data, c.b) {
				t.Errorf("a capture of the scenario (%d frames) holds %s in clear", frames, c.what)
			}
		}
	} else {
		t.Logf("no cluster CA (binaries without TLS): the traffic is in clear")
		for _, c := range clear[:2] {
			if !bytes.Contains(data, c.b) {
				t.Errorf("without TLS the capture (%d frames) should show %s: it missed the traffic", frames, c.what)
			}
		}
	}

	// A job that still runs at teardown: down.sh cancels it.
	n.submit("nobody", "-o", "/dev/null", "--wrap", "sleep 300")
	sd := stateDir()
	out, code := n.script("down.sh")
	downDone = true
	if code != 0 {
		t.Fatalf("down.sh exited %d", code)
	}
	if strings.Contains(out, "stale pid file") {
		t.Errorf("down.sh found stale pid files of a cluster that ran until now:\n%s", out)
	}
	for _, ns := range namespaces {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			t.Errorf("namespace %s left after down.sh", ns)
		}
	}
	var left map[int]string
	for deadline := time.Now().Add(15 * time.Second); ; {
		left = procsMentioning(run, sd)
		for pid, l := range procsInNetns(inodes) {
			left[pid] = l
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the cluster left after down.sh: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A namespace's links go when its last process has (the kernel
	// cleans up behind ip netns del).
	for deadline := time.Now().Add(10 * time.Second); ; {
		var there []string
		for _, l := range links {
			if _, err := os.Stat("/sys/class/net/" + l); err == nil {
				there = append(there, l)
			}
		}
		if len(there) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("links left after down.sh: %v", there)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if sd != "" {
		if _, err := os.Stat(sd); err == nil && strings.HasPrefix(sd, "/dev/shm/") {
			t.Errorf("down.sh left the job directories %s", sd)
		}
	}
}
