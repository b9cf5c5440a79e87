package integration

import (
	"context"
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

// cliWithin runs a CLI command like cli, failing the test when it does
// not answer within d (a hang must be a failure, not a stuck test).
func (c *cluster) cliWithin(d time.Duration, args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := c.commandContext(ctx, nil, args...)
	cmd.Dir = c.workDir()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		c.t.Fatalf("%v did not answer within %s", args, d)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("run %v: %v", args, err)
	}
	return result{out: out.String(), err: errb.String(), code: code}
}

// requireNodesUp fails unless every node is registered, responding and
// neither DOWN nor drained.
func (c *cluster) requireNodesUp() {
	c.t.Helper()
	nl, err := c.api.Nodes(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	if len(nl.Nodes) != len(c.nodes) {
		c.t.Fatalf("%d nodes listed, want %d", len(nl.Nodes), len(c.nodes))
	}
	for _, n := range nl.Nodes {
		if n.State == api.NodeDown || n.State == api.NodeUnknown || n.Drain || !n.Responding {
			c.t.Errorf("node %s: state %s drain=%v responding=%v reason %q", n.Name, n.State, n.Drain, n.Responding, n.Reason)
		}
	}
}

// submitWrap runs `sbatch --parsable ARGS --wrap CMD` as cred (nil: the
// test's user) and returns the job id.
func (c *cluster) submitWrap(cred *syscall.Credential, cmd string, args ...string) uint64 {
	c.t.Helper()
	r := c.cliAs(cred, c.workDir(), append(append([]string{"sbatch", "--parsable"}, args...), "--wrap", cmd)...)
	if r.code != 0 {
		c.t.Fatalf("sbatch %v --wrap %q: %d %s%s", args, cmd, r.code, r.out, r.err)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(r.out), 10, 64)
	if err != nil {
		c.t.Fatalf("sbatch printed %q", r.out)
	}
	return id
}

// TestHostileOutputPattern is issue 20's probe: an ordinary user's
// `sbatch -o 'out%0999999999j' --wrap true` took the node that launched
// it DOWN (its zero-padding was built a character at a time, on the path
// the node's heartbeats waited for), with every job on it, and with
// --requeue walked from node to node; `scontrol show job` hung for
// everyone meanwhile. Now the padding stops at ten characters, as
// Slurm's does, and the job completes beside another user's job, which
// nothing touches.
func TestHostileOutputPattern(t *testing.T) {
	c := newCluster(t, 2)
	var attacker *syscall.Credential
	if os.Getuid() == 0 {
		// Two users: the probe's nobody, the bystander the test's own.
		attacker = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	bystander := c.submitWrap(nil, "echo up; while :; do sleep 0.1; done", "-w", "gpu01", "-o", "bystander-%j.out")
	c.waitState(bystander, api.StateRunning, 30*time.Second)
	c.waitOutput(filepath.Join(c.workDir(), fmt.Sprintf("bystander-%d.out", bystander)), "up", 30*time.Second)

	for _, tt := range []struct {
		name string
		args []string
	}{
		{"the probe", []string{"-w", "gpu01", "-o", "out%0999999999j"}},
		{"the probe with --requeue", []string{"-w", "gpu01", "-o", "out%0999999999j", "--requeue"}},
		{"width digits past any integer", []string{"-o", "out%0999999999j", "-e", "err%" + strings.Repeat("9", 300) + "j", "--requeue"}},
	} {
		args := tt.args
		t.Run(tt.name, func(t *testing.T) {
			// Held first, so that its record sits in the queue: every
			// scontrol show job and squeue expands its patterns.
			id := c.submitWrap(attacker, "true", append([]string{"-H"}, args...)...)
			out := filepath.Join(c.workDir(), fmt.Sprintf("out%010d", id))
			show := c.cliWithin(30*time.Second, "scontrol", "show", "job")
			if show.code != 0 || !strings.Contains(show.out, fmt.Sprintf("JobId=%d ", id)) || !strings.Contains(show.out, "StdOut="+out+"\n") {
				t.Errorf("scontrol show job: %d %q\n%s", show.code, show.err, show.out)
			}
			q := c.cliWithin(30*time.Second, "squeue", "-h", "-O", "StdOut:300")
			if q.code != 0 || !strings.Contains(q.out, out+" ") {
				t.Errorf("squeue: %d %s\n%s", q.code, q.err, q.out)
			}
			if r := c.cliAs(attacker, c.workDir(), "scontrol", "release", strconv.FormatUint(id, 10)); r.code != 0 {
				t.Fatalf("scontrol release: %d %s%s", r.code, r.out, r.err)
			}
			j := c.waitTerminal(id, 60*time.Second)
			if j.State != api.StateCompleted || j.Restarts != 0 {
				ev := c.cli("tide", "events", strconv.FormatUint(id, 10))
				t.Fatalf("job %d: %s (%s) restarts=%d\n%s", id, j.State, j.Reason, j.Restarts, ev.out)
			}
			fi, err := os.Stat(out)
			if err != nil {
				t.Fatalf("output file: %v", err)
			}
			if st := fi.Sys().(*syscall.Stat_t); attacker != nil && st.Uid != attacker.Uid {
				t.Errorf("output owned by uid %d, want %d", st.Uid, attacker.Uid)
			}
			c.requireNodesUp()
		})
	}
	if j := c.job(bystander); j.State != api.StateRunning || j.Restarts != 0 {
		t.Errorf("the bystander job: %s restarts=%d, want RUNNING as it was", j.State, j.Restarts)
	}
}

// breakLaunches makes node's launches fail for real, as a node whose
// state directory broke would: its jobs/ directory becomes a file, so no
// job directory can be made there. The returned func repairs it.
func (c *cluster) breakLaunches(node string) (repair func()) {
	c.t.Helper()
	jobs := filepath.Join(c.dir, "nodes", node, "jobs")
	if err := os.Remove(jobs); err != nil {
		c.t.Fatalf("break %s: %v (jobs left there?)", node, err)
	}
	if err := os.WriteFile(jobs, []byte("not a directory\n"), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return func() {
		if err := os.Remove(jobs); err != nil {
			c.t.Fatal(err)
		}
		if err := os.Mkdir(jobs, 0o711); err != nil {
			c.t.Fatal(err)
		}
	}
}

// TestLaunchFailures: a node that cannot launch a job (nothing of it
// ran) stays UP and the job goes to another node; a job whose launches
// fail on every node is held after scheduler.launch_fail_limit (3) of
// them in a row, with each failure in its trail, until an operator
// releases it.
func TestLaunchFailures(t *testing.T) {
	c := newCluster(t, 2)
	var user *syscall.Credential
	if os.Getuid() == 0 {
		user = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	repair1 := c.breakLaunches("gpu01")

	t.Run("another node runs it", func(t *testing.T) {
		// Both nodes idle: best fit takes gpu01 first.
		id := c.submitWrap(user, "echo ran on $SLURMD_NODENAME", "-o", "lf-%j.out")
		j := c.waitTerminal(id, 60*time.Second)
		ev := c.cli("tide", "events", strconv.FormatUint(id, 10))
		if j.State != api.StateCompleted || j.Restarts != 1 || j.BatchHost() != "gpu02" {
			t.Fatalf("job %d: %s on %s restarts=%d\n%s", id, j.State, j.BatchHost(), j.Restarts, ev.out)
		}
		if !strings.Contains(ev.out, "launch failed on gpu01 (1 of 3 in a row): prepare job:") {
			t.Errorf("the trail does not name the failed launch:\n%s", ev.out)
		}
		if got := c.waitOutput(filepath.Join(c.workDir(), fmt.Sprintf("lf-%d.out", id)), "ran", 10*time.Second); got != "ran on gpu02\n" {
			t.Errorf("output %q", got)
		}
		c.requireNodesUp()
	})

	repair2 := c.breakLaunches("gpu02")
	t.Run("held after three in a row", func(t *testing.T) {
		id := c.submitWrap(user, "echo finally", "-o", "held-%j.out")
		var j api.Job
		c.eventually(60*time.Second, "job held", func() bool {
			j = c.job(id)
			return j.HoldKind == api.HoldAdmin || j.State.Terminal()
		})
		ev := c.cli("tide", "events", strconv.FormatUint(id, 10))
		if j.State != api.StatePending || j.Reason != api.ReasonJobHeldAdmin || j.LaunchFailures != 3 || j.Restarts != 3 {
			t.Fatalf("job %d: %s %s failures=%d restarts=%d\n%s", id, j.State, j.Reason, j.LaunchFailures, j.Restarts, ev.out)
		}
		if n := strings.Count(ev.out, "launch failed on gpu0"); n != 3 || !strings.Contains(ev.out, "launch failed requeued held") {
			t.Errorf("the trail names %d failed launches, want 3 and the hold:\n%s", n, ev.out)
		}
		show := c.cliWithin(30*time.Second, "scontrol", "show", "job", strconv.FormatUint(id, 10))
		if !strings.Contains(show.out, "Reason=JobHeldAdmin") || !strings.Contains(show.out, "launch failed requeued held: 3 launches in a row failed") {
			t.Errorf("scontrol show job:\n%s", show.out)
		}
		c.requireNodesUp()
		// Held, it stays put.
		time.Sleep(time.Second)
		if j := c.job(id); j.State != api.StatePending || j.Restarts != 3 {
			t.Errorf("held job moved on: %s restarts=%d", j.State, j.Restarts)
		}

		repair1()
		repair2()
		if r := c.cli("scontrol", "release", strconv.FormatUint(id, 10)); r.code != 0 {
			t.Fatalf("scontrol release: %d %s%s", r.code, r.out, r.err)
		}
		j = c.waitTerminal(id, 60*time.Second)
		if j.State != api.StateCompleted {
			t.Fatalf("released job: %s %s", j.State, j.Reason)
		}
		if got := c.waitOutput(filepath.Join(c.workDir(), fmt.Sprintf("held-%d.out", id)), "finally", 10*time.Second); got != "finally\n" {
			t.Errorf("output %q", got)
		}
	})
}
