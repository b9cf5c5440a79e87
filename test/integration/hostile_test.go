package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// The probes of issue 20: what a careless or hostile user could send,
// each refused with a clear error (or made harmless) on a real cluster,
// leaving every node UP and other users' jobs alone.

// nobodyCred runs a command as Debian's nobody (uid/gid 65534).
var nobodyCred = &syscall.Credential{Uid: 65534, Gid: 65534}

// hostileCluster is a two-node cluster with queues, so that classes
// and queues are enforced: nobody is in ml, daemon in ops.
func hostileCluster(t *testing.T) *cluster {
	return newClusterOpts(t, clusterOpts{nodes: 2, ctldYAML: `queues:
  - {name: ml, users: [nobody, root]}
  - {name: ops, users: [daemon]}
submit: {rate_per_queue: 10000}
`})
}

// rawSubmit sends spec to the controller as the test's own user,
// without sbatch's checks.
func (c *cluster) rawSubmit(req api.SubmitRequest) (api.SubmitResponse, error) {
	if req.Spec.Script == "" && !req.Spec.Allocation {
		req.Spec.Script = "#!/bin/sh\ntrue\n"
	}
	if req.Spec.WorkDir == "" {
		req.Spec.WorkDir = c.workDir()
	}
	return c.api.Submit(context.Background(), req)
}

// checkNodesUp fails unless every node is up (idle, mixed or allocated).
func (c *cluster) checkNodesUp() {
	c.t.Helper()
	nl, err := c.api.Nodes(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	for _, n := range nl.Nodes {
		if n.State == api.NodeDown || n.Drain {
			c.t.Errorf("node %s is %s (drain %v): %s", n.Name, n.State, n.Drain, n.Reason)
		}
	}
}

// TestProbeOversizedValues: a 7 MB job name or comment, a 100 MB
// script, a negative or overflowing time limit are refused with an
// error that names the problem, through sbatch and through the API.
func TestProbeOversizedValues(t *testing.T) {
	c := hostileCluster(t)
	victim := c.submit("#!/bin/sh\nsleep 30\n", "-J", "victim")
	c.waitState(victim, api.StateRunning, 20*time.Second)

	big := strings.Repeat("n", 7<<20)
	for _, tc := range []struct {
		name string
		req  api.SubmitRequest
		want string
	}{
		{"7 MB name", api.SubmitRequest{Spec: api.JobSpec{Name: big}}, "job name is 7340032 bytes, at most 1024"},
		{"7 MB comment", api.SubmitRequest{Spec: api.JobSpec{Comment: big}}, "comment is 7340032 bytes, at most 1024"},
		{"negative time limit", api.SubmitRequest{Spec: api.JobSpec{TimeLimit: -200}}, api.ErrTimeLimit},
		{"time limit past the maximum", api.SubmitRequest{Spec: api.JobSpec{TimeLimit: 200000 * 86400}}, "more than the maximum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.rawSubmit(tc.req)
			if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want an invalid argument with %q", err, tc.want)
			}
		})
	}

	// Through sbatch: the limits are checked before anything is sent.
	long := filepath.Join(c.workDir(), "long-name.sh")
	os.WriteFile(long, []byte("#!/bin/sh\n#SBATCH -J "+strings.Repeat("j", 2000)+"\ntrue\n"), 0o755)
	if r := c.cli("sbatch", long); r.code != 1 || !strings.Contains(r.err, "sbatch: error: Batch job submission failed: Pathname of a file, directory or other parameter too long (job name is 2000 bytes, at most 1024)") {
		t.Errorf("sbatch with a 2000-byte name: exit %d, %q", r.code, r.err)
	}
	if r := c.cli("sbatch", "--time=200000-00:00:00", "--wrap", "true"); r.code != 1 || !strings.Contains(r.err, "Invalid --time specification") {
		t.Errorf("sbatch --time=200000-00:00:00: exit %d, %q", r.code, r.err)
	}
	huge := filepath.Join(c.workDir(), "huge.sh")
	line := strings.Repeat("#", 1023) + "\n"
	os.WriteFile(huge, []byte("#!/bin/sh\n"+strings.Repeat(line, 100<<10-1)+strings.Repeat("#", 1013)+"\n"), 0o755)
	r := c.cli("sbatch", huge)
	if r.code != 1 || !strings.Contains(r.err, "batch script is 104857600 bytes, more than the 4194304 allowed (max_script_size)") {
		t.Errorf("sbatch of a 100 MB script: exit %d, %q", r.code, r.err)
	}
	// A job without a limit in a partition with a maximum waits for
	// ever rather than run unlimited.
	unl := c.submit("#!/bin/sh\ntrue\n", "--time=UNLIMITED")
	c.eventually(10*time.Second, "unlimited job pends PartitionTimeLimit", func() bool {
		j := c.job(unl)
		return j.State == api.StatePending && j.Reason == api.ReasonPartitionTimeLimit
	})

	out := c.cli("squeue", "-h", "-o", "%i %j").out
	if strings.Count(out, "\n") != 2 || len(out) > 200 {
		t.Errorf("squeue shows %d bytes:\n%.300s", len(out), out)
	}
	if j := c.job(victim); j.State != api.StateRunning {
		t.Errorf("the other job is %s", j.State)
	}
	c.checkNodesUp()
}

