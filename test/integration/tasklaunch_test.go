package integration

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestTaskLaunch covers how a node starts a step's tasks as Slurm's
// slurmstepd does (issue 22, from Slurm's own tests 116_6, 116_8,
// 116_12, 116_19, 116_20, 116_36, 116_37): a program that cannot run
// fails as its execve would, srun's umask and resource limits reach the
// tasks, --slurmd-debug's lines, --debugger-test's held tasks and
// process table, and a task epilog's background child.
func TestTaskLaunch(t *testing.T) {
	c := stepCluster(t)

	t.Run("a missing program fails each task with execve's error in its own error file", func(t *testing.T) {
		dir := c.workDir()
		r := c.cli("srun", "-n2", "-e", "noexec.%t.err", "/bad/bad/bad")
		if r.code != 2 || !strings.Contains(r.err, "task 0: Exited with exit code 2") || !strings.Contains(r.err, "task 1: Exited with exit code 2") {
			t.Fatalf("exit %d, stderr:\n%s", r.code, r.err)
		}
		for _, task := range []string{"0", "1"} {
			b, err := os.ReadFile(filepath.Join(dir, "noexec."+task+".err"))
			if err != nil || string(b) != "slurmstepd: error: execve(): /bad/bad/bad: No such file or directory\n" {
				t.Errorf("task %s's error file %q, %v", task, b, err)
			}
		}
		r = c.cli("srun", "no-such-command-anywhere")
		if r.code != 2 || !strings.Contains(r.err, "slurmstepd: error: execve(): no-such-command-anywhere: No such file or directory") {
			t.Fatalf("command not in PATH: exit %d, stderr:\n%s", r.code, r.err)
		}
	})

	t.Run("srun's umask and soft limits reach the tasks, and the variables do not", func(t *testing.T) {
		j, out := c.batchOutput("#!/bin/sh\numask 027\nulimit -S -c 0\nulimit -S -n 100\n"+
			"srun -n1 sh -c 'echo umask=$(umask) core=$(ulimit -c) nofile=$(ulimit -n) vars=$(env | grep -c ^SLURM_RLIMIT_)'\n"+
			"srun -n1 --propagate=NONE sh -c 'echo none nofile=$(ulimit -n)'\n", "-N1")
		if j.State != api.StateCompleted || !strings.Contains(out, "umask=0027 core=0 nofile=100 vars=0") {
			t.Fatalf("job %s, output:\n%s", j.State, out)
		}
		if strings.Contains(out, "none nofile=100\n") {
			t.Errorf("--propagate=NONE still propagated NOFILE:\n%s", out)
		}
	})

	t.Run("--slurmd-debug prints slurmstepd's lines from verbose up", func(t *testing.T) {
		if r := c.cli("srun", "--slurmd-debug=info", "true"); r.code != 0 || strings.Contains(r.err, "slurmstepd:") {
			t.Fatalf("info: exit %d, stderr:\n%s", r.code, r.err)
		}
		r := c.cli("srun", "--slurmd-debug=debug", "true")
		for _, want := range []string{"slurmstepd: debug levels are stderr='debug'", "slurmstepd: starting 1 tasks", "slurmstepd: debug:  task 0 (local 0) started as pid "} {
			if r.code != 0 || !strings.Contains(r.err, want) {
				t.Errorf("debug: exit %d, stderr lacks %q:\n%s", r.code, want, r.err)
			}
		}
	})

	t.Run("--debugger-test holds the tasks and prints the process table", func(t *testing.T) {
		dir := c.workDir()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := c.commandContext(ctx, nil, "srun", "-n2", "--debugger-test", "sh", "-c", "touch held.$SLURM_JOB_ID.$SLURM_PROCID")
		cmd.Dir = dir
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`^srun: task:(\d), host:gpu0\d, pid:(\d+), executable:sh$`)
		sc := bufio.NewScanner(stderr)
		pids := map[string]int{}
		for len(pids) < 2 && sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				pids[m[1]], _ = strconv.Atoi(m[2])
			}
		}
		go func() { _, _ = io.Copy(io.Discard, stderr) }()
		if len(pids) != 2 {
			t.Fatalf("process table %v", pids)
		}
		id := lastJob(t, c)
		time.Sleep(300 * time.Millisecond)
		if m, _ := filepath.Glob(filepath.Join(dir, "held."+strconv.FormatUint(id, 10)+".*")); len(m) != 0 {
			t.Fatalf("held tasks ran: %v", m)
		}
		if c.hosts == nil { // the nodes' pids are this host's
			for task, pid := range pids {
				if err := syscall.Kill(pid, 0); err != nil {
					t.Errorf("task %s's pid %d: %v", task, pid, err)
				}
			}
		}
		if r := c.cli("scancel", strconv.FormatUint(id, 10)); r.code != 0 {
			t.Fatalf("scancel: %s", r.err)
		}
		_ = cmd.Wait()
		c.waitTerminal(id, 60*time.Second)
		if m, _ := filepath.Glob(filepath.Join(dir, "held."+strconv.FormatUint(id, 10)+".*")); len(m) != 0 {
			t.Fatalf("held tasks ran: %v", m)
		}
	})

	t.Run("a task epilog's background child neither holds the step nor outlives it", func(t *testing.T) {
		dir := c.workDir()
		epilog := filepath.Join(dir, "bgepilog.sh")
		mark := filepath.Join(dir, "bgepilog.ran")
		os.WriteFile(epilog, []byte("#!/bin/sh\ntouch "+mark+"\nsleep 97 &\necho $! >"+mark+"\nexit 0\n"), 0o755)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := c.commandContext(ctx, nil, "srun", "-n1", "--task-epilog="+epilog, "true")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("srun: %v (the epilog's child held the step?)\n%s", err, out)
		}
		b, err := os.ReadFile(mark)
		if err != nil {
			t.Fatalf("the epilog did not run: %v", err)
		}
		if c.hosts == nil {
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			deadline := time.Now().Add(10 * time.Second)
			for pid > 0 {
				st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
				if err != nil || strings.Contains(string(st), ") Z ") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the epilog's child %d outlived it", pid)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	})
}
