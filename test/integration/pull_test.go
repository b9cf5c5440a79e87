package integration

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// registry is a distribution registry (Debian's docker-registry) on
// 127.0.0.1, speaking plain HTTP, with its storage and access log in a
// temporary directory.
type registry struct {
	host string // 127.0.0.1:PORT
	log  string
}

// startRegistry starts docker-registry on a free port and stops it by
// its pid at cleanup; the test is skipped where it is not installed.
func startRegistry(t *testing.T) *registry {
	t.Helper()
	return startRegistryAt(t, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
}

// needRegistry skips the test where docker-registry is not installed.
func needRegistry(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		t.Skip("docker-registry is not installed (apt-get install docker-registry): no registry to pull from")
	}
	return bin
}

// startRegistryAt is startRegistry on a given host:port.
func startRegistryAt(t *testing.T, host string) *registry {
	t.Helper()
	bin := needRegistry(t)
	dir := t.TempDir()
	r := &registry{host: host, log: filepath.Join(dir, "registry.log")}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: %s/data
  delete:
    enabled: true
http:
  addr: %s
`, dir, r.host)
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", filepath.Join(dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start docker-registry: %v", err)
	}
	t.Cleanup(func() {
		kill(cmd, syscall.SIGTERM)
		logf.Close()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + r.host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(r.log)
			t.Fatalf("docker-registry does not answer on %s: %v\n%s", r.host, err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tagLookups counts the registry's answers to lookups of repo:tag (a
// pull resolves the tag once; the rest goes by digest) after offset
// bytes of its access log.
func (r *registry) tagLookups(t *testing.T, repo, tag string, offset int) int {
	b, err := os.ReadFile(r.log)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b[offset:]), "\n") {
		for _, m := range []string{"HEAD", "GET"} {
			if strings.Contains(line, fmt.Sprintf(`"%s /v2/%s/manifests/%s HTTP/`, m, repo, tag)) {
				n++
			}
		}
	}
	return n
}

func (r *registry) logSize(t *testing.T) int {
	fi, err := os.Stat(r.log)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Size())
}

// TestPullContainerImage: a job whose image is not on the node has it
// pulled from a registry (here a local one, pushed to with "tide image
// push"): two jobs wanting it at once share one pull, and an image the
// registry lacks fails the launch with the registry's reason.
func TestPullContainerImage(t *testing.T) {
	sock := os.Getenv(containerEnv)
	if sock == "" {
		t.Skipf("%s is not set: pulls need a containerd (see TestContainerJobs)", containerEnv)
	}
	if os.Getuid() != 0 {
		t.Skip("container jobs need tided to run as root")
	}
	reg := startRegistry(t)
	b := make([]byte, 4)
	rand.Read(b)
	ns := "tide-pull-" + hex.EncodeToString(b)
	snap := os.Getenv("TIDE_SNAPSHOTTER")
	if snap == "" {
		snap = "overlayfs"
	}
	// On loopback in the netns pass too: the registry serves on this
	// host's 127.0.0.1, and the pulls (not the hosts) are under test.
	c := newClusterOpts(t, clusterOpts{nodes: 1, singleHost: true, nodeYAML: fmt.Sprintf("containerd: {socket: %s, namespace: %s, snapshotter: %s, insecure_registries: [%q]}\n",
		sock, ns, snap, reg.host)})
	image := reg.host + "/tide-test/pulled:latest"
	admin := func(args ...string) result {
		return c.cli(append([]string{"tide", "image", "--containerd-socket", sock, "--namespace", ns, "--snapshotter", snap}, args...)...)
	}
	t.Cleanup(func() { admin("rm", image) })

	// Put the busybox image into the registry through containerd, then
	// forget it locally.
	tar := filepath.Join(c.dir, "pulled.tar")
	if out, err := exec.Command("../../scripts/build-test-image.sh", tar, image).CombinedOutput(); err != nil {
		t.Fatalf("build test image: %v\n%s", err, out)
	}
	if r := admin("import", tar); r.code != 0 || !strings.Contains(r.out, "imported "+image) {
		t.Fatalf("tide image import: %d %s%s", r.code, r.out, r.err)
	}
	if r := admin("push", "--insecure-registry", reg.host, image); r.code != 0 || !strings.Contains(r.out, "pushed "+image+" as "+image) {
		t.Fatalf("tide image push: %d %s%s", r.code, r.out, r.err)
	}
	if r := admin("rm", image); r.code != 0 {
		t.Fatalf("tide image rm: %d %s%s", r.code, r.out, r.err)
	}
	if r := admin("ls"); strings.Contains(r.out, image) {
		t.Fatalf("image still on the node after rm:\n%s", r.out)
	}

	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	wd := c.workDir()

	t.Run("jobs pull the image once and run in it", func(t *testing.T) {
		offset := reg.logSize(t)
		script := "#!/bin/sh\necho \"pulled job $SLURM_JOB_ID uid=$(id -u) $(cat /etc/passwd | wc -l)\"\n"
		ids := []uint64{
			c.submitAs(nobody, script, "--container-image="+reg.host+"/tide-test/pulled", "-o", "pull-%j.out"),
			c.submitAs(nobody, script, "--container-image="+image, "-o", "pull-%j.out"),
		}
		for _, id := range ids {
			j := c.waitTerminal(id, 120*time.Second)
			if j.State != api.StateCompleted {
				ev := c.cli("tide", "events", strconv.FormatUint(id, 10))
				t.Fatalf("job %d: state %s reason %s\n%s", id, j.State, j.Reason, ev.out)
			}
			want := fmt.Sprintf("pulled job %d uid=65534 2\n", id)
			if got, _ := os.ReadFile(filepath.Join(wd, fmt.Sprintf("pull-%d.out", id))); string(got) != want {
				t.Fatalf("job %d output %q, want %q", id, got, want)
			}
		}
		if n := reg.tagLookups(t, "tide-test/pulled", "latest", offset); n != 1 {
			t.Fatalf("the registry was asked for tide-test/pulled:latest %d times, want 1 (one shared pull)", n)
		}
		if r := admin("ls"); !strings.Contains(r.out, image) {
			t.Fatalf("pulled image not listed:\n%s%s", r.out, r.err)
		}
		if log, _ := os.ReadFile(filepath.Join(c.dir, "gpu01.log")); !strings.Contains(string(log), "image pulled") {
			t.Fatalf("tided did not log the pull:\n%s", log)
		}
	})

	t.Run("an image the registry lacks fails the launch", func(t *testing.T) {
		id := c.submitAs(nobody, "#!/bin/sh\necho never\n", "--container-image="+reg.host+"/tide-test/missing:1")
		j := c.waitTerminal(id, 60*time.Second)
		if j.State != api.StateFailed || j.Reason != api.ReasonLaunchFailed {
			t.Fatalf("state %s reason %s", j.State, j.Reason)
		}
		ev := c.cli("tide", "events", strconv.FormatUint(id, 10))
		if want := "pull " + reg.host + "/tide-test/missing:1: "; !strings.Contains(ev.out, want) || !strings.Contains(ev.out, "not found") {
			t.Fatalf("events do not say %q ... not found:\n%s", want, ev.out)
		}
	})

	t.Run("tide image pull fetches ahead of jobs", func(t *testing.T) {
		admin("rm", image)
		r := admin("pull", "--insecure-registry", reg.host, reg.host+"/tide-test/pulled")
		if r.code != 0 || !strings.Contains(r.out, "pulled "+image) {
			t.Fatalf("tide image pull: %d %s%s", r.code, r.out, r.err)
		}
	})
}

