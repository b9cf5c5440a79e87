package opts

import (
	"fmt"
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
type Getopt struct {
	specs []Spec
	short map[byte]int
}

// NewGetopt builds a parser over specs; the table order is the order
// ambiguous candidates are listed in.
func NewGetopt(specs []Spec) *Getopt {
	g := &Getopt{specs: specs, short: map[byte]int{}}
	for i, s := range specs {
		if s.Short != 0 {
			if _, dup := g.short[s.Short]; !dup {
				g.short[s.Short] = i
			}
		}
	}
	return g
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
	for j, s := range g.specs {
		if s.Long == name {
			idx = j
			break
		}
	}
	if idx < 0 {
		var cands []int
		for j, s := range g.specs {
			if strings.HasPrefix(s.Long, name) {
				cands = append(cands, j)
			}
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
				fmt.Fprintf(&b, " '--%s'", g.specs[c].Long)
			}
			return Match{}, 0, &GetoptError{Msg: b.String(), Pos: i}
		}
	}
	s := g.specs[idx]
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
	first := g.specs[cands[0]]
	for _, c := range cands[1:] {
		s := g.specs[c]
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
		idx, ok := g.short[c]
		if !ok {
			return out, 0, &GetoptError{Msg: fmt.Sprintf("invalid option -- '%c'", c), Pos: i}
		}
		s := g.specs[idx]
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
