package opts

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// Input is everything Parse reads, so that parsing touches no global
// state and tests need no server, files or environment of their own.
type Input struct {
	// Args are the command-line arguments after the program name.
	Args []string
	// Getenv reads SBATCH_* variables and PATH; Environ is the caller's
	// whole environment, for --export.
	Getenv  func(string) string
	Environ []string
	// LookupEnv, when set, reads the option variables instead of Getenv,
	// telling an empty variable from an unset one (an empty flag
	// variable sets the flag).
	LookupEnv func(string) (string, bool)
	// EnvVars, when not nil, are the option variables instead of
	// sbatch's SBATCH_* (srun's and salloc's own lists); empty reads
	// none.
	EnvVars []EnvVar
	// ReadFile reads the script and node files. Relative paths are
	// joined to Cwd before it is called.
	ReadFile func(string) ([]byte, error)
	// Stdin supplies the script when no file is named; nil when stdin is
	// a terminal (sbatch then has no script to read).
	Stdin io.Reader
	// Cwd is the submit directory and Host the submit host.
	Cwd, Host string
	// Now is the clock --begin and --deadline are read against; its
	// location is the one wall-clock times are in.
	Now time.Time
}

// Request is a parsed sbatch invocation: the job to submit and what the
// command itself must do.
type Request struct {
	Action Action
	Spec   api.JobSpec
	// ScriptPath is the script file as named ("" for stdin or --wrap);
	// ScriptArgs are the words after it, meant for the script.
	ScriptPath string
	ScriptArgs []string
	// User and Group are --uid and --gid: the controller runs the job
	// as them when root or an operator submits it (and refuses them to
	// everybody else).
	User, Group string
	// Client-side flags.
	Parsable, TestOnly, Wait, Quiet bool
	Verbose                         int
	// Warnings are printed as "sbatch: warning: <text>".
	Warnings []string
	// Defined lists the options that were set, in table order, for
	// sbatch -v's "defined options" block.
	Defined [][2]string
	// TaskHosts is -m arbitrary's layout: the node of each task, from
	// the file SLURM_HOSTFILE names (nil without one).
	TaskHosts []string
	// FromEnv holds the options (by id, "nodes") whose value came from
	// an environment variable, as Slurm's slurm_option_set_by_env tells:
	// srun treats some of those it inherits from its job differently.
	FromEnv map[string]bool
}

// Error is a parse or validation failure worded as sbatch words it.
// Syntax errors of the command line (Usage) print as
// "sbatch: <line>" followed by the "Try sbatch --help" hint; every other
// error prints each line as "sbatch: error: <line>".
type Error struct {
	Lines []string
	Usage bool
	class error
}

func (e *Error) Error() string { return strings.Join(e.Lines, " ") }

// Unwrap returns the error's class (api.ErrInvalidArgument unless the
// script could not be found).
func (e *Error) Unwrap() error {
	if e.class != nil {
		return e.class
	}
	return api.ErrInvalidArgument
}

// Write prints the error for program prog ("sbatch").
func (e *Error) Write(w io.Writer, prog string) {
	for _, l := range e.Lines {
		// Lines may quote a script's #SBATCH lines, which need not be
		// the submitter's own: escaped, as every command prints.
		if e.Usage {
			fmt.Fprintf(w, "%s: %s\n", prog, termsafe.Escape(l))
		} else {
			fmt.Fprintf(w, "%s: error: %s\n", prog, termsafe.Escape(l))
		}
	}
	if e.Usage {
		fmt.Fprintf(w, "Try \"%s --help\" for more information\n", prog)
	}
}

func fail(lines ...string) *Error { return &Error{Lines: lines} }

// layer is where an option value came from; later layers win.
type layer int

const (
	layerNone layer = iota
	layerScript
	layerEnv
	layerCLI
)

// Memory options, which are mutually exclusive within one layer.
const (
	memNode = iota
	memCPU
	memGPU
)

var memNames = [3]string{"mem", "mem-per-cpu", "mem-per-gpu"}

// GPU request options.
const (
	gpuJob  = "gpus"
	gpuNode = "gpus-per-node"
	gpuTask = "gpus-per-task"
)

