package integration

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/internal/pgtest"
)

// The chaos test (issue 20): a steady mixed load on a local cluster
// (tidectld and three tided) for a while, with the controller and the
// node daemons killed with SIGKILL at random and started again; then the
// load stops, the cluster settles, and invariants are checked over what
// the load was told and what the controller recorded. `make chaos` runs
// it for DURATION (10m by default); in `make test` it runs for a minute.
// docs/operations.md ("Chaos test") describes the summary it prints.

// Settings, from the environment.
const (
	// chaosDurationEnv: how long the load and the kills go on ("90s",
	// "10m", or seconds); default one minute.
	chaosDurationEnv = "TIDE_CHAOS_DURATION"
	// chaosSeedEnv: the seed of the random choices (default: the clock);
	// timing still differs between runs.
	chaosSeedEnv = "TIDE_CHAOS_SEED"
	// chaosKeepEnv: a directory to copy the daemons' logs, the kill
	// timeline and the evidence of violations to, even when the run
	// passes (a failed run keeps them in a new temporary directory).
	chaosKeepEnv = "TIDE_CHAOS_KEEP"
	// chaosControllersEnv: how many controllers (1 to 3, default 1).
	// With more, they share a PostgreSQL store (the run's, or one of
	// the package's own server), the nodes and commands list them all,
	// and the faults include pauses of the primary past its lease
	// (SIGSTOP, then SIGCONT) besides kills of any controller.
	chaosControllersEnv = "TIDE_CHAOS_CONTROLLERS"
)

// chaosConfig shapes a run.
type chaosConfig struct {
	duration time.Duration
	seed     uint64
	keep     string
	nodes    int
	workers  int
	// controllers is chaosControllersEnv.
	controllers int
	// settle bounds the wait for the jobs left at the end to finish on
	// their own; drain bounds the wait for those then cancelled.
	settle, drain time.Duration
}

// chaosConfigFrom reads the settings through getenv.
func chaosConfigFrom(getenv func(string) string) (chaosConfig, error) {
	cfg := chaosConfig{duration: time.Minute, seed: uint64(time.Now().UnixNano()), keep: getenv(chaosKeepEnv),
		nodes: 3, workers: 3, controllers: 1, settle: 4 * time.Minute, drain: 2 * time.Minute}
	if v := getenv(chaosControllersEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 3 {
			return cfg, fmt.Errorf("%s=%q: want 1, 2 or 3", chaosControllersEnv, v)
		}
		cfg.controllers = n
	}
	if v := getenv(chaosDurationEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			n, nerr := strconv.ParseUint(v, 10, 32)
			if nerr != nil {
				return cfg, fmt.Errorf("%s=%q: not a duration (90s, 10m) or a number of seconds", chaosDurationEnv, v)
			}
			d = time.Duration(n) * time.Second
		}
		if d < 10*time.Second {
			return cfg, fmt.Errorf("%s=%q: at least 10s, or the load cannot meet a single kill", chaosDurationEnv, v)
		}
		cfg.duration = d
	}
	if v := getenv(chaosSeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cfg, fmt.Errorf("%s=%q: not an unsigned number", chaosSeedEnv, v)
		}
		cfg.seed = n
	}
	return cfg, nil
}

// chaosViolation is one broken invariant.
type chaosViolation struct {
	// invariant: "submit" (an sbatch failed), "1-accounting",
	// "2-state", "3-alloc", "4-processes", "5-database", "6-primary"
	// (standby controllers: not exactly one primary), "daemon" (a
	// daemon died by itself or did not come back), "cli" (a command
	// hung).
	invariant string
	job       uint64 // 0 when no single job is concerned
	detail    string
}

func (v chaosViolation) String() string {
	if v.job != 0 {
		return fmt.Sprintf("%s job=%d: %s", v.invariant, v.job, v.detail)
	}
	return fmt.Sprintf("%s: %s", v.invariant, v.detail)
}

// chaosRun is one run's cluster, load record and findings.
type chaosRun struct {
	c     *cluster
	cfg   chaosConfig
	api   *client.Client
	users []*chaosUser
	work  string
	env   []string
	// marker is in every job's environment (TIDE_CHAOS_RUN).
	marker string
	t0     time.Time

	mu         sync.Mutex
	seq        int
	subs       []*chaosSub
	byID       map[uint64]*chaosSub
	counts     map[string]int
	kills      map[string]int
	restarts   map[string]int
	timeline   []string
	violations []chaosViolation
	// settled says how the end went: how long the wait took, which jobs
	// the test cancelled at the end.
	settleWait time.Duration
	cancelled  []string
	// sampled is the most job processes one scan saw during the load:
	// proof that the scan of invariant 4 can see them at all.
	sampled int
	// backlog is how many jobs run or wait to run, as of the sampler's
	// last look: the load submits nothing while it is over
	// chaosMaxBacklog, as users wait for their jobs, so that the end
	// does not have to drain a queue that grew with the duration.
	backlog int
}

