package sacct

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
)

// Options are sacct's parsed flags and dependencies.
type Options struct {
	IO     *cmdutil.IOStreams
	API    func() (cmdutil.API, error)
	Now    func() time.Time
	UID    func() int
	Getenv func(string) string
	// Loc is the zone times are read and printed in (time.Local in
	// production).
	Loc *time.Location

	Jobs       []string
	Users      []string
	AllUsers   bool
	Accounts   []string
	Partitions []string
	States     []string
	Names      []string
	Start, End string

	Formats     []string
	Parsable    bool
	Parsable2   bool
	NoHeader    bool
	Allocations bool
	Long        bool
	Brief       bool
	JSON        bool
	HelpFormat  bool
	Delimiter   string
	// Clusters is -M/--clusters: the clusters whose jobs to show
	// (clusters.go).
	Clusters []string
	// more holds what the rest of Slurm's options ask for (options.go,
	// filters.go).
	more slurmOptions
}

// NewCmd returns the `sacct` command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return newCmd(f, time.Local)
}

// newCmd builds sacct. Cobra only dispatches: sacct reads its own
// arguments with Slurm's option table (options.go).
func newCmd(f *cmdutil.Factory, loc *time.Location) *cobra.Command {
	opts := &Options{IO: f.IO, API: f.API, Now: f.Now, UID: f.UID, Getenv: f.Getenv, Loc: loc}
	return cmdutil.RawCommand("sacct [OPTIONS]", "Show accounting data of jobs",
		func(ctx context.Context, args []string) error {
			if done, err := opts.parseArgs(args); done || err != nil {
				return err
			}
			return opts.Run(ctx)
		})
}

// Run prints the accounting report.
func (o *Options) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.HelpFormat {
		return printHelpFormat(o.IO.Out)
	}
	cols, err := o.columns()
	if err != nil {
		return err
	}
	q, err := o.query()
	if err != nil {
		return err
	}
	c, err := o.API()
	if err != nil {
		return err
	}
	list, err := c.Accounting(ctx, q.filter)
	if err != nil {
		return fmt.Errorf("load accounting data: %w", err)
	}
	now := list.Now
	if now.IsZero() {
		now = o.Now()
	}
	scope, err := o.clusterScope(ctx, c, q.filter.Clusters) // clusters.go
	if err != nil {
		return err
	}
	// The controller sorts by cluster, then id: the order is kept.
	var jobs []api.Job
	lacksCluster := false
	for _, j := range list.Jobs {
		if q.inWindow(&j, now) && o.keeps(&j) {
			jobs = append(jobs, j)
			lacksCluster = lacksCluster || j.Cluster == ""
		}
	}
	cluster := scope.local
	if cluster == "" && lacksCluster && (o.JSON || needsCluster(cols)) {
		info, err := c.Cluster(ctx)
		if err != nil {
			return fmt.Errorf("load cluster name: %w", err)
		}
		cluster = info.Name
	}
	// Steps and usage are each cluster's own (clusters.go).
	own := scope.ownJobs(jobs)
	stepMap, err := o.loadSteps(ctx, c, own)
	if err != nil {
		return err
	}
	otherSteps, err := o.loadClusterSteps(ctx, c, scope, jobs) // clusters.go
	if err != nil {
		return err
	}
	stepsOf := func(j *api.Job) []api.StepRecord {
		if !scope.own(j) {
			return otherSteps[j.Cluster][j.ID]
		}
		return stepMap[j.ID]
	}
	ownUsage, err := loadUsage(ctx, c, own) // usage.go
	if err != nil {
		return err
	}
	otherUsage, err := o.loadClusterUsage(ctx, c, scope, jobs) // clusters.go
	if err != nil {
		return err
	}
	var rows []row
	for i := range jobs {
		j := &jobs[i]
		steps, usage := stepsOf(j), ownUsage
		if !scope.own(j) {
			usage = otherUsage[j.Cluster]
		}
		only := q.only[strconv.FormatUint(j.ID, 10)]
		if only == nil {
			only = q.only[j.ArrayID()]
		}
		if only == nil {
			r := row{j: j, now: now, loc: o.Loc, cluster: cluster, derived: derivedExit(steps)}
			r.jobUser, r.jobSys = usage.jobCPU(j)
			rows = append(rows, r)
		}
		// Allocation-only jobs (srun, salloc) run no batch script.
		if !o.Allocations && !j.StartTime.IsZero() && !j.Allocation && (only == nil || only["batch"]) {
			rows = append(rows, row{j: j, step: true, now: now, loc: o.Loc, cluster: cluster, usage: usage.of(j.ID, api.BatchStepID)})
		}
		for k := range steps {
			st := &steps[k]
			if only != nil && !only[strconv.FormatUint(uint64(st.StepID), 10)] {
				continue
			}
			sj := stepJob(j, st)
			rows = append(rows, row{j: sj, step: true, rec: st, now: now, loc: o.Loc, cluster: cluster, usage: usage.of(j.ID, st.StepID)})
		}
	}
	if tf := slurmfmt.ParseTimeFormat(o.Getenv("SLURM_TIME_FORMAT"), now, o.Loc); !tf.Standard() {
		for i := range rows {
			rows[i].tf = tf
		}
	}
	if o.JSON {
		return writeJSON(o.IO.Out, jobs, stepsOf, now, o.Loc, cluster, o.Allocations)
	}
	mode := fixedWidth
	switch {
	case o.Parsable2:
		mode = parsableNoEnd
	case o.Parsable:
		mode = parsableEnd
	}
	delim := "|"
	if o.Delimiter != "" {
		delim = o.Delimiter
	}
	return writeTable(o.IO.Out, cols, rows, mode, delim, !o.NoHeader)
}

