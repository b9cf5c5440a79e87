package integration

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/mattn/go-sqlite3" // the controller's driver, for the integrity check

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/cgroup"
)

// The chaos test's checks, run once the cluster has settled. Each
// returns the violations it found; the pure ones have table tests in
// chaos_unit_test.go.

// chaosReport is what a run prints.
type chaosReport struct {
	cfg             chaosConfig
	loadTime, total time.Duration
	settleWait      time.Duration
	cancelledAtEnd  []string

	submissions, acked, failed, retried, arrays, arrayTasks int
	counts                                                  map[string]int
	kills, restarts                                         map[string]int
	nodes                                                   []string

	records     int
	states      map[string]int
	unexplained int
	withToken   int
	intervals   int
	procsSeen   int
	// procsSampled is the most job processes a scan saw during the load.
	procsSampled int
	// outcomes are final states the scripts do not explain (an exit 0
	// job FAILED, a job CANCELLED that the load never cancelled): printed
	// for a person to judge, not violations.
	outcomes []string
	// stepErrors are srun errors found in the jobs' output.
	stepErrors []string

	violations []chaosViolation
	// evidence holds, for each violation's job, its trail and the
	// daemons' log lines that name it (kept with the artifacts).
	evidence string
}

// check gathers the controller's records and runs every check.
func (r *chaosRun) check() *chaosReport {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep := &chaosReport{cfg: r.cfg, counts: map[string]int{}, kills: map[string]int{}, restarts: map[string]int{},
		states: map[string]int{}, nodes: r.daemons()}

	r.mu.Lock()
	subs := slices.Clone(r.subs)
	for _, s := range subs {
		rep.submissions++
		switch {
		case s.id != 0:
			rep.acked++
		default:
			rep.failed++
			r.violate("submit", 0, fmt.Sprintf("%s as %s: %s", s.name, s.user.name, s.failure))
		}
		if s.retried {
			rep.retried++
		}
		if s.kind == chaosArray && s.id != 0 {
			rep.arrays++
			rep.arrayTasks += s.tasks
		}
	}
	r.mu.Unlock()

	var recs []api.Job
	var nodes []api.Node
	err := r.retry(ctx, func(ctx context.Context) error {
		l, err := r.api.Accounting(ctx, api.JobFilter{All: true})
		if err != nil {
			return err
		}
		recs = l.Jobs
		nl, err := r.api.Nodes(ctx)
		nodes = nl.Nodes
		return err
	})
	if err != nil {
		r.addViolations(chaosViolation{invariant: "1-accounting", detail: "cannot list the accounting records: " + err.Error()})
		return r.finish(rep)
	}
	rep.records = len(recs)
	for i := range recs {
		rep.states[string(recs[i].State)]++
	}

	// 1. Every acknowledged job once, nothing unacknowledged.
	v, unexplained, withToken := checkAccounting(subs, recs)
	rep.unexplained, rep.withToken = unexplained, withToken
	r.addViolations(v...)

	// ... and sacct, the command users read accounting with, agrees.
	res := r.cli(r.users[0], chaosCLITimeout, "sacct", "-a", "-X", "-P", "-n", "-S", "2000-01-01T00:00:00", "--format=JobID,JobName,State")
	if res.code != 0 {
		r.addViolations(chaosViolation{invariant: "1-accounting", detail: fmt.Sprintf("sacct exited %d: %s", res.code, oneLine(res.err))})
	} else {
		r.addViolations(compareSacct(res.out, recs)...)
	}

	// 2. Every job ended, or waits for a person or a dependency; every
	// step of an ended job ended too.
	r.addViolations(checkStates(recs)...)
	res = r.cli(r.users[0], chaosCLITimeout, "sacct", "-a", "-P", "-n", "-S", "2000-01-01T00:00:00", "--format=JobID,State")
	if res.code != 0 {
		r.addViolations(chaosViolation{invariant: "2-state", detail: fmt.Sprintf("sacct exited %d: %s", res.code, oneLine(res.err))})
	} else {
		r.addViolations(checkSteps(res.out, recs)...)
	}

	// 3. Nothing allocated twice at once, from the trail.
	var ivs []chaosInterval
	trails := map[uint64][]api.Event{}
	for i := range recs {
		j := &recs[i]
		var evs []api.Event
		if err := r.retry(ctx, func(ctx context.Context) error {
			var err error
			evs, err = r.api.Events(ctx, j.ID)
			return err
		}); err != nil {
			r.addViolations(chaosViolation{invariant: "3-alloc", job: j.ID, detail: "cannot read its trail: " + err.Error()})
			continue
		}
		trails[j.ID] = evs
		iv, v := chaosIntervals(j, evs)
		ivs = append(ivs, iv...)
		r.addViolations(v...)
	}
	rep.intervals = len(ivs)
	r.addViolations(checkAllocations(ivs, nodes)...)
	r.addViolations(checkIdleNodes(recs, nodes)...)

	// 4. No process of a job that is not running.
	r.mu.Lock()
	rep.procsSampled = r.sampled
	if r.sampled == 0 {
		r.violate("4-processes", 0, fmt.Sprintf("no scan during the load saw a job process (TIDE_CHAOS_RUN=%s and SLURM_JOB_ID in /proc/PID/environ): the check cannot see leftovers", r.marker))
	}
	r.mu.Unlock()
	procs, v := r.checkProcesses(recs)
	rep.procsSeen = procs
	r.addViolations(v...)

	rep.outcomes = chaosOutcomes(subs, recs, r.byIDSnapshot())
	rep.stepErrors = r.stepErrors(recs)

	// 5. The database survives one more crash intact (not counted with
	// the load's kills).
	if r.c.standbys != nil {
		// 6. With standby controllers, one primary at the end; the
		// others (paused ones resumed included) stand by.
		var primaries []string
		for _, name := range r.c.controllerNames() {
			if p, err := pingSocket(r.c.controllerSocket(name)); err != nil {
				r.addViolations(chaosViolation{invariant: "6-primary", detail: fmt.Sprintf("%s does not answer pings: %v", name, err)})
			} else if p.Role == api.RolePrimary {
				primaries = append(primaries, name)
			}
		}
		if len(primaries) != 1 {
			r.addViolations(chaosViolation{invariant: "6-primary", detail: fmt.Sprintf("%d controllers answer as primary %v, want 1", len(primaries), primaries)})
		}
	}
	for _, name := range r.c.controllerNames() {
		cmd := r.c.controllerCmd(name)
		r.note("kill -9 %s (pid %d) for the database check", name, cmd.Process.Pid)
		kill(cmd, syscall.SIGKILL)
	}
	if r.c.storeURL != "" {
		// The controller's tables are in its cluster's schema
		// (cluster_name it: tide_it, accounting.ClusterSchema).
		r.addViolations(checkPostgres(r.c.storeURL + "&search_path=tide_it,public")...)
	} else {
		r.addViolations(checkDatabase(filepath.Join(r.c.dir, "ctld", "tide.db"))...)
	}

	r.mu.Lock()
	rep.evidence = r.evidence(trails)
	r.mu.Unlock()
	return r.finish(rep)
}

