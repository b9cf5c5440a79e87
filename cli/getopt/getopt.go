package getopt

import (
	"fmt"
	"slices"
	"strings"
)

// ArgKind says whether an option takes an argument, as getopt_long's
// has_arg field does.
type ArgKind int

// The three getopt_long argument kinds. An optional argument is only ever
// taken from "--name=value" or from the rest of a short-option cluster
// ("-kvalue"), never from the next word.
const (
	NoArg ArgKind = iota
	RequiredArg
	OptionalArg
)

// Spec is one entry of a getopt_long table. Entries that share an ID are
// one option under several names (getopt_long's equal has_arg/flag/val),
// so a prefix matching only them is not ambiguous. An empty ID is the
// long name.
type Spec struct {
	Long  string
	Short byte
	Arg   ArgKind
	ID    string
}

// Key is the option's identity: its ID, or its long name.
func (s *Spec) Key() string {
	if s.ID != "" {
		return s.ID
	}
	return s.Long
}

// Match is one option found on a command line. Index points into the
// table the parser was built with; Pos is the position in the argument
// list of the word the option began in, so that callers can say where a
// bad value came from.
type Match struct {
	Index    int
	Value    string
	HasValue bool
	Pos      int
	// Written is the option as the user spelled it ("--part", "-p").
	Written string
}

// Error is a command-line syntax error worded exactly as glibc's
// getopt_long words it (without the program-name prefix): "unrecognized
// option '--foo'", "invalid option -- 'x'", "option '--n' is ambiguous;
// possibilities: …", "option '--nodes' requires an argument", "option
// requires an argument -- 'N'", "option '--hold' doesn't allow an
// argument". Pos is the index of the word it is about.
type Error struct {
	Msg string
	Pos int
}

func (e *Error) Error() string { return e.Msg }

// Parser parses argument lists with glibc getopt_long semantics.
//
// It builds no index: names are looked up by scanning the table, which
// for a hundred options costs less than building a map would in a
// process that parses one command line and exits.
type Parser struct {
	// n specs, read through spec, so that a command's parser reads its
	// option table in place rather than copying it.
	n    int
	spec func(i int) *Spec
	// Permute is glibc's default ordering: options may follow operands
	// ("scancel 12 --signal=USR1"), which are returned in their order.
	// Without it parsing stops at the first operand, as with a "+" at
	// the start of the short-option string (sbatch, srun and salloc,
	// whose operands are a script or command with options of its own),
	// or with POSIXLY_CORRECT in the environment.
	Permute bool
	// NameOrder lists the candidates of an ambiguous or shared prefix
	// by long name instead of in table order, as if the table were
	// sorted by name (sbatch's table is; see opts.newTableGetopt).
	NameOrder bool
}

// New builds a parser over specs that stops at the first operand; the
// table order is the order ambiguous candidates are listed in, and the
// first of several entries with the same short option wins.
func New(specs []Spec) *Parser {
	return &Parser{n: len(specs), spec: func(i int) *Spec { return &specs[i] }}
}

// NewFunc builds a parser over a table of n specs read through spec, for
// tables whose entries hold more than the Spec.
func NewFunc(n int, spec func(i int) *Spec) *Parser {
	return &Parser{n: n, spec: spec}
}

// Parse returns the options found in args, in order, and the operands:
// without Permute the first operand and everything after it, with
// Permute every word that is not an option or its argument, in order;
// and in both modes the words after a "--" that ended the options (the
// "--" itself removed). On a syntax error it returns the options
// matched before the error together with the error, so that a --help
// written earlier can still win as it does in Slurm's commands.
func (p *Parser) Parse(args []string) ([]Match, []string, error) {
	var out []Match
	var operands []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return out, append(operands, args[i+1:]...), nil
		case strings.HasPrefix(a, "--"):
			m, used, err := p.long(args, i)
			if err != nil {
				return out, nil, err
			}
			out = append(out, m)
			i += used
		case len(a) > 1 && a[0] == '-':
			ms, used, err := p.shorts(args, i)
			out = append(out, ms...)
			if err != nil {
				return out, nil, err
			}
			i += used
		case p.Permute:
			operands = append(operands, a)
		default:
			return out, args[i:], nil
		}
	}
	return out, operands, nil
}

