package root

import (
	"errors"
	"slices"
	"strings"

	"github.com/tide-hpc/tide/cli/getopt"
	"github.com/tide-hpc/tide/cli/manpage"
)

// The completion engine: given a command's option table and the words
// before the one being completed, it says what that word may become. It
// reads the words with the command's own getopt rules (abbreviated long
// options, bundled short options, "--opt=v" and "--opt v", operands
// after options or among them), so that it agrees with the parser on
// whether a word is an option, an option's argument or an operand. The
// shells' adapters (completion.go) turn its answer into their formats.

// compKind says what the shell completes besides the candidates.
type compKind int

const (
	// compWords: the candidates only (no file names).
	compWords compKind = iota
	// compFiles, compDirs and compCommands: file names, directory
	// names or command names, matched against Partial.
	compFiles
	compDirs
	compCommands
)

// compCand is one candidate: the whole word it completes to, and a
// description the shells that show one (zsh, fish) print beside it.
type compCand struct {
	Word, Desc string
}

// compResult is the engine's answer.
type compResult struct {
	Cands []compCand
	Kind  compKind
	// Prefix and Partial split the word for file, directory and command
	// completion: Prefix is kept as written ("--output=", "-o") and
	// Partial is completed ("out/lo").
	Prefix, Partial string
	// NoSpace: the shell must not add a space after a single candidate
	// ("--partition=", "gpu:").
	NoSpace bool
}

// compSpec is what the engine knows of a command.
type compSpec struct {
	options []manpage.Option
	// permute: options may follow operands (every Slurm command but
	// sbatch, srun and salloc, whose first operand starts the script or
	// command with its own options).
	permute bool
	// value completes an option's argument (cur is the argument written
	// so far); nil completes only its fixed words.
	value func(c *completer, o *manpage.Option, cur string) compResult
	// operand completes an operand; prev are the operands before it.
	operand func(c *completer, prev []string, cur string) compResult
}

// complete answers for the word cur after the words args (the command
// line after the program name, cur not included).
func (s *compSpec) complete(c *completer, args []string, cur string) compResult {
	specs := make([]getopt.Spec, len(s.options))
	for i, o := range s.options {
		specs[i] = getopt.Spec{Long: o.Long, Short: o.Short, Arg: o.Arg, ID: o.Key}
	}
	p := getopt.New(specs)
	p.Permute = s.permute

	// Read the words before cur as the command will. A word the parser
	// refuses (a mistyped option) is left out and the rest read again,
	// so that one mistake does not end completion of the line.
	words := slices.Clone(args)
	var operands []string
	optionsOpen := true
	for {
		_, ops, err := p.Parse(words)
		var ge *getopt.Error
		if errors.As(err, &ge) {
			if ge.Pos == len(words)-1 && strings.Contains(ge.Msg, "requires an argument") {
				// cur is the argument of the last word's option.
				if o := s.lastOption(p, words[len(words)-1]); o != nil {
					return s.completeValue(c, o, "", cur)
				}
				return compResult{}
			}
			words = slices.Delete(words, ge.Pos, ge.Pos+1)
			continue
		}
		operands = ops
		break
	}
	if slices.Contains(words, "--") || (!s.permute && len(operands) > 0) {
		optionsOpen = false
	}
	if optionsOpen && strings.HasPrefix(cur, "-") && cur != "-" && !strings.HasPrefix(cur, "--") {
		return s.completeShort(c, p, cur)
	}
	if optionsOpen && strings.HasPrefix(cur, "-") {
		return s.completeLong(c, p, cur)
	}
	if s.operand == nil {
		return compResult{}
	}
	return s.operand(c, operands, cur)
}

// lastOption returns the option a word ends with that takes the next
// word as its argument ("--partition", "-Hp").
func (s *compSpec) lastOption(p *getopt.Parser, word string) *manpage.Option {
	const marker = "\x00"
	ms, _, err := p.Parse([]string{word, marker})
	if err != nil || len(ms) == 0 || ms[len(ms)-1].Value != marker {
		return nil
	}
	return &s.options[ms[len(ms)-1].Index]
}

