package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
	"github.com/tide-hpc/tide/noded/cgroup"
)

// stepCluster is a two-node cluster whose nodes accept steps.
func stepCluster(t *testing.T) *cluster {
	t.Helper()
	return newClusterOpts(t, clusterOpts{nodes: 2})
}

// batchOutput submits script (with srun on its PATH) and returns the
// finished job and its output file.
func (c *cluster) batchOutput(script string, args ...string) (api.Job, string) {
	c.t.Helper()
	script = strings.Replace(script, "\n", fmt.Sprintf("\nexport PATH=%s:$PATH\n", binDir), 1)
	id := c.submit(script, append([]string{"-o", "step-%j.out"}, args...)...)
	j := c.waitTerminal(id, 90*time.Second)
	b, err := os.ReadFile(filepath.Join(c.workDir(), fmt.Sprintf("step-%d.out", id)))
	if err != nil {
		c.t.Fatal(err)
	}
	return j, string(b)
}

// TestStepInAllocation covers srun inside batch jobs: labelled output
// from every node, the per-task environment of a 16-GPU job over two
// nodes, exit codes and --kill-on-bad-exit.
func TestStepInAllocation(t *testing.T) {
	c := stepCluster(t)

	t.Run("srun -l hostname prints one labelled line per task from both nodes", func(t *testing.T) {
		host, _ := os.Hostname()
		j, out := c.batchOutput("#!/bin/sh\nsrun -l hostname | sort\nsrun -l printenv SLURMD_NODENAME | sort\n", "-N2")
		if j.State != api.StateCompleted {
			t.Fatalf("job %s %s, output:\n%s", j.State, j.Exit, out)
		}
		want := fmt.Sprintf("0: %s\n1: %s\n0: gpu01\n1: gpu02\n", host, host)
		if out != want {
			t.Fatalf("output:\n%s\nwant:\n%s", out, want)
		}
		got := strings.TrimSpace(c.cli("sacct", "-j", fmt.Sprint(j.ID), "-P", "-n", "--format=JobID,JobName,State,ExitCode,NTasks").out)
		wantAcct := fmt.Sprintf("%[1]d|%[2]s|COMPLETED|0:0|\n%[1]d.batch|batch|COMPLETED|0:0|1\n%[1]d.0|hostname|COMPLETED|0:0|2\n%[1]d.1|printenv|COMPLETED|0:0|2", j.ID, j.Name)
		if got != wantAcct {
			t.Fatalf("sacct:\n%s\nwant:\n%s", got, wantAcct)
		}
	})

	t.Run("16 GPUs over two nodes: RANK WORLD_SIZE LOCAL_RANK CUDA_VISIBLE_DEVICES per task", func(t *testing.T) {
		script := "#!/bin/sh\nsrun --gpus-per-task=1 -n 16 sh -c 'echo task $SLURM_PROCID $RANK $WORLD_SIZE $LOCAL_RANK $SLURM_LOCALID $CUDA_VISIBLE_DEVICES $SLURMD_NODENAME $SLURM_NTASKS $MASTER_ADDR $SLURM_STEP_NODELIST'\n"
		j, out := c.batchOutput(script, "-N2", "--ntasks-per-node=8", "--gpus-per-task=1")
		if j.State != api.StateCompleted {
			t.Fatalf("job %s, output:\n%s", j.State, out)
		}
		gpus := map[string][]int{}
		for _, a := range j.Alloc {
			gpus[a.Node] = a.GPUs
		}
		seenRank := map[int]bool{}
		seenGPU := map[string]bool{}
		perNode := map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) != 11 || f[0] != "task" {
				t.Fatalf("bad line %q in:\n%s", line, out)
			}
			procid, _ := strconv.Atoi(f[1])
			local, _ := strconv.Atoi(f[4])
			node := f[7]
			switch {
			case f[2] != f[1]:
				t.Errorf("RANK %s != SLURM_PROCID %s", f[2], f[1])
			case f[3] != "16" || f[8] != "16":
				t.Errorf("WORLD_SIZE %s SLURM_NTASKS %s, want 16", f[3], f[8])
			case f[4] != f[5]:
				t.Errorf("LOCAL_RANK %s != SLURM_LOCALID %s", f[4], f[5])
			case f[9] != c.nodeHost(j.Alloc[0].Node) || f[10] != "gpu[01-02]":
				t.Errorf("MASTER_ADDR %s SLURM_STEP_NODELIST %s", f[9], f[10])
			}
			// Block distribution: ranks 0-7 on the first node.
			wantNode := j.Alloc[procid/8].Node
			if node != wantNode || local != procid%8 {
				t.Errorf("rank %d on %s local %d, want %s local %d", procid, node, local, wantNode, procid%8)
			}
			if g, err := strconv.Atoi(f[6]); err != nil || g != gpus[node][local] {
				t.Errorf("rank %d CUDA_VISIBLE_DEVICES %q, want %d", procid, f[6], gpus[node][local])
			}
			if seenGPU[node+"/"+f[6]] || seenRank[procid] {
				t.Errorf("rank %d or GPU %s/%s seen twice", procid, node, f[6])
			}
			seenRank[procid], seenGPU[node+"/"+f[6]] = true, true
			perNode[node]++
		}
		if len(seenRank) != 16 || len(perNode) != 2 {
			t.Fatalf("%d ranks over %d nodes, want 16 over 2:\n%s", len(seenRank), len(perNode), out)
		}
	})

	t.Run("exit codes propagate and --kill-on-bad-exit stops the others", func(t *testing.T) {
		script := `#!/bin/sh
srun -N2 sh -c 'exit $((SLURM_PROCID + 3))'
echo rc=$?
srun -n1 sh -c 'kill -9 $$'
echo rc=$?
srun -K -N2 sh -c 'if [ $SLURM_PROCID = 1 ]; then exit 5; fi; sleep 300; echo survived'
echo rc=$?
`
		j, out := c.batchOutput(script, "-N2")
		if j.State != api.StateCompleted {
			t.Fatalf("job %s, output:\n%s", j.State, out)
		}
		var rcs []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "rc=") {
				rcs = append(rcs, l)
			}
		}
		if got := strings.Join(rcs, " "); got != "rc=4 rc=137 rc=5" || strings.Contains(out, "survived") {
			t.Fatalf("exit codes %q, output:\n%s", got, out)
		}
	})
}

