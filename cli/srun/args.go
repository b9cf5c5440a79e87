package srun

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/sbatch/opts"
	"github.com/tide-hpc/tide/ctld/api"
)

// Args is a parsed srun (or salloc) command line: the resource options,
// read with sbatch's option table so that both commands take the same
// flags the same way, plus srun's own options and the command.
type Args struct {
	// Spec holds the resource options (-N -n -c --gpus-per-task -p -t
	// …), -J as Name, -o/-e/-i as Stdout/Stderr/Stdin, -D as WorkDir and
	// --export's result as Environment.
	Spec api.JobSpec
	// Argv is the command and its arguments (empty when none is given).
	Argv []string
	// srun's own options.
	Label      bool
	KillBadEx  bool
	Pty        bool
	Unbuffered bool
	// JobID is --jobid (0 when not given).
	JobID uint64
	// Help, Usage and Version ask for those texts instead of running.
	Help, Usage, Version bool
	Warnings             []string
}

// ParseInput is what ParseArgs reads besides the words.
type ParseInput struct {
	Environ   []string
	Cwd, Host string
	Now       time.Time
}

// placeholder stands in for the batch script sbatch's parser wants: the
// command line names a program, not a script.
const placeholder = "#!/bin/sh\n"

// ownOption is an option srun has and sbatch has not.
type ownOption struct {
	long  string
	short byte
	arg   int // 0 none, 1 required, 2 optional
	set   func(a *Args, v string) error
}

var ownOptions = []ownOption{
	{long: "label", short: 'l', set: func(a *Args, _ string) error { a.Label = true; return nil }},
	{long: "kill-on-bad-exit", short: 'K', arg: 2, set: func(a *Args, v string) error {
		a.KillBadEx = v == "" || v != "0"
		return nil
	}},
	{long: "pty", set: func(a *Args, _ string) error { a.Pty = true; return nil }},
	{long: "unbuffered", short: 'u', set: func(a *Args, _ string) error { a.Unbuffered = true; return nil }},
	{long: "jobid", arg: 1, set: func(a *Args, v string) error {
		id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil || id == 0 {
			return fmt.Errorf("Invalid job id: %s", v)
		}
		a.JobID = id
		return nil
	}},
}

// ParseArgs parses words (after the program name). sbatch's parser reads
// every resource option and stops at the command, as getopt does; the
// options it does not know are srun's own, which are taken out one by
// one until it accepts the rest.
func ParseArgs(words []string, in ParseInput) (*Args, error) {
	a := &Args{}
	words = append([]string(nil), words...)
	for _, w := range words {
		if w == "--" || !strings.HasPrefix(w, "-") {
			break
		}
		switch w {
		case "--help", "-h":
			a.Help = true
			return a, nil
		case "--usage":
			a.Usage = true
			return a, nil
		case "--version", "-V":
			a.Version = true
			return a, nil
		}
	}
	gpt := 0
	for tries := 0; tries <= len(words); tries++ {
		req, err := opts.Parse(opts.Input{
			Args: words, Getenv: func(string) string { return "" }, Environ: in.Environ,
			ReadFile: func(string) ([]byte, error) { return []byte(placeholder), nil },
			Stdin:    strings.NewReader(placeholder), Cwd: in.Cwd, Host: in.Host, Now: in.Now,
		})
		if err == nil {
			a.Spec = req.Spec
			if gpt > 0 {
				a.Spec.GPUsPerTask = gpt
			}
			a.Spec.Script, a.Spec.ScriptArgs = "", nil
			if req.ScriptPath != "" {
				a.Argv = append([]string{req.ScriptPath}, req.ScriptArgs...)
			}
			a.Warnings = req.Warnings
			return a, nil
		}
		var pe *opts.Error
		if errors.As(err, &pe) && len(pe.Lines) > 0 && strings.Contains(pe.Lines[0], "--gpus-per-task requires") && gpt == 0 {
			// A step without -n or --ntasks-per-node runs the job's
			// own task layout (the controller lays it out), so
			// --gpus-per-task alone is valid for srun, unlike for
			// sbatch: parse the rest without it.
			if words, gpt, err = takeGPUsPerTask(words); err != nil {
				return nil, err
			}
			if gpt > 0 {
				continue
			}
		}
		if !errors.As(err, &pe) || !pe.Usage || len(pe.Lines) == 0 {
			return nil, err
		}
		var took bool
		words, took, err = takeOwn(a, words, pe.Lines[0])
		if err != nil {
			return nil, err
		}
		if !took {
			return nil, err0(pe)
		}
	}
	return nil, errors.New("cannot parse the command line")
}