// finish copies the load's counters and the violations into rep.
func (r *chaosRun) finish(rep *chaosReport) *chaosReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range r.counts {
		rep.counts[k] = v
	}
	for k, v := range r.kills {
		rep.kills[k] = v
	}
	for k, v := range r.restarts {
		rep.restarts[k] = v
	}
	rep.settleWait, rep.cancelledAtEnd = r.settleWait, slices.Clone(r.cancelled)
	rep.violations = slices.Clone(r.violations)
	return rep
}

func (r *chaosRun) addViolations(vs ...chaosViolation) {
	r.mu.Lock()
	r.violations = append(r.violations, vs...)
	r.mu.Unlock()
}

func (r *chaosRun) byIDSnapshot() map[uint64]*chaosSub {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[uint64]*chaosSub, len(r.byID))
	for k, v := range r.byID {
		m[k] = v
	}
	return m
}

// retry calls f until it succeeds, for up to 30 s: the controller may be
// busy recovering from the last kill still.
func (r *chaosRun) retry(ctx context.Context, f func(context.Context) error) error {
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err = f(cctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkAccounting is invariant 1: every id sbatch printed has exactly
// one record (an array: one per task), and every record belongs to an
// acknowledged submission. It returns the violations, how many records
// no acknowledgement explains, and how many of those carry a submission
// token (a retry that the token did not deduplicate).
func checkAccounting(subs []*chaosSub, recs []api.Job) (v []chaosViolation, unexplained, withToken int) {
	count := map[uint64]int{}
	tasks := map[uint64][]int{}
	for i := range recs {
		j := &recs[i]
		count[j.ID]++
		if j.ArrayJobID != 0 {
			if j.IsArrayMeta() {
				tasks[j.ArrayJobID] = append(tasks[j.ArrayJobID], j.ArrayPending.Ids()...)
			} else {
				tasks[j.ArrayJobID] = append(tasks[j.ArrayJobID], j.ArrayTaskID)
			}
		}
	}
	acked, byName := map[uint64]*chaosSub{}, map[string]*chaosSub{}
	for _, s := range subs {
		byName[s.name] = s
		if s.id == 0 {
			continue
		}
		acked[s.id] = s
		if n := count[s.id]; n != 1 {
			v = append(v, chaosViolation{"1-accounting", s.id, fmt.Sprintf("acknowledged to %s (%s) but has %d records", s.user.name, s.name, n)})
		}
		if s.kind != chaosArray {
			continue
		}
		got := tasks[s.id]
		slices.Sort(got)
		want := make([]int, s.tasks)
		for i := range want {
			want[i] = i
		}
		if !slices.Equal(got, want) {
			v = append(v, chaosViolation{"1-accounting", s.id, fmt.Sprintf("array of %d tasks has task records %v", s.tasks, got)})
		}
	}
	for i := range recs {
		j := &recs[i]
		if acked[j.ID] != nil || (j.ArrayJobID != 0 && acked[j.ArrayJobID] != nil) {
			continue
		}
		unexplained++
		if j.SubmitToken != "" {
			withToken++
		}
		why := "no submission of the load has its name"
		if s := byName[j.Name]; s != nil {
			if s.id != 0 {
				why = fmt.Sprintf("its submission %s was acknowledged as job %d: a duplicate", s.name, s.id)
			} else {
				why = fmt.Sprintf("its submission %s failed (%s), yet the job exists", s.name, s.failure)
			}
		}
		v = append(v, chaosViolation{"1-accounting", j.ID, fmt.Sprintf("%s %s of uid %d (token %q) not acknowledged by any sbatch: %s",
			j.Name, j.State, j.UserID, j.SubmitToken, why)})
	}
	return v, unexplained, withToken
}

// compareSacct checks that sacct's JobID column (-X -P -n, JobID first)
// lists every accounting record once, and nothing else.
func compareSacct(out string, recs []api.Job) []chaosViolation {
	listed := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if id, _, _ := strings.Cut(line, "|"); id != "" {
			listed[id]++
		}
	}
	var v []chaosViolation
	for i := range recs {
		id := recs[i].ArrayID()
		if n := listed[id]; n != 1 {
			v = append(v, chaosViolation{"1-accounting", recs[i].ID, fmt.Sprintf("sacct lists %s %d times, want once", id, n)})
		}
		delete(listed, id)
	}
	extra := make([]string, 0, len(listed))
	for id := range listed {
		extra = append(extra, id)
	}
	sort.Strings(extra)
	for _, id := range extra {
		v = append(v, chaosViolation{"1-accounting", 0, fmt.Sprintf("sacct lists %s, which the accounting API does not", id)})
	}
	return v
}

// checkStates is invariant 2: once settled, every record is terminal or
// legitimately pending.
func checkStates(recs []api.Job) []chaosViolation {
	var v []chaosViolation
	for i := range recs {
		if j := &recs[i]; !settled(j) {
			v = append(v, chaosViolation{"2-state", j.ID, fmt.Sprintf("%s ended the run %s (reason %s %s), neither ended nor held or waiting for a dependency",
				j.Name, j.State, j.Reason, j.ReasonDetail)})
		}
	}
	return v
}

// checkSteps reads sacct's step rows (-P -n --format=JobID,State) and
// reports the steps still running, pending or completing in a job that
// ended.
func checkSteps(out string, recs []api.Job) []chaosViolation {
	byID := map[string]*api.Job{}
	for i := range recs {
		byID[recs[i].ArrayID()] = &recs[i]
	}
	var v []chaosViolation
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		id, state, _ := strings.Cut(line, "|")
		job, _, isStep := strings.Cut(id, ".")
		j := byID[job]
		if !isStep || j == nil || !j.State.Terminal() {
			continue
		}
		if st := api.JobState(strings.Fields(state + " x")[0]); !st.Terminal() {
			v = append(v, chaosViolation{"2-state", j.ID, fmt.Sprintf("step %s is %s in sacct, but the job ended %s at %s",
				id, state, j.State, j.EndTime.Format("15:04:05.000"))})
		}
	}
	return v
}