// state is a parse in progress.
type state struct {
	in    *Input
	spec  api.JobSpec
	req   Request
	layer layer

	mem   [3]int64
	memBy [3]layer
	// gpu holds the GPU requests by option; --gres=gpu is gpus-per-node.
	gpu map[string]gpuReq
	// gpuFromGres is true when gpu[gpuNode] came from --gres.
	gpuFromGres bool
	// Slices: --gpu-mem (MB) and --gpu-compute (percent), and what the
	// last --gres asked for as shard and mps.
	gpuMem              int64
	gpuCompute          int
	gresShards, gresMPS int

	export  string
	chdir   string
	wrap    string
	hasWrap bool
	// arbitrary: -m arbitrary, the tasks' nodes from SLURM_HOSTFILE.
	arbitrary bool

	warned   map[string]bool
	warnings []string
	defined  map[string]string
	fromEnv  map[string]bool
}

func (st *state) warn(msg string) {
	if !st.warned[msg] {
		st.warned[msg] = true
		st.warnings = append(st.warnings, msg)
	}
}

func (st *state) warnIgnored(name string) {
	st.warn(fmt.Sprintf("--%s has no effect yet in Tide; ignored", name))
}

// apply runs option i's handler and records the value for -v.
func (st *state) apply(i int, v string, has bool) error {
	o := &table()[i]
	if o.early {
		return nil
	}
	if err := st.set(o, v, has); err != nil {
		return err
	}
	shown := v
	if !has {
		shown = "set"
	}
	st.defined[o.id()] = shown
	if st.layer == layerEnv || st.fromEnv[o.id()] {
		if st.fromEnv == nil {
			st.fromEnv = map[string]bool{}
		}
		st.fromEnv[o.id()] = st.layer == layerEnv
	}
	return nil
}

// set applies option o's value: its JobSpec field, its handler, or the
// check and warning of an option Tide ignores.
func (st *state) set(o *option, v string, has bool) error {
	switch {
	case o.ignore != nil:
		if err := o.ignore(o, v, has); err != nil {
			return err
		}
		st.warnIgnored(o.id())
		return nil
	case o.str != nil:
		*o.str(&st.spec) = v
		return nil
	case o.num != nil:
		n, err := parseInt("--"+o.Long, v, true)
		if err != nil {
			return err
		}
		*o.num(&st.spec) = n
		return nil
	case o.secs != nil:
		secs, err := parseTime(o.Long, v)
		if err != nil {
			return err
		}
		*o.secs(&st.spec) = secs
		return nil
	}
	return o.set(st, v, has)
}

// Parse turns an sbatch command line, its script's #SBATCH directives
// and the SBATCH_* environment (or Input.EnvVars) into a job request.
// Precedence is Slurm's: command line over environment over directives
// (envinput.go has the environment's rules). Errors are *Error.
func Parse(in Input) (*Request, error) {
	if in.Getenv == nil {
		in.Getenv = func(string) string { return "" }
	}
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	g := newTableGetopt()
	cli, operands, gerr := parseArgs(g, in.Args)
	for _, m := range cli {
		switch table()[m.Index].Long {
		case "help":
			return &Request{Action: ActionHelp}, nil
		case "usage":
			return &Request{Action: ActionUsage}, nil
		case "version":
			return &Request{Action: ActionVersion}, nil
		}
	}
	if gerr != nil {
		return nil, &Error{Lines: []string{gerr.Error()}, Usage: true}
	}
	st := &state{in: &in, gpu: map[string]gpuReq{}, warned: map[string]bool{}, defined: map[string]string{}}
	for _, m := range cli {
		if table()[m.Index].Long == "wrap" {
			st.wrap, st.hasWrap = m.Value, true
		}
	}
	body, name, err := st.loadScript(operands)
	if err != nil {
		return nil, err
	}
	if lines := checkScript(body); lines != nil {
		return nil, fail(lines...)
	}
	st.spec.Script = body

	st.layer = layerScript
	if err := st.applyDirectives(g, name, body); err != nil {
		return nil, err
	}
	st.layer = layerEnv
	if err := st.applyEnv(); err != nil {
		return nil, err
	}
	st.layer = layerCLI
	for _, m := range cli {
		if err := st.apply(m.Index, m.Value, m.HasValue); err != nil {
			return nil, fail(err.Error())
		}
	}
	if err := st.finish(); err != nil {
		return nil, err
	}
	return st.request(), nil
}

