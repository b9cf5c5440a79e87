package integration

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/tide-hpc/tide/internal/munge/mungetest"
)

// hostsEnv names the mode the suite's clusters run in: unset or
// "single" puts every daemon and command on this host's loopback, and
// the commands reach the controller through its unix socket; "netns"
// gives the controller, a login node and each compute node a network
// namespace of its own on a private bridge (as TIDE_HOSTS=netns does for
// make up), so that nothing but the network joins them: the commands
// run on the login node as their users and reach the controller over
// TCP with MUNGE credentials from the login node's munged, and the
// nodes reach it over TCP. `make test` runs the suite in both modes.
const hostsEnv = "TIDE_IT_HOSTS"

// netnsMode is whether this run's clusters are netns clusters.
var netnsMode = os.Getenv(hostsEnv) == "netns"

// netSeq numbers the netns clusters of this process: their bridge,
// links, namespaces and subnet.
var netSeq atomic.Int64

// hosts is a netns cluster's network: a bridge holding the test's own
// address (the operator's machine, from which the tests reach every
// daemon as before), and one namespace per host with its address.
type hosts struct {
	t      *testing.T
	net    string            // the first three octets of its /24
	bridge string            // the bridge's link name
	ns     map[string]string // host name -> namespace name
	addrs  map[string]string // host name -> address
	links  []string          // the bridge side of each host's veth pair

	// Each of the controller's host and the login node runs its own
	// munged; the two share one key, as the hosts of a real cluster do.
	ctlMunge, loginMunge *mungetest.Munged
}

// checkNetnsMode fails at once, saying why, when the netns mode cannot
// run here: it needs root, ip (iproute2), nsenter and setpriv
// (util-linux) and munged (munge).
func checkNetnsMode() error {
	if !netnsMode {
		return nil
	}
	if os.Getuid() != 0 {
		return fmt.Errorf("%s=netns needs root (it makes network namespaces)", hostsEnv)
	}
	for _, tool := range []string{"ip", "nsenter", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s=netns needs %s (Debian packages iproute2, util-linux): %w", hostsEnv, tool, err)
		}
	}
	if mungetest.Binary() == "" {
		return fmt.Errorf("%s=netns needs munged, one per host (Debian package munge)", hostsEnv)
	}
	return nil
}

// newHosts makes the network of a cluster of nodes: namespaces for
// "ctl", "login" and each node, each with a veth on the cluster's bridge,
// and the two munged daemons. Everything is removed when the test ends.
func newHosts(t *testing.T, nodes []string) *hosts {
	t.Helper()
	seq := netSeq.Add(1)
	// Link names are at most 15 bytes and must not meet another test
	// process's: the pid and the sequence number in base 36.
	tag := strconv.FormatInt(int64(os.Getpid()), 36) + "x" + strconv.FormatInt(seq, 36)
	h := &hosts{
		t:      t,
		net:    fmt.Sprintf("10.%d.%d", 100+seq/250, seq%250),
		bridge: "tb" + tag,
		ns:     map[string]string{},
		addrs:  map[string]string{},
	}
	if len(h.bridge) > 12 {
		t.Fatalf("netns: link names of %q are too long", tag)
	}
	t.Cleanup(h.remove)
	h.ip("link", "add", h.bridge, "type", "bridge")
	h.ip("addr", "add", h.net+".1/24", "dev", h.bridge)
	h.ip("link", "set", h.bridge, "up")
	all := append([]string{"ctl", "login"}, nodes...)
	for i, host := range all {
		ns := fmt.Sprintf("tide-it-%s-%s", tag, host)
		veth, peer := fmt.Sprintf("tv%sh%d", tag, i), fmt.Sprintf("tp%sh%d", tag, i)
		h.ns[host] = ns
		h.addrs[host] = h.hostAddr(host, i)
		h.ip("netns", "add", ns)
		h.links = append(h.links, veth)
		h.ip("link", "add", veth, "type", "veth", "peer", "name", peer)
		h.ip("link", "set", veth, "master", h.bridge, "up")
		h.ip("link", "set", peer, "netns", ns)
		h.ip("-n", ns, "link", "set", "lo", "up")
		h.ip("-n", ns, "link", "set", peer, "name", "eth0")
		h.ip("-n", ns, "addr", "add", h.addrs[host]+"/24", "dev", "eth0")
		h.ip("-n", ns, "link", "set", "eth0", "up")
	}
	key := make([]byte, mungetest.KeyLen)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	h.ctlMunge = mungetest.StartWithKey(t, key)
	h.loginMunge = mungetest.StartWithKey(t, key)
	return h
}