// chaosMaxBacklog bounds the running and eligible jobs the load keeps.
const chaosMaxBacklog = 60

// runSampler scans for job processes every few seconds while the load
// runs.
func (r *chaosRun) runSampler(ctx context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(3 * time.Second):
			}
			n := len(scanJobProcs(r.marker))
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			l, err := r.api.Jobs(qctx, api.JobFilter{})
			cancel()
			r.mu.Lock()
			r.sampled = max(r.sampled, n)
			if err == nil {
				r.backlog = len(slices.DeleteFunc(l.Jobs, func(j api.Job) bool { return settled(&j) }))
			}
			r.mu.Unlock()
		}
	}()
	return &wg
}

// note adds a line to the kill timeline.
func (r *chaosRun) note(format string, args ...any) {
	now := time.Now()
	line := fmt.Sprintf("%s %8.3fs ", now.UTC().Format("15:04:05.000"), now.Sub(r.t0).Seconds()) + fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.timeline = append(r.timeline, line)
	r.mu.Unlock()
}

// violate records a violation; called with mu held.
func (r *chaosRun) violate(invariant string, job uint64, detail string) {
	r.violations = append(r.violations, chaosViolation{invariant: invariant, job: job, detail: detail})
}

// TestChaos runs the soak test; see the top of this file.
func TestChaos(t *testing.T) {
	cfg, err := chaosConfigFrom(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(chaosControllersEnv) == "" && onPostgres() {
		// make test's PostgreSQL pass runs it with standby controllers
		// (the SQLite and netns passes with one).
		cfg.controllers = 3
	}
	c := newClusterOpts(t, clusterOpts{nodes: cfg.nodes, controllers: cfg.controllers})
	r := &chaosRun{c: c, cfg: cfg, api: c.api, users: chaosUsers(), work: c.workDir(),
		marker: c.dir, t0: time.Now(), byID: map[uint64]*chaosSub{}, counts: map[string]int{},
		kills: map[string]int{}, restarts: map[string]int{}}
	r.env = append(c.userEnv(), "TIDE_CHAOS_RUN="+r.marker, "PATH="+binDir+":"+os.Getenv("PATH"))
	fmt.Printf("chaos: start seed=%d duration=%s nodes=%d controllers=%d workers=%d users=%s dir=%s\n",
		cfg.seed, cfg.duration, cfg.nodes, cfg.controllers, cfg.workers, userNames(r.users), c.dir)

	ctx, stop := context.WithTimeout(context.Background(), cfg.duration)
	load := r.runLoad(ctx, cfg.workers)
	killer := r.runKiller(ctx)
	sampler := r.runSampler(ctx)
	<-ctx.Done()
	stop()
	killer.Wait()
	sampler.Wait()
	r.note("load stopped; waiting for the commands in flight")
	load.Wait()
	loadTime := time.Since(r.t0)
	r.revive()
	r.settle()

	rep := r.check()
	rep.loadTime, rep.total = loadTime, time.Since(r.t0)
	rep.print(os.Stdout)
	if keep := r.keepDir(t, len(r.violations) > 0); keep != "" {
		r.keepArtifacts(keep, rep)
		fmt.Printf("chaos: artifacts %s\n", keep)
	}
	if len(r.violations) > 0 {
		t.Errorf("chaos: %d invariant violations (listed above as \"chaos: violation\")", len(r.violations))
	}
}

func userNames(us []*chaosUser) string {
	var names []string
	for _, u := range us {
		names = append(names, u.name)
	}
	return strings.Join(names, ",")
}

// waitNodes waits until the controller answers and every node responds.
func (r *chaosRun) waitNodes(d time.Duration) bool {
	return r.c.eventuallyQuiet(d, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		nl, err := r.api.Nodes(ctx)
		if err != nil || len(nl.Nodes) != len(r.c.nodes) {
			return false
		}
		for _, n := range nl.Nodes {
			if !n.Responding || n.State == api.NodeDown {
				return false
			}
		}
		return true
	})
}

// settled reports whether job j needs nothing more to happen: it ended,
// or it waits for a person (held) or for a dependency.
func settled(j *api.Job) bool {
	if j.State.Terminal() {
		return true
	}
	return j.State == api.StatePending && (j.HoldKind != "" || j.Reason == api.ReasonDependency ||
		j.Reason == api.ReasonDependencyNeverSatisfied)
}

