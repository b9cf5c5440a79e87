package queues

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// Formats in the -o syntax of the internal field letters below; the
// name columns (%s) are sized to the longest name, so that names are
// never cut.
const (
	QueueFormat     = "%%%dn %%%dp %%.10g %%.5c %%.5u %%.8b %%.5l %%.7R %%.7P %%.8B"
	QueueLongFormat = QueueFormat + " %%.10L %%.12O %%.11j %%.11s %%.11G %%.11r %%m"
	QOSFormat       = "%%%dn %%.5a %%.5z %%.7d %%8M %%.4x %%.8g %%.9t %%.10N %%A"
)

// Options are the parsed command line of tide queues.
type Options struct {
	IO  *cmdutil.IOStreams
	API func() (cmdutil.API, error)

	Names    []string
	QOS      bool
	Long     bool
	NoHeader bool
	Parsable bool
	JSON     bool
}

// NewCmd returns `tide queues [QUEUE...]`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	o := &Options{IO: f.IO, API: f.API}
	cmd := &cobra.Command{
		Use:   "queues [QUEUE...]",
		Short: "Show the queues' shares and use, and the job classes",
		Long: `queues lists every queue (a Slurm account: sbatch -A/--queue) like sshare:
its guaranteed GPUs and hard cap, the GPUs its running jobs use, the part of
them borrowed beyond its guarantee, the GPUs of its guarantee other queues
borrow (LENT), and its running, pending and buffered (submitted in a burst,
not yet released) jobs. Child queues are indented under their parent. A cap
or limit shown as "-" is none.

With --qos it lists the job classes instead: their levels, preemption mode,
the level gap a same-queue preemptor needs, grace time, longest time limit
and the run time before a job may be preempted.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Names = args
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return o.Run(ctx)
		},
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.BoolVar(&o.QOS, "qos", false, "list the job classes (QOS) instead of the queues")
	fl.BoolVarP(&o.Long, "long", "l", false, "also show limits: lend and borrow limits, per-user limits, submit rate, members")
	fl.BoolVarP(&o.NoHeader, "noheader", "n", false, "print no header line")
	fl.BoolVarP(&o.Parsable, "parsable2", "P", false, "print fields delimited by '|', without padding")
	fl.BoolVar(&o.JSON, "json", false, "print the controller's answer as JSON")
	fl.Bool("help", false, "show this help")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cmdutil.Usagef("%s", err) })
	return cmd
}

// Run loads the queues and prints them.
func (o *Options) Run(ctx context.Context) error {
	c, err := o.API()
	if err != nil {
		return err
	}
	ql, err := c.Queues(ctx)
	if err != nil {
		return fmt.Errorf("load queues: %w", err)
	}
	if len(o.Names) > 0 {
		if ql.Queues, err = o.selected(ql.Queues); err != nil {
			return err
		}
	}
	w := bufio.NewWriter(o.IO.Out)
	if o.JSON {
		if ql.Queues == nil {
			ql.Queues = []api.QueueStatus{}
		}
		if ql.QOS == nil {
			ql.QOS = []api.QOSStatus{}
		}
		if err := cmdutil.WriteJSON(w, ql); err != nil {
			return err
		}
		return flush(w)
	}
	if o.QOS {
		nameW := len("NAME")
		for _, q := range ql.QOS {
			nameW = max(nameW, printedLen(q.Name))
		}
		if err := render(w, o.format(fmt.Sprintf(QOSFormat, nameW)), qosFields(), ql.QOS, !o.NoHeader); err != nil {
			return err
		}
		return flush(w)
	}
	format := QueueFormat
	if o.Long {
		format = QueueLongFormat
	}
	rows := treeOrder(ql.Queues)
	nameW, parentW := len("NAME"), len("PARENT")
	for i := range rows {
		if o.Parsable {
			rows[i].depth = 0
		}
		nameW = max(nameW, rows[i].depth+printedLen(rows[i].q.Name))
		parentW = max(parentW, printedLen(rows[i].q.Parent))
	}
	if err := render(w, o.format(fmt.Sprintf(format, nameW, parentW)), queueFields(), rows, !o.NoHeader); err != nil {
		return err
	}
	return flush(w)
}

// selected keeps the named queues, in the order given, and fails on a
// name the controller does not know.
func (o *Options) selected(all []api.QueueStatus) ([]api.QueueStatus, error) {
	var out []api.QueueStatus
	for _, n := range o.Names {
		found := false
		for _, q := range all {
			if q.Name == n {
				out = append(out, q)
				found = true
				break
			}
		}
		if !found {
			return nil, api.Errorf(api.ErrNotFound, "no queue %q (tide queues lists them)", n)
		}
	}
	return out, nil
}

// format turns a format into sshare's -P form when asked: every field
// as wide as its value, separated by '|'.
func (o *Options) format(f string) string {
	if !o.Parsable {
		return f
	}
	var b strings.Builder
	for i, item := range strings.Fields(f) {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString("%" + item[len(item)-1:])
	}
	return b.String()
}

// printedLen is how many bytes s takes in a cell: its escaped length,
// since the table escapes values (slurmfmt.Column.AppendValue).
func printedLen(s string) int { return len(termsafe.Escape(s)) }

func flush(w *bufio.Writer) error {
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// queueRow is a queue with its depth in the hierarchy.
type queueRow struct {
	q     *api.QueueStatus
	depth int
}

// treeOrder lists queues parents first, each followed by its children
// (in the controller's order); a queue whose parent is not listed is a
// top-level one.
func treeOrder(qs []api.QueueStatus) []queueRow {
	byName := make(map[string]bool, len(qs))
	for _, q := range qs {
		byName[q.Name] = true
	}
	children := map[string][]int{}
	var roots []int
	for i, q := range qs {
		if q.Parent == "" || !byName[q.Parent] || q.Parent == q.Name {
			roots = append(roots, i)
			continue
		}
		children[q.Parent] = append(children[q.Parent], i)
	}
	out := make([]queueRow, 0, len(qs))
	seen := make([]bool, len(qs))
	var walk func(i, depth int)
	walk = func(i, depth int) {
		if seen[i] { // a cycle in a broken configuration
			return
		}
		seen[i] = true
		out = append(out, queueRow{q: &qs[i], depth: depth})
		for _, c := range children[qs[i].Name] {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	for i := range qs { // queues only on a cycle
		if !seen[i] {
			walk(i, 0)
		}
	}
	return out
}

type field[T any] struct {
	header string
	value  func(dst []byte, row T) []byte
}

func num[T any](f func(T) int) func([]byte, T) []byte {
	return func(dst []byte, r T) []byte { return strconv.AppendInt(dst, int64(f(r)), 10) }
}

// limit prints a limit where 0 means none ("-").
func limit[T any](f func(T) int) func([]byte, T) []byte {
	return func(dst []byte, r T) []byte {
		if v := f(r); v > 0 {
			return strconv.AppendInt(dst, int64(v), 10)
		}
		return append(dst, '-')
	}
}

// unlimited prints a limit where -1 means none ("-").
func unlimited[T any](f func(T) int) func([]byte, T) []byte {
	return func(dst []byte, r T) []byte {
		if v := f(r); v >= 0 {
			return strconv.AppendInt(dst, int64(v), 10)
		}
		return append(dst, '-')
	}
}

func secs[T any](f func(T) int64, zero string) func([]byte, T) []byte {
	return func(dst []byte, r T) []byte {
		v := f(r)
		if v <= 0 {
			return append(dst, zero...)
		}
		return append(dst, api.FormatElapsed(v)...)
	}
}

// queueFields and qosFields are the columns by letter, built on first
// use: every CLI command is this binary, and sbatch should not build
// them each time it starts.
func queueFields() map[byte]field[queueRow] { return queueFieldTable.Get() }

var queueFieldTable = cmdutil.Lazy[map[byte]field[queueRow]]{Build: func() map[byte]field[queueRow] {
	return map[byte]field[queueRow]{
		'n': {"NAME", func(dst []byte, r queueRow) []byte {
			for range r.depth {
				dst = append(dst, ' ')
			}
			return append(dst, r.q.Name...)
		}},
		'p': {"PARENT", func(dst []byte, r queueRow) []byte {
			if r.q.Parent == "" {
				return append(dst, '-')
			}
			return append(dst, r.q.Parent...)
		}},
		'g': {"GUARANTEED", num(func(r queueRow) int { return r.q.Guaranteed })},
		'c': {"CAP", limit(func(r queueRow) int { return r.q.Cap })},
		'u': {"USED", num(func(r queueRow) int { return r.q.UsedGPUs })},
		'b': {"BORROWED", num(func(r queueRow) int { return r.q.BorrowedGPUs })},
		'l': {"LENT", num(func(r queueRow) int { return r.q.LentGPUs })},
		'R': {"RUNNING", num(func(r queueRow) int { return r.q.Running })},
		'P': {"PENDING", num(func(r queueRow) int { return r.q.Pending })},
		'B': {"BUFFERED", num(func(r queueRow) int { return r.q.Buffered })},
		'L': {"LEND_LIMIT", unlimited(func(r queueRow) int { return r.q.LendLimit })},
		'O': {"BORROW_LIMIT", unlimited(func(r queueRow) int { return r.q.BorrowLimit })},
		'j': {"MAX_RUN/USR", limit(func(r queueRow) int { return r.q.MaxRunningPerUser })},
		's': {"MAX_SUB/USR", limit(func(r queueRow) int { return r.q.MaxSubmitPerUser })},
		'G': {"MAX_GPU/USR", limit(func(r queueRow) int { return r.q.MaxGPUsPerUser })},
		'r': {"SUBMIT_RATE", func(dst []byte, r queueRow) []byte {
			if r.q.SubmitRate <= 0 {
				return append(dst, '-')
			}
			return strconv.AppendFloat(dst, r.q.SubmitRate, 'f', -1, 64)
		}},
		'm': {"MEMBERS", func(dst []byte, r queueRow) []byte {
			var parts []string
			parts = append(parts, r.q.Users...)
			for _, g := range r.q.Groups {
				parts = append(parts, "@"+g)
			}
			if len(parts) == 0 {
				return append(dst, '-')
			}
			return append(dst, strings.Join(parts, ",")...)
		}},
	}
}}

func qosFields() map[byte]field[api.QOSStatus] { return qosFieldTable.Get() }

var qosFieldTable = cmdutil.Lazy[map[byte]field[api.QOSStatus]]{Build: func() map[byte]field[api.QOSStatus] {
	return map[byte]field[api.QOSStatus]{
		'n': {"NAME", func(dst []byte, q api.QOSStatus) []byte { return append(dst, q.Name...) }},
		'a': {"MIN", num(func(q api.QOSStatus) int { return q.MinLevel })},
		'z': {"MAX", num(func(q api.QOSStatus) int { return q.MaxLevel })},
		'd': {"DEFAULT", num(func(q api.QOSStatus) int { return q.DefaultLevel })},
		'M': {"PREEMPT", func(dst []byte, q api.QOSStatus) []byte {
			if q.Mode == "" {
				return append(dst, api.PreemptNever...)
			}
			return append(dst, q.Mode...)
		}},
		'x': {"GAP", limit(func(q api.QOSStatus) int { return q.PreemptGap })},
		'g': {"GRACE", secs(func(q api.QOSStatus) int64 { return q.GraceTime }, "0:00")},
		't': {"MAXTIME", secs(func(q api.QOSStatus) int64 { return q.MaxTime }, "UNLIMITED")},
		'N': {"MINRUNTIME", secs(func(q api.QOSStatus) int64 { return q.MinRuntime }, "0:00")},
		// Who may use the class besides operators: users, @groups and
		// queue:NAME, as MEMBERS spells them.
		'A': {"ACCESS", func(dst []byte, q api.QOSStatus) []byte {
			if q.Open {
				return append(dst, "everyone"...)
			}
			parts := slices.Clone(q.Users)
			for _, g := range q.Groups {
				parts = append(parts, "@"+g)
			}
			for _, a := range q.Accounts {
				parts = append(parts, "queue:"+a)
			}
			if len(parts) == 0 {
				return append(dst, "operators"...)
			}
			return append(dst, strings.Join(parts, ",")...)
		}},
	}
}}

// render prints rows in format with fields.
func render[T any](w io.Writer, format string, fields map[byte]field[T], rows []T, header bool) error {
	f, err := slurmfmt.ParseShort(format)
	if err != nil {
		return err
	}
	tbl, err := slurmfmt.Compile(f, "queue", func(name string) (slurmfmt.Field[T], bool) {
		if len(name) != 1 {
			return slurmfmt.Field[T]{}, false
		}
		fd, ok := fields[name[0]]
		if !ok {
			return slurmfmt.Field[T]{}, false
		}
		return slurmfmt.Field[T]{Header: fd.header, Value: fd.value, NoCut: true, HeaderNoCut: true}, true
	})
	if err != nil {
		return err
	}
	var line []byte
	if header {
		line = tbl.AppendHeader(line)
	}
	for _, r := range rows {
		line = tbl.AppendRow(line, r)
	}
	if _, err := w.Write(line); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}