// loadScript finds the batch script: --wrap, a file named by the first
// operand, or standard input. name is what errors call the script.
func (st *state) loadScript(operands []string) (body, name string, err error) {
	in := st.in
	switch {
	case st.hasWrap:
		if len(operands) > 0 {
			return "", "", fail("Script arguments not permitted with --wrap option")
		}
		st.spec.Name = "wrap"
		return wrapScript(st.wrap), "--wrap", nil
	case len(operands) > 0:
		path := operands[0]
		if path == ":" {
			return "", "", fail("heterogeneous jobs (\":\" between option groups) are not supported yet")
		}
		data, err := st.readScript(path)
		if err != nil {
			return "", "", &Error{Lines: []string{fmt.Sprintf("Unable to open file %s", path)}, class: api.ErrNotFound}
		}
		st.req.ScriptPath = path
		st.req.ScriptArgs = operands[1:]
		st.spec.Name = filepath.Base(path)
		return string(data), path, nil
	case in.Stdin != nil:
		// Bounded: `sbatch < /dev/zero` must end with an error, not
		// exhaust memory.
		data, err := io.ReadAll(io.LimitReader(in.Stdin, api.MaxMaxScriptSize+1))
		if err != nil {
			return "", "", fail(fmt.Sprintf("Unable to read batch script from standard input: %v", err))
		}
		if len(data) > api.MaxMaxScriptSize {
			return "", "", fail(fmt.Sprintf("Batch script from standard input is larger than %d bytes, the most any controller takes", api.MaxMaxScriptSize))
		}
		st.spec.Name = "sbatch"
		return string(data), "(stdin)", nil
	}
	return "", "", &Error{Lines: []string{"no batch script: name a script file, use --wrap, or pipe a script into sbatch"}, Usage: true}
}

// readScript resolves a script path the way sbatch 22.05 does: paths
// starting with "." or "/" as written, then the submit directory, then
// each directory of PATH.
func (st *state) readScript(path string) ([]byte, error) {
	in := st.in
	if in.ReadFile == nil {
		return nil, errors.New("no file reader")
	}
	if strings.HasPrefix(path, ".") || strings.HasPrefix(path, "/") || strings.Contains(path, "/") {
		return in.ReadFile(st.abs(path))
	}
	data, err := in.ReadFile(st.abs(path))
	if err == nil {
		return data, nil
	}
	for _, dir := range filepath.SplitList(in.Getenv("PATH")) {
		if dir == "" {
			continue
		}
		if d, e := in.ReadFile(filepath.Join(st.abs(dir), path)); e == nil {
			return d, nil
		}
	}
	return nil, err
}

// abs makes p absolute against the submit directory.
func (st *state) abs(p string) string {
	if filepath.IsAbs(p) || st.in.Cwd == "" {
		return filepath.Clean(p)
	}
	return filepath.Join(st.in.Cwd, p)
}

// applyDirectives parses the #SBATCH words as one command line, as
// sbatch does, and names the script line of any error.
func (st *state) applyDirectives(g *Getopt, name, body string) error {
	words, err := directiveWords(name, body)
	if err != nil {
		return fail(err.Error())
	}
	if len(words) == 0 {
		return nil
	}
	texts := make([]string, len(words))
	for i, w := range words {
		texts[i] = w.text
	}
	at := func(pos int, msg string) error {
		return fail(fmt.Sprintf("%s: line %d: %s", name, words[pos].line, msg))
	}
	ms, rest, gerr := parseArgs(g, texts)
	var ge *GetoptError
	if errors.As(gerr, &ge) {
		return at(ge.Pos, ge.Msg)
	}
	if len(rest) > 0 {
		pos := len(texts) - len(rest)
		return at(pos, "Invalid directive found in batch script: "+rest[0])
	}
	for _, m := range ms {
		if err := st.apply(m.Index, m.Value, m.HasValue); err != nil {
			return at(m.Pos, err.Error())
		}
	}
	return nil
}