// takeGPUsPerTask removes the first --gpus-per-task from words and
// returns its value (0 when there is none).
func takeGPUsPerTask(words []string) ([]string, int, error) {
	at, n := -1, 1
	val := ""
	for i, w := range words {
		if w == "--" {
			break
		}
		switch {
		case strings.HasPrefix(w, "--gpus-per-task="):
			at, val = i, strings.TrimPrefix(w, "--gpus-per-task=")
		case w == "--gpus-per-task" && i+1 < len(words):
			at, val, n = i, words[i+1], 2
		}
	}
	if at < 0 {
		return words, 0, nil
	}
	g, err := strconv.Atoi(val)
	if err != nil || g < 1 {
		return nil, 0, fmt.Errorf("Invalid --gpus-per-task specification: %s", val)
	}
	return append(words[:at:at], words[at+n:]...), g, nil
}

func err0(pe *opts.Error) error { return fmt.Errorf("%s", strings.Join(pe.Lines, " ")) }

// takeOwn removes from words the srun option getopt complained about in
// msg ("unrecognized option '--label'", "invalid option -- 'l'") and
// applies it. took is false when msg is about no option of srun's.
func takeOwn(a *Args, words []string, msg string) ([]string, bool, error) {
	if rest, ok := strings.CutPrefix(msg, "unrecognized option '--"); ok {
		text := strings.TrimSuffix(rest, "'")
		name, val, hasVal := strings.Cut(text, "=")
		o := findLong(name)
		if o == nil {
			return words, false, nil
		}
		for i, w := range words {
			if w != "--"+text {
				continue
			}
			n := 1
			switch {
			case o.arg == 0 && hasVal:
				return nil, false, fmt.Errorf("option '--%s' doesn't allow an argument", o.long)
			case o.arg == 1 && !hasVal:
				if i+1 >= len(words) {
					return nil, false, fmt.Errorf("option '--%s' requires an argument", o.long)
				}
				val, n = words[i+1], 2
			}
			if err := o.set(a, val); err != nil {
				return nil, false, err
			}
			return append(words[:i:i], words[i+n:]...), true, nil
		}
		return words, false, nil
	}
	if rest, ok := strings.CutPrefix(msg, "invalid option -- '"); ok && len(rest) >= 1 {
		c := rest[0]
		if findShort(c) == nil {
			return words, false, nil
		}
		for i, w := range words {
			if len(w) < 2 || w[0] != '-' || w[1] == '-' || !strings.ContainsRune(w[1:], rune(c)) {
				continue
			}
			for k := 1; k < len(w); k++ {
				o := findShort(w[k])
				if o == nil {
					return nil, false, fmt.Errorf("give -%c as a word of its own (srun's own short options do not combine with sbatch's)", c)
				}
				val := ""
				if o.arg == 2 && k+1 < len(w) {
					val, k = w[k+1:], len(w)
				}
				if err := o.set(a, val); err != nil {
					return nil, false, err
				}
			}
			return append(words[:i:i], words[i+1:]...), true, nil
		}
	}
	return words, false, nil
}

func findLong(name string) *ownOption {
	var found *ownOption
	for i := range ownOptions {
		o := &ownOptions[i]
		if o.long == name {
			return o
		}
		if strings.HasPrefix(o.long, name) {
			if found != nil {
				return nil
			}
			found = o
		}
	}
	return found
}

func findShort(c byte) *ownOption {
	for i := range ownOptions {
		if ownOptions[i].short == c && c != 0 {
			return &ownOptions[i]
		}
	}
	return nil
}
