package squeue

// squeue -s/--steps (issue 22): Slurm 22.05's step listing. The running
// steps of running jobs (cli/livesteps: each batch job's batch step and
// its srun steps that have not ended) are filtered as Slurm's
// _filter_step does (-j, -p, -s, -w, -u, and -n on the step name as the
// manual says), sorted by -S (default "P,i") and printed with the step
// format letters and -O names. -t, -A, -q, -L and -R do not apply to
// steps, as in Slurm; --json lists jobs.

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/livesteps"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// StepFormat is Slurm's format of squeue -s.
const StepFormat = "%.15i %.8j %.9P %.8u %.9M %N"

// DefaultStepSort is partition, then step id.
const DefaultStepSort = "P,i"

// stepSel is one item of -s's list: a step of a job, or of an array's
// task (task >= 0).
type stepSel struct {
	job  uint64
	task int
	step uint32
}

// parseStepList reads -s's list as Slurm's _build_step_list does: each
// item is job[_task].step, the numbers read as C's strtol reads them;
// "batch" names the batch step.
func parseStepList(s string) ([]stepSel, error) {
	var out []stepSel
	for _, item := range strings.Split(s, ",") {
		if item == "" {
			continue
		}
		jobPart, stepPart, found := strings.Cut(item, ".")
		if jobPart == "" {
			break // strtok found no job: Slurm stops reading the list
		}
		job, rest := strtol(jobPart)
		sel := stepSel{task: -1}
		if strings.HasPrefix(rest, "_") {
			t, _ := strtol(rest[1:])
			sel.task = int(t)
		}
		if !found {
			return nil, api.Invalid("Invalid job_step id: %s.??", jobPart)
		}
		step, _ := strtol(stepPart)
		if stepPart == "batch" {
			step = int64(api.BatchStepID)
		}
		if job <= 0 || step < 0 {
			return nil, api.Invalid("Invalid job_step id: %s.%s", jobPart, stepPart)
		}
		sel.job, sel.step = uint64(job), uint32(step)
		out = append(out, sel)
	}
	return out, nil
}

// strtol reads a leading decimal number as C's strtol does (0 for
// none) and returns what follows it.
func strtol(s string) (int64, string) {
	i := 0
	neg := false
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		neg = s[i] == '-'
		i++
	}
	start := i
	var n int64
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		if n < 1<<40 {
			n = n*10 + int64(s[i]-'0')
		}
		i++
	}
	if i == start {
		return 0, s
	}
	if neg {
		n = -n
	}
	return n, s[i:]
}

// stepQuery is a compiled squeue -s.
type stepQuery struct {
	// filter selects the jobs: -j, -u (and --me) and -p.
	filter api.JobFilter
	steps  []stepSel
	names  map[string]bool
	nodes  map[string]bool
	sort   []stepSortKey
	format string
	long   bool
}