// TestStepOutsideAllocation covers srun without an allocation, sacct's
// step rows and salloc driven through a pseudo-terminal.
func TestStepOutsideAllocation(t *testing.T) {
	c := stepCluster(t)

	t.Run("srun asks for an allocation, runs the step and releases it", func(t *testing.T) {
		r := c.cli("srun", "-N2", "-l", "-J", "envtest", "printenv", "SLURMD_NODENAME")
		if r.code != 0 {
			t.Fatalf("srun exit %d: %s%s", r.code, r.out, r.err)
		}
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		sort.Strings(lines)
		if got := strings.Join(lines, "|"); got != "0: gpu01|1: gpu02" {
			t.Fatalf("output %q (stderr %q)", r.out, r.err)
		}
		id := lastJob(t, c)
		j := c.waitTerminal(id, 30*time.Second)
		if j.State != api.StateCompleted || !j.Allocation {
			t.Fatalf("allocation job %d: %s allocation=%v", id, j.State, j.Allocation)
		}
		got := strings.TrimSpace(c.cli("sacct", "-j", fmt.Sprint(id), "-P", "-n", "--format=JobID,JobName,State,ExitCode,NodeList,NTasks").out)
		want := fmt.Sprintf("%d|envtest|COMPLETED|0:0|gpu[01-02]|\n%d.0|envtest|COMPLETED|0:0|gpu[01-02]|2", id, id)
		if got != want {
			t.Fatalf("sacct:\n%s\nwant:\n%s", got, want)
		}
	})

	t.Run("srun exits with the task's code and the allocation FAILED", func(t *testing.T) {
		r := c.cli("srun", "sh", "-c", "echo to-stderr >&2; exit 7")
		if r.code != 7 || !strings.Contains(r.err, "to-stderr") {
			t.Fatalf("srun exit %d, stderr %q", r.code, r.err)
		}
		id := lastJob(t, c)
		if j := c.waitTerminal(id, 30*time.Second); j.State != api.StateFailed || j.Exit.Code != 7 {
			t.Fatalf("job %d: %s %s", id, j.State, j.Exit)
		}
	})

	t.Run("salloc through a pseudo-terminal", func(t *testing.T) {
		out, code := c.salloc(t, "echo JOBID=$SLURM_JOB_ID NODES=$SLURM_JOB_NODELIST\nexit\n", "-N2")
		m := regexp.MustCompile(`JOBID=(\d+) NODES=gpu\[01-02\]`).FindStringSubmatch(out)
		if code != 0 || m == nil {
			t.Fatalf("salloc exit %d, terminal:\n%s", code, out)
		}
		id, _ := strconv.ParseUint(m[1], 10, 64)
		if j := c.waitTerminal(id, 30*time.Second); j.State != api.StateCompleted {
			t.Fatalf("job %d: %s", id, j.State)
		}
	})

	t.Run("srun --pty gives a terminal on the first node", func(t *testing.T) {
		out, code := c.onTerminal(t, "tty; echo PTY=$SLURM_PROCID:$SLURMD_NODENAME\nexit 3\n", "srun", "--pty", "-N2", "/bin/sh")
		if code != 3 || !regexp.MustCompile(`(?m)/dev/pts/\d+\r?$`).MatchString(out) || !strings.Contains(out, "PTY=0:gpu01") {
			t.Fatalf("srun --pty exit %d, terminal:\n%s", code, out)
		}
	})

	t.Run("srun inside salloc runs a step of the allocation", func(t *testing.T) {
		out, code := c.salloc(t, fmt.Sprintf("%s/srun -l printenv SLURM_JOB_ID SLURM_STEP_ID | sort; exit\n", binDir), "-N2")
		m := regexp.MustCompile(`(?m)^0: (\d+)\r?$`).FindStringSubmatch(out)
		if code != 0 || m == nil || !regexp.MustCompile(`(?m)^1: 0\r?$`).MatchString(out) {
			t.Fatalf("salloc exit %d, terminal:\n%s", code, out)
		}
	})
}