// hostAddr is host's address: the controller .2, the login node .3,
// node gpuNN .(10+NN) (the i-th host otherwise).
func (h *hosts) hostAddr(host string, i int) string {
	switch host {
	case "ctl":
		return h.net + ".2"
	case "login":
		return h.net + ".3"
	}
	if k, err := strconv.Atoi(strings.TrimPrefix(host, "gpu")); err == nil && strings.HasPrefix(host, "gpu") && k < 240 {
		return fmt.Sprintf("%s.%d", h.net, 10+k)
	}
	return fmt.Sprintf("%s.%d", h.net, 250-i)
}

// addr is host's address.
func (h *hosts) addr(host string) string {
	a, ok := h.addrs[host]
	if !ok {
		h.t.Fatalf("netns: no host %q", host)
	}
	return a
}

// command returns a command that runs name args in host's network
// namespace: nsenter --net (not `ip netns exec`, whose fresh /sys has no
// cgroups) execs it, so the process started is the command's own and
// is stopped by its pid. With cred, setpriv drops to that user first.
func (h *hosts) command(ctx context.Context, host string, cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	ns, ok := h.ns[host]
	if !ok {
		h.t.Fatalf("netns: no host %q", host)
	}
	argv := []string{"--net=/run/netns/" + ns, "--"}
	if cred != nil {
		groups := "--clear-groups"
		if len(cred.Groups) > 0 {
			g := make([]string, len(cred.Groups))
			for i, v := range cred.Groups {
				g[i] = strconv.FormatUint(uint64(v), 10)
			}
			groups = "--groups=" + strings.Join(g, ",")
		}
		argv = append(argv, "setpriv", fmt.Sprintf("--reuid=%d", cred.Uid), fmt.Sprintf("--regid=%d", cred.Gid), groups, "--")
	}
	return exec.CommandContext(ctx, "nsenter", append(append(argv, name), args...)...)
}

// loginEnv is the environment of the commands run on the login node:
// this process's, less its TIDE_ settings, plus the controller's api_addr,
// the login node's munged and the cluster CA.
func (h *hosts) loginEnv(apiAddr, caFile string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TIDE_") {
			env = append(env, kv)
		}
	}
	env = append(env, "TIDE_CONTROLLER="+apiAddr, "TIDE_MUNGE_SOCKET="+h.loginMunge.Socket)
	if caFile != "" {
		env = append(env, "TIDE_CA="+caFile)
	}
	return env
}

// ip runs ip args, failing the test on an error.
func (h *hosts) ip(args ...string) {
	h.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		h.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// remove deletes the cluster's namespaces and links (its daemons are
// stopped by then: the cluster's cleanup ran first). Deleting a
// namespace deletes the veth ends in it and so their peers.
func (h *hosts) remove() {
	for _, ns := range h.ns {
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
	for _, l := range h.links {
		_ = exec.Command("ip", "link", "del", l).Run()
	}
	_ = exec.Command("ip", "link", "del", h.bridge).Run()
}

// nodeHost is node's address: its namespace's in the netns mode, the
// loopback otherwise.
func (c *cluster) nodeHost(node string) string {
	if c.hosts == nil {
		return "127.0.0.1"
	}
	return c.hosts.addr(node)
}

// onlyOnce skips a test in the netns mode's pass: a test that starts its
// own cluster with the dev scripts (which have a netns mode of their
// own) checks the same in both passes.
func onlyOnce(t *testing.T) {
	t.Helper()
	if netnsMode {
		t.Skipf("%s=netns: this test starts its own cluster with the dev scripts; the single-host pass runs it", hostsEnv)
	}
}