// compileSteps turns the options into a step query. -j with -s takes
// the jobs' steps; -j without a list beside -s is refused, as Slurm
// does.
func (o *Options) compileSteps() (*stepQuery, error) {
	if o.JobsFlag && o.Jobs == "" {
		return nil, api.Invalid("Incompatible options --jobs and --steps")
	}
	q := &stepQuery{}
	for _, s := range api.SplitJobIDList(o.Jobs) {
		ids, tasks, err := api.ParseJobIDs(s)
		if err != nil {
			return nil, api.Invalid("Invalid job id: %s", s)
		}
		q.filter.IDs = append(q.filter.IDs, ids...)
		q.filter.Tasks = append(q.filter.Tasks, tasks...)
	}
	steps, err := parseStepList(o.Steps)
	if err != nil {
		return nil, err
	}
	q.steps = steps
	users := o.Users
	if users == "" {
		users = o.env("SQUEUE_USERS")
	}
	q.filter.Users = splitList(users)
	if o.Me {
		q.filter.Users = append(q.filter.Users, strconv.Itoa(o.UID()))
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
	if ns := splitList(names); len(ns) > 0 {
		q.names = map[string]bool{}
		for _, n := range ns {
			q.names[n] = true
		}
	}
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
	sortSpec := o.Sort
	if sortSpec == "" {
		sortSpec = o.env("SQUEUE_SORT")
	}
	if sortSpec == "" {
		sortSpec = DefaultStepSort
	}
	q.sort = parseStepSort(sortSpec)
	switch {
	case o.FormatLong != "":
		q.format, q.long = o.FormatLong, true
	case o.Format != "":
		q.format = o.Format
	case o.env("SQUEUE_FORMAT") != "":
		q.format = o.env("SQUEUE_FORMAT")
	case o.env("SQUEUE_FORMAT2") != "":
		q.format, q.long = o.env("SQUEUE_FORMAT2"), true
	default:
		q.format = StepFormat
	}
	return q, nil
}

// keep applies the filters of Slurm's _filter_step the controller's job
// filter did not apply.
func (q *stepQuery) keep(s *livesteps.Step) bool {
	if len(q.steps) > 0 {
		hit := false
		for _, sel := range q.steps {
			if sel.step != s.ID {
				continue
			}
			j := s.Job
			if sel.task < 0 && (sel.job == j.ID || sel.job == j.ArrayJobID) ||
				sel.task >= 0 && j.ArrayJobID != 0 && sel.job == j.ArrayJobID && sel.task == j.ArrayTaskID {
				hit = true
				break
			}
		}
		if !hit {
			return false
		}
	}
	if q.nodes != nil && !slices.ContainsFunc(s.Nodes, func(n string) bool { return q.nodes[n] }) {
		return false
	}
	if q.names != nil && !q.names[s.Name] {
		return false
	}
	return true
}

// runSteps is squeue -s.
func runSteps(ctx context.Context, o *Options) error {
	q, err := o.compileSteps()
	if err != nil {
		return err
	}
	e := &env{loc: o.Loc, tf: o.timeFormat()}
	tbl, err := compileStepFormat(q.format, q.long, e)
	if err != nil {
		return err
	}
	if o.Verbose > 0 {
		o.printOptions(&query{filter: q.filter, format: q.format})
	}
	client, err := o.API()
	if err != nil {
		return fmt.Errorf("connect to controller: %w", err)
	}
	if err := o.checkClusters(ctx, client); err != nil {
		return err
	}
	return o.repeat(ctx, func(w *bufio.Writer) error {
		steps, now, err := livesteps.Load(ctx, client, q.filter)
		if err != nil {
			return fmt.Errorf("slurm_get_job_steps error: %w", err)
		}
		e.setNow(now, o.Now)
		shown := make([]*livesteps.Step, 0, len(steps))
		for i := range steps {
			if q.keep(&steps[i]) {
				shown = append(shown, &steps[i])
			}
		}
		sortSteps(shown, q.sort, e)
		if !o.NoHeader && (o.Iterate > 0 || o.Verbose > 0 || o.Long) {
			w.WriteString(e.now.In(e.loc).Format(slurmfmt.DateLayout))
			w.WriteByte('\n')
		}
		line := make([]byte, 0, 256)
		if !o.NoHeader {
			line = tbl.AppendHeader(line)
		}
		for _, s := range shown {
			line = tbl.AppendRow(line, s)
			if len(line) > 32<<10 {
				if _, err := w.Write(line); err != nil {
					return fmt.Errorf("write output: %w", err)
				}
				line = line[:0]
			}
		}
		if _, err := w.Write(line); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		return nil
	})
}

// --- step fields ---

// stepField is one field of squeue -s: its -o letter (0 for -O only),
// its -O names, its header and how to print it.
type stepField struct {
	letter                         byte
	names                          []string
	header                         string
	noCut, headerNoCut, headerLeft bool
	value                          func(e *env, dst []byte, s *livesteps.Step) []byte
}

func stepStr(f func(s *livesteps.Step) string) func(*env, []byte, *livesteps.Step) []byte {
	return func(_ *env, dst []byte, s *livesteps.Step) []byte { return append(dst, f(s)...) }
}

func stepNum(f func(s *livesteps.Step) int64) func(*env, []byte, *livesteps.Step) []byte {
	return func(_ *env, dst []byte, s *livesteps.Step) []byte { return strconv.AppendInt(dst, f(s), 10) }
}

func stepConst(v string) func(*env, []byte, *livesteps.Step) []byte {
	return func(_ *env, dst []byte, _ *livesteps.Step) []byte { return append(dst, v...) }
}

// stepFields finds squeue -s's fields by letter and -O name.
var stepFields = slurmfmt.Index[stepField]{Build: stepFieldList, Keys: func(f *stepField) (byte, []string) { return f.letter, f.names }}

// stepFieldList lists the step fields of Slurm 22.05's squeue (its
// step_format_add_* calls): the letters, then the -O names only. Slurm
// keeps no step network, reserved ports, container, CPU frequency or
// per-node, per-task and per-socket TRES requests for Tide's steps:
// those print as Slurm prints unset ones. A step's GPUs are recorded
// as its total, which TRES_PER_STEP shows.
func stepFieldList() []stepField {
	return []stepField{
		{letter: 'A', names: []string{"NumTasks"}, header: "TASKS", value: stepNum(func(s *livesteps.Step) int64 { return int64(s.Tasks) })},
		// Slurm's header of the tres_per_node field is TRES_PER_JOB.
		{letter: 'b', names: []string{"tres-per-node", "gres"}, header: "TRES_PER_JOB", value: stepConst(slurmfmt.Null)},
		{letter: 'i', names: []string{"StepId"}, header: "STEPID", value: stepStr(func(s *livesteps.Step) string { return s.ArrayID() })},
		{letter: 'j', names: []string{"StepName"}, header: "NAME", value: stepStr(func(s *livesteps.Step) string { return s.Name })},
		{letter: 'l', names: []string{"TimeLimit"}, header: "TIME_LIMIT", noCut: true, value: stepTimeLimit},
		{letter: 'M', names: []string{"TimeUsed"}, header: "TIME", noCut: true, value: func(e *env, dst []byte, s *livesteps.Step) []byte {
			return slurmfmt.AppendSecs(dst, e.nowUnix-s.Start.Unix())
		}},
		{letter: 'N', names: []string{"Nodes"}, header: "NODELIST", noCut: true, headerNoCut: true, value: stepStr(func(s *livesteps.Step) string { return hostlist.Compress(s.Nodes) })},
		{letter: 'P', names: []string{"Partition"}, header: "PARTITION", value: stepStr(func(s *livesteps.Step) string { return s.Job.Partition })},
		{letter: 'S', names: []string{"StartTime"}, header: "START_TIME", headerLeft: true, value: func(e *env, dst []byte, s *livesteps.Step) []byte {
			return e.tf.AppendTimestamp(dst, s.Start, e.loc)
		}},
		{letter: 'U', names: []string{"UserId"}, header: "UID", value: stepNum(func(s *livesteps.Step) int64 { return int64(s.Job.UserID) })},
		{letter: 'u', names: []string{"UserName"}, header: "USER", value: func(e *env, dst []byte, s *livesteps.Step) []byte { return userName(e, dst, s.Job) }},

		{names: []string{"Cluster"}, header: "CLUSTER", value: stepStr(func(s *livesteps.Step) string { return slurmfmt.OrNull(s.Job.Cluster) })},
		{names: []string{"Container"}, header: "CONTAINER", value: stepConst(slurmfmt.Null)},
		{names: []string{"ArrayJobId"}, header: "ARRAY_JOB_ID", value: func(e *env, dst []byte, s *livesteps.Step) []byte { return appendArrayJobID(e, dst, s.Job) }},
		{names: []string{"ArrayTaskId"}, header: "ARRAY_TASK_ID", value: stepStr(func(s *livesteps.Step) string {
			if s.Job.ArrayJobID == 0 {
				return "N/A"
			}
			return strconv.Itoa(s.Job.ArrayTaskID)
		})},
		{names: []string{"JobId"}, header: "JOB_ID", value: stepNum(func(s *livesteps.Step) int64 { return int64(s.Job.ID) })},
		{names: []string{"Network"}, header: "NETWORK", value: stepConst(slurmfmt.Null)},
		{names: []string{"NumCPUs"}, header: "NUM_CPUS", value: stepNum(func(s *livesteps.Step) int64 { return int64(s.CPUs) })},
		{names: []string{"CPUFreq"}, header: "CPU_FREQ", value: stepConst("Unknown-Unknown:Unknown")},
		{names: []string{"ResvPorts"}, header: "RESERVED_PORTS", value: stepConst(slurmfmt.Null)},
		{names: []string{"StepState"}, header: "STATE", value: stepConst(string(api.StateRunning))},
		{names: []string{"cpus-per-tres"}, header: "CPUS_PER_TRES", value: stepConst(slurmfmt.Null)},
		{names: []string{"mem-per-tres"}, header: "MEM_PER_TRES", value: stepConst(slurmfmt.Null)},
		{names: []string{"tres-bind"}, header: "TRES_BIND", value: stepConst(slurmfmt.Null)},
		{names: []string{"tres-freq"}, header: "TRES_FREQ", value: stepConst(slurmfmt.Null)},
		{names: []string{"tres-per-step", "tres-per-job"}, header: "TRES_PER_STEP", value: stepStr(func(s *livesteps.Step) string {
			if s.Batch() || s.GPUs == 0 {
				return slurmfmt.Null // a batch step asks for nothing of its own
			}
			return "gres:gpu:" + strconv.Itoa(s.GPUs)
		})},
		{names: []string{"tres-per-socket"}, header: "TRES_PER_SOCKET", value: stepConst(slurmfmt.Null)},
		{names: []string{"tres-per-task"}, header: "TRES_PER_TASK", value: stepConst(slurmfmt.Null)},
	}
}

// stepTimeLimit is %l: the step's own limit, or UNLIMITED (a step
// without -t runs until its job ends).
func stepTimeLimit(_ *env, dst []byte, s *livesteps.Step) []byte {
	if s.TimeLimit <= 0 {
		return append(dst, "UNLIMITED"...)
	}
	return slurmfmt.AppendSecs(dst, s.TimeLimit)
}

// compileStepFormat compiles a step format; "%all" prints every step
// letter, as Slurm does.
func compileStepFormat(format string, long bool, e *env) (*slurmfmt.Table[*livesteps.Step], error) {
	var f slurmfmt.Format
	var err error
	switch {
	case long:
		f, err = slurmfmt.ParseLong(format)
	case strings.EqualFold(format, "%all"):
		for _, c := range "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" {
			if _, ok := stepFields.ByLetter(string(c)); ok {
				f.Specs = append(f.Specs, slurmfmt.Spec{Name: string(c), Suffix: "|"})
			}
		}
		f.Specs[len(f.Specs)-1].Suffix = ""
	default:
		f, err = slurmfmt.ParseShort(format)
	}
	if err != nil {
		return nil, err
	}
	return slurmfmt.Compile(f, "job step", func(name string) (slurmfmt.Field[*livesteps.Step], bool) {
		sf, ok := stepFields.Lookup(name, long)
		if !ok {
			return slurmfmt.Field[*livesteps.Step]{}, false
		}
		return slurmfmt.Field[*livesteps.Step]{
			Header:      sf.header,
			NoCut:       sf.noCut,
			HeaderNoCut: sf.headerNoCut,
			HeaderLeft:  sf.headerLeft,
			Value:       func(dst []byte, s *livesteps.Step) []byte { return sf.value(e, dst, s) },
		}, true
	})
}

// --- sorting ---

// stepSortKey is one -S key of squeue -s.
type stepSortKey struct {
	num     func(e *env, s *livesteps.Step) int64
	str     func(s *livesteps.Step) string
	reverse bool
}

// stepSortField is the step key of -S letter c (Slurm's sort_step_list:
// i, N, P, l, S, M, u, U); other letters sort nothing.
func stepSortField(c byte) (stepSortKey, bool) {
	switch c {
	case 'i':
		// Job id, then step id: the batch step after the srun steps.
		return stepSortKey{num: func(_ *env, s *livesteps.Step) int64 { return int64(s.Job.ID)<<32 | int64(s.ID) }}, true
	case 'N':
		return stepSortKey{str: func(s *livesteps.Step) string { return hostlist.Compress(s.Nodes) }}, true
	case 'P':
		return stepSortKey{str: func(s *livesteps.Step) string { return s.Job.Partition }}, true
	case 'l':
		return stepSortKey{num: func(_ *env, s *livesteps.Step) int64 {
			if s.TimeLimit <= 0 {
				return 1 << 62
			}
			return s.TimeLimit
		}}, true
	case 'S':
		return stepSortKey{num: func(_ *env, s *livesteps.Step) int64 { return s.Start.Unix() }}, true
	case 'M':
		return stepSortKey{num: func(e *env, s *livesteps.Step) int64 { return e.nowUnix - s.Start.Unix() }}, true
	case 'u':
		return stepSortKey{str: func(s *livesteps.Step) string { return s.Job.User }}, true
	case 'U':
		return stepSortKey{num: func(_ *env, s *livesteps.Step) int64 { return int64(s.Job.UserID) }}, true
	}
	return stepSortKey{}, false
}

// parseStepSort reads -S for steps as Slurm's sort_step_list does: one
// key per letter, '-' before a letter reversing it, "cluster" (one
// cluster here: no order) and unknown letters skipped.
func parseStepSort(spec string) []stepSortKey {
	var keys []stepSortKey
	for i := 0; i < len(spec); i++ {
		c := spec[i]
		if c == ',' || c == '+' || c == '-' {
			continue
		}
		if len(spec)-i >= len("cluster") && strings.EqualFold(spec[i:i+len("cluster")], "cluster") {
			i += len("cluster") - 1
			continue
		}
		k, ok := stepSortField(c)
		if !ok {
			continue
		}
		k.reverse = i > 0 && spec[i-1] == '-'
		keys = append(keys, k)
	}
	return keys
}

// sortSteps orders steps by keys, the first key first; ties keep the
// order the steps were listed in.
func sortSteps(steps []*livesteps.Step, keys []stepSortKey, e *env) {
	slices.SortStableFunc(steps, func(a, b *livesteps.Step) int {
		for _, k := range keys {
			var c int
			if k.num != nil {
				c = cmp.Compare(k.num(e, a), k.num(e, b))
			} else {
				c = strings.Compare(k.str(a), k.str(b))
			}
			if c != 0 {
				if k.reverse {
					return -c
				}
				return c
			}
		}
		return 0
	})
}

// repeat runs once, then again every --iterate seconds until the
// context ends, flushing the output after each round.
func (o *Options) repeat(ctx context.Context, once func(w *bufio.Writer) error) error {
	w := bufio.NewWriterSize(o.IO.Out, 64<<10)
	for {
		if err := once(w); err != nil {
			return err
		}
		if err := flush(w); err != nil {
			return err
		}
		if o.Iterate <= 0 {
			return nil
		}
		if _, err := w.WriteString("\n"); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		if err := flush(w); err != nil {
			return err
		}
		if err := o.Sleep(ctx, time.Duration(o.Iterate)*time.Second); err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return err
		}
	}
}
