package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/internal/pki"
	"github.com/tide-hpc/tide/noded/stepd"
)

// haCluster is three controllers sharing one PostgreSQL store, two
// nodes configured with all three, and a CLI environment naming all
// three api_addr (TLS, a JWT).
type haCluster struct {
	t     *testing.T
	dir   string
	ctls  []*haCtl
	nodes map[string]*exec.Cmd
	// env is the CLI's: TIDE_CONTROLLER with every api_addr, the CA,
	// a token.
	env []string
}

type haCtl struct {
	name, cfg, socket string
	nodeAddr, apiAddr string
	cmd               *exec.Cmd
}

const haNodes = 2

func newHACluster(t *testing.T) *haCluster {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root: the nodes run jobs as other users")
	}
	if !onPostgres() {
		// Its controllers need PostgreSQL whatever the pass, and one
		// run is enough: make test's last pass.
		t.Skipf("runs in the PostgreSQL pass (%s=postgres)", storeEnv)
	}
	_, store := newStore(t, false)
	dir, err := os.MkdirTemp("", "tide-it-ha-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	h := &haCluster{t: t, dir: dir, nodes: map[string]*exec.Cmd{}}
	jwtKey := make([]byte, 32)
	rand.Read(jwtKey)
	jwtFile := filepath.Join(dir, "jwt.key")
	if err := os.WriteFile(jwtFile, jwtKey, 0o600); err != nil {
		t.Fatal(err)
	}
	var nodeAddrs, apiAddrs []string
	for i := 1; i <= 3; i++ {
		c := &haCtl{name: fmt.Sprintf("ctl%d", i), socket: filepath.Join(dir, fmt.Sprintf("ctl%d.sock", i)),
			nodeAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), apiAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
		c.cfg = filepath.Join(dir, c.name+".yaml")
		nodeAddrs, apiAddrs = append(nodeAddrs, c.nodeAddr), append(apiAddrs, c.apiAddr)
		cfg := fmt.Sprintf(`version: 1
cluster_name: it
state_dir: %s/%s
store: %s
socket: %s
node_addr: %s
api_addr: %s
tls: {mode: on}
jwt: {key_file: %s}
ha: {controller_name: %s}
allow_root_jobs: true
timeouts: {node: 30s, kill_wait: 2s, min_job_age: 30m}
scheduler: {interval: 200ms}
partitions:
  - {name: gpu, nodes: "gpu[01-%02d]", default: true, default_time: "10:00", max_time: "1:00:00"}
nodes:
  - {names: "gpu[01-%02d]", cpus: 64, memory: 512G, gpus: 8}
`, dir, c.name, store, c.socket, c.nodeAddr, c.apiAddr, jwtFile, c.name, haNodes, haNodes)
		if err := os.WriteFile(c.cfg, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		h.ctls = append(h.ctls, c)
	}
	t.Cleanup(h.stop)
	// One CA, one step key: made by ctl1, copied to the others as an
	// operator copies them to each controller host.
	first := h.ctls[0]
	if out, err := exec.Command(filepath.Join(binDir, "tidectld"), "--config", first.cfg, "ca", "init").CombinedOutput(); err != nil {
		t.Fatalf("tidectld ca init: %v\n%s", err, out)
	}
	h.start(0)
	h.waitRole(0, api.RolePrimary, 15*time.Second)
	for _, c := range h.ctls[1:] {
		for _, f := range []string{"tls/" + pki.CACertFile, "tls/" + pki.CAKeyFile, "step_key.pem"} {
			copyPrivate(t, filepath.Join(dir, first.name, f), filepath.Join(dir, c.name, f))
		}
	}
	h.start(1)
	h.start(2)
	h.waitRole(1, api.RoleStandby, 15*time.Second)
	h.waitRole(2, api.RoleStandby, 15*time.Second)

	ca := filepath.Join(dir, "ca.crt")
	copyPrivate(t, filepath.Join(dir, first.name, "tls", pki.CACertFile), ca)
	os.Chmod(ca, 0o644)
	api1 := client.NewUnix(first.socket)
	for i := 1; i <= haNodes; i++ {
		name := fmt.Sprintf("gpu%02d", i)
		ncfg := filepath.Join(dir, name+".yaml")
		os.WriteFile(ncfg, []byte(fmt.Sprintf(`version: 1
name: %s
controller: %s
tls_dir: %s/nodes/%s.tls
state_dir: %s/nodes/%s
cpus: 64
memory: 512G
gpus: {source: fake, fake: {count: 8, model: a100, memory_mb: 81920}}
heartbeat: 2s
kill_wait: 2s
allow_root_jobs: true
step_addr: 127.0.0.1:0
cgroup_parent: tide-it-ha-%d
`, name, strings.Join(nodeAddrs, ","), dir, name, dir, name, os.Getpid())), 0o644)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		tok, err := api1.NodeToken(ctx, api.NodeTokenRequest{TTLS: 300, Node: name})
		if err != nil {
			cancel()
			t.Fatalf("join token for %s: %v", name, err)
		}
		join := exec.CommandContext(ctx, filepath.Join(binDir, "tided"), "--config", ncfg, "join", "--token", "-")
		join.Stdin = strings.NewReader(tok.Token + "\n")
		out, err := join.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("tided join %s: %v\n%s", name, err, out)
		}
		log, _ := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		cmd := exec.Command(filepath.Join(binDir, "tided"), "--config", ncfg)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		h.nodes[name] = cmd
	}
	t.Cleanup(func() { removeCgroupParent(fmt.Sprintf("tide-it-ha-%d", os.Getpid())) })
	h.env = []string{"TIDE_SOCKET=/nonexistent/tide.sock", "TIDE_CONTROLLER=" + strings.Join(apiAddrs, ","), "TIDE_CA=" + ca}
	r := h.cliSocket(0, "tide", "token", "--lifespan=1h")
	tokLine, ok := strings.CutPrefix(strings.TrimSpace(r.out), "TIDE_JWT=")
	if r.code != 0 || !ok {
		t.Fatalf("tide token: exit %d, %q %q", r.code, r.out, r.err)
	}
	h.env = append(h.env, "TIDE_JWT="+tokLine)
	h.eventually(30*time.Second, "both nodes idle", func() bool {
		r := h.cli("sinfo", "-h", "-N", "-o", "%N %t")
		return r.code == 0 && strings.Count(r.out, " idle") == haNodes
	})
	return h
}

