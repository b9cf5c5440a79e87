package opts

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

func (s Spec) id() string {
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

// GetoptError is a command-line syntax error worded exactly as glibc's
// getopt_long words it (without the program-name prefix).
type GetoptError struct {
	Msg string
	Pos int
}

func (e *GetoptError) Error() string { return e.Msg }

// Getopt parses argument lists with glibc getopt_long semantics in the
// "+" (POSIXLY_CORRECT) mode sbatch uses: option parsing stops at the
// first word that is not an option, and "--" ends the options.
//
// It builds no index: names are looked up by scanning the table, which
// for sbatch's hundred options costs less than building a map would in
// a process that parses one command line and exits.
type Getopt struct {
	// n specs, read through spec, so that sbatch's parser reads its
	// option table in place rather than copying it.
	n    int
	spec func(i int) *Spec
	// nameOrder lists the candidates of an ambiguous or shared prefix
	// by long name instead of in table order, as if the table were
	// sorted by name (see newTableGetopt).
	nameOrder bool
}

// NewGetopt builds a parser over specs; the table order is the order
// ambiguous candidates are listed in, and the first of several entries
// with the same short option wins.
func NewGetopt(specs []Spec) *Getopt {
	return &Getopt{n: len(specs), spec: func(i int) *Spec { return &specs[i] }}
}

// Parse returns the options found in args, in order, and the operands
// that follow them (the first operand and everything after it, with a
// "--" that ended the options removed). On a syntax error it returns the
// options matched before the error together with the error, so that a
// --help written earlier can still win as it does in sbatch.
func (g *Getopt) Parse(args []string) ([]Match, []string, error) {
	var out []Match
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return out, args[i+1:], nil
		case strings.HasPrefix(a, "--"):
			m, used, err := g.long(args, i)
			if err != nil {
				return out, nil, err
			}
			out = append(out, m)
			i += used
		case len(a) > 1 && a[0] == '-':
			ms, used, err := g.shorts(args, i)
			out = append(out, ms...)
			if err != nil {
				return out, nil, err
			}
			i += used
		default:
			return out, args[i:], nil
		}
	}
	return out, nil, nil
}

// long handles args[i], a "--name[=value]" word. used is the number of
// extra words consumed (1 when the argument is the next word).
func (g *Getopt) long(args []string, i int) (Match, int, error) {
	text := args[i][2:]
	name, value, hasEq := strings.Cut(text, "=")
	idx := -1
	for j := range g.n {
		if g.spec(j).Long == name {
			idx = j
			break
		}
	}
	if idx < 0 {
		var cands []int
		for j := range g.n {
			if strings.HasPrefix(g.spec(j).Long, name) {
				cands = append(cands, j)
			}
		}
		if g.nameOrder && len(cands) > 1 {
			slices.SortFunc(cands, func(a, b int) int { return strings.Compare(g.spec(a).Long, g.spec(b).Long) })
		}
		switch {
		case len(cands) == 0:
			return Match{}, 0, &GetoptError{Msg: fmt.Sprintf("unrecognized option '--%s'", text), Pos: i}
		case g.sameOption(cands):
			idx = cands[0]
		default:
			var b strings.Builder
			fmt.Fprintf(&b, "option '--%s' is ambiguous; possibilities:", text)
			for _, c := range cands {
				fmt.Fprintf(&b, " '--%s'", g.spec(c).Long)
			}
			return Match{}, 0, &GetoptError{Msg: b.String(), Pos: i}
		}
	}
	s := g.spec(idx)
	m := Match{Index: idx, Pos: i, Written: "--" + name}
	switch s.Arg {
	case NoArg:
		if hasEq {
			return Match{}, 0, &GetoptError{Msg: fmt.Sprintf("option '--%s' doesn't allow an argument", s.Long), Pos: i}
		}
	case OptionalArg:
		m.Value, m.HasValue = value, hasEq
	case RequiredArg:
		if hasEq {
			m.Value, m.HasValue = value, true
			break
		}
		if i+1 >= len(args) {
			return Match{}, 0, &GetoptError{Msg: fmt.Sprintf("option '--%s' requires an argument", s.Long), Pos: i}
		}
		m.Value, m.HasValue = args[i+1], true
		return m, 1, nil
	}
	return m, 0, nil
}

// sameOption reports whether every candidate of a prefix match is the
// same option under another name, which glibc does not call ambiguous.
func (g *Getopt) sameOption(cands []int) bool {
	first := g.spec(cands[0])
	for _, c := range cands[1:] {
		s := g.spec(c)
		if s.Arg != first.Arg || s.id() != first.id() {
			return false
		}
	}
	return true
}

// shorts handles a cluster of short options such as "-HJname".
func (g *Getopt) shorts(args []string, i int) ([]Match, int, error) {
	a := args[i]
	var out []Match
	for k := 1; k < len(a); k++ {
		c := a[k]
		idx := g.shortIndex(c)
		if idx < 0 {
			return out, 0, &GetoptError{Msg: fmt.Sprintf("invalid option -- '%c'", c), Pos: i}
		}
		s := g.spec(idx)
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
				return out, 0, &GetoptError{Msg: fmt.Sprintf("option requires an argument -- '%c'", c), Pos: i}
			}
			m.Value, m.HasValue = args[i+1], true
			return append(out, m), 1, nil
		}
	}
	return out, 0, nil
}

// shortIndex returns the index of the spec with short option c (the
// first in table order, or by long name under nameOrder), or -1.
func (g *Getopt) shortIndex(c byte) int {
	idx := -1
	if c == 0 {
		return idx
	}
	for i := range g.n {
		if g.spec(i).Short != c {
			continue
		}
		if !g.nameOrder {
			return i
		}
		if idx < 0 || g.spec(i).Long < g.spec(idx).Long {
			idx = i
		}
	}
	return idx
}
