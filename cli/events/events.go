package events

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/jobfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// Options are the parsed flags and dependencies of events and audit.
type Options struct {
	IO  *cmdutil.IOStreams
	API func() (cmdutil.API, error)
	// Loc is the zone times are printed in (time.Local in production).
	Loc  *time.Location
	JSON bool
	// Limit is audit's -n: how many of the newest records to show.
	Limit int
}

// NewCmd returns `tide events JOBID`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return newEventsCmd(f, time.Local)
}

// NewAuditCmd returns `tide audit [-n N]`.
func NewAuditCmd(f *cmdutil.Factory) *cobra.Command {
	return newAuditCmd(f, time.Local)
}

func newEventsCmd(f *cmdutil.Factory, loc *time.Location) *cobra.Command {
	opts := &Options{IO: f.IO, API: f.API, Loc: loc}
	cmd := &cobra.Command{
		Use:   "events JOBID",
		Short: "Show a job's trail of state changes and scheduling decisions",
		Long: `events prints every recorded event of a job, oldest first: submission,
each scheduling decision that kept it pending (with the reason and the
per-node diagnosis), start, launch, signals, holds, updates and its end.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.Usagef("events takes exactly one job id")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil || id == 0 {
				return cmdutil.Usagef("invalid job id: %s", args[0])
			}
			return opts.RunEvents(cmd.Context(), id)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	cmd.SetFlagErrorFunc(usageFlagError)
	return cmd
}

// usageFlagError makes bad flags usage errors (exit 2).
func usageFlagError(_ *cobra.Command, err error) error {
	return cmdutil.Usagef("%s", err)
}

func newAuditCmd(f *cmdutil.Factory, loc *time.Location) *cobra.Command {
	opts := &Options{IO: f.IO, API: f.API, Loc: loc}
	cmd := &cobra.Command{
		Use:   "audit [-n N]",
		Short: "Show the newest audit records",
		Long: `audit prints who did what to which object (submissions, cancels, holds,
updates, node drains), oldest of the selection first.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.Usagef("audit takes no arguments, got %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Limit <= 0 {
				return cmdutil.Usagef("-n must be a positive number, not %d", opts.Limit)
			}
			return opts.RunAudit(cmd.Context())
		},
	}
	cmd.Flags().IntVarP(&opts.Limit, "limit", "n", 20, "number of records to show")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	cmd.SetFlagErrorFunc(usageFlagError)
	return cmd
}

// RunEvents prints the trail of job id.
func (o *Options) RunEvents(ctx context.Context, id uint64) error {
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := o.API()
	if err != nil {
		return err
	}
	evs, err := c.Events(ctx, id)
	if err != nil {
		return fmt.Errorf("events of job %d: %w", id, err)
	}
	if o.JSON {
		if evs == nil {
			evs = []api.Event{}
		}
		return writeJSON(o.IO.Out, evs)
	}
	rows := make([][]string, len(evs))
	for i, e := range evs {
		rows[i] = []string{jobfmt.Time(e.Time, o.Loc), e.Kind, string(e.State), e.Reason, e.Message, e.Actor}
	}
	return writeTable(o.IO.Out, []string{"TIME", "EVENT", "STATE", "REASON", "MESSAGE", "BY"}, rows)
}

// RunAudit prints the newest Limit audit records, oldest first.
func (o *Options) RunAudit(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := o.API()
	if err != nil {
		return err
	}
	recs, err := c.Audit(ctx, o.Limit)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	// Whatever order the controller answers in, print a log: oldest of
	// the selection first, so the newest record is the last line.
	recs = append([]api.AuditRecord(nil), recs...)
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Time.Before(recs[j].Time) })
	if len(recs) > o.Limit {
		recs = recs[len(recs)-o.Limit:]
	}
	if o.JSON {
		if recs == nil {
			recs = []api.AuditRecord{}
		}
		return writeJSON(o.IO.Out, recs)
	}
	rows := make([][]string, len(recs))
	for i, r := range recs {
		user := r.User
		if user == "" {
			user = strconv.FormatUint(uint64(r.UID), 10)
		}
		rows[i] = []string{jobfmt.Time(r.Time, o.Loc), user, r.Action, r.Target, r.Detail}
	}
	return writeTable(o.IO.Out, []string{"TIME", "USER", "ACTION", "TARGET", "DETAIL"}, rows)
}

func writeJSON(w io.Writer, v any) error { return cmdutil.WriteJSON(w, v) }

// writeTable prints a borderless, left-aligned table like squeue's, with
// trailing blanks trimmed so that output is stable to compare. It uses
// text/tabwriter rather than tablewriter: every sbatch and squeue run
// starts this same binary, and tablewriter's Unicode tables cost ~0.5 ms
// and 600 KB at each start. Cells are escaped (termsafe): messages and
// details quote job names, comments and reasons, which are other users'
// text, and a tab or newline in one would also break the columns.
func writeTable(w io.Writer, header []string, rows [][]string) error {
	var buf strings.Builder
	tab := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tab, strings.Join(header, "\t"))
	var line []byte
	for _, r := range rows {
		line = line[:0]
		for i, c := range r {
			if i > 0 {
				line = append(line, '\t')
			}
			line = termsafe.Append(line, c)
		}
		tab.Write(append(line, '\n'))
	}
	if err := tab.Flush(); err != nil {
		return fmt.Errorf("render table: %w", err)
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line == "" {
			continue
		}
		out.WriteString(strings.TrimRight(line, " \n"))
		out.WriteByte('\n')
	}
	_, err := io.WriteString(w, out.String())
	return err
}