// TestProbePolicyEnforced: an ordinary user cannot pick a class, queue,
// level or identity the configuration does not grant; root can.
func TestProbePolicyEnforced(t *testing.T) {
	c := hostileCluster(t)
	script := "#!/bin/sh\nsleep 60\n"
	as := func(args ...string) result { return c.cliAs(nobodyCred, c.workDir(), args...) }
	if r := as("sbatch", "--qos=inference", "-H", "--wrap", "true"); r.code != 1 ||
		!strings.Contains(r.err, "Invalid qos specification: user nobody may not use qos inference (open to operators only)") {
		t.Errorf("nobody --qos=inference: exit %d, %q", r.code, r.err)
	}
	if r := as("sbatch", "-A", "ops", "-H", "--wrap", "true"); r.code != 1 ||
		!strings.Contains(r.err, "Invalid account or account/partition combination specified: user nobody may not submit to queue ops") {
		t.Errorf("nobody -A ops: exit %d, %q", r.code, r.err)
	}
	if r := as("sbatch", "--uid=root", "-H", "--wrap", "true"); r.code != 1 ||
		!strings.Contains(r.err, "only root and operators may submit jobs as another user") {
		t.Errorf("nobody --uid=root: exit %d, %q", r.code, r.err)
	}
	id := c.submitAs(nobodyCred, script, "-H")
	sid := strconv.FormatUint(id, 10)
	for _, tc := range []struct{ field, want string }{
		{"Priority=10", "users may only lower the level"},
		{"Account=ops", "user nobody may not submit to queue ops"},
		{"TimeLimit=" + strings.Repeat("9", 8), "time limit"},
	} {
		if r := as("scontrol", "update", "JobId="+sid, tc.field); r.code == 0 || !strings.Contains(r.err, tc.want) {
			t.Errorf("nobody's scontrol update %s: exit %d, %q", tc.field, r.code, r.err)
		}
	}
	// An operator (root) may.
	if r := c.cli("scontrol", "update", "JobId="+sid, "Account=ops", "Priority=9"); r.code != 0 {
		t.Errorf("root's update: exit %d, %q", r.code, r.err)
	}
	if j := c.job(id); j.Account != "ops" || j.Level != 9 || j.UserID != 65534 {
		t.Errorf("job now in %s at level %d of uid %d", j.Account, j.Level, j.UserID)
	}
	// Nor may a user touch another's job.
	other := c.submit(script, "-H")
	if r := as("scontrol", "update", "JobId="+strconv.FormatUint(other, 10), "Comment=x"); r.code == 0 ||
		!strings.Contains(r.err, "Access/permission denied") {
		t.Errorf("nobody updated root's job: exit %d, %q", r.code, r.err)
	}
}