// long handles args[i], a "--name[=value]" word. used is the number of
// extra words consumed (1 when the argument is the next word).
func (p *Parser) long(args []string, i int) (Match, int, error) {
	text := args[i][2:]
	name, value, hasEq := strings.Cut(text, "=")
	idx := -1
	for j := range p.n {
		if l := p.spec(j).Long; l != "" && l == name {
			idx = j
			break
		}
	}
	if idx < 0 {
		var cands []int
		for j := range p.n {
			// An entry without a long name is a short option only
			// (squeue's -U).
			if l := p.spec(j).Long; l != "" && strings.HasPrefix(l, name) {
				cands = append(cands, j)
			}
		}
		if p.NameOrder && len(cands) > 1 {
			slices.SortFunc(cands, func(a, b int) int { return strings.Compare(p.spec(a).Long, p.spec(b).Long) })
		}
		if len(cands) == 0 {
			return Match{}, 0, &Error{Msg: fmt.Sprintf("unrecognized option '--%s'", text), Pos: i}
		}
		// glibc takes the first candidate, and calls the prefix
		// ambiguous when a later one is another option; it lists the
		// first and those others (not the first one's aliases).
		first := p.spec(cands[0])
		others := []int{cands[0]}
		for _, c := range cands[1:] {
			if s := p.spec(c); s.Arg != first.Arg || s.Key() != first.Key() {
				others = append(others, c)
			}
		}
		if len(others) > 1 {
			var b strings.Builder
			fmt.Fprintf(&b, "option '--%s' is ambiguous; possibilities:", text)
			for _, c := range others {
				fmt.Fprintf(&b, " '--%s'", p.spec(c).Long)
			}
			return Match{}, 0, &Error{Msg: b.String(), Pos: i}
		}
		idx = cands[0]
	}
	s := p.spec(idx)
	m := Match{Index: idx, Pos: i, Written: "--" + name}
	switch s.Arg {
	case NoArg:
		if hasEq {
			return Match{}, 0, &Error{Msg: fmt.Sprintf("option '--%s' doesn't allow an argument", s.Long), Pos: i}
		}
	case OptionalArg:
		m.Value, m.HasValue = value, hasEq
	case RequiredArg:
		if hasEq {
			m.Value, m.HasValue = value, true
			break
		}
		if i+1 >= len(args) {
			return Match{}, 0, &Error{Msg: fmt.Sprintf("option '--%s' requires an argument", s.Long), Pos: i}
		}
		m.Value, m.HasValue = args[i+1], true
		return m, 1, nil
	}
	return m, 0, nil
}

// shorts handles a cluster of short options such as "-HJname".
func (p *Parser) shorts(args []string, i int) ([]Match, int, error) {
	a := args[i]
	var out []Match
	for k := 1; k < len(a); k++ {
		c := a[k]
		idx := p.shortIndex(c)
		if idx < 0 {
			return out, 0, &Error{Msg: fmt.Sprintf("invalid option -- '%c'", c), Pos: i}
		}
		s := p.spec(idx)
		m := Match{Index: idx, Pos: i, Written: "-" + string(c)}
		rest := a[k+1:]
		switch s.Arg {
		case NoArg:
			out = append(out, m)
			continue
		case OptionalArg:
			if rest != "" {
				m.Value, m.HasValue = rest, true
			}
			return append(out, m), 0, nil
		default:
			if rest != "" {
				m.Value, m.HasValue = rest, true
				return append(out, m), 0, nil
			}
			if i+1 >= len(args) {
				return out, 0, &Error{Msg: fmt.Sprintf("option requires an argument -- '%c'", c), Pos: i}
			}
			m.Value, m.HasValue = args[i+1], true
			return append(out, m), 1, nil
		}
	}
	return out, 0, nil
}

// shortIndex returns the index of the spec with short option c (the
// first in table order, or by long name under NameOrder), or -1.
func (p *Parser) shortIndex(c byte) int {
	idx := -1
	if c == 0 {
		return idx
	}
	for i := range p.n {
		if p.spec(i).Short != c {
			continue
		}
		if !p.NameOrder {
			return i
		}
		if idx < 0 || p.spec(i).Long < p.spec(idx).Long {
			idx = i
		}
	}
	return idx
}