// chaosProc is a process that carries a job's id.
type chaosProc struct {
	pid int
	job uint64
	cmd string
}

// scanJobProcs lists the live processes whose environment has the run's
// marker and a SLURM_JOB_ID: the jobs' processes and their steps'.
func scanJobProcs(marker string) []chaosProc {
	ents, _ := os.ReadDir("/proc")
	var out []chaosProc
	want := []byte("TIDE_CHAOS_RUN=" + marker + "\x00")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !pidAlive(pid) {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(append(env, 0), want) {
			continue
		}
		var job uint64
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("SLURM_JOB_ID=")); ok {
				job, _ = strconv.ParseUint(string(v), 10, 64)
			}
		}
		if job == 0 {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, chaosProc{pid: pid, job: job, cmd: strings.TrimSpace(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))})
	}
	return out
}

// cgroupParent returns the job cgroups' parent from a node's config.
func (r *chaosRun) cgroupParent() string {
	b, _ := os.ReadFile(filepath.Join(r.c.dir, r.c.nodes[0]+".yaml"))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "cgroup_parent: "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// checkProcesses is invariant 4: no process of a job that is not active
// lives on, neither found by its environment nor in the job's cgroup.
// What is found is looked at again for up to 30 s: only what stays is a
// violation. It returns how many job processes the first scan saw.
func (r *chaosRun) checkProcesses(recs []api.Job) (int, []chaosViolation) {
	state := map[uint64]*api.Job{}
	for i := range recs {
		state[recs[i].ID] = &recs[i]
	}
	ended := func(id uint64) bool { j := state[id]; return j == nil || !j.State.Active() }
	h, _ := cgroup.Detect(cgroup.DefaultRoot)
	parent := r.cgroupParent()
	scan := func() map[string]string { // what -> job
		found := map[string]string{}
		for _, p := range scanJobProcs(r.marker) {
			if ended(p.job) {
				found[fmt.Sprintf("pid %d (%s)", p.pid, p.cmd)] = strconv.FormatUint(p.job, 10)
			}
		}
		if h == nil || parent == "" {
			return found
		}
		for id := range state {
			if !ended(id) {
				continue
			}
			for _, dir := range h.Paths(filepath.Join(parent, cgroup.JobName(id))) {
				if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil && len(bytes.TrimSpace(b)) > 0 {
					found[fmt.Sprintf("cgroup %s holds pids %s", dir, strings.Join(strings.Fields(string(b)), ","))] = strconv.FormatUint(id, 10)
				}
			}
		}
		return found
	}
	first := scan()
	seen := len(scanJobProcs(r.marker))
	found := first
	for deadline := time.Now().Add(30 * time.Second); len(found) > 0 && time.Now().Before(deadline); {
		time.Sleep(2 * time.Second)
		found = scan()
	}
	var v []chaosViolation
	keys := make([]string, 0, len(found))
	for k := range found {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, what := range keys {
		id, _ := strconv.ParseUint(found[what], 10, 64)
		st := "no record"
		if j := state[id]; j != nil {
			st = fmt.Sprintf("%s since %s", j.State, j.EndTime.Format("15:04:05.000"))
		}
		v = append(v, chaosViolation{"4-processes", id, fmt.Sprintf("%s still there 30s after the checks began; the job is %s", what, st)})
	}
	return seen, v
}

// checkDatabase is invariant 5: SQLite's integrity and foreign key
// checks pass on the controller's database (the controller is stopped).
func checkDatabase(path string) []chaosViolation {
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		return []chaosViolation{{"5-database", 0, fmt.Sprintf("open %s: %v", path, err)}}
	}
	defer db.Close()
	var v []chaosViolation
	for _, pragma := range []string{"integrity_check", "foreign_key_check"} {
		rows, err := db.Query("PRAGMA " + pragma)
		if err != nil {
			v = append(v, chaosViolation{"5-database", 0, fmt.Sprintf("PRAGMA %s: %v", pragma, err)})
			continue
		}
		cols, _ := rows.Columns()
		var lines []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				lines = append(lines, err.Error())
				break
			}
			lines = append(lines, fmt.Sprint(vals...))
		}
		if err := rows.Err(); err != nil {
			lines = append(lines, err.Error())
		}
		rows.Close()
		ok := len(lines) == 0 || (pragma == "integrity_check" && len(lines) == 1 && lines[0] == "ok")
		if !ok {
			v = append(v, chaosViolation{"5-database", 0, fmt.Sprintf("PRAGMA %s: %s", pragma, strings.Join(lines, "; "))})
		}
	}
	return v
}