// TestProbeSubmitAsUser: root's sbatch --uid/--gid runs the job as that
// user, never as root.
func TestProbeSubmitAsUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root")
	}
	c := hostileCluster(t)
	id := c.submit("#!/bin/sh\nid -u > whoami-$SLURM_JOB_ID.txt; id -g >> whoami-$SLURM_JOB_ID.txt\n", "--uid=nobody", "-o", "as-%j.out")
	j := c.waitTerminal(id, 20*time.Second)
	if j.State != api.StateCompleted || j.UserID != 65534 || j.User != "nobody" {
		t.Fatalf("job %s of %s (%d)", j.State, j.User, j.UserID)
	}
	path := filepath.Join(c.workDir(), fmt.Sprintf("whoami-%d.txt", id))
	b, err := os.ReadFile(path)
	if err != nil || strings.Fields(string(b))[0] != "65534" {
		t.Fatalf("the job ran as %q (%v)", b, err)
	}
	if fi, err := os.Stat(filepath.Join(c.workDir(), fmt.Sprintf("as-%d.out", id))); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Fatalf("output file not nobody's: %v", err)
	}
	ev, _ := c.api.Events(context.Background(), id)
	// "submitted by root (munge, ADDR) as nobody" over TCP.
	if len(ev) == 0 || !strings.Contains(ev[0].Message, "submitted by root") || !strings.Contains(ev[0].Message, " as nobody") {
		t.Fatalf("trail: %+v", ev)
	}
}

// TestProbeDependencyCycle: scontrol update cannot make jobs wait for
// each other.
func TestProbeDependencyCycle(t *testing.T) {
	c := hostileCluster(t)
	a := c.submit("#!/bin/sh\ntrue\n", "-H")
	b := c.submit("#!/bin/sh\ntrue\n", "-H", fmt.Sprintf("--dependency=afterok:%d", a))
	r := c.cli("scontrol", "update", fmt.Sprintf("JobId=%d", a), fmt.Sprintf("Dependency=afterany:%d", b))
	if r.code != 1 || !strings.Contains(r.err, "Circular job dependency") {
		t.Fatalf("cycle: exit %d, %q", r.code, r.err)
	}
	if j := c.job(a); j.Dependency != "" {
		t.Fatalf("job %d now depends on %q", a, j.Dependency)
	}
}

// TestProbeTerminalEscapes: a job name and comment with escape
// sequences and newlines are stored exactly (JSON keeps them) and printed
// escaped by squeue, scontrol and sacct.
func TestProbeTerminalEscapes(t *testing.T) {
	c := hostileCluster(t)
	name := "x\x1b[2J\x1b]0;pwned\a\nFAKE 999 LINE"
	resp, err := c.rawSubmit(api.SubmitRequest{Spec: api.JobSpec{Name: name, Comment: "c\r\x9b31m", Hold: true}})
	if err != nil {
		t.Fatal(err)
	}
	if j := c.job(resp.JobID); j.Name != name {
		t.Fatalf("stored name %q", j.Name)
	}
	for _, args := range [][]string{
		{"squeue"}, {"squeue", "-o", "%j %k"}, {"scontrol", "show", "job"},
		{"sacct", "-X", "-P", "--format=JobName,Comment"}, {"sacct", "-X", "--format=JobName%60"},
	} {
		out := c.cli(args...).out
		if strings.ContainsAny(out, "\x1b\a\r\u009b") || strings.Contains(out, "\nFAKE") {
			t.Errorf("%v printed a raw control character:\n%q", args, out)
		}
	}
	if out := c.cli("squeue", "--json").out; !strings.Contains(out, `\u001b[2J`) {
		t.Errorf("squeue --json lost the exact name: %.400s", out)
	}
}

