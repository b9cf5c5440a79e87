package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

const helloScript = `#!/bin/sh
#SBATCH -J hello
#SBATCH -o out-%j.txt
#SBATCH -t 1:00
#SBATCH --gpus=2
echo $SLURM_JOB_ID $CUDA_VISIBLE_DEVICES
`

// TestLifecycle covers the acceptance paths of one cluster: a GPU job
// completes with its output as its user, exit codes and timeouts are
// recorded, cancel kills the job's children, bad submissions are refused.
func TestLifecycle(t *testing.T) {
	c := newCluster(t, 2)

	t.Run("gpu job completes and writes its output", func(t *testing.T) {
		var cred *syscall.Credential
		wantUID := os.Getuid()
		if os.Getuid() == 0 {
			// As root, submit as nobody: the job must run as nobody.
			cred = &syscall.Credential{Uid: 65534, Gid: 65534}
			wantUID = 65534
		}
		id := c.submitAs(cred, helloScript)
		j := c.waitTerminal(id, 30*time.Second)
		if j.State != api.StateCompleted {
			t.Fatalf("state %s reason %s", j.State, j.Reason)
		}
		out := filepath.Join(c.workDir(), fmt.Sprintf("out-%d.txt", id))
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Fields(string(b))
		if len(fields) != 2 || fields[0] != strconv.FormatUint(id, 10) || len(strings.Split(fields[1], ",")) != 2 {
			t.Fatalf("output %q: want id and two GPU indices", b)
		}
		fi, _ := os.Stat(out)
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != wantUID {
			t.Fatalf("output owned by uid %d, want %d", st.Uid, wantUID)
		}
		if got, want := c.sacctLine(id), fmt.Sprintf("%d|COMPLETED|0:0", id); got != want {
			t.Fatalf("sacct = %q, want %q", got, want)
		}
	})

	t.Run("exit 3 is FAILED 3:0", func(t *testing.T) {
		id := c.submit("#!/bin/sh\nexit 3\n")
		c.waitTerminal(id, 30*time.Second)
		if got, want := c.sacctLine(id), fmt.Sprintf("%d|FAILED|3:0", id); got != want {
			t.Fatalf("sacct = %q, want %q", got, want)
		}
	})

	t.Run("script arguments reach the script", func(t *testing.T) {
		script := filepath.Join(c.workDir(), "args.sh")
		os.WriteFile(script, []byte("#!/bin/sh\necho \"$# [$1] [$2]\"\n"), 0o755)
		r := c.cli("sbatch", "--parsable", "-o", "args-%j.out", script, "a", "b c")
		if r.code != 0 {
			t.Fatalf("sbatch: %s", r.err)
		}
		id, _ := strconv.ParseUint(strings.TrimSpace(r.out), 10, 64)
		c.waitTerminal(id, 30*time.Second)
		b, _ := os.ReadFile(filepath.Join(c.workDir(), fmt.Sprintf("args-%d.out", id)))
		if got := strings.TrimSpace(string(b)); got != "2 [a] [b c]" {
			t.Fatalf("script saw %q", got)
		}
	})

	t.Run("time limit ends TIMEOUT", func(t *testing.T) {
		id := c.submit("#!/bin/sh\nsleep 300\n", "-t", "0:05")
		j := c.waitTerminal(id, 30*time.Second)
		if j.State != api.StateTimeout {
			t.Fatalf("state %s, want TIMEOUT", j.State)
		}
		if el := j.EndTime.Sub(j.StartTime); el < 4*time.Second || el > 20*time.Second {
			t.Fatalf("ran %s under a 5 s limit", el)
		}
	})

	t.Run("scancel kills the job and its children", func(t *testing.T) {
		pidFile := filepath.Join(c.workDir(), "child.pid")
		os.Remove(pidFile)
		id := c.submit(fmt.Sprintf("#!/bin/sh\nsleep 300 &\necho $! > %s\nwait\n", pidFile))
		c.waitState(id, api.StateRunning, 20*time.Second)
		var child int
		c.eventually(10*time.Second, "child pid written", func() bool {
			b, err := os.ReadFile(pidFile)
			if err != nil {
				return false
			}
			child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			return child > 0
		})
		if r := c.cli("scancel", fmt.Sprint(id)); r.code != 0 {
			t.Fatalf("scancel: %d %s", r.code, r.err)
		}
		j := c.waitTerminal(id, 20*time.Second)
		if j.State != api.StateCancelled {
			t.Fatalf("state %s, want CANCELLED", j.State)
		}
		c.eventually(10*time.Second, "child gone", func() bool { return !pidAlive(child) })
	})

	t.Run("impossible and malformed submissions are refused", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--gpus-per-node=16"}, "Requested node configuration is not available"},
			{[]string{"-p", "nosuchpart"}, "invalid partition"},
			{[]string{"--no-such-option"}, "no-such-option"},
			{[]string{"-t", "1:2:3:4"}, "time"},
			{[]string{"-N", "3"}, "not available"},
		} {
			r := c.cli(append(append([]string{"sbatch"}, tc.args...), "--wrap", "true")...)
			if r.code == 0 || !strings.Contains(strings.ToLower(r.err), strings.ToLower(tc.want)) {
				t.Errorf("sbatch %v: exit %d, stderr %q; want failure mentioning %q", tc.args, r.code, r.err, tc.want)
			}
		}
	})

	t.Run("held job waits with a reason until released", func(t *testing.T) {
		id := c.submit("#!/bin/sh\ntrue\n", "-H")
		r := c.cli("squeue", "-h", "-j", fmt.Sprint(id), "-o", "%t %R")
		if strings.TrimSpace(r.out) != "PD (JobHeldUser)" {
			t.Fatalf("squeue = %q", r.out)
		}
		if r := c.cli("scontrol", "release", fmt.Sprint(id)); r.code != 0 {
			t.Fatalf("release: %s", r.err)
		}
		if j := c.waitTerminal(id, 20*time.Second); j.State != api.StateCompleted {
			t.Fatalf("state %s", j.State)
		}
		ev := c.cli("tide", "events", fmt.Sprint(id)).out
		for _, want := range []string{"submit", "release", "start", "end"} {
			if !strings.Contains(ev, want) {
				t.Errorf("trail lacks %q:\n%s", want, ev)
			}
		}
	})

	t.Run("partition time limit keeps the job pending", func(t *testing.T) {
		id := c.submit("#!/bin/sh\ntrue\n", "-p", "short", "-t", "5")
		c.eventually(10*time.Second, "PartitionTimeLimit", func() bool {
			return c.job(id).Reason == api.ReasonPartitionTimeLimit
		})
		c.cli("scancel", fmt.Sprint(id))
	})

	t.Run("node requests need a node credential", func(t *testing.T) {
		// The cluster key without TLS, a node certificate with it.
		hc, base := c.nodeHTTP()
		resp, err := hc.Post(base+"/api/v1/node/sync", "application/json", strings.NewReader(`{"name":"gpu01"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d without a credential", resp.StatusCode)
		}
	})

	t.Run("drain keeps new jobs off a node", func(t *testing.T) {
		if r := c.cli("scontrol", "update", "NodeName=gpu02", "State=DRAIN", "Reason=maintenance"); r.code != 0 {
			t.Fatalf("drain: %d %s", r.code, r.err)
		}
		if out := c.cli("sinfo", "-h", "-N", "-n", "gpu02", "-o", "%t").out; strings.TrimSpace(out) != "drain" {
			t.Fatalf("sinfo state %q", out)
		}
		id := c.submit("#!/bin/sh\ntrue\n", "-w", "gpu02")
		c.eventually(10*time.Second, "ReqNodeNotAvail", func() bool {
			return c.job(id).Reason == api.ReasonReqNodeNotAvail
		})
		c.cli("scontrol", "update", "NodeName=gpu02", "State=RESUME")
		if j := c.waitTerminal(id, 20*time.Second); j.State != api.StateCompleted {
			t.Fatalf("state %s", j.State)
		}
	})
}
