package sstat

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/getopt"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// command is sstat's option table: Slurm 22.05 sstat's, in the order of
// its long_options, read with getopt_long's rules (cli/getopt). As in
// Slurm, -h, -e and --usage print their texts only once the whole line
// has been read (the last of them wins), and -V at once.
var command = getopt.Command[Options]{
	Name:      "sstat",
	Options:   options[:],
	TryHelp:   true,
	HelpText:  writeHelp,
	UsageText: writeUsage,
}

type opt = getopt.Option[Options]

// What -h, -e and --usage ask for.
const (
	helpNone = iota
	helpText
	helpFields
	helpUsage
)

var options = [...]opt{
	{Spec: getopt.Spec{Long: "allsteps", Short: 'a'}, Help: "every running step of the jobs named without a step, the batch step included",
		Flag: func(o *Options) *bool { return &o.AllSteps }},
	{Spec: getopt.Spec{Long: "helpformat", Short: 'e'}, Help: "list the fields --format accepts", Set: asker(helpFields)},
	{Spec: getopt.Spec{Long: "help", Short: 'h'}, Help: "print this description", Set: asker(helpText)},
	{Spec: getopt.Spec{Long: "jobs", Short: 'j', Arg: getopt.RequiredArg}, ArgName: "job(.step)",
		Help: "comma separated list of jobs or steps (job[.step], step a number or batch) to show; required. " +
			"A job without a step stands for its lowest numbered running srun step (every running step with -a)",
		Set: addJobs},
	{Spec: getopt.Spec{Long: "noheader", Short: 'n'}, Help: "print no header", Flag: func(o *Options) *bool { return &o.NoHeader }},
	{Spec: getopt.Spec{Long: "fields", Short: 'o', Arg: getopt.RequiredArg, ID: "format"}, Hidden: true, Set: addFields},
	{Spec: getopt.Spec{Long: "format", Short: 'o', Arg: getopt.RequiredArg}, ArgName: "fields",
		Help: "comma separated list of fields, each with an optional %WIDTH (negative: left-justified); see --helpformat",
		Set:  addFields},
	{Spec: getopt.Spec{Long: "noconvert"}, Help: "print sizes in bytes, without K, M or G units", Flag: func(o *Options) *bool { return &o.NoConvert }},
	{Spec: getopt.Spec{Long: "pidformat", Short: 'i'}, Help: "list each step's process ids per node (not supported by Tide: its nodes do not report them)",
		Set: noPids},
	{Spec: getopt.Spec{Long: "parsable", Short: 'p'}, Help: "separate the fields with '|', one after the last field too",
		Set: func(o *Options, _ string, _ bool) error { o.Layout = slurmfmt.FieldsParsable; return nil }},
	{Spec: getopt.Spec{Long: "parsable2", Short: 'P'}, Help: "separate the fields with '|', none after the last field",
		Set: func(o *Options, _ string, _ bool) error { o.Layout = slurmfmt.FieldsParsable2; return nil }},
	{Spec: getopt.Spec{Long: "usage"}, Help: "print a brief usage message", Set: asker(helpUsage)},
	{Spec: getopt.Spec{Long: "verbose", Short: 'v'}, Help: "report the steps asked for on stderr", Count: func(o *Options) *int { return &o.Verbose }},
	{Spec: getopt.Spec{Long: "version", Short: 'V'}, Action: getopt.Version, Help: "print the Slurm release sstat behaves as"},
}

func asker(kind int) func(o *Options, _ string, _ bool) error {
	return func(o *Options, _ string, _ bool) error {
		o.help = kind
		return nil
	}
}

// addFields is -o: the lists of every -o are read together, in order.
func addFields(o *Options, v string, _ bool) error {
	o.Fields = append(o.Fields, v)
	return nil
}

// addJobs is -j: job[_task][.step] items, read as Slurm reads them
// (slurm_addto_step_list); a mistake there is fatal.
func addJobs(o *Options, v string, _ bool) error {
	sels, err := parseSteps(v)
	if err != nil {
		return err
	}
	for _, s := range sels {
		dup := false
		for _, have := range o.Jobs {
			dup = dup || have == s
		}
		if !dup {
			o.Jobs = append(o.Jobs, s)
		}
	}
	return nil
}

func noPids(*Options, string, bool) error {
	return errors.New("-i/--pidformat is not supported by Tide: its nodes do not report the steps' process ids")
}

// Step ids of the special steps: Slurm's SLURM_EXTERN_CONT and
// SLURM_INTERACTIVE_STEP, which Tide's jobs never have, and its
// SLURM_BATCH_SCRIPT (api.BatchStepID).
const (
	externStepID      uint32 = 0xfffffffc
	interactiveStepID uint32 = 0xfffffffa
	// maxNormalStepID is the highest id of an srun step.
	maxNormalStepID uint32 = 0xfffffff0
)