// lastJob is the highest job id the controller knows.
func lastJob(t *testing.T, c *cluster) uint64 {
	t.Helper()
	ids := strings.Fields(c.cli("squeue", "-h", "-t", "all", "-o", "%i").out)
	var top uint64
	for _, s := range ids {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil && n > top {
			top = n
		}
	}
	if top == 0 {
		t.Fatal("no jobs")
	}
	return top
}

// salloc runs salloc args in a new pseudo-terminal, types input into it
// and returns everything the terminal showed and salloc's exit code.
func (c *cluster) salloc(t *testing.T, input string, args ...string) (string, int) {
	t.Helper()
	return c.onTerminal(t, input, "salloc", args...)
}

// onTerminal runs prog args in a new pseudo-terminal (its controlling
// terminal), types input and returns what the terminal showed and the
// exit code.
func (c *cluster) onTerminal(t *testing.T, input, prog string, args ...string) (string, int) {
	t.Helper()
	cmd := c.command(nil, append([]string{prog}, args...)...)
	cmd.Dir = c.workDir()
	cmd.Env = append(cmd.Env, "SHELL=/bin/sh", "PS1=$ ", "ENV=")
	return runOnPty(t, cmd, input)
}

// runOnPty runs cmd in a new pseudo-terminal (its controlling
// terminal), types input and returns what the terminal showed and the
// exit code; a command that has not ended after 90 s fails the test.
func runOnPty(t *testing.T, cmd *exec.Cmd, input string) (string, int) {
	t.Helper()
	master, slave := openTestPty(t)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var mu sync.Mutex
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			mu.Lock()
			buf.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	io.WriteString(master, input)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case <-waited:
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		<-waited
		mu.Lock()
		t.Fatalf("%v did not end; terminal:\n%s", cmd.Args, buf.String())
	}
	<-done
	master.Close()
	return buf.String(), cmd.ProcessState.ExitCode()
}

