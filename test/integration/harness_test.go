// Package integration starts real tidectld and tided processes on
// loopback and drives them with the real CLI, as a user would.
package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/internal/pgtest"
	"github.com/tide-hpc/tide/internal/pki"
	"github.com/tide-hpc/tide/noded/cgroup"
	"github.com/tide-hpc/tide/noded/stepd"
)

// clusterSeq numbers the test clusters of this process.
var clusterSeq atomic.Int64

// removeCgroupParent removes a test cluster's (by then empty) cgroup
// parent from every hierarchy; errors are ignored (none was made when
// cgroups are off here).
func removeCgroupParent(parent string) {
	if h, err := cgroup.Detect(cgroup.DefaultRoot); err == nil {
		h.RemoveParent(parent)
	}
}

// binDir holds tide, tidectld, tided and the Slurm-named links, built
// once for the package.
var binDir string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(0)
	}
	if err := checkNetnsMode(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The store is checked before the build (a minute) and its server
	// started after it, so that a failed build leaves no server behind.
	pg, err := storeFromEnv(os.Getenv(storeEnv))
	if err == nil && pg && !pgtest.Installed() {
		err = fmt.Errorf("%s=postgres: %w", storeEnv, pgtest.ErrNotInstalled)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "tide-it-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Other users (jobs run as nobody when tests run as root) must reach
	// the binaries.
	os.Chmod(dir, 0o755)
	binDir = dir
	tags := os.Getenv("GOTAGS_IT")
	if _, err := os.Stat("/usr/include/sqlite3.h"); err == nil && tags == "" {
		tags = "libsqlite3"
	}
	// As `make build` does: daemons with cgo (SQLite, NSS), the CLI static.
	builds := []struct {
		cgo  string
		pkgs []string
	}{{"1", []string{"../../cmd/tidectld", "../../cmd/tided", "../../cmd/tide-stepd"}}, {"0", []string{"../../cmd/tide"}}}
	for _, b := range builds {
		cmd := exec.Command("go", append([]string{"build", "-tags", tags, "-o", dir + "/"}, b.pkgs...)...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+b.cgo)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build binaries:", err)
			os.Exit(1)
		}
	}
	for _, l := range []string{"sbatch", "squeue", "scancel", "sinfo", "scontrol", "sacct", "srun", "salloc", "sprio", "sstat"} {
		os.Symlink("tide", filepath.Join(dir, l))
	}
	if pg {
		if pgServer, err = pgtest.Start(); err != nil {
			fmt.Fprintf(os.Stderr, "%s=postgres: %v\n", storeEnv, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	for _, stop := range []func() error{pgUnit.Stop, stopServer} {
		if err := stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// stopServer stops pgServer if it was started.
func stopServer() error {
	if pgServer == nil {
		return nil
	}
	return pgServer.Stop()
}

// storeEnv chooses the controllers' store: "sqlite" (or unset, the
// default) or "postgres", in which every controller a test starts gets a
// fresh database of its own in one private PostgreSQL server
// (internal/pgtest) that the test binary starts and stops.
const storeEnv = "TIDE_TEST_STORE"

// pgServer is that server, nil on SQLite. PostgreSQL missing fails the
// run (TestMain), not a skip: a run asked for the PostgreSQL store must
// not pass on SQLite.
var pgServer *pgtest.Server

// storeFromEnv reads storeEnv's value v: whether it asks for PostgreSQL.
func storeFromEnv(v string) (postgres bool, err error) {
	switch v {
	case "", "sqlite":
		return false, nil
	case "postgres":
		return true, nil
	}
	return false, fmt.Errorf("%s=%q: want sqlite or postgres", storeEnv, v)
}

// pgUnit is a private PostgreSQL server for the unit tests of the checks
// of PostgreSQL stores, started on first use in either mode (the
// controllers' pgServer is not there on SQLite).
var pgUnit pgtest.Lazy

// onPostgres reports whether the controllers of this run keep their
// state in PostgreSQL.
func onPostgres() bool { return pgServer != nil }

// newStore returns the store key of a new controller's configuration
// ("" on SQLite: tide.db in its state directory) and the store's URL. On
// PostgreSQL it creates a fresh database, dropped when t ends; register
// the controller's stop after this call so that it runs first. A
// controller in a network namespace (netns) has a loopback of its own,
// so it reaches the server over its unix socket (network namespaces
// share the file system).
func newStore(t *testing.T, netns bool) (yaml, url string) {
	t.Helper()
	if pgServer == nil {
		return "", ""
	}
	ctx := context.Background()
	name, url, err := pgServer.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pgServer.DropDatabase(ctx, name); err != nil {
			t.Errorf("%v", err)
		}
	})
	if netns {
		url = pgServer.SocketURL(name)
	}
	return "store: " + url + "\n", url
}

// cluster is one controller and its nodes under a temporary directory.
type cluster struct {
	t      *testing.T
	dir    string
	port   int
	nodes  []string
	ctld   *exec.Cmd
	tided  map[string]*exec.Cmd
	socket string
	api    *client.Client
	// tls: the controller serves TLS with a cluster CA (caFile), and
	// every node joined it (clusterOpts.plain turns it off: the cluster
	// key, as before issue 21).
	tls    bool
	caFile string
	// hosts is the cluster's network in the netns mode (nil otherwise):
	// the daemons run in their hosts' namespaces, and the commands on
	// the login node over TCP.
	hosts *hosts
	// ctlHost is the controller's address as the nodes and this process
	// reach it (127.0.0.1 on one host); apiAddr its api_addr in the
	// netns mode.
	ctlHost, apiAddr string
	// storeURL is the controller's PostgreSQL database (TIDE_TEST_STORE=
	// postgres), "" on SQLite.
	storeURL string
	// standbys are the controllers after the first
	// (clusterOpts.controllers; ha_harness_test.go).
	standbys []*standbyCtl
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago
// and that no earlier call of this process returned: the kernel may hand
// a port just closed out again, and a test that asked for two ports
// (api_addr and the cluster's node_addr) then got one port twice.
func freePort(t *testing.T) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !portsGiven[port] {
			portsGiven[port] = true
			return port
		}
	}
	t.Fatal("freePort: 100 ports in a row were handed out before")
	return 0
}

// portsGiven are the ports freePort returned.
var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// newCluster writes configs and starts tidectld plus n tided, waiting
// until every node is idle. Everything is stopped by PID at cleanup.
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	return newClusterWith(t, n, "")
}

// newClusterWith is newCluster with nodeYAML appended to every node's
// configuration (containerd keys, for instance).
func newClusterWith(t *testing.T, n int, nodeYAML string) *cluster {
	t.Helper()
	return newClusterOpts(t, clusterOpts{nodes: n, nodeYAML: nodeYAML})
}

// clusterOpts shapes a test cluster; zero fields take newCluster's
// defaults.
type clusterOpts struct {
	nodes int
	// nodeYAML is appended to every node's configuration.
	nodeYAML string
	// gpus is the nodes' fake inventory (default: 8 a100 of 80 GB).
	gpus *gres.FakeConfig
	// switches replaces the controller's topology.switches entries
	// (default: one switch s1 over every node).
	switches []string
	// ctldYAML is appended to the controller's configuration (queues,
	// qos, scheduler settings).
	ctldYAML string
	// plain runs the cluster without TLS: nodes present the cluster key
	// in clear, as before issue 21. By default the controller has a
	// cluster CA (tidectld ca init), every node joins it with a one-time
	// token before its first start (tided join), and node_addr and
	// api_addr serve TLS.
	plain bool
	// singleHost keeps the cluster on this host's loopback in the netns
	// mode too: for the tests that check the single-host setup itself
	// (the unix socket, loopback listeners of their own).
	singleHost bool
	// controllers, when more than one, adds standby controllers sharing
	// the first one's PostgreSQL store (ha_harness_test.go); on SQLite
	// runs the store is a database of pgUnit's server.
	controllers int
}

func newClusterOpts(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	n, nodeYAML := o.nodes, o.nodeYAML
	if !strings.Contains(nodeYAML, "cgroup_parent:") {
		// Job cgroups of this cluster under a parent of its own: the
		// clusters of parallel tests (and packages) reuse job ids, and
		// a node cleaning up job_<id> must never touch another
		// cluster's job.
		cgParent := fmt.Sprintf("tide-it-%d-%d", os.Getpid(), clusterSeq.Add(1))
		nodeYAML += "cgroup_parent: " + cgParent + "\n"
		t.Cleanup(func() { removeCgroupParent(cgParent) })
	}
	gpus := gres.FakeConfig{Count: 8, Model: "a100", MemoryMB: 81920}
	if o.gpus != nil {
		gpus = *o.gpus
	}
	dir, err := os.MkdirTemp("", "tide-it-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	c := &cluster{t: t, dir: dir, port: freePort(t), tided: map[string]*exec.Cmd{}, tls: !o.plain, ctlHost: "127.0.0.1"}
	c.socket = filepath.Join(dir, "ctld.sock")
	root := os.Getuid() == 0
	key := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(key, []byte("integration-test-key-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		c.nodes = append(c.nodes, fmt.Sprintf("gpu%02d", i))
	}
	expr := fmt.Sprintf("gpu[01-%02d]", n)
	// In the netns mode the users' API listens on the controller's
	// address with MUNGE (the controller's host's munged); the commands
	// use it from the login node.
	netYAML := ""
	if netnsMode && !o.singleHost {
		c.hosts = newHosts(t, c.nodes)
		c.ctlHost = c.hosts.addr("ctl")
		c.apiAddr = fmt.Sprintf("%s:%d", c.ctlHost, c.port+1)
		netYAML = fmt.Sprintf("api_addr: %s\nmunge: {socket: %s}\n", c.apiAddr, c.hosts.ctlMunge.Socket)
	}
	storeYAML, storeURL := newStore(t, c.hosts != nil)
	if o.controllers > 1 && storeURL == "" {
		// Standbys need a shared store.
		storeURL = pgUnit.Database(t)
		storeYAML = "store: " + storeURL + "\n"
	}
	c.storeURL = storeURL
	ctldAuth := "tls: {mode: off}\nkey_file: " + key
	if c.tls {
		if !strings.Contains("\n"+o.ctldYAML, "\ntls:") {
			ctldAuth = "tls: {mode: on}"
		} else {
			ctldAuth = "" // the test's own tls: settings
		}
		// Copied where every user may read it, as /etc/tide/ca.crt on
		// a login node (the state directory is the controller's alone).
		c.caFile = filepath.Join(dir, "ca.crt")
	}
	cfg := fmt.Sprintf(`version: 1
cluster_name: it
state_dir: %s/ctld
socket: %s
node_addr: %s:%d
%s%s%s
allow_root_jobs: %v
timeouts: {node: 30s, kill_wait: 2s, min_job_age: 5m}
scheduler: {interval: 200ms}
partitions:
  - {name: gpu, nodes: "%s", default: true, default_time: "10:00", max_time: "1:00:00"}
  - {name: short, nodes: "gpu01", max_time: "0:30"}
nodes:
  - {names: "%s", cpus: 64, memory: 512G, gpus: 8}
topology:
  switches:
%s`, dir, c.socket, c.ctlHost, c.port, storeYAML, netYAML, ctldAuth, root, expr, expr, switchesYAML(o.switches, expr))
	if o.ctldYAML != "" {
		cfg += "\n" + o.ctldYAML
	}
	controllers := fmt.Sprintf("%s:%d", c.ctlHost, c.port)
	if o.controllers > 1 {
		controllers = c.writeStandbyConfigs(o.controllers, cfg)
		cfg += "\nha: {controller_name: ctl1}\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "tide.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range c.nodes {
		nodeAuth := "key_file: " + key
		if c.tls {
			nodeAuth = "tls_dir: " + c.tlsDir(name)
		}
		stepHost := "127.0.0.1"
		if c.hosts != nil {
			stepHost = c.hosts.addr(name)
		}
		ncfg := fmt.Sprintf(`version: 1
name: %s
controller: %s
%s
state_dir: %s/nodes/%s
cpus: 64
memory: 512G
gpus: {source: fake, fake: {count: %d, model: %s, memory_mb: %d, topology: "%s"}}
heartbeat: 2s
kill_wait: 2s
allow_root_jobs: %v
step_addr: %s:0
%s`, name, controllers, nodeAuth, dir, name, gpus.Count, gpus.Model, gpus.MemoryMB, gpus.Topology, root, stepHost, nodeYAML)
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(ncfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c.api = client.NewUnixList(strings.Split(c.sockets(), ","))
	t.Cleanup(c.stop)
	if c.tls {
		out, err := exec.Command(filepath.Join(binDir, "tidectld"), "--config", filepath.Join(dir, "tide.yaml"), "ca", "init").CombinedOutput()
		if err != nil {
			t.Fatalf("tidectld ca init: %v\n%s", err, out)
		}
		ca, err := os.ReadFile(filepath.Join(dir, "ctld", "tls", "ca.crt"))
		if err == nil {
			err = os.WriteFile(c.caFile, ca, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	c.startCtld()
	c.startStandbys()
	for _, name := range c.nodes {
		c.startTided(name)
	}
	c.waitIdle()
	return c
}

func (c *cluster) startCtld() {
	c.t.Helper()
	log, _ := os.OpenFile(filepath.Join(c.dir, "tidectld.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	cmd := c.onHost("ctl", nil, filepath.Join(binDir, "tidectld"), "--config", filepath.Join(c.dir, "tide.yaml"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.ctld = cmd
	c.eventually(10*time.Second, "controller answers", func() bool {
		_, err := c.api.Cluster(context.Background())
		return err == nil
	})
}

// tlsDir is node name's tls_dir.
func (c *cluster) tlsDir(name string) string { return filepath.Join(c.dir, "nodes", name+".tls") }

// joinNode joins node name to the cluster CA as an operator would: a
// one-time token from the controller, handed to tided join on its
// standard input.
func (c *cluster) joinNode(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := c.api.NodeToken(ctx, api.NodeTokenRequest{TTLS: 300, Node: name})
	if err != nil {
		c.t.Fatalf("join token for %s: %v", name, err)
	}
	cmd := c.onHostContext(ctx, name, nil, filepath.Join(binDir, "tided"), "--config", filepath.Join(c.dir, name+".yaml"), "join", "--token", "-")
	cmd.Stdin = strings.NewReader(tok.Token + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("tided join %s: %v\n%s", name, err, out)
	}
}

// startTided starts node name's tided, joining the node first when the
// cluster has TLS and it has no certificate yet (a restarted tided
// keeps the one in its tls_dir).
func (c *cluster) startTided(name string) {
	c.t.Helper()
	if c.tls {
		if _, err := os.Stat(filepath.Join(c.tlsDir(name), "node.pem")); err != nil {
			c.joinNode(name)
		}
	}
	log, _ := os.OpenFile(filepath.Join(c.dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	cmd := c.onHost(name, nil, filepath.Join(binDir, "tided"), "--config", filepath.Join(c.dir, name+".yaml"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.tided[name] = cmd
}

// kill stops a daemon: SIGKILL models a crash, SIGTERM a clean stop.
func kill(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func (c *cluster) stop() {
	// Cancel what still runs so no job process outlives the test.
	if c.ctld != nil && c.ctld.ProcessState == nil {
		ids := strings.Fields(c.cli("squeue", "-h", "-o", "%i").out)
		if len(ids) > 0 {
			c.cli(append([]string{"scancel"}, ids...)...)
			c.eventuallyQuiet(10*time.Second, func() bool {
				return strings.TrimSpace(c.cli("squeue", "-h", "-o", "%i").out) == ""
			})
		}
	}
	for _, cmd := range c.tided {
		kill(cmd, syscall.SIGTERM)
	}
	c.stopStandbys()
	if c.ctld != nil && c.ctld.ProcessState == nil {
		_ = c.ctld.Process.Signal(syscall.SIGCONT) // a chaos test may have paused it
	}
	kill(c.ctld, syscall.SIGTERM)
	// The nodes' shared job supervisors outlive tided by design; stop
	// each by the pid it recorded.
	for _, name := range c.nodes {
		stopSupervisor(c.t, stepd.ServePIDFile(stepd.ServeSocket(filepath.Join(c.dir, "nodes", name))))
	}
	if c.t.Failed() {
		for _, f := range append(c.controllerNames(), c.nodes...) {
			b, _ := os.ReadFile(filepath.Join(c.dir, f+".log"))
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			c.t.Logf("--- %s.log (tail)\n%s", f, b)
		}
	}
	os.RemoveAll(c.dir)
}

func (c *cluster) waitIdle() {
	c.t.Helper()
	c.eventually(20*time.Second, "all nodes idle", func() bool {
		nl, err := c.api.Nodes(context.Background())
		if err != nil || len(nl.Nodes) != len(c.nodes) {
			return false
		}
		for _, n := range nl.Nodes {
			if n.State != api.NodeIdle {
				return false
			}
		}
		return true
	})
}

func (c *cluster) eventually(d time.Duration, what string, f func() bool) {
	c.t.Helper()
	if !c.eventuallyQuiet(d, f) {
		c.t.Fatalf("timed out after %s waiting for: %s", d, what)
	}
}

func (c *cluster) eventuallyQuiet(d time.Duration, f func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if f() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return f()
}

type result struct {
	out, err string
	code     int
}

// cli runs a CLI command (by its Slurm name) in the cluster's work dir.
func (c *cluster) cli(args ...string) result { return c.cliAs(nil, c.workDir(), args...) }

func (c *cluster) workDir() string {
	w := filepath.Join(c.dir, "work")
	os.MkdirAll(w, 0o777)
	os.Chmod(w, 0o777)
	return w
}

// cliAs runs a command with an optional credential (tests as root submit
// as another user this way).
func (c *cluster) cliAs(cred *syscall.Credential, dir string, args ...string) result {
	cmd := c.command(cred, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("run %v: %v", args, err)
	}
	return result{out: out.String(), err: errb.String(), code: code}
}

// onHost returns a command that runs name args on host ("ctl",
// "login" or a node): in the host's namespace in the netns mode, as
// cred when not nil.
func (c *cluster) onHost(host string, cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	return c.onHostContext(context.Background(), host, cred, name, args...)
}

// onHostContext is onHost with a context that kills the command.
func (c *cluster) onHostContext(ctx context.Context, host string, cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	if c.hosts != nil {
		return c.hosts.command(ctx, host, cred, name, args...)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	return cmd
}

// command returns the command args (a CLI command by its Slurm name)
// as a user runs it, as cred when not nil, with its environment: on one
// host through the controller's unix socket, in the netns mode on the
// login node over TCP.
func (c *cluster) command(cred *syscall.Credential, args ...string) *exec.Cmd {
	return c.commandContext(context.Background(), cred, args...)
}

// commandContext is command with a context that kills it.
func (c *cluster) commandContext(ctx context.Context, cred *syscall.Credential, args ...string) *exec.Cmd {
	cmd := c.onHostContext(ctx, "login", cred, filepath.Join(binDir, args[0]), args[1:]...)
	cmd.Env = c.userEnv()
	return cmd
}

// userEnv is the environment of the commands: this process's plus what
// reaches the controller (see command).
func (c *cluster) userEnv() []string {
	if c.hosts != nil {
		return c.hosts.loginEnv(c.apiAddr, c.caFile)
	}
	return append(append(os.Environ(), c.caEnv()...), "TIDE_SOCKET="+c.sockets())
}

// submit writes script to the work dir and sbatches it, returning the id.
func (c *cluster) submit(script string, args ...string) uint64 {
	c.t.Helper()
	return c.submitAs(nil, script, args...)
}

func (c *cluster) submitAs(cred *syscall.Credential, script string, args ...string) uint64 {
	c.t.Helper()
	f, err := os.CreateTemp(c.workDir(), "job-*.sh")
	if err != nil {
		c.t.Fatal(err)
	}
	f.WriteString(script)
	f.Close()
	os.Chmod(f.Name(), 0o755)
	r := c.cliAs(cred, c.workDir(), append(append([]string{"sbatch", "--parsable"}, args...), f.Name())...)
	if r.code != 0 {
		c.t.Fatalf("sbatch failed (%d): %s%s", r.code, r.out, r.err)
	}
	var id uint64
	if _, err := fmt.Sscan(strings.TrimSpace(r.out), &id); err != nil {
		c.t.Fatalf("sbatch printed %q", r.out)
	}
	return id
}

// job returns the controller's record of id.
func (c *cluster) job(id uint64) api.Job {
	c.t.Helper()
	j, err := c.api.Job(context.Background(), id)
	if err != nil {
		c.t.Fatalf("job %d: %v", id, err)
	}
	return j
}

// waitState waits until job id is in state want.
func (c *cluster) waitState(id uint64, want api.JobState, d time.Duration) api.Job {
	c.t.Helper()
	var j api.Job
	c.eventually(d, fmt.Sprintf("job %d %s", id, want), func() bool {
		var err error
		j, err = c.api.Job(context.Background(), id)
		return err == nil && j.State == want
	})
	return j
}

func (c *cluster) waitTerminal(id uint64, d time.Duration) api.Job {
	c.t.Helper()
	var j api.Job
	c.eventually(d, fmt.Sprintf("job %d ends", id), func() bool {
		var err error
		j, err = c.api.Job(context.Background(), id)
		return err == nil && j.State.Terminal()
	})
	return j
}

// sacctLine is `sacct -X -j N -P -n --format=JobID,State,ExitCode`.
func (c *cluster) sacctLine(id uint64) string {
	return strings.TrimSpace(c.cli("sacct", "-X", "-j", fmt.Sprint(id), "-P", "-n", "--format=JobID,State,ExitCode").out)
}

func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie is as good as gone.
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// stopSupervisor kills the shared supervisor that recorded its identity
// in pidFile, if it still runs, and waits until it is gone.
func stopSupervisor(t *testing.T, pidFile string) {
	id, err := stepd.ReadIdentity(pidFile)
	if err != nil || !id.Alive() {
		return
	}
	_ = syscall.Kill(id.PID, syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); id.Alive() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if id.Alive() {
		t.Errorf("shared supervisor %d did not stop", id.PID)
	}
}

// caEnv is the commands' environment for the cluster CA: TIDE_CA
// (what they verify the controller with over TCP), none without TLS.
func (c *cluster) caEnv() []string {
	if !c.tls {
		return nil
	}
	return []string{"TIDE_CA=" + c.caFile}
}

// nodeHTTP is an HTTP client of node_addr and its base URL: over TLS
// that verifies the controller with the cluster CA (and presents no
// client certificate), or plain HTTP without TLS.
func (c *cluster) nodeHTTP() (*http.Client, string) {
	c.t.Helper()
	if !c.tls {
		return &http.Client{Timeout: 10 * time.Second}, fmt.Sprintf("http://%s:%d", c.ctlHost, c.port)
	}
	pool, err := pki.ReadPool(c.caFile)
	if err != nil {
		c.t.Fatal(err)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: pki.ControllerClient(pool, c.ctlHost, nil)}},
		fmt.Sprintf("https://%s:%d", c.ctlHost, c.port)
}

// dialStep connects to node's step listener at addr as srun does: over
// TLS that checks the node's certificate against the cluster CA, or
// plain TCP without TLS.
func (c *cluster) dialStep(t *testing.T, addr, node string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !c.tls {
		return conn
	}
	pool, err := pki.ReadPool(c.caFile)
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(conn, pki.NodeClient(pool, node))
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		conn.Close()
		t.Fatalf("TLS to %s's step listener: %v", node, err)
	}
	_ = tc.SetDeadline(time.Time{})
	return tc
}

// switchesYAML renders topology.switches entries, one switch s1 over
// nodes expr by default.
func switchesYAML(entries []string, expr string) string {
	if len(entries) == 0 {
		entries = []string{fmt.Sprintf(`{name: s1, nodes: "%s"}`, expr)}
	}
	var b strings.Builder
	for _, e := range entries {
		b.WriteString("    - " + e + "\n")
	}
	return b.String()
}
