// Package scancel implements the scancel command: cancel or signal jobs
// by id or by filter, with Slurm's options and messages.
//
// Unlike Slurm, which reports a failed cancel only with -v and still
// exits 0, Tide prints "scancel: error: Kill job error on job id N: …"
// for every job the controller refused and exits 1, so that scripts
// notice. A job that already finished is not an error.
package scancel

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// Options are scancel's parsed command line.
type Options struct {
	IO  *cmdutil.IOStreams
	API func() (cmdutil.API, error)
	UID func() int

	JobIDs      []string
	Users       string
	Names       string
	Partitions  string
	States      string
	Accounts    string
	NodeList    string
	Signal      string
	Me          bool
	Batch       bool
	Full        bool
	Interactive bool
	Quiet       bool
	Verbose     int
}

// NewCmd returns the scancel command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return newCmd(f, run)
}

func newCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO, API: f.API, UID: f.UID}
	cmd := &cobra.Command{
		Use:   "scancel [job_id...]",
		Short: "Cancel or signal jobs",
		Long: "scancel cancels the jobs named by id, or every job matching the filters that the\n" +
			"caller may cancel. With --signal it sends that signal instead of cancelling.",
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.JobIDs = args
			return runF(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.SetNormalizeFunc(normalize)
	fl.StringVarP(&o.Accounts, "account", "A", "", "cancel jobs of these accounts")
	fl.BoolVarP(&o.Batch, "batch", "b", false, "signal only the batch shell")
	fl.BoolVarP(&o.Full, "full", "f", false, "signal the batch shell and all its children (the default in Tide)")
	fl.BoolVarP(&o.Interactive, "interactive", "i", false, "ask before cancelling each job")
	fl.StringVarP(&o.Names, "name", "n", "", "cancel jobs with these names")
	fl.StringVarP(&o.Partitions, "partition", "p", "", "cancel jobs in these partitions")
	fl.BoolVarP(&o.Quiet, "quiet", "Q", false, "do not report errors")
	fl.StringVarP(&o.Signal, "signal", "s", "", "send `SIGNAL` (name or number) instead of cancelling")
	fl.StringVarP(&o.States, "state", "t", "", "cancel jobs in these states (PENDING, RUNNING, …)")
	fl.StringVarP(&o.Users, "user", "u", "", "cancel jobs of these users (names or ids)")
	fl.BoolVar(&o.Me, "me", false, "cancel the caller's jobs")
	fl.CountVarP(&o.Verbose, "verbose", "v", "report each job as it is signalled")
	fl.StringVarP(&o.NodeList, "nodelist", "w", "", "cancel jobs running on these nodes")
	fl.Bool("help", false, "show this help")
	return cmd
}

func normalize(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	switch name {
	case "jobname":
		name = "name"
	case "states":
		name = "state"
	case "users":
		name = "user"
	case "accounts":
		name = "account"
	case "partitions":
		name = "partition"
	case "nodes", "node":
		name = "nodelist"
	}
	return pflag.NormalizedName(name)
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

// request is what the options resolve to.
type request struct {
	cancel api.CancelRequest
	nodes  map[string]bool
	// filtered: selectors other than ids were given.
	filtered bool
	// none: the filters can match no job.
	none bool
}

func (o *Options) compile() (*request, error) {
	r := &request{}
	fl := &r.cancel.Filter
	for _, arg := range o.JobIDs {
		for _, s := range api.SplitJobIDList(arg) {
			ids, tasks, err := api.ParseJobIDs(s)
			if err != nil {
				return nil, api.Invalid("Invalid job id %s", s)
			}
			fl.IDs = append(fl.IDs, ids...)
			fl.Tasks = append(fl.Tasks, tasks...)
		}
	}
	fl.Users = splitList(o.Users)
	if o.Me {
		fl.Users = append(fl.Users, strconv.Itoa(o.UID()))
	}
	fl.Names = splitList(o.Names)
	fl.Partitions = splitList(o.Partitions)
	fl.Accounts = splitList(o.Accounts)
	states := splitList(o.States)
	for _, s := range states {
		st, err := api.ParseJobState(s)
		if err != nil && slurmfmt.SlurmOnlyJobState(s) {
			continue
		}
		if err != nil {
			return nil, api.Invalid("Invalid job state specified: %s", s)
		}
		fl.States = append(fl.States, st)
	}
	// "-t BOOT_FAIL" names only states Tide never has: nothing matches,
	// and an empty state list must not widen the selection to all states.
	r.none = len(states) > 0 && len(fl.States) == 0
	if o.NodeList != "" {
		hosts, err := hostlist.Expand(o.NodeList)
		if err != nil || len(hosts) == 0 {
			return nil, api.Invalid("'%s' invalid entry for --nodelist", o.NodeList)
		}
		r.nodes = map[string]bool{}
		for _, h := range hosts {
			r.nodes[h] = true
		}
	}
	r.filtered = len(fl.Users) > 0 || len(fl.Names) > 0 || len(fl.Partitions) > 0 ||
		len(fl.Accounts) > 0 || len(states) > 0 || r.nodes != nil
	if len(fl.IDs) == 0 && len(fl.Tasks) == 0 && !r.filtered {
		return nil, api.Invalid("No job identification provided")
	}
	if o.Signal != "" {
		sig, err := ParseSignal(o.Signal)
		if err != nil {
			return nil, err
		}
		r.cancel.Signal = sig
	}
	r.cancel.BatchOnly = o.Batch
	return r, nil
}

func run(ctx context.Context, o *Options) error {
	r, err := o.compile()
	if err != nil {
		return err
	}
	if r.none {
		return nil
	}
	client, err := o.API()
	if err != nil {
		return fmt.Errorf("connect to controller: %w", err)
	}
	if r.nodes != nil || o.Interactive {
		ids, err := o.choose(ctx, client, r)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		// The chosen jobs already passed every filter.
		r.cancel.Filter = api.JobFilter{IDs: ids}
		r.filtered = false
	}
	named := namedIDs(r.cancel.Filter)
	explicit := len(named) > 0
	if o.Verbose > 0 && explicit {
		for _, id := range named {
			o.announce(id, r.cancel.Signal)
		}
	}
	resp, err := client.Cancel(ctx, r.cancel)
	if err != nil {
		return fmt.Errorf("Kill job error: %w", err)
	}
	failed := 0
	seen := map[string]bool{}
	for _, res := range resp.Results {
		id := resultID(res)
		seen[id] = true
		if o.Verbose > 0 && !explicit {
			o.announce(id, r.cancel.Signal)
		}
		if res.Error != "" {
			failed++
			o.report(id, res.Error)
		}
	}
	// Without other filters, an id the controller did not answer for is
	// an unknown job.
	if explicit && !r.filtered {
		for _, id := range named {
			if !seen[id] {
				failed++
				o.report(id, "Invalid job id specified")
			}
		}
	}
	if failed > 0 {
		return &cmdutil.SilentError{Code: cmdutil.ExitError}
	}
	return nil
}

// namedIDs lists the ids a request names, as scancel prints them ("12",
// "7_3").
func namedIDs(f api.JobFilter) []string {
	out := make([]string, 0, len(f.IDs)+len(f.Tasks))
	for _, id := range f.IDs {
		out = append(out, strconv.FormatUint(id, 10))
	}
	for _, t := range f.Tasks {
		out = append(out, t.String())
	}
	return out
}

// resultID is the id a result answers for.
func resultID(r api.JobResult) string {
	if r.ID != "" {
		return r.ID
	}
	return strconv.FormatUint(r.JobID, 10)
}

func (o *Options) announce(id string, sig int) {
	if sig != 0 {
		fmt.Fprintf(o.IO.ErrOut, "scancel: Signal %d to job %s\n", sig, id)
		return
	}
	fmt.Fprintf(o.IO.ErrOut, "scancel: Terminating job %s\n", id)
}

func (o *Options) report(id string, msg string) {
	if o.Quiet {
		return
	}
	cmdutil.Errorf(o.IO.ErrOut, "scancel", "Kill job error on job id %s: %s", id, msg)
}

// choose lists the jobs the filters select, keeps those on the -w nodes
// and, with -i, those the user confirms.
func (o *Options) choose(ctx context.Context, client cmdutil.API, r *request) ([]uint64, error) {
	list, err := client.Jobs(ctx, r.cancel.Filter)
	if err != nil {
		return nil, fmt.Errorf("slurm_load_jobs error: %w", err)
	}
	in := bufio.NewReader(o.IO.In)
	var ids []uint64
	for i := range list.Jobs {
		j := &list.Jobs[i]
		if j.State.Terminal() {
			continue
		}
		if r.nodes != nil && !onNodes(j, r.nodes) {
			continue
		}
		if o.Interactive {
			ok, err := confirm(o.IO.Out, in, j)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		ids = append(ids, j.ID)
	}
	return ids, nil
}

func onNodes(j *api.Job, nodes map[string]bool) bool {
	for _, a := range j.Alloc {
		if nodes[a.Node] {
			return true
		}
	}
	return false
}

// confirm asks Slurm's question and reads a y/n answer; end of input
// means no.
func confirm(w io.Writer, in *bufio.Reader, j *api.Job) (bool, error) {
	// The name is the job owner's text: escaped, it cannot redraw the
	// question (an operator answers for other users' jobs).
	fmt.Fprintf(w, "Cancel job_id=%d name=%s partition=%s [y/n]? ", j.ID, termsafe.Escape(j.Name), termsafe.Escape(j.Partition))
	line, err := in.ReadString('\n')
	if err != nil && err != io.EOF {
		return false, fmt.Errorf("read answer: %w", err)
	}
	ans := strings.ToLower(strings.TrimSpace(line))
	return ans == "y" || ans == "yes", nil
}