// columns resolves -o/-b/-l/SACCT_FORMAT into columns, in Slurm's order
// of precedence: explicit fields, then brief and long lists appended,
// else SACCT_FORMAT or the default list.
func (o *Options) columns() ([]column, error) {
	var lists []string
	lists = append(lists, o.Formats...)
	if o.Brief {
		lists = append(lists, briefFields)
	}
	if o.Long {
		lists = append(lists, longFields)
	}
	if len(lists) == 0 {
		if env := o.Getenv("SACCT_FORMAT"); env != "" {
			lists = append(lists, env)
		} else {
			lists = append(lists, defaultFields)
		}
	}
	return parseFormat(strings.Join(lists, ","))
}

// query is the request plus what the client applies itself.
type query struct {
	filter api.JobFilter
	// only holds, for jobs asked for as N.batch or N.S (or N_I.…), the
	// steps to show ("batch", "0", …) instead of the job's rows.
	only  map[string]map[string]bool
	since time.Time
	until time.Time
}

func (o *Options) query() (*query, error) {
	q := &query{only: map[string]map[string]bool{}}
	f := &q.filter
	f.All = true
	seen := map[string]bool{}
	// -j is a string slice, split at every comma; array task lists
	// ("7_[1,3]") are put back together.
	for _, s := range api.SplitJobIDList(strings.Join(o.Jobs, ",")) {
		idPart, step, hasStep := strings.Cut(s, ".")
		ids, tasks, err := api.ParseJobIDs(idPart)
		if err != nil || (hasStep && step != "batch" && !isStepID(step)) || (hasStep && len(tasks) > 1) {
			return nil, fmt.Errorf("invalid job id or step specified: %s", s)
		}
		key := idPart
		if len(tasks) == 1 {
			key = tasks[0].String()
		} else if len(ids) == 1 {
			key = strconv.FormatUint(ids[0], 10)
		}
		switch {
		case hasStep && (!seen[key] || q.only[key] != nil):
			if q.only[key] == nil {
				q.only[key] = map[string]bool{}
			}
			q.only[key][step] = true
		case !hasStep:
			delete(q.only, key)
		}
		if !seen[key] {
			seen[key] = true
			f.IDs = append(f.IDs, ids...)
			f.Tasks = append(f.Tasks, tasks...)
		}
	}
	all := o.AllUsers
	for _, u := range o.Users {
		if u = strings.TrimSpace(u); u == "-1" {
			all = true
		} else if u != "" {
			f.Users = append(f.Users, u)
		}
	}
	switch {
	case all:
		f.Users = nil
	case len(f.Users) == 0 && len(f.IDs) == 0 && len(f.Tasks) == 0 && o.UID() != 0:
		// Slurm shows a non-root caller only their own jobs unless asked
		// for more; naming jobs lifts that default.
		f.Users = []string{strconv.Itoa(o.UID())}
	}
	f.Accounts = nonEmpty(o.Accounts)
	f.Partitions = nonEmpty(o.Partitions)
	f.Names = nonEmpty(o.Names)
	for _, s := range nonEmpty(o.States) {
		st, err := api.ParseJobState(s)
		if err != nil {
			return nil, fmt.Errorf("unrecognized job state value %s", s)
		}
		f.States = append(f.States, st)
	}
	now := o.Now()
	var err error
	if o.Start != "" {
		if q.since, err = ParseTime(o.Start, now, o.Loc); err != nil {
			return nil, err
		}
	} else if len(f.IDs) == 0 && len(f.Tasks) == 0 {
		// Slurm's default window: since midnight, or since now when
		// states are asked for (jobs in that state now).
		if len(f.States) > 0 {
			q.since = now
		} else {
			n := now.In(o.Loc)
			q.since = time.Date(n.Year(), n.Month(), n.Day(), 0, 0, 0, 0, o.Loc)
		}
	}
	if o.End != "" {
		if q.until, err = ParseTime(o.End, now, o.Loc); err != nil {
			return nil, err
		}
	}
	if !q.since.IsZero() && !q.until.IsZero() && q.until.Before(q.since) {
		return nil, fmt.Errorf("start time (%s) is after end time (%s)",
			q.since.In(o.Loc).Format("2006-01-02T15:04:05"), q.until.In(o.Loc).Format("2006-01-02T15:04:05"))
	}
	f.Since, f.Until = q.since, q.until
	f.Clusters = o.clusterList() // clusters.go
	return q, nil
}