// checkPostgres is invariant 5 on the PostgreSQL store: amcheck's
// checks of every table's heap (verify_heapam) and of every B-tree index
// against it (bt_index_check with heapallindexed), SQLite's
// integrity_check's counterparts; and no row whose foreign key names a
// missing row (what foreign_key_check finds; PostgreSQL enforces the
// keys at each write, so this checks that enforcement).
func checkPostgres(url string) []chaosViolation {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bad := func(format string, args ...any) []chaosViolation {
		return []chaosViolation{{"5-database", 0, fmt.Sprintf(format, args...)}}
	}
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		return bad("connect to the store: %v", err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS amcheck SCHEMA public`); err != nil {
		return bad("amcheck (PostgreSQL's contrib, in Debian's postgresql package): %v", err)
	}
	var v []chaosViolation
	rows, err := db.Query(ctx, `SELECT c.relname, p.blkno, p.offnum, p.msg
		FROM pg_class c, verify_heapam(c.oid) p
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'`)
	if err != nil {
		return bad("verify_heapam: %v", err)
	}
	for rows.Next() {
		var rel, msg string
		var blk int64
		var off *int32
		if err := rows.Scan(&rel, &blk, &off, &msg); err != nil {
			v = append(v, bad("verify_heapam: %v", err)...)
			break
		}
		v = append(v, bad("verify_heapam %s block %d: %s", rel, blk, msg)...)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		v = append(v, bad("verify_heapam: %v", err)...)
	}
	var idx []string
	rows, err = db.Query(ctx, `SELECT c.relname FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
		WHERE c.relnamespace = current_schema()::regnamespace AND am.amname = 'btree' ORDER BY 1`)
	if err == nil {
		idx, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return append(v, bad("list the indexes: %v", err)...)
	}
	if len(idx) == 0 {
		v = append(v, bad("the store has no index in its schema (current_schema()): not the controller's database?")...)
	}
	for _, name := range idx {
		if _, err := db.Exec(ctx, `SELECT bt_index_check(to_regclass($1), true)`, pgx.Identifier{name}.Sanitize()); err != nil {
			v = append(v, bad("bt_index_check %s: %v", name, err)...)
		}
	}
	type fk struct{ name, child, col, parent, pcol string }
	rows, err = db.Query(ctx, `SELECT con.conname, cc.relname, a.attname, pc.relname, pa.attname,
			cardinality(con.conkey)
		FROM pg_constraint con
		JOIN pg_class cc ON cc.oid = con.conrelid JOIN pg_class pc ON pc.oid = con.confrelid
		JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = con.conkey[1]
		JOIN pg_attribute pa ON pa.attrelid = con.confrelid AND pa.attnum = con.confkey[1]
		WHERE con.contype = 'f' AND con.connamespace = current_schema()::regnamespace ORDER BY 1`)
	if err != nil {
		return append(v, bad("list the foreign keys: %v", err)...)
	}
	var fks []fk
	for rows.Next() {
		var k fk
		var cols int
		if err := rows.Scan(&k.name, &k.child, &k.col, &k.parent, &k.pcol, &cols); err != nil {
			v = append(v, bad("list the foreign keys: %v", err)...)
			break
		}
		if cols != 1 {
			// The schema has none; a new one needs this check extended.
			v = append(v, bad("foreign key %s has %d columns: this check reads single-column keys only", k.name, cols)...)
			continue
		}
		fks = append(fks, k)
	}
	rows.Close()
	for _, k := range fks {
		id := func(s string) string { return pgx.Identifier{s}.Sanitize() }
		var n int64
		q := fmt.Sprintf(`SELECT count(*) FROM %s c WHERE c.%s IS NOT NULL AND NOT EXISTS (SELECT 1 FROM %s p WHERE p.%s = c.%s)`,
			id(k.child), id(k.col), id(k.parent), id(k.pcol), id(k.col))
		if err := db.QueryRow(ctx, q).Scan(&n); err != nil {
			v = append(v, bad("foreign key %s: %v", k.name, err)...)
		} else if n > 0 {
			v = append(v, bad("foreign key %s: %d rows of %s name a missing %s row", k.name, n, k.child, k.parent)...)
		}
	}
	return v
}

// chaosOutcomes lists the ended records whose state the script and the
// load's actions do not explain.
func chaosOutcomes(subs []*chaosSub, recs []api.Job, byID map[uint64]*chaosSub) []string {
	var out []string
	for i := range recs {
		j := &recs[i]
		s := byID[j.ID]
		if s == nil && j.ArrayJobID != 0 {
			s = byID[j.ArrayJobID]
		}
		if s == nil || !j.State.Terminal() {
			continue
		}
		want := api.StateCompleted
		if s.kind == chaosFail {
			want = api.StateFailed
		}
		switch {
		case j.State == want:
		case j.State == api.StateCancelled && (s.cancelled || j.Reason == api.ReasonDependencyNeverSatisfied ||
			j.CancelledBy != nil):
			// The load, the settle step or a failed dependency cancelled it.
		default:
			out = append(out, fmt.Sprintf("job %s (%s, %s) ended %s reason %s exit %s, want %s%s", j.ArrayID(), s.name, s.user.name,
				j.State, j.Reason, j.Exit, want, restarts(j)))
		}
	}
	return out
}

func restarts(j *api.Job) string {
	if j.Restarts == 0 {
		return ""
	}
	return fmt.Sprintf(" (after %d requeues)", j.Restarts)
}

// stepErrors collects the srun errors the jobs' output files show.
func (r *chaosRun) stepErrors(recs []api.Job) []string {
	var out []string
	for i := range recs {
		j := &recs[i]
		if !strings.Contains(j.Name, "-srun") || j.State == api.StateCancelled || j.Restarts > 0 {
			continue // a cancel or a requeue kills steps on purpose
		}
		b, err := os.ReadFile(filepath.Join(r.work, fmt.Sprintf("slurm-%d.out", j.ID)))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			// The notice of a wait for the controller is not an error
			// of the step: the call went through after it.
			if strings.HasPrefix(line, "srun: error") && !strings.Contains(line, "sleeping and retrying") {
				out = append(out, fmt.Sprintf("job %d: %s", j.ID, oneLine(line)))
			}
		}
	}
	return out
}

