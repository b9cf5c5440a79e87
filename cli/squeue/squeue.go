package squeue

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// Slurm's built-in formats.
const (
	DefaultFormat = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
	LongFormat    = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
	StartFormat   = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"
	// DefaultSort is partition, then compact state, then priority
	// descending; ties fall back to the job id.
	DefaultSort = "P,t,-p"
)

// ErrInvalidJobID is what squeue prints when -j names no known job.
const ErrInvalidJobID = "slurm_load_jobs error: Invalid job id specified"

// Options are squeue's parsed command line.
type Options struct {
	IO  *cmdutil.IOStreams
	API func() (cmdutil.API, error)
	Now func() time.Time
	UID func() int
	// Getenv reads SQUEUE_* defaults.
	Getenv func(string) string
	// Loc is the zone times are printed in (time.Local by default).
	Loc *time.Location
	// Sleep waits between --iterate rounds; it returns early with the
	// context's error when interrupted.
	Sleep func(ctx context.Context, d time.Duration) error

	Format     string
	FormatLong string
	Sort       string
	Long       bool
	Start      bool
	NoHeader   bool
	JSON       bool
	Me         bool
	Verbose    int
	Iterate    int
	// Array (-r) prints each pending task of an array on its own line
	// instead of one "N_[tasks]" line.
	Array bool

	Users      string
	Jobs       string
	JobsFlag   bool
	Partitions string
	States     string
	Names      string
	Accounts   string
	QOS        string
	NodeList   string
	// Licenses (-L) and Reservation (-R) select jobs that use them,
	// which no Tide job does.
	Licenses    string
	Reservation string
	// Clusters is -M/--clusters: it must name the controller's cluster
	// (or be "all"); SLURM_CLUSTERS stands in for it.
	Clusters string
	// Steps and StepsFlag are -s/--steps[=list].
	Steps     string
	StepsFlag bool

	// formatSet and formatLongSet say -o and -O were given, which
	// Slurm refuses together.
	formatSet, formatLongSet bool
}

// NewCmd returns the squeue command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return newCmd(f, run)
}

// newCmd builds squeue around runF. Cobra only dispatches: squeue reads
// its own arguments with Slurm's option table (options.go).
func newCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{
		IO: f.IO, API: f.API, Now: f.Now, UID: f.UID, Getenv: f.Getenv,
		Loc: time.Local, Sleep: sleepCtx,
	}
	return cmdutil.RawCommand("squeue [OPTIONS]", "View information about jobs in the scheduling queue",
		func(ctx context.Context, args []string) error {
			if done, err := o.parseArgs(args); done || err != nil {
				return err
			}
			return runF(ctx, o)
		})
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// query is a compiled request: what to ask the controller, what to drop
// afterwards, how to sort and how to print.
type query struct {
	filter   api.JobFilter
	anyState bool // no -t and no -j: show only active jobs
	// noState: -t named only Slurm states Tide never has (SUSPENDED…),
	// so nothing matches.
	noState bool
	// none: -L or -R asked for licenses or a reservation, which no
	// Tide job has.
	none   bool
	nodes  map[string]bool
	qos    map[string]bool
	sort   []sortKey
	format string
	long   bool
}