// TestContainerCDI: on a node whose CDI specs define its GPUs, a
// container job's GPU comes with the spec's device node, mount,
// variables and hook (the fake GPUs are /dev/null underneath).
func TestContainerCDI(t *testing.T) {
	dir, err := os.MkdirTemp("", "tide-it-cdi-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	c := ctrClusterKeys(t, func() string {
		cdiDir := filepath.Join(dir, "cdi")
		os.MkdirAll(cdiDir, 0o755)
		os.WriteFile(filepath.Join(dir, "cdi-lib.txt"), []byte("fake-libcuda\n"), 0o644)
		var devs []string
		for i := range 8 {
			devs = append(devs, fmt.Sprintf(`{"name": "%d", "containerEdits": {"env": ["CDI_GPU=%d"],
 "deviceNodes": [{"path": "/dev/nvidia-fake%d", "hostPath": "/dev/null"}]}}`, i, i, i))
		}
		spec := fmt.Sprintf(`{"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [%s],
 "containerEdits": {"env": ["CDI_SPEC=yes"],
  "mounts": [{"hostPath": "%s/cdi-lib.txt", "containerPath": "/usr/lib/cdi-lib.txt", "options": ["ro", "nosuid", "nodev", "bind"]}],
  "hooks": [{"hookName": "createRuntime", "path": "/bin/sh", "args": ["sh", "-c", "touch %s/hook-ran"]}]}}`,
			strings.Join(devs, ","), dir, dir)
		os.WriteFile(filepath.Join(cdiDir, "nvidia.json"), []byte(spec), 0o644)
		return fmt.Sprintf("cdi_spec_dirs: [%q]", cdiDir)
	}())
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	script := "#!/bin/sh\necho \"spec=$CDI_SPEC lib=$(cat /usr/lib/cdi-lib.txt)\"\ntest -c /dev/nvidia-fake$CDI_GPU && echo \"gpu $CDI_GPU is a device\"\n"
	id := c.submitAs(nobody, script, "--container-image=tide-test/bb", "--gres=gpu:1", "-o", "cdi-%j.out")
	j := c.waitTerminal(id, 60*time.Second)
	out, _ := os.ReadFile(filepath.Join(c.workDir(), fmt.Sprintf("cdi-%d.out", id)))
	if j.State != api.StateCompleted {
		ev := c.cli("tide", "events", strconv.FormatUint(id, 10))
		t.Fatalf("state %s reason %s; output %q\n%s", j.State, j.Reason, out, ev.out)
	}
	if !strings.HasPrefix(string(out), "spec=yes lib=fake-libcuda\ngpu ") || !strings.HasSuffix(string(out), " is a device\n") {
		t.Fatalf("output %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "hook-ran")); err != nil {
		t.Fatalf("the spec's createRuntime hook did not run: %v", err)
	}
}

