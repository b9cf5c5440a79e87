// Package scancel implements the scancel command: cancel or signal jobs
// by id or by filter, with Slurm's options and messages.
//
// Unlike Slurm, which reports a failed cancel only with -v and still
// exits 0, Tide prints "scancel: error: Kill job error on job id N: …"
// for every job the controller refused and exits 1, so that scripts
// notice. A job that already finished is not an error.
//
// Signals go where Slurm sends them: --signal to the job's steps (the
// tasks srun started) and not the batch shell; with -b to the batch
// shell alone (-b without --signal sends it SIGKILL); with -f to the
// batch shell and its children, srun among them, which passes it on to
// its tasks. --signal=KILL without -b cancels the job, as in Slurm.
package scancel

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

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
	// Getenv reads POSIXLY_CORRECT (nil: none).
	Getenv func(string) string

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
	// QOS (-q) selects jobs by class; Reservation (-R) and WCKey
	// (--wckey) select jobs that have them, which no Tide job does.
	QOS         string
	Reservation string
	WCKey       string
	// Clusters is -M/--clusters: it must name the controller's cluster
	// (or be "all").
	Clusters string
}

// NewCmd returns the scancel command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return newCmd(f, run)
}

// newCmd builds scancel around runF. Cobra only dispatches: scancel
// reads its own arguments with Slurm's option table (options.go).
func newCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO, API: f.API, UID: f.UID, Getenv: f.Getenv}
	return cmdutil.RawCommand("scancel [OPTIONS] [job_id[_array_id][.step_id]...]", "Cancel or signal jobs",
		func(ctx context.Context, args []string) error {
			if done, err := o.parseArgs(args); done || err != nil {
				return err
			}
			return runF(ctx, o)
		})
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
	qos    map[string]bool
	// filtered: selectors other than ids were given.
	filtered bool
	// none: the filters can match no job.
	none bool
	// sigSet: --signal was given (messages say "Signal N to" rather
	// than "Terminating"); kind is "batch " or "full " for -b and -f.
	sigSet bool
	kind   string
}

func (o *Options) compile() (*request, error) {
	r := &request{}
	fl := &r.cancel.Filter
	for _, arg := range o.JobIDs {
		for _, s := range api.SplitJobIDList(arg) {
			if ref, ok := api.ParseStepRef(s); ok {
				// J.S: that step alone (steps.go).
				r.cancel.Steps = append(r.cancel.Steps, ref)
				continue
			}
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
	if qs := splitList(o.QOS); len(qs) > 0 {
		r.qos = map[string]bool{}
		for _, q := range qs {
			r.qos[strings.ToLower(q)] = true
		}
	}
	// No Tide job has a reservation or a wckey.
	r.none = r.none || o.Reservation != "" || o.WCKey != ""
	r.filtered = len(fl.Users) > 0 || len(fl.Names) > 0 || len(fl.Partitions) > 0 ||
		len(fl.Accounts) > 0 || len(states) > 0 || r.nodes != nil || r.qos != nil ||
		o.Reservation != "" || o.WCKey != ""
	if len(fl.IDs) == 0 && len(fl.Tasks) == 0 && len(r.cancel.Steps) == 0 && !r.filtered {
		return nil, api.Invalid("No job identification provided")
	}
	if o.Signal != "" {
		sig, err := ParseSignal(o.Signal)
		if err != nil {
			return nil, err
		}
		r.cancel.Signal = sig
		r.sigSet = true
	}
	// Both flags go to the controller as given, -f winning over -b for
	// the target (Slurm: "-b is ignored with -f").
	r.cancel.BatchOnly, r.cancel.Full = o.Batch, o.Full
	switch {
	case o.Full:
		r.kind = "full "
	case o.Batch:
		r.kind = "batch "
	}
	if o.Batch && !r.sigSet {
		// Slurm's scancel -b without --signal: SIGKILL to the batch
		// shell.
		r.cancel.Signal = sigKill
	}
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
	if err := o.checkClusters(ctx, client); err != nil {
		return err
	}
	if r.nodes != nil || r.qos != nil || o.Interactive {
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
	named := append(namedIDs(r.cancel.Filter), namedSteps(r.cancel.Steps)...)
	explicit := len(named) > 0
	if o.Verbose > 0 && explicit {
		for _, id := range named {
			o.announce(id, r)
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
			o.announce(id, r)
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

// namedSteps lists the steps a request names, as scancel prints them
// ("12.0").
func namedSteps(refs []api.StepRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.String()
	}
	return out
}

// isStepID reports whether id, as namedIDs and namedSteps print them,
// names a step.
func isStepID(id string) bool { return strings.Contains(id, ".") }

// resultID is the id a result answers for.
func resultID(r api.JobResult) string {
	if r.ID != "" {
		return r.ID
	}
	return strconv.FormatUint(r.JobID, 10)
}

// announce prints Slurm's -v line for one job: "Signal 10 to batch job
// 12", "Terminating job 12".
func (o *Options) announce(id string, r *request) {
	if isStepID(id) {
		// Steps: "Signal 10 to step 12.0", "Terminating step 12.0".
		if r.sigSet {
			fmt.Fprintf(o.IO.ErrOut, "scancel: Signal %d to step %s\n", r.cancel.Signal, id)
		} else {
			fmt.Fprintf(o.IO.ErrOut, "scancel: Terminating step %s\n", id)
		}
		return
	}
	if r.sigSet {
		fmt.Fprintf(o.IO.ErrOut, "scancel: Signal %d to %sjob %s\n", r.cancel.Signal, r.kind, id)
		return
	}
	fmt.Fprintf(o.IO.ErrOut, "scancel: Terminating %sjob %s\n", r.kind, id)
}

func (o *Options) report(id string, msg string) {
	if o.Quiet {
		return
	}
	if isStepID(id) {
		cmdutil.Errorf(o.IO.ErrOut, "scancel", "Kill job error on job step id %s: %s", id, msg)
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
		if r.qos != nil && !r.qos[strings.ToLower(j.QOS)] {
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