// evidence renders, for each job a violation names, its trail and the
// log lines that mention it. Called with mu held.
func (r *chaosRun) evidence(trails map[uint64][]api.Event) string {
	var b strings.Builder
	done := map[uint64]bool{}
	logs := map[string][]string{}
	for _, name := range r.daemons() {
		data, _ := os.ReadFile(filepath.Join(r.c.dir, name+".log"))
		logs[name] = strings.Split(string(data), "\n")
	}
	for _, v := range r.violations {
		if v.job == 0 || done[v.job] {
			continue
		}
		done[v.job] = true
		fmt.Fprintf(&b, "== job %d (%s)\n", v.job, v.invariant)
		if s := r.byID[v.job]; s != nil {
			fmt.Fprintf(&b, "submitted: %s as %s: %q\n", s.name, s.user.name, s.args)
		}
		for _, e := range trails[v.job] {
			fmt.Fprintf(&b, "  %s %-8s %-10s %-20s %s %s\n", e.Time.Format("15:04:05.000000"), e.Kind, e.State, e.Reason, e.Message, e.Actor)
		}
		pat := regexp.MustCompile(fmt.Sprintf(`job_id=%d\b`, v.job))
		for _, name := range r.daemons() {
			for _, line := range logs[name] {
				if pat.MatchString(line) {
					fmt.Fprintf(&b, "  %s: %s\n", name, line)
				}
			}
		}
	}
	return b.String()
}