// ctrClusterKeys is ctrCluster (a one-node cluster on the test
// containerd with the busybox image imported) with more containerd keys,
// given as YAML flow-mapping entries ("pull: never, auth_file: /x").
func ctrClusterKeys(t *testing.T, keys string) *cluster {
	t.Helper()
	sock := os.Getenv(containerEnv)
	if sock == "" {
		t.Skipf("%s is not set: container jobs need a containerd (see TestContainerJobs)", containerEnv)
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
	// On loopback in the netns pass too: these tests' registries serve
	// on this host's 127.0.0.1.
	c := newClusterOpts(t, clusterOpts{nodes: 1, singleHost: true, nodeYAML: fmt.Sprintf("containerd: {socket: %s, namespace: %s, snapshotter: %s, %s}\n", sock, ns, snap, keys)})
	tar := filepath.Join(c.dir, "bb.tar")
	if out, err := exec.Command("../../scripts/build-test-image.sh", tar).CombinedOutput(); err != nil {
		t.Fatalf("build test image: %v\n%s", err, out)
	}
	admin := []string{"tide", "image", "--containerd-socket", sock, "--namespace", ns, "--snapshotter", snap}
	if r := c.cli(append(admin, "import", tar)...); r.code != 0 || !strings.Contains(r.out, "imported docker.io/tide-test/bb:latest") {
		t.Fatalf("tide image import: %d %s%s", r.code, r.out, r.err)
	}
	t.Cleanup(func() { c.cli(append(admin, "rm", "tide-test/bb")...) })
	return c
}

// TestPullResumesAfterRestart: tided killed while a job waits for its
// image pulls again when it comes back, and the job runs. The registry
// first hangs (a listener that never answers), then is a real one on
// the same port.
func TestPullResumesAfterRestart(t *testing.T) {
	needRegistry(t)
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := hole.Addr().String()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			conn, err := hole.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn) // held open, never answered
			mu.Unlock()
		}
	}()
	closeHole := func() {
		hole.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
	}
	t.Cleanup(closeHole)
	c := ctrClusterKeys(t, fmt.Sprintf("insecure_registries: [%q]", host))
	image := host + "/tide-test/later:latest"
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	id := c.submitAs(nobody, "#!/bin/sh\necho \"ran after the restart $SLURM_JOB_ID\"\n", "--container-image="+image, "-o", "later-%j.out")
	c.waitState(id, api.StateRunning, 30*time.Second)
	logPath := filepath.Join(c.dir, "gpu01.log")
	c.eventually(30*time.Second, "tided pulling", func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "pulling it")
	})
	kill(c.tided["gpu01"], syscall.SIGKILL)
	closeHole()

	reg := startRegistryAt(t, host)
	sock, ns, snap := os.Getenv(containerEnv), ctrNamespace(t, c), os.Getenv("TIDE_SNAPSHOTTER")
	if snap == "" {
		snap = "overlayfs"
	}
	admin := func(args ...string) result {
		return c.cli(append([]string{"tide", "image", "--containerd-socket", sock, "--namespace", ns, "--snapshotter", snap}, args...)...)
	}
	tar := filepath.Join(c.dir, "later.tar")
	if out, err := exec.Command("../../scripts/build-test-image.sh", tar, image).CombinedOutput(); err != nil {
		t.Fatalf("build test image: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"import", tar}, {"push", "--insecure-registry", reg.host, image}, {"rm", image}} {
		if r := admin(args...); r.code != 0 {
			t.Fatalf("tide image %s: %d %s%s", args[0], r.code, r.out, r.err)
		}
	}
	t.Cleanup(func() { admin("rm", image) })

	c.startTided("gpu01")
	j := c.waitTerminal(id, 120*time.Second)
	if j.State != api.StateCompleted {
		ev := c.cli("tide", "events", strconv.FormatUint(id, 10))
		t.Fatalf("state %s reason %s\n%s", j.State, j.Reason, ev.out)
	}
	if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "pulling again") {
		t.Fatalf("the restarted tided did not resume the pull:\n%s", b)
	}
	want := fmt.Sprintf("ran after the restart %d\n", id)
	if got, _ := os.ReadFile(filepath.Join(c.workDir(), fmt.Sprintf("later-%d.out", id))); string(got) != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}

// ctrNamespace reads the containerd namespace of the cluster's node
// from its configuration.
func ctrNamespace(t *testing.T, c *cluster) string {
	b, err := os.ReadFile(filepath.Join(c.dir, "gpu01.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "namespace: ")
	if !ok {
		t.Fatal("no containerd namespace in gpu01.yaml")
	}
	ns, _, _ := strings.Cut(rest, ",")
	return strings.TrimSpace(ns)
}