// inWindow applies the -S/-E window on the client too, so that the
// report holds the same jobs whichever controller answers: a job counts
// from when it became eligible (or was submitted) until it ended, and a
// job that has not reached a final state is active now.
func (q *query) inWindow(j *api.Job, now time.Time) bool {
	from := j.EligibleTime
	if from.IsZero() {
		from = j.SubmitTime
	}
	to := j.EndTime
	if to.IsZero() || !j.State.Terminal() {
		// Still pending, running or completing: active now.
		to = now
	}
	if !q.until.IsZero() && from.After(q.until) {
		return false
	}
	if !q.since.IsZero() && to.Before(q.since) {
		return false
	}
	return true
}

func nonEmpty(xs []string) []string {
	var out []string
	for _, x := range xs {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func needsCluster(cols []column) bool {
	for _, c := range cols {
		if c.def.name == "Cluster" {
			return true
		}
	}
	return false
}

// printHelpFormat lists the fields four to a line, as sacct -e does.
func printHelpFormat(w io.Writer) error {
	var b strings.Builder
	for i, f := range fieldDefs() {
		switch {
		case i&3 != 0:
			b.WriteByte(' ')
		case i > 0:
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%-19s", f.name)
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// isStepID reports whether s is a numeric step id ("0", "12").
func isStepID(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

// stepLister is implemented by clients that can list srun steps
// (*client.Client); without it sacct shows batch steps only.
type stepLister interface {
	Steps(ctx context.Context, ids []uint64) ([]api.StepRecord, error)
}

// loadSteps fetches the srun steps of the jobs that started, by job id.
func (o *Options) loadSteps(ctx context.Context, c cmdutil.API, jobs []api.Job) (map[uint64][]api.StepRecord, error) {
	sl, ok := c.(stepLister)
	if !ok || o.Allocations {
		return nil, nil
	}
	var ids []uint64
	for i := range jobs {
		if !jobs[i].StartTime.IsZero() {
			ids = append(ids, jobs[i].ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	steps, err := sl.Steps(ctx, ids)
	if err != nil {
		if errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrUnavailable) {
			return nil, nil // a controller without steps
		}
		return nil, fmt.Errorf("load job steps: %w", err)
	}
	out := map[uint64][]api.StepRecord{}
	for _, s := range steps {
		out[s.JobID] = append(out[s.JobID], s)
	}
	return out, nil
}

// stepJob is the job as a step row sees it: the step's state, exit and
// times, and only the step's nodes.
func stepJob(j *api.Job, st *api.StepRecord) *api.Job {
	cp := *j
	cp.State, cp.Exit, cp.StartTime, cp.EndTime = st.State, st.Exit, st.Start, st.End
	cp.CancelledBy = nil
	cp.Alloc = nil
	for _, a := range j.Alloc {
		for _, n := range st.Nodes {
			if a.Node == n {
				cp.Alloc = append(cp.Alloc, a)
			}
		}
	}
	return &cp
}

// derivedExit is Slurm's DerivedExitCode: the highest exit of the
// steps (a signal counts above any code).
func derivedExit(steps []api.StepRecord) api.ExitStatus {
	var out api.ExitStatus
	rank := func(e api.ExitStatus) int {
		if e.Signal != 0 {
			return 1000 + e.Signal
		}
		return e.Code
	}
	for _, s := range steps {
		if rank(s.Exit) > rank(out) {
			out = s.Exit
		}
	}
	return out
}