func (o *Options) env(key string) string {
	if o.Getenv == nil {
		return ""
	}
	return o.Getenv(key)
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// compile turns the options into a query, rejecting bad ids, states and
// node lists the way Slurm does.
func (o *Options) compile() (*query, error) {
	o.envDefaults()
	q := &query{}
	users := o.Users
	if users == "" {
		users = o.env("SQUEUE_USERS")
	}
	q.filter.Users = splitList(users)
	if o.Me {
		q.filter.Users = append(q.filter.Users, strconv.Itoa(o.UID()))
	}
	for _, s := range api.SplitJobIDList(o.Jobs) {
		ids, tasks, err := api.ParseJobIDs(s)
		if err != nil {
			return nil, api.Invalid("Invalid job id: %s", s)
		}
		q.filter.IDs = append(q.filter.IDs, ids...)
		q.filter.Tasks = append(q.filter.Tasks, tasks...)
	}
	parts := o.Partitions
	if parts == "" {
		parts = o.env("SQUEUE_PARTITION")
	}
	q.filter.Partitions = splitList(parts)
	names := o.Names
	if names == "" {
		names = o.env("SQUEUE_NAMES")
	}
	q.filter.Names = splitList(names)
	accts := o.Accounts
	if accts == "" {
		accts = o.env("SQUEUE_ACCOUNT")
	}
	q.filter.Accounts = splitList(accts)
	states := o.States
	if states == "" {
		states = o.env("SQUEUE_STATES")
	}
	if states == "" && o.Start {
		states = "PD"
	}
	all := false
	for _, s := range splitList(states) {
		if strings.EqualFold(s, "all") {
			all = true
			continue
		}
		st, err := api.ParseJobState(s)
		if err != nil && slurmfmt.SlurmOnlyJobState(s) {
			q.noState = true
			continue
		}
		if err != nil {
			return nil, api.Invalid("Invalid job state specified: %s", s)
		}
		if st.Terminal() {
			q.filter.All = true
		}
		q.filter.States = append(q.filter.States, st)
	}
	if all {
		q.filter.States = nil
		q.filter.All = true
		q.noState = false
	}
	q.noState = q.noState && len(q.filter.States) == 0
	q.none = o.Licenses != "" || o.Reservation != ""
	if len(q.filter.IDs) > 0 || len(q.filter.Tasks) > 0 || o.JobsFlag {
		q.filter.All = true
	}
	q.anyState = !all && len(q.filter.States) == 0 && !o.JobsFlag
	if o.NodeList != "" {
		hosts, err := hostlist.Expand(o.NodeList)
		if err != nil || len(hosts) == 0 {
			return nil, api.Invalid("'%s' invalid entry for --nodelist", o.NodeList)
		}
		q.nodes = make(map[string]bool, len(hosts))
		for _, h := range hosts {
			q.nodes[h] = true
		}
	}
	if qs := splitList(o.QOS); len(qs) > 0 {
		q.qos = make(map[string]bool, len(qs))
		for _, s := range qs {
			q.qos[strings.ToLower(s)] = true
		}
	}
	sortSpec := o.Sort
	if sortSpec == "" {
		sortSpec = o.env("SQUEUE_SORT")
	}
	if sortSpec == "" {
		sortSpec = DefaultSort
		if o.Start {
			sortSpec = "S"
		}
	}
	keys, err := parseSort(sortSpec)
	if err != nil {
		return nil, err
	}
	q.sort = keys
	switch {
	case o.FormatLong != "":
		q.format, q.long = o.FormatLong, true
	case o.Format != "":
		q.format = o.Format
	case o.Long:
		q.format = LongFormat
	case o.Start:
		q.format = StartFormat
	case o.env("SQUEUE_FORMAT") != "":
		q.format = o.env("SQUEUE_FORMAT")
	case o.env("SQUEUE_FORMAT2") != "":
		q.format, q.long = o.env("SQUEUE_FORMAT2"), true
	default:
		q.format = DefaultFormat
	}
	return q, nil
}

// keep applies the filters the controller does not know.
func (q *query) keep(j *api.Job) bool {
	if q.noState || q.none {
		return false
	}
	if q.anyState && j.State.Terminal() {
		return false
	}
	if len(q.filter.States) > 0 && !hasState(q.filter.States, j.State) {
		return false
	}
	if q.nodes != nil {
		hit := false
		for i := range j.Alloc {
			if q.nodes[j.Alloc[i].Node] {
				hit = true
				break
			}
		}
		if !hit {
			return false
		}
	}
	if q.qos != nil && !q.qos[strings.ToLower(j.QOS)] {
		return false
	}
	return true
}

func hasState(sts []api.JobState, s api.JobState) bool {
	for _, x := range sts {
		if x == s {
			return true
		}
	}
	return false
}

func run(ctx context.Context, o *Options) error {
	if o.StepsFlag && !o.JSON {
		return runSteps(ctx, o)
	}
	q, err := o.compile()
	if err != nil {
		return err
	}
	e := &env{loc: o.Loc, tf: o.timeFormat()}
	var tbl *slurmfmt.Table[*api.Job]
	if !o.JSON {
		if tbl, err = compileFormat(q.format, q.long, e); err != nil {
			return err
		}
	}
	if o.Verbose > 0 {
		o.printOptions(q)
	}
	client, err := o.API()
	if err != nil {
		return fmt.Errorf("connect to controller: %w", err)
	}
	if err := o.checkClusters(ctx, client); err != nil {
		return err
	}
	return o.repeat(ctx, func(w *bufio.Writer) error { return o.once(ctx, client, q, tbl, e, w) })
}

// once loads, filters, sorts and prints the queue one time.
func (o *Options) once(ctx context.Context, client cmdutil.API, q *query, tbl *slurmfmt.Table[*api.Job], e *env, w *bufio.Writer) error {
	list, err := client.Jobs(ctx, q.filter)
	if err != nil {
		return fmt.Errorf("slurm_load_jobs error: %w", err)
	}
	if (len(q.filter.IDs) > 0 || len(q.filter.Tasks) > 0) && len(list.Jobs) == 0 {
		fmt.Fprintln(o.IO.ErrOut, ErrInvalidJobID)
		return &cmdutil.SilentError{Code: cmdutil.ExitError}
	}
	e.setNow(list.Now, o.Now)
	jobs := make([]*api.Job, 0, len(list.Jobs))
	for i := range list.Jobs {
		if q.keep(&list.Jobs[i]) {
			jobs = append(jobs, &list.Jobs[i])
		}
	}
	if o.Array {
		jobs = expandArrays(jobs, q.filter)
	}
	sortJobs(jobs, q.sort, e)
	if o.JSON {
		if err := writeJSON(w, jobs, e); err != nil {
			return err
		}
		return flush(w)
	}
	if !o.NoHeader && (o.Iterate > 0 || o.Verbose > 0 || o.Long) {
		w.WriteString(e.now.In(e.loc).Format(slurmfmt.DateLayout))
		w.WriteByte('\n')
	}
	if err := render(w, tbl, jobs, !o.NoHeader); err != nil {
		return err
	}
	return flush(w)
}

func flush(w *bufio.Writer) error {
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// render prints the header (if asked) and one line per job.
func render(w io.Writer, tbl *slurmfmt.Table[*api.Job], jobs []*api.Job, header bool) error {
	line := make([]byte, 0, 256)
	if header {
		line = tbl.AppendHeader(line)
		if _, err := w.Write(line); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	for _, j := range jobs {
		line = tbl.AppendRow(line[:0], j)
		if _, err := w.Write(line); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	return nil
}

// printOptions is -v: the effective options, on stderr so that stdout
// stays parseable.
func (o *Options) printOptions(q *query) {
	b := &strings.Builder{}
	line := func(k, v string) { fmt.Fprintf(b, "%-12s= %s\n", k, v) }
	orNull := func(s string) string { return slurmfmt.OrNull(s) }
	b.WriteString("-----------------------------\n")
	line("accounts", orNull(strings.Join(q.filter.Accounts, ",")))
	line("all_states", strconv.FormatBool(q.filter.All))
	line("format", q.format)
	line("iterate", strconv.Itoa(o.Iterate))
	line("job_flag", strconv.FormatBool(o.JobsFlag))
	line("jobs", orNull(o.Jobs))
	line("long", strconv.FormatBool(o.Long))
	line("names", orNull(strings.Join(q.filter.Names, ",")))
	line("no_header", strconv.FormatBool(o.NoHeader))
	line("nodes", orNull(o.NodeList))
	line("partitions", orNull(strings.Join(q.filter.Partitions, ",")))
	line("sort", orNull(o.Sort))
	line("start_flag", strconv.FormatBool(o.Start))
	st := make([]string, len(q.filter.States))
	for i, s := range q.filter.States {
		st[i] = string(s)
	}
	line("states", orNull(strings.Join(st, ",")))
	line("users", orNull(strings.Join(q.filter.Users, ",")))
	line("verbose", strconv.Itoa(o.Verbose))
	b.WriteString("-----------------------------\n")
	io.WriteString(o.IO.ErrOut, b.String())
}

// expandArrays is -r: each array meta record becomes one line per
// pending task (those the filter names, when it names tasks), printed
// as "N_I".
func expandArrays(jobs []*api.Job, f api.JobFilter) []*api.Job {
	out := make([]*api.Job, 0, len(jobs))
	for _, j := range jobs {
		if !j.IsArrayMeta() {
			out = append(out, j)
			continue
		}
		whole := len(f.Tasks) == 0 || slices.Contains(f.IDs, j.ArrayJobID)
		j.ArrayPending.Each(func(t int) bool {
			if whole || slices.Contains(f.Tasks, api.TaskRef{JobID: j.ArrayJobID, Task: t}) {
				c := *j
				c.ArrayPending, c.ArrayTaskID = nil, t
				out = append(out, &c)
			}
			return true
		})
	}
	return out
}
