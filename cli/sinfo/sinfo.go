package sinfo

import (
	"bufio"
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
	"github.com/tide-hpc/tide/hostlist"
)

// Slurm 22.05's built-in formats; '#' marks a column as wide as its
// widest value.
const (
	DefaultFormat     = "%#P %.5a %.10l %.6D %.6t %N"
	LongFormat        = "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"
	SummarizeFormat   = "%#P %.5a %.10l %.16F  %N"
	NodeFormat        = "%#N %.6D %.9P %6t"
	NodeLongFormat    = "%#N %.6D %.9P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E"
	ReasonsFormat     = "%20E %9u %19H %N"
	ReasonsLongFormat = "%20E %12U %19H %6t %N"
	// gpuFormat and gpuNodeFormat are Tide's --gpus views: the usual
	// columns, then GPUS(A/I/T) (and the node's GRES with -N).
	gpuFormat     = "%#P %.5a %.10l %.6D %.6t "
	gpuNodeFormat = "%#N %.6D %.9P %6t "
)

// Options are sinfo's parsed command line.
type Options struct {
	IO     *cmdutil.IOStreams
	API    func() (cmdutil.API, error)
	Now    func() time.Time
	Getenv func(string) string
	// Loc is the zone times are printed in (time.Local by default).
	Loc *time.Location
	// Sleep waits between --iterate rounds.
	Sleep func(ctx context.Context, d time.Duration) error

	Format      string
	FormatLong  string
	Sort        string
	Long        bool
	NodeView    bool
	Summarize   bool
	ListReasons bool
	GPUs        bool
	NoHeader    bool
	JSON        bool
	Exact       bool
	Dead        bool
	Responding  bool
	Verbose     int
	Iterate     int
	Partitions  string
	Nodes       string
	States      string
	// Clusters is -M/--clusters: it must name the controller's cluster
	// (or be "all"); SLURM_CLUSTERS stands in for it.
	Clusters string
	// Reservations is -T: list reservations, of which Tide has none.
	Reservations bool

	// What the parser checks combinations with: -a, -p, and -o or -O.
	allSet, partitionSet, formatSet bool
}

// NewCmd returns the sinfo command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return newCmd(f, run)
}

// newCmd builds sinfo around runF. Cobra only dispatches: sinfo reads
// its own arguments with Slurm's option table (options.go).
func newCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO, API: f.API, Now: f.Now, Getenv: f.Getenv, Loc: time.Local, Sleep: sleepCtx}
	return cmdutil.RawCommand("sinfo [OPTIONS]", "View information about nodes and partitions",
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

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// plan is a compiled invocation.
type plan struct {
	layout *layout
	filter filter
	sort   []sortKey
	format string
}

// formatFor picks the format the options ask for; extra are Tide's
// GPUS(A/I/T) columns.
func (o *Options) formatFor() (format string, long bool, extra []slurmfmt.Spec) {
	gpuCol := slurmfmt.Spec{Name: "GPUsState", Width: 12, Right: true}
	switch {
	case o.FormatLong != "":
		return o.FormatLong, true, nil
	case o.Format != "":
		return o.Format, false, nil
	case o.Summarize:
		return SummarizeFormat, false, nil
	case o.ListReasons && o.Long:
		return ReasonsLongFormat, false, nil
	case o.ListReasons:
		return ReasonsFormat, false, nil
	case o.GPUs && o.NodeView:
		gpuCol.Suffix = " "
		return gpuNodeFormat, false, []slurmfmt.Spec{gpuCol, {Name: "Gres"}}
	case o.GPUs:
		gpuCol.Suffix = " "
		return gpuFormat, false, []slurmfmt.Spec{gpuCol, {Name: "NodeList"}}
	case o.NodeView && o.Long:
		return NodeLongFormat, false, nil
	case o.NodeView:
		return NodeFormat, false, nil
	case o.Long:
		return LongFormat, false, nil
	}
	if env := o.env("SINFO_FORMAT"); env != "" {
		return env, false, nil
	}
	return DefaultFormat, false, nil
}

func (o *Options) env(k string) string {
	if o.Getenv == nil {
		return ""
	}
	return o.Getenv(k)
}

func (o *Options) compile(e *env) (*plan, error) {
	p := &plan{}
	format, long, extra := o.formatFor()
	p.format = format
	var err error
	if p.layout, err = compileLayout(format, long, e, extra...); err != nil {
		return nil, err
	}
	parts := o.Partitions
	if parts == "" {
		parts = o.env("SINFO_PARTITION")
	}
	if ps := splitList(parts); len(ps) > 0 {
		p.filter.partitions = map[string]bool{}
		for _, x := range ps {
			p.filter.partitions[x] = true
		}
	}
	if o.Nodes != "" {
		hosts, err := hostlist.Expand(o.Nodes)
		if err != nil || len(hosts) == 0 {
			return nil, api.Invalid("'%s' invalid entry for --nodes", o.Nodes)
		}
		p.filter.nodes = map[string]bool{}
		for _, h := range hosts {
			p.filter.nodes[h] = true
		}
	}
	if o.States != "" {
		if p.filter.states, err = parseStates(o.States); err != nil {
			return nil, err
		}
	}
	p.filter.dead, p.filter.responding = o.Dead, o.Responding
	p.filter.reasons = o.ListReasons && o.States == ""
	sortSpec := o.Sort
	if sortSpec == "" {
		sortSpec = o.env("SINFO_SORT")
	}
	if sortSpec == "" {
		sortSpec = "#P,-t"
		if o.NodeView {
			sortSpec = "N"
		} else if o.ListReasons {
			sortSpec = "E"
		}
	}
	if p.sort, err = parseSort(sortSpec); err != nil {
		return nil, err
	}
	return p, nil
}

func run(ctx context.Context, o *Options) error {
	if o.Reservations {
		// Slurm's words for none.
		fmt.Fprintln(o.IO.Out, "No reservations in the system")
		return nil
	}
	e := &env{loc: o.Loc, exact: o.Exact}
	if e.loc == nil {
		e.loc = time.Local
	}
	e.tf = o.timeFormat(e.loc)
	p, err := o.compile(e)
	if err != nil {
		return err
	}
	if o.Verbose > 0 {
		o.printOptions(p)
	}
	client, err := o.API()
	if err != nil {
		return fmt.Errorf("connect to controller: %w", err)
	}
	if err := o.checkClusters(ctx, client); err != nil {
		return err
	}
	w := bufio.NewWriter(o.IO.Out)
	for {
		if err := o.once(ctx, client, p, e, w); err != nil {
			return err
		}
		if o.Iterate <= 0 {
			return nil
		}
		w.WriteString("\n")
		if err := w.Flush(); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		if err := o.Sleep(ctx, time.Duration(o.Iterate)*time.Second); err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return err
		}
	}
}