// sel is one -j item: a job (or an array's task), and a step or all of
// the job's (allSteps).
type sel struct {
	job      uint64
	task     int // -1: not an array task
	step     uint32
	allSteps bool
}

// fatalError is a mistake Slurm reports with fatal(): "sstat: fatal: …".
type fatalError struct{ msg string }

func (e *fatalError) Error() string { return e.msg }

// parseSteps reads a -j list as Slurm's slurm_addto_step_list and
// slurm_parse_step_str do: comma separated items (quotes around the
// whole list dropped), each starting with a digit; the step after a dot
// is a number, batch, extern or interactive; a job may be an array's
// task (N_T). Numbers are read as C's atoi reads them.
func parseSteps(list string) ([]sel, error) {
	if len(list) > 0 && (list[0] == '"' || list[0] == '\'') {
		q := list[0]
		list = list[1:]
		if i := strings.IndexByte(list, q); i >= 0 {
			list = list[:i]
		}
	}
	var out []sel
	for _, item := range strings.Split(list, ",") {
		if item == "" {
			continue
		}
		if item[0] < '0' || item[0] > '9' {
			return nil, &fatalError{"Bad job/step specified: " + item}
		}
		s := sel{task: -1, allSteps: true}
		name, step, hasStep := strings.Cut(item, ".")
		if hasStep {
			s.allSteps = false
			switch {
			case step == "batch":
				s.step = api.BatchStepID
			case step == "extern":
				s.step = externStepID
			case step == "interactive":
				s.step = interactiveStepID
			case step != "" && step[0] >= '0' && step[0] <= '9':
				s.step = uint32(cmdutil.Atoi(step))
			default:
				return nil, &fatalError{"Bad step specified: " + name}
			}
		}
		if j, t, ok := strings.Cut(name, "_"); ok {
			if t == "" || t[0] < '0' || t[0] > '9' {
				return nil, &fatalError{"Bad job array element specified: " + j}
			}
			name, s.task = j, cmdutil.Atoi(t)
		}
		s.job = uint64(cmdutil.Atoi(name))
		out = append(out, s)
	}
	return out, nil
}

// stepIDString is a step as Slurm's %ps prints it: "StepId=7.0",
// "StepId=7.batch".
func stepIDString(job uint64, step uint32) string {
	var name string
	switch step {
	case api.BatchStepID:
		name = "batch"
	case externStepID:
		name = "extern"
	case interactiveStepID:
		name = "interactive"
	default:
		name = strconv.FormatUint(uint64(step), 10)
	}
	return fmt.Sprintf("StepId=%d.%s", job, name)
}

// parseArgs reads sstat's command line into o. done says the command
// has nothing more to do (a text was printed, or a mistake was). As in
// Slurm, the first operand is one more -j list and any other is
// ignored.
func (o *Options) parseArgs(args []string) (done bool, err error) {
	operands, done, err := cmdutil.ParseOptions(o.IO, &command, o, args, o.Getenv)
	var fe *fatalError
	if errors.As(err, &fe) {
		io.WriteString(o.IO.ErrOut, "sstat: fatal: "+termsafe.Escape(fe.msg)+"\n")
		return true, &cmdutil.SilentError{Code: cmdutil.ExitError}
	}
	if done || err != nil {
		return done, err
	}
	switch o.help {
	case helpText:
		command.WriteHelp(o.IO.Out)
		return true, nil
	case helpFields:
		writeFieldList(o.IO.Out)
		return true, nil
	case helpUsage:
		command.WriteUsage(o.IO.Out)
		return true, nil
	}
	if len(operands) > 0 {
		if err := addJobs(o, operands[0], true); err != nil {
			if errors.As(err, &fe) {
				io.WriteString(o.IO.ErrOut, "sstat: fatal: "+termsafe.Escape(fe.msg)+"\n")
				return true, &cmdutil.SilentError{Code: cmdutil.ExitError}
			}
			return true, err
		}
	}
	return false, nil
}

// writeHelp is sstat --help, laid out as Slurm's.
func writeHelp(w io.Writer) {
	const indent = "                   "
	var b strings.Builder
	b.WriteString("sstat [<OPTION>] -j <job(.stepid)>\n    Valid <OPTION> values are:\n")
	// The table itself, not command, whose HelpText this is.
	table := getopt.Command[Options]{Options: options[:]}
	for _, op := range table.Listed() {
		if op.Short != 0 {
			fmt.Fprintf(&b, "     -%c, --%s:\n", op.Short, op.Long)
		} else {
			fmt.Fprintf(&b, "     --%s:\n", op.Long)
		}
		for _, l := range getopt.WrapWords(op.Help, 80-len(indent)) {
			b.WriteString(indent + l + "\n")
		}
	}
	b.WriteString("\n")
	io.WriteString(w, b.String())
}

// writeUsage is sstat --usage, which points at --help.
func writeUsage(w io.Writer) {
	io.WriteString(w, "Usage: sstat [options] -j <job(.stepid)>\n\tSee --help for the options\n")
}