// settle lets the jobs left at the end of the load run out (bounded by
// cfg.settle), then cancels those still active or eligible and waits
// for them to end (bounded by cfg.drain).
func (r *chaosRun) settle() {
	t0 := time.Now()
	if !r.waitNodes(2 * time.Minute) {
		r.mu.Lock()
		r.violate("daemon", 0, "the nodes did not all respond within 2m of the end of the load")
		r.mu.Unlock()
	}
	unsettled := func() []api.Job {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := r.api.Jobs(ctx, api.JobFilter{})
		if err != nil {
			return []api.Job{{ID: 0}} // not known yet: keep waiting
		}
		return slices.DeleteFunc(l.Jobs, func(j api.Job) bool { return settled(&j) })
	}
	var left []api.Job
	r.c.eventuallyQuiet(r.cfg.settle, func() bool {
		left = unsettled()
		return len(left) == 0
	})
	r.settleWait = time.Since(t0)
	r.note("settled after %s; %d jobs still to end", r.settleWait.Round(time.Second), len(left))
	if len(left) == 0 {
		return
	}
	var ids []string
	for _, j := range left {
		if j.ID == 0 {
			continue
		}
		if lim := time.Duration(j.TimeLimit) * time.Second; j.State.Active() && j.TimeLimit > 0 && !j.StartTime.IsZero() &&
			time.Since(j.StartTime) > lim+time.Minute {
			r.mu.Lock()
			r.violate("2-state", j.ID, fmt.Sprintf("%s since %s, over a minute past its time limit %s", j.State,
				j.StartTime.Format(time.TimeOnly), lim))
			r.mu.Unlock()
		}
		r.cancelled = append(r.cancelled, fmt.Sprintf("%s(%s %s)", j.ArrayID(), j.State, j.Reason))
		ids = append(ids, strconv.FormatUint(j.ID, 10))
	}
	if len(ids) > 0 {
		res := r.cli(r.users[0], chaosCLITimeout, append([]string{"scancel"}, ids...)...)
		r.note("scancel of the jobs left: exit %d %s", res.code, oneLine(res.err))
	}
	if !r.c.eventuallyQuiet(r.cfg.drain, func() bool { left = unsettled(); return len(left) == 0 }) {
		r.note("%d jobs still not settled %s after they were cancelled", len(left), r.cfg.drain)
	}
}

// keepDir is where the artifacts go: TIDE_CHAOS_KEEP, or a new temporary
// directory when the run failed, or "" to keep nothing.
func (r *chaosRun) keepDir(t *testing.T, failed bool) string {
	if r.cfg.keep != "" {
		if err := os.MkdirAll(r.cfg.keep, 0o755); err != nil {
			t.Errorf("%s: %v", chaosKeepEnv, err)
			return ""
		}
		return r.cfg.keep
	}
	if !failed {
		return ""
	}
	d, err := os.MkdirTemp("", "tide-chaos-")
	if err != nil {
		t.Errorf("keep artifacts: %v", err)
		return ""
	}
	return d
}

// keepArtifacts copies the daemons' logs, the timeline, the report and
// the controller's database to dir.
func (r *chaosRun) keepArtifacts(dir string, rep *chaosReport) {
	for _, name := range r.daemons() {
		copyFile(filepath.Join(r.c.dir, name+".log"), filepath.Join(dir, name+".log"))
	}
	if r.c.storeURL != "" {
		// The PostgreSQL store, dropped when the test ends: a dump
		// (pg_restore -d URL tide.dump reads it).
		out, err := exec.Command(filepath.Join(pgtest.BinDir(), "pg_dump"), "-Fc", "-f", filepath.Join(dir, "tide.dump"), r.c.storeURL).CombinedOutput()
		if err != nil {
			fmt.Printf("chaos: pg_dump of the store: %v\n%s", err, out)
		}
	}
	for _, f := range []string{"tide.db", "tide.db-wal"} {
		copyFile(filepath.Join(r.c.dir, "ctld", f), filepath.Join(dir, f))
	}
	var b strings.Builder
	rep.print(&b)
	fmt.Fprintln(&b, "\ntimeline:")
	r.mu.Lock()
	for _, l := range r.timeline {
		fmt.Fprintln(&b, l)
	}
	fmt.Fprintln(&b, "\nsubmissions:")
	for _, s := range r.subs {
		fmt.Fprintf(&b, "%d %s user=%s id=%d took=%s retried=%v cancelled=%v requeued=%v held=%v failure=%q args=%q\n",
			s.seq, s.name, s.user.name, s.id, s.took.Round(time.Millisecond), s.retried, s.cancelled, s.requeued, s.held, s.failure, s.args)
	}
	r.mu.Unlock()
	fmt.Fprintln(&b, "\nevidence:")
	b.WriteString(rep.evidence)
	_ = os.WriteFile(filepath.Join(dir, "chaos-report.txt"), []byte(b.String()), 0o644)
}

func copyFile(from, to string) {
	in, err := os.Open(from)
	if err != nil {
		return
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return
	}
	defer out.Close()
	_, _ = io.Copy(out, in)
}
