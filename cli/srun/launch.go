package srun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
	"github.com/tide-hpc/tide/internal/envlist"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// errStepCancelled: the step never ran (given up while it waited for
// resources, or its srun prolog failed); srun said why and exits 1.
var errStepCancelled = errors.New("step cancelled")

// stepBusyNote is how often srun repeats that its step still waits.
const stepBusyNote = time.Minute

// isStepBusy reports whether err is the controller's answer that the
// step must wait for other steps of its job.
func isStepBusy(err error) bool {
	return errors.Is(err, api.ErrConflict) && strings.Contains(err.Error(), api.StepBusy)
}

// createStep asks for step req of job id until the controller grants
// it. While the job's other steps hold what it needs, srun waits as
// Slurm's does ("step creation temporarily disabled, retrying"), unless
// immediate (seconds, 1 for -I alone) says how long it may wait. A
// signal on sigs while it waits gives the step up.
func createStep(ctx context.Context, c StepAPI, id uint64, req api.StepRequest, immediate int, errOut io.Writer, sigs <-chan os.Signal, every time.Duration) (api.StepResponse, error) {
	start := time.Now()
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	delay := every
	waited := false
	lastNote := start
	for {
		resp, err := c.CreateStep(ctx, id, req)
		if err == nil {
			if waited {
				fmt.Fprintf(errOut, "%s: Step created for job %d\n", prog, id)
			}
			return resp, nil
		}
		if !isStepBusy(err) {
			return api.StepResponse{}, err
		}
		if immediate > 0 && (immediate == 1 || time.Since(start) >= time.Duration(immediate)*time.Second) {
			return api.StepResponse{}, fmt.Errorf("Unable to create step for job %d: %s", id, api.StepBusy)
		}
		switch {
		case !waited:
			fmt.Fprintf(errOut, "%s: Job %d step creation temporarily disabled, retrying (%s)\n", prog, id, api.StepBusy)
			waited = true
		case time.Since(lastNote) >= stepBusyNote:
			fmt.Fprintf(errOut, "%s: Job %d step creation still disabled, retrying (%s)\n", prog, id, api.StepBusy)
			lastNote = time.Now()
		}
		wait := delay
		if immediate > 1 {
			wait = min(wait, time.Until(start.Add(time.Duration(immediate)*time.Second)))
		}
		select {
		case <-ctx.Done():
			return api.StepResponse{}, ctx.Err()
		case sig := <-sigs:
			if sig == syscall.SIGCONT {
				continue
			}
			fmt.Fprintf(errOut, "%s: Cancelled pending step for job %d\n", prog, id)
			return api.StepResponse{}, errStepCancelled
		case <-time.After(max(wait, time.Millisecond)):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// runLocal runs srun's --prolog or --epilog, here, with the step's
// command as its arguments and the step's environment plus its ids, and
// returns its exit code (127 when it cannot start).
func runLocal(ctx context.Context, program string, argv, env []string, g *api.StepGrant) int {
	cmd := exec.CommandContext(ctx, program, argv...)
	e := envlist.FromEntries(env)
	e.Set("SLURM_JOB_ID", strconv.FormatUint(g.JobID, 10))
	e.Set("SLURM_JOBID", strconv.FormatUint(g.JobID, 10))
	e.Set("SLURM_STEP_ID", strconv.FormatUint(uint64(g.StepID), 10))
	e.Set("SLURM_STEPID", strconv.FormatUint(uint64(g.StepID), 10))
	e.Set("SLURM_SCRIPT_CONTEXT", "prolog_srun")
	cmd.Env = e.Entries()
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 127
}

// testOnly is srun --test-only: the controller says when and where an
// allocation would start; nothing runs.
func testOnly(ctx context.Context, c StepAPI, a *Args, errOut io.Writer) error {
	spec := a.Spec
	spec.Allocation = true
	spec.Script, spec.ScriptArgs, spec.Environment = "", nil, nil
	spec.Stdout, spec.Stderr, spec.Stdin = "", "", ""
	resp, err := c.Submit(ctx, api.SubmitRequest{Spec: spec, TestOnly: true})
	if err != nil {
		return failf(errOut, "Unable to allocate resources: %s", trimPrefix(err))
	}
	fmt.Fprintf(errOut, "%s: Job %d to start at %s using %d processors on nodes %s in partition %s\n",
		prog, resp.JobID, resp.TestStart.Local().Format("2006-01-02T15:04:05"),
		resp.TestCPUs, termsafe.Escape(resp.TestNodes), termsafe.Escape(resp.TestPartition))
	return nil
}

// JobLine is srun's -v line for an allocation: "jobid 12: nodes(2):
// `gpu[01-02]', cpu counts: 4(x2)", which tools read the job id from.
func JobLine(j *api.Job) string {
	cpus := make([]int, len(j.Alloc))
	for i, a := range j.Alloc {
		cpus[i] = a.CPUs
	}
	var parts []string
	for i := 0; i < len(cpus); {
		k := i
		for k < len(cpus) && cpus[k] == cpus[i] {
			k++
		}
		parts = append(parts, fmt.Sprintf("%d(x%d)", cpus[i], k-i))
		i = k
	}
	return fmt.Sprintf("jobid %d: nodes(%d):`%s', cpu counts: %s", j.ID, len(j.Alloc), hostlist.Compress(j.NodeNames()), strings.Join(parts, ","))
}

// verbose prints srun's -v lines: those of verbosity level n and below
// when -v was given n times (and not -Q).
type verbose struct {
	w     io.Writer
	level int
}

func newVerbose(w io.Writer, a *Args) *verbose {
	v := &verbose{w: w, level: a.Verbose}
	if a.Quiet {
		v.level = 0
	}
	return v
}

// say prints line at level n.
func (v *verbose) say(n int, line string) {
	if v == nil || v.level < n {
		return
	}
	fmt.Fprintf(v.w, "%s: %s\n", prog, line)
}

// on reports whether level n prints.
func (v *verbose) on(n int) bool { return v != nil && v.level >= n }

// defined prints the "defined options" block of -v.
func (v *verbose) defined(d [][2]string) {
	if !v.on(1) {
		return
	}
	const rule = "-------------------- --------------------"
	v.say(1, "defined options")
	v.say(1, rule)
	for _, e := range d {
		v.say(1, fmt.Sprintf("%-20s: %s", e[0], termsafe.Escape(e[1])))
	}
	v.say(1, rule)
	v.say(1, "end of defined options")
}

// launching prints the "launching StepId=J.S on host H, N tasks: R"
// lines of -v, one per node of the step.
func (v *verbose) launching(g *api.StepGrant) {
	if !v.on(1) {
		return
	}
	for _, n := range g.Nodes {
		v.say(1, fmt.Sprintf("launching StepId=%s on host %s, %d tasks: %s", g.ID(), n.Name, len(n.Ranks), intList(sortedInts(n.Ranks))))
	}
}

// ParseMultiProg reads a --multi-prog configuration (man srun, MULTIPLE
// PROGRAM CONFIGURATION) and returns each task's command, by rank, with
// %t (the task's rank) and %o (its offset within its line's ranks)
// expanded and args appended. Each line is "RANKS PROGRAM ARGS...":
// RANKS is "*" (every task no earlier line names; it must come last)
// or a comma list of ranks and ranges. Words may be quoted with single
// quotes; a backslash escapes the next character or, at the end of a
// line, joins the next one. Lines starting with "#" are comments.
// ntasks is -n (0: the highest rank named plus one). name is the file
// as given, for messages.
func ParseMultiProg(data, name string, ntasks int, args []string) ([][]string, error) {
	type line struct {
		num    int
		ranks  []int
		offset map[int]int
		star   bool
		words  []mpWord
	}
	bad := func(num int, why ...string) error {
		return &ParseError{Lines: append(why, fmt.Sprintf("Line %d of configuration file %s invalid", num, name))}
	}
	var lines []line
	raw := strings.Split(data, "\n")
	star := false
	for i := 0; i < len(raw); i++ {
		num := i + 1
		text := raw[i]
		// A backslash at the end of a line joins the next.
		for strings.HasSuffix(text, "\\") && i+1 < len(raw) {
			i++
			text = text[:len(text)-1] + "\n" + raw[i]
		}
		t := strings.TrimLeft(text, " \t\r")
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		spec, rest, _ := strings.Cut(strings.ReplaceAll(t, "\t", " "), " ")
		words, err := splitMultiProg(strings.TrimLeft(t[len(spec):], " \t"))
		if err != nil || strings.TrimSpace(rest) == "" || len(words) == 0 {
			return nil, bad(num)
		}
		l := line{num: num, words: words, offset: map[int]int{}}
		if spec == "*" {
			if star {
				return nil, bad(num, "Task range specification with asterisk must be last")
			}
			l.star, star = true, true
			lines = append(lines, l)
			continue
		}
		if star {
			return nil, bad(num, "Task range specification with asterisk must be last")
		}
		for _, r := range strings.Split(spec, ",") {
			lo, hi, isRange := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if !isRange {
				b, err2 = a, nil
			}
			if err1 != nil || err2 != nil || lo == "" || strings.HasPrefix(lo, "+") {
				return nil, bad(num, fmt.Sprintf("Invalid task range specification (%s)", r))
			}
			if a > b {
				return nil, bad(num, fmt.Sprintf("Invalid task range, %d-%d", a, b))
			}
			if ntasks > 0 && b >= ntasks {
				return nil, bad(num, fmt.Sprintf("Invalid task id, %d >= ntasks", b))
			}
			for k := a; k <= b; k++ {
				l.offset[k] = len(l.ranks)
				l.ranks = append(l.ranks, k)
			}
		}
		lines = append(lines, l)
	}
	n := ntasks
	for _, l := range lines {
		for _, r := range l.ranks {
			n = max(n, r+1)
		}
	}
	if n <= 0 {
		return nil, &ParseError{Lines: []string{fmt.Sprintf("Invalid task count %d", n)}}
	}
	out := make([][]string, n)
	owner := make([]int, n)
	for i := range owner {
		owner[i] = -1
	}
	for li, l := range lines {
		if l.star {
			for r := range n {
				if owner[r] < 0 {
					owner[r] = li
				}
			}
			continue
		}
		for _, r := range l.ranks {
			if owner[r] >= 0 {
				return nil, bad(l.num, fmt.Sprintf("Duplicate record for task %d", r))
			}
			owner[r] = li
		}
	}
	for r := range n {
		if owner[r] < 0 {
			return nil, &ParseError{Lines: []string{fmt.Sprintf("Configuration file %s invalid, no record for task id %d", name, r)}}
		}
		l := lines[owner[r]]
		off := r
		if !l.star {
			off = l.offset[r]
		}
		for _, w := range l.words {
			out[r] = append(out[r], w.expand(r, off))
		}
		out[r] = append(out[r], args...)
	}
	return out, nil
}

// mpWord is one word of a --multi-prog line: literal text and, between
// it, %t and %o to expand per task.
type mpWord []mpPart

type mpPart struct {
	text string
	code byte // 0 for text, 't' or 'o'
}

func (w mpWord) expand(rank, offset int) string {
	var b strings.Builder
	for _, p := range w {
		switch p.code {
		case 't':
			b.WriteString(strconv.Itoa(rank))
		case 'o':
			b.WriteString(strconv.Itoa(offset))
		default:
			b.WriteString(p.text)
		}
	}
	return b.String()
}

// splitMultiProg splits the program and arguments of a --multi-prog
// line into words, as Slurm's slurmstepd does: spaces separate, single
// quotes keep everything to the next quote, a backslash takes the next
// character as it is (a newline, from a joined line, is dropped), %t
// and %o are marked for expansion and any other %x is dropped.
func splitMultiProg(s string) ([]mpWord, error) {
	var out []mpWord
	var cur mpWord
	var text strings.Builder
	in := false
	flushText := func() {
		if text.Len() > 0 {
			cur = append(cur, mpPart{text: text.String()})
			text.Reset()
		}
	}
	endWord := func() {
		flushText()
		if in {
			out = append(out, cur)
		}
		cur, in = nil, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			endWord()
		case c == '\\':
			in = true
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					text.WriteByte(s[i])
				}
			}
		case c == '\'':
			in = true
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated quote")
			}
			text.WriteString(strings.ReplaceAll(s[i+1:i+1+end], "\\\n", ""))
			i += end + 1
		case c == '%':
			in = true
			if i+1 < len(s) {
				i++
				if s[i] == 't' || s[i] == 'o' {
					flushText()
					cur = append(cur, mpPart{code: s[i]})
				}
			}
		default:
			in = true
			text.WriteByte(c)
		}
	}
	endWord()
	return out, nil
}

// sortedInts is a sorted copy of xs.
func sortedInts(xs []int) []int {
	out := append([]int(nil), xs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