// TestSubmitAcrossControllerRestart: a storm of sbatch from several
// clients while the controller is killed (SIGKILL) and restarted:
// every sbatch succeeds, and every job exists exactly once.
// TIDE_RESTART_STORM sets the number of submissions (240; the issue's
// figure is 3000).
func TestSubmitAcrossControllerRestart(t *testing.T) {
	c := newCluster(t, 1)
	total := 240
	if v, err := strconv.Atoi(os.Getenv("TIDE_RESTART_STORM")); err == nil && v > 0 {
		total = v
	}
	const clients = 6
	each := (total + clients - 1) / clients
	start := time.Now()
	var mu sync.Mutex
	ids := map[uint64]int{}
	var failures []string
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r := c.cli("sbatch", "--parsable", "-H", "-J", fmt.Sprintf("s%d-%d", w, i), "--wrap", "true")
				mu.Lock()
				if id, err := strconv.ParseUint(strings.TrimSpace(r.out), 10, 64); r.code != 0 || err != nil {
					failures = append(failures, fmt.Sprintf("exit %d: %s%s", r.code, r.out, r.err))
				} else {
					ids[id]++
				}
				mu.Unlock()
			}
		}()
	}
	// Crashes in the middle of the storm: two, and one more per
	// thousand submissions, each a second's outage.
	crashes := 2 + total/1000
	for range crashes {
		time.Sleep(300 * time.Millisecond)
		kill(c.ctld, syscall.SIGKILL)
		time.Sleep(time.Second)
		c.startCtld()
	}
	wg.Wait()
	t.Logf("%d submissions from %d clients across %d controller crashes in %s", clients*each, clients, crashes, time.Since(start).Round(time.Millisecond))
	if len(failures) > 0 {
		t.Fatalf("%d of %d sbatch failed, first: %s", len(failures), clients*each, failures[0])
	}
	if len(ids) != clients*each {
		t.Fatalf("%d distinct ids for %d submissions", len(ids), clients*each)
	}
	jl, err := c.api.Jobs(context.Background(), api.JobFilter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, j := range jl.Jobs {
		names[j.Name]++
		if ids[j.ID] != 1 {
			t.Errorf("job %d (%s) was not acknowledged to any sbatch", j.ID, j.Name)
		}
	}
	for n, k := range names {
		if k != 1 {
			t.Errorf("job name %s exists %d times", n, k)
		}
	}
	if len(jl.Jobs) != clients*each {
		t.Fatalf("%d jobs for %d submissions", len(jl.Jobs), clients*each)
	}
}

// TestProbeMetricsScrapers: scrapers hammering /metrics (over TCP, as
// Prometheus does) make the controller gather its state at most about
// once a second, so they cannot slow submissions down by taking its lock
// for every scrape.
func TestProbeMetricsScrapers(t *testing.T) {
	c := newCluster(t, 1)
	before := c.metric("tide_metrics_gathered_total")
	hc, base := c.nodeHTTP()
	url := base + "/metrics"
	stop := time.Now().Add(3 * time.Second)
	var scrapes atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer hc.CloseIdleConnections()
			for time.Now().Before(stop) {
				resp, err := hc.Get(url)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				scrapes.Add(1)
			}
		}()
	}
	// Submissions go on meanwhile.
	for range 5 {
		c.submit("#!/bin/sh\ntrue\n", "-H")
	}
	wg.Wait()
	gathered := c.metric("tide_metrics_gathered_total") - before
	t.Logf("%d scrapes, %.0f gatherings", scrapes.Load(), gathered)
	if scrapes.Load() < 20 || gathered > 6 {
		t.Fatalf("%d scrapes made %.0f gatherings, want at most about one a second", scrapes.Load(), gathered)
	}
}