func copyPrivate(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// start starts controller i (again).
func (h *haCluster) start(i int) {
	h.t.Helper()
	c := h.ctls[i]
	log, _ := os.OpenFile(filepath.Join(h.dir, c.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	cmd := exec.Command(filepath.Join(binDir, "tidectld"), "--config", c.cfg)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	c.cmd = cmd
}

func (h *haCluster) stop() {
	// Cancel what still runs (the long jobs) so that no job process
	// outlives the test, as cluster.stop does.
	if r := h.cli("squeue", "-h", "-o", "%i"); r.code == 0 && strings.TrimSpace(r.out) != "" {
		h.cli(append([]string{"scancel"}, strings.Fields(r.out)...)...)
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) && strings.TrimSpace(h.cli("squeue", "-h", "-o", "%i").out) != "" {
			time.Sleep(200 * time.Millisecond)
		}
	}
	for _, n := range h.nodes {
		kill(n, syscall.SIGTERM)
	}
	// The nodes' shared job supervisors outlive tided by design.
	for name := range h.nodes {
		stopSupervisor(h.t, stepd.ServePIDFile(stepd.ServeSocket(filepath.Join(h.dir, "nodes", name))))
	}
	for _, c := range h.ctls {
		if c.cmd != nil && c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Signal(syscall.SIGCONT)
			kill(c.cmd, syscall.SIGTERM)
		}
	}
	if h.t.Failed() {
		for _, f := range []string{"ctl1.log", "ctl2.log", "ctl3.log", "gpu01.log"} {
			b, _ := os.ReadFile(filepath.Join(h.dir, f))
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			h.t.Logf("--- %s (tail)\n%s", f, b)
		}
	}
	os.RemoveAll(h.dir)
}

// ping asks controller i who it is, over its socket.
func (h *haCluster) ping(i int) (api.PingResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return client.NewUnix(h.ctls[i].socket).Ping(ctx)
}

func (h *haCluster) waitRole(i int, role string, d time.Duration) {
	h.t.Helper()
	h.eventually(d, h.ctls[i].name+" is "+role, func() bool {
		p, err := h.ping(i)
		return err == nil && p.Role == role
	})
}

// primary is the index of the controller that says it is primary, -1
// for none.
func (h *haCluster) primary() int {
	for i := range h.ctls {
		if c := h.ctls[i].cmd; c == nil || c.ProcessState != nil {
			continue
		}
		if p, err := h.ping(i); err == nil && p.Role == api.RolePrimary {
			return i
		}
	}
	return -1
}

func (h *haCluster) eventually(d time.Duration, what string, f func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out after %v waiting for: %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cli runs a command with the CLI environment (every api_addr).
func (h *haCluster) cli(args ...string) result {
	return h.run(h.env, args...)
}

// cliSocket runs a command on controller i's socket.
func (h *haCluster) cliSocket(i int, args ...string) result {
	return h.run([]string{"TIDE_SOCKET=" + h.ctls[i].socket}, args...)
}

func (h *haCluster) run(env []string, args ...string) result {
	return runBin(h.t, h.dir, nil, env, args...)
}

// TestControllerFailover is issue 26's acceptance on three controllers
// sharing PostgreSQL: kill -9 of the primary in the middle of a storm
// of submissions, then SIGSTOP of the next primary past its lease. A
// standby serves within seconds each time; every acknowledged job runs
// exactly once (each appends a line to its output: two lines would be
// a second launch); the jobs running at the kill keep running; the CLI
// and the nodes carry on by themselves; the paused primary, resumed,
// steps down and writes nothing.
func TestControllerFailover(t *testing.T) {
	h := newHACluster(t)
	since := time.Now().Add(-time.Minute).Format("2006-01-02T15:04:05")
	out := filepath.Join(h.dir, "out")
	os.Mkdir(out, 0o777)

	// Long jobs that must survive both failovers.
	var long []uint64
	for range 2 {
		r := h.cli("sbatch", "--parsable", "-c", "1", "--open-mode=append", "-o", out+"/%j.out", "--wrap", "echo start; sleep 300")
		id, err := strconv.ParseUint(strings.TrimSpace(r.out), 10, 64)
		if r.code != 0 || err != nil {
			t.Fatalf("sbatch long: exit %d %q %q", r.code, r.out, r.err)
		}
		long = append(long, id)
	}
	h.eventually(30*time.Second, "long jobs running", func() bool {
		r := h.cli("squeue", "-h", "-t", "R", "-o", "%i")
		return r.code == 0 && len(strings.Fields(r.out)) == len(long)
	})

	// The storm: workers submit short jobs until told to stop; each
	// acknowledged id is kept.
	const storm = 3000
	const workers = 8
	var mu sync.Mutex
	acked := map[uint64]bool{}
	var submitted, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for submitted.Add(1) <= storm {
				r := h.cli("sbatch", "--parsable", "-c", "1", "-t", "5", "--open-mode=append", "-o", out+"/%j.out", "--wrap", "echo ran")
				id, err := strconv.ParseUint(strings.TrimSpace(r.out), 10, 64)
				if r.code != 0 || err != nil {
					failed.Add(1)
					t.Logf("worker %d: sbatch failed: exit %d %q %q", w, r.code, r.out, r.err)
					continue
				}
				mu.Lock()
				acked[id] = true
				mu.Unlock()
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	h.eventually(120*time.Second, "a third of the storm acknowledged", func() bool { return count() >= storm/3 })

	// kill -9 the primary.
	p := h.primary()
	if p < 0 {
		t.Fatal("no primary before the kill")
	}
	killed := time.Now()
	_ = h.ctls[p].cmd.Process.Kill()
	_ = h.ctls[p].cmd.Wait()
	h.eventually(30*time.Second, "a standby becomes primary", func() bool { return h.primary() >= 0 })
	h.eventually(30*time.Second, "the new primary serves squeue", func() bool { return h.cli("squeue", "-h").code == 0 })
	t.Logf("kill -9 of %s: a standby served after %v", h.ctls[p].name, time.Since(killed).Round(100*time.Millisecond))
	// The killed controller comes back, as a standby.
	h.start(p)
	h.waitRole(p, api.RoleStandby, 20*time.Second)

	h.eventually(180*time.Second, "two thirds of the storm acknowledged", func() bool { return count() >= 2*storm/3 })
	// SIGSTOP the new primary past its lease; another takes over; the
	// paused one, resumed, must step down.
	q := h.primary()
	if q < 0 {
		t.Fatal("no primary before the pause")
	}
	paused := time.Now()
	_ = h.ctls[q].cmd.Process.Signal(syscall.SIGSTOP)
	h.eventually(30*time.Second, "another controller takes over from the paused one", func() bool {
		i := h.primary()
		return i >= 0 && i != q
	})
	t.Logf("SIGSTOP of %s: another took over after %v", h.ctls[q].name, time.Since(paused).Round(100*time.Millisecond))
	_ = h.ctls[q].cmd.Process.Signal(syscall.SIGCONT)
	h.waitRole(q, api.RoleStandby, 20*time.Second)

	wg.Wait()
	ids := func() []uint64 {
		mu.Lock()
		defer mu.Unlock()
		var l []uint64
		for id := range acked {
			l = append(l, id)
		}
		return l
	}()
	t.Logf("storm: %d acknowledged, %d sbatch failures", len(ids), failed.Load())
	if len(ids) < storm*9/10 {
		t.Errorf("only %d of %d submissions acknowledged", len(ids), storm)
	}
	// Every acknowledged job completes, exactly once.
	h.eventually(10*time.Minute, "the storm drains", func() bool {
		r := h.cli("squeue", "-h", "-o", "%i")
		return r.code == 0 && len(strings.Fields(r.out)) == len(long)
	})
	r := h.cli("sacct", "-X", "-n", "-P", "-S", since, "-o", "JobID,State")
	if r.code != 0 {
		t.Fatalf("sacct: exit %d %q", r.code, r.err)
	}
	states := map[uint64]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.out), "\n") {
		id, st, _ := strings.Cut(line, "|")
		if n, err := strconv.ParseUint(id, 10, 64); err == nil {
			states[n] = st
		}
	}
	lost, twice := 0, 0
	for _, id := range ids {
		if states[id] != "COMPLETED" {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged job %d: state %q, want COMPLETED", id, states[id])
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("%d.out", id)))
		if n := bytes.Count(b, []byte("ran\n")); err != nil || n != 1 {
			twice++
			if twice <= 5 {
				t.Errorf("job %d ran %d times (%v)", id, n, err)
			}
		}
	}
	if lost+twice > 0 {
		t.Errorf("%d acknowledged jobs not completed, %d not run exactly once", lost, twice)
	}
	for _, id := range long {
		r := h.cli("squeue", "-h", "-j", strconv.FormatUint(id, 10), "-o", "%T")
		b, _ := os.ReadFile(filepath.Join(out, fmt.Sprintf("%d.out", id)))
		if strings.TrimSpace(r.out) != "RUNNING" || bytes.Count(b, []byte("start\n")) != 1 {
			t.Errorf("long job %d after two failovers: %q, output %q; want RUNNING, started once", id, r.out, b)
		}
	}
	// The nodes followed without help: each is still idle or allocated.
	r = h.cli("sinfo", "-h", "-N", "-o", "%N %t")
	if strings.Contains(r.out, "down") || strings.Count(r.out, "\n") != haNodes {
		t.Errorf("nodes after failovers: %q", r.out)
	}
	// scontrol ping names one primary and two backups, all up.
	r = h.cli("scontrol", "ping")
	if strings.Count(r.out, "(primary)") != 1 || strings.Count(r.out, "(backup)") != 2 || strings.Contains(r.out, "DOWN") {
		t.Errorf("scontrol ping: exit %d\n%s%s", r.code, r.out, r.err)
	}
	var pr []api.PingResponse
	for i := range h.ctls {
		p, _ := h.ping(i)
		pr = append(pr, p)
	}
	b, _ := json.Marshal(pr)
	t.Logf("pings: %s", b)
}