// completeLong completes "--name", "--name=value" or a lone "-".
func (s *compSpec) completeLong(c *completer, p *getopt.Parser, cur string) compResult {
	if name, val, ok := strings.Cut(cur, "="); ok {
		ms, _, err := p.Parse([]string{name + "=" + "\x00"})
		if err != nil || len(ms) != 1 {
			return compResult{}
		}
		return s.completeValue(c, &s.options[ms[0].Index], name+"=", val)
	}
	var r compResult
	for i := range s.options {
		o := &s.options[i]
		if o.Hidden || o.Long == "" || !strings.HasPrefix("--"+o.Long, cur) {
			continue
		}
		w := "--" + o.Long
		if o.Arg == getopt.RequiredArg {
			w += "="
		}
		r.Cands = append(r.Cands, compCand{Word: w, Desc: o.Help})
	}
	r.NoSpace = len(r.Cands) == 1 && strings.HasSuffix(r.Cands[0].Word, "=")
	return r
}

// completeShort completes a word of short options: "-p" (complete: the
// shell adds a space) or "-pgp" (the argument written so far).
func (s *compSpec) completeShort(c *completer, p *getopt.Parser, cur string) compResult {
	ms, _, err := p.Parse([]string{cur})
	var ge *getopt.Error
	switch {
	case errors.As(err, &ge) && strings.Contains(ge.Msg, "requires an argument"):
		return compResult{Cands: []compCand{{Word: cur}}}
	case err != nil || len(ms) == 0:
		return compResult{}
	}
	m := ms[len(ms)-1]
	if m.HasValue {
		return s.completeValue(c, &s.options[m.Index], cur[:len(cur)-len(m.Value)], m.Value)
	}
	return compResult{Cands: []compCand{{Word: cur}}}
}

// completeValue completes option o's argument val, written after prefix
// in the same word ("--partition=", "-p", or "" for a word of its own).
func (s *compSpec) completeValue(c *completer, o *manpage.Option, prefix, val string) compResult {
	var r compResult
	if s.value != nil {
		r = s.value(c, o, val)
	}
	if r.Kind == compWords && len(r.Cands) == 0 {
		if words := o.Words(); len(words) > 0 {
			// Lists of them (--mail-type=BEGIN,END) complete the item
			// after the last comma; a single word has none.
			r = listOf(words, val, true)
		}
	}
	return r.withPrefix(prefix)
}

// withPrefix puts prefix before every candidate and, for file,
// directory and command names, before Partial's part of the word.
func (r compResult) withPrefix(prefix string) compResult {
	if prefix == "" {
		return r
	}
	for i := range r.Cands {
		r.Cands[i].Word = prefix + r.Cands[i].Word
	}
	if r.Kind != compWords {
		r.Prefix = prefix + r.Prefix
	}
	return r
}

// filter keeps the candidates that start with cur, each word once.
func filter(cands []compCand, cur string) []compCand {
	var out []compCand
	for _, c := range cands {
		if strings.HasPrefix(c.Word, cur) && !slices.ContainsFunc(out, func(o compCand) bool { return o.Word == c.Word }) {
			out = append(out, c)
		}
	}
	return out
}

// listOf completes cur as one word of words or, when list is set, as a
// comma-separated list of them: the item after the last comma, the ones
// before it kept and not offered again.
func listOf(words []string, cur string, list bool) compResult {
	cands := make([]compCand, len(words))
	for i, w := range words {
		cands[i] = compCand{Word: w}
	}
	return listOfCands(cands, cur, list)
}

// listOfCands is listOf with descriptions.
func listOfCands(cands []compCand, cur string, list bool) compResult {
	head, item := "", cur
	if list {
		if i := strings.LastIndexByte(cur, ','); i >= 0 {
			head, item = cur[:i+1], cur[i+1:]
		}
	}
	done := strings.Split(strings.TrimSuffix(head, ","), ",")
	var r compResult
	for _, c := range filter(cands, item) {
		if head != "" && slices.Contains(done, c.Word) {
			continue
		}
		r.Cands = append(r.Cands, compCand{Word: head + c.Word, Desc: c.Desc})
	}
	return r
}