// finish resolves what depends on several options and fills the
// submission context.
func (st *state) finish() error {
	s := &st.spec
	if err := st.finishMemory(); err != nil {
		return err
	}
	if err := st.finishGPUs(); err != nil {
		return err
	}
	if s.GPUsPerTask > 0 && s.Tasks == 0 && s.TasksPerNode == 0 && s.GPUs == 0 && s.Nodes == 0 {
		// Slurm's rule: the task count may also come from --gpus
		// (--gpus / --gpus-per-task) or -N (one task per node); the
		// controller resolves it (api.JobSpec.ResolveGPUs).
		return fail("--gpus-per-task requires --ntasks, --ntasks-per-node, --gpus or --nodes")
	}
	if s.TimeMin > 0 && s.TimeLimit > 0 && s.TimeMin > s.TimeLimit {
		return fail("Invalid --time-min specification: longer than --time")
	}
	if err := st.finishHostfile(); err != nil {
		return err
	}
	s.SubmitDir = st.in.Cwd
	s.SubmitHost = st.in.Host
	s.WorkDir = st.in.Cwd
	if st.chdir != "" {
		s.WorkDir = st.abs(st.chdir)
	}
	env, err := exportEnv(st.export, st.in.Environ)
	if err != nil {
		return fail(err.Error())
	}
	s.Environment = env
	return nil
}

// finishMemory applies Slurm's rule for --mem, --mem-per-cpu and
// --mem-per-gpu: within the highest layer that set any of them only one
// may be given, and it replaces whatever lower layers set.
func (st *state) finishMemory() error {
	top := layerNone
	for _, l := range st.memBy {
		top = max(top, l)
	}
	if top == layerNone {
		return nil
	}
	winner, n := -1, 0
	for k, l := range st.memBy {
		if l == top {
			winner, n = k, n+1
		}
	}
	if n > 1 {
		return fail("--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.")
	}
	s := &st.spec
	s.MemPerNodeMB, s.MemPerCPUMB, s.MemPerGPUMB = 0, 0, 0
	v := st.mem[winner]
	switch winner {
	case memNode:
		s.MemPerNodeMB = v
		if v == 0 {
			s.MemPerNodeMB = MemWholeNode
		}
	case memCPU:
		s.MemPerCPUMB = v
	case memGPU:
		s.MemPerGPUMB = v
	}
	for k := range st.memBy {
		if k != winner && st.memBy[k] != layerNone {
			delete(st.defined, memNames[k])
		}
	}
	return nil
}

// finishGPUs fills the GPU counts and the one GPU model they may name.
func (st *state) finishGPUs() error {
	s := &st.spec
	s.GPUs = st.gpu[gpuJob].Count
	s.GPUsPerNode = st.gpu[gpuNode].Count
	s.GPUsPerTask = st.gpu[gpuTask].Count
	if st.gpuMem > 0 && st.gresShards > 0 {
		return fail("--gpu-mem and --gres=shard are mutually exclusive: give the slice's memory one way")
	}
	s.GPUMemMB, s.GPUShards = st.gpuMem, st.gresShards
	// --gpu-compute says the same as --gres=mps, more plainly; it wins.
	s.GPUComputePct = st.gpuCompute
	if s.GPUComputePct == 0 {
		s.GPUComputePct = st.gresMPS
	}
	var kinds []string
	for k := range st.gpu {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		r := st.gpu[k]
		if r.Type == "" || r.Count == 0 {
			continue
		}
		if s.GPUType != "" && !strings.EqualFold(s.GPUType, r.Type) {
			return fail(fmt.Sprintf("conflicting GPU types %q and %q: Tide supports one GPU type per job", s.GPUType, r.Type))
		}
		s.GPUType = r.Type
	}
	return nil
}

// request packages the result.
func (st *state) request() *Request {
	r := st.req
	r.Action = ActionSubmit
	r.Spec = st.spec
	r.Warnings = st.warnings
	r.Defined = st.definedInOrder()
	for id, env := range st.fromEnv {
		if env {
			if r.FromEnv == nil {
				r.FromEnv = map[string]bool{}
			}
			r.FromEnv[id] = true
		}
	}
	return &r
}

// definedInOrder lists the options that were set in the order of
// Slurm's table, which is sorted by long name; an option with several
// names (--account and --queue) comes at its first name. Sorting the
// few options set costs less than sorting the table.
func (st *state) definedInOrder() [][2]string {
	if len(st.defined) == 0 {
		return nil
	}
	type entry struct{ key, id, v string }
	es := make([]entry, 0, len(st.defined))
	t := table()
	for id, v := range st.defined {
		e := entry{id: id, v: v}
		for i := range t {
			if t[i].id() == id && (e.key == "" || t[i].Long < e.key) {
				e.key = t[i].Long
			}
		}
		if e.key != "" {
			es = append(es, e)
		}
	}
	slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	out := make([][2]string, len(es))
	for i, e := range es {
		out[i] = [2]string{e.id, e.v}
	}
	return out
}