// openTestPty opens a pseudo-terminal pair.
func openTestPty(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	master := os.NewFile(uintptr(fd), "ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, slave
}

// TestStepCgroups runs a 2-node job's srun tasks inside the job's
// fences: on the batch node in the job cgroup the supervisor made, on
// the other in a job cgroup tided makes for the step (job_<id>/step_<s>),
// removed when the step ends. Both nodes run on this host, so each gets
// a cgroup parent of its own, as two hosts would have.
func TestStepCgroups(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("job cgroups need tided to run as root")
	}
	h, err := cgroup.Detect(cgroup.DefaultRoot)
	if err != nil || !h.Has(cgroup.Memory) {
		t.Skipf("no usable cgroups here: %v", err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	parent := "tide-it-steps-" + hex.EncodeToString(b)
	for _, p := range []string{parent, parent + "/gpu01", parent + "/gpu02"} {
		if err := h.Prepare(p); err != nil {
			t.Skipf("cgroups not usable here: %v", err)
		}
	}
	t.Cleanup(func() {
		for _, p := range []string{parent + "/gpu02", parent + "/gpu01", parent} {
			h.RemoveParent(p)
		}
	})
	c := newClusterOpts(t, clusterOpts{nodes: 2, nodeYAML: fmt.Sprintf("cgroups: required\ncgroup_parent: %s/gpu01\n", parent)})
	// gpu02 gets its own parent: restart it with that configuration and
	// wait until the controller has its new step listener.
	old := nodeStepAddr(t, c, "gpu02")
	kill(c.tided["gpu02"], syscall.SIGTERM)
	cfgPath := filepath.Join(c.dir, "gpu02.yaml")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(string(cfg), parent+"/gpu01", parent+"/gpu02", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	c.startTided("gpu02")
	c.eventually(30*time.Second, "gpu02 registered again", func() bool {
		a := nodeStepAddr(t, c, "gpu02")
		return a != "" && a != old
	})
	c.waitIdle()

	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	script := fmt.Sprintf("#!/bin/sh\nexport PATH=%s:$PATH\nsrun -l cat /proc/self/cgroup\n", binDir)
	id := c.submitAs(nobody, script, "-N2", "-o", "stepcg-%j.out")
	j := c.waitTerminal(id, 90*time.Second)
	out, _ := os.ReadFile(filepath.Join(c.workDir(), fmt.Sprintf("stepcg-%d.out", id)))
	if j.State != api.StateCompleted {
		t.Fatalf("job %s %s, output:\n%s", j.State, j.Exit, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		label, rest, ok := strings.Cut(line, ": ")
		if i := strings.Index(rest, "/"+parent+"/"); ok && i >= 0 {
			got[label] = rest[i+1:]
		}
	}
	job := cgroup.JobName(id)
	want := map[string]string{
		"0": parent + "/gpu01/" + job,
		"1": parent + "/gpu02/" + job + "/step_0",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("tasks in cgroups %v, want %v; output:\n%s", got, want, out)
	}
	c.eventually(10*time.Second, "step's job cgroup on gpu02 removed", func() bool {
		for _, d := range cgDirs(h, parent+"/gpu02/"+job) {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				return false
			}
		}
		return true
	})
}

// nodeStepAddr is the step listener the controller has for node name.
func nodeStepAddr(t *testing.T, c *cluster, name string) string {
	t.Helper()
	nl, err := c.api.Nodes(context.Background())
	if err != nil {
		return ""
	}
	for _, n := range nl.Nodes {
		if n.Name == name {
			return n.StepAddr
		}
	}
	return ""
}