// print writes the summary: one "chaos: KEY k=v ..." line per topic, in
// a fixed order, then one line per violation (see docs/operations.md).
func (rep *chaosReport) print(out io.Writer) {
	var b strings.Builder
	w := &b
	defer func() {
		// No trailing blanks where a list is empty.
		for _, line := range strings.SplitAfter(b.String(), "\n") {
			io.WriteString(out, strings.TrimRight(line, " \n")+strings.Repeat("\n", strings.Count(line, "\n")))
		}
	}()
	kv := func(m map[string]int) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%d", strings.ReplaceAll(k, " ", "_"), m[k]))
		}
		return strings.Join(parts, " ")
	}
	kills, restarts := 0, 0
	var perDaemon []string
	for _, n := range rep.nodes {
		kills += rep.kills[n]
		restarts += rep.restarts[n]
		perDaemon = append(perDaemon, fmt.Sprintf("%s=%d", n, rep.kills[n]))
	}
	fmt.Fprintf(w, "chaos: run seed=%d duration=%s load=%s settle=%s total=%s\n", rep.cfg.seed, rep.cfg.duration,
		rep.loadTime.Round(time.Second), rep.settleWait.Round(time.Second), rep.total.Round(time.Second))
	fmt.Fprintf(w, "chaos: submit submitted=%d acknowledged=%d failed=%d retried=%d arrays=%d array_tasks=%d\n",
		rep.submissions, rep.acked, rep.failed, rep.retried, rep.arrays, rep.arrayTasks)
	fmt.Fprintf(w, "chaos: actions %s\n", kv(rep.counts))
	fmt.Fprintf(w, "chaos: kills total=%d %s\n", kills, strings.Join(perDaemon, " "))
	fmt.Fprintf(w, "chaos: restarts total=%d\n", restarts)
	fmt.Fprintf(w, "chaos: records total=%d %s unacknowledged=%d unacknowledged_with_token=%d\n", rep.records, kv(rep.states), rep.unexplained, rep.withToken)
	fmt.Fprintf(w, "chaos: settle cancelled=%d %s\n", len(rep.cancelledAtEnd), strings.Join(rep.cancelledAtEnd, " "))
	fmt.Fprintf(w, "chaos: alloc intervals=%d\n", rep.intervals)
	fmt.Fprintf(w, "chaos: processes during_load_max=%d after_settle=%d\n", rep.procsSampled, rep.procsSeen)
	fmt.Fprintf(w, "chaos: outcomes unexplained=%d\n", len(rep.outcomes))
	for _, o := range rep.outcomes {
		fmt.Fprintf(w, "chaos: outcome %s\n", o)
	}
	fmt.Fprintf(w, "chaos: steps srun_errors=%d\n", len(rep.stepErrors))
	for _, e := range rep.stepErrors {
		fmt.Fprintf(w, "chaos: step_error %s\n", e)
	}
	byInv := map[string]int{}
	for _, v := range rep.violations {
		byInv[v.invariant]++
	}
	fmt.Fprintf(w, "chaos: violations total=%d %s\n", len(rep.violations), kv(byInv))
	for _, v := range rep.violations {
		fmt.Fprintf(w, "chaos: violation %s\n", v)
	}
	result := "PASS"
	if len(rep.violations) > 0 {
		result = "FAIL"
	}
	fmt.Fprintf(w, "chaos: result %s\n", result)
}