func (o *Options) once(ctx context.Context, client cmdutil.API, p *plan, e *env, w *bufio.Writer) error {
	list, err := client.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("slurm_load_node error: %w", err)
	}
	e.now = list.Now
	if e.now.IsZero() && o.Now != nil {
		e.now = o.Now()
	}
	if o.JSON {
		if err := writeJSON(w, &list, p, e); err != nil {
			return err
		}
		return flush(w)
	}
	rs := buildRecords(&list, p.layout, &p.filter, o.NodeView, e)
	sortRecords(rs, p.sort)
	p.layout.fitAuto(rs)
	if !o.NoHeader && (o.Long || o.Iterate > 0 || o.Verbose > 0) {
		w.WriteString(e.now.In(e.loc).Format(slurmfmt.DateLayout))
		w.WriteByte('\n')
	}
	var line []byte
	if !o.NoHeader {
		line = p.layout.table.AppendHeader(line)
		w.Write(line)
	}
	for _, r := range rs {
		line = p.layout.table.AppendRow(line[:0], r)
		w.Write(line)
	}
	return flush(w)
}

func flush(w *bufio.Writer) error {
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

func (o *Options) printOptions(p *plan) {
	b := &strings.Builder{}
	line := func(k, v string) { fmt.Fprintf(b, "%-12s= %s\n", k, v) }
	b.WriteString("-----------------------------\n")
	line("dead", strconv.FormatBool(o.Dead))
	line("exact", strconv.FormatBool(o.Exact))
	line("format", p.format)
	line("iterate", strconv.Itoa(o.Iterate))
	line("long", strconv.FormatBool(o.Long))
	line("no_header", strconv.FormatBool(o.NoHeader))
	line("node_flag", strconv.FormatBool(o.NodeView))
	line("nodes", slurmfmt.OrNull(o.Nodes))
	line("partition", slurmfmt.OrNull(o.Partitions))
	line("responding", strconv.FormatBool(o.Responding))
	line("states", slurmfmt.OrNull(o.States))
	line("sort", slurmfmt.OrNull(o.Sort))
	line("summarize", strconv.FormatBool(o.Summarize))
	line("verbose", strconv.Itoa(o.Verbose))
	b.WriteString("-----------------------------\n")
	io.WriteString(o.IO.ErrOut, b.String())
}
