package topology

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// SyntaxError is one problem in a topology file, tied to the line where
// the offending (possibly continued) line starts, so that an admin can go
// straight to it.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// slurmKeys maps the lower-cased keys of a topology.conf line to the
// spelling Slurm documents, for error messages.
var slurmKeys = map[string]string{
	"switchname": "SwitchName",
	"nodes":      "Nodes",
	"switches":   "Switches",
	"linkspeed":  "LinkSpeed",
}

// maxSlurmLine bounds one physical line; node lists of big clusters are
// long, but a megabyte is far beyond any real file.
const maxSlurmLine = 1 << 20

// ParseSlurmConf reads Slurm's topology.conf (topology/tree syntax) as
// written for Slurm, so that sites can keep one file for both systems:
//
//	# comment
//	SwitchName=s1 Nodes=gpu[001-016] LinkSpeed=100
//	SwitchName=spine Switches=s[1-2]
//
// Keys are case-insensitive; LinkSpeed is accepted and ignored; a line
// ending in a backslash continues on the next. Every problem is reported
// (joined) as a *SyntaxError naming its line: unknown keys, a missing
// SwitchName, both Nodes and Switches, keys given twice, and switches
// defined twice. The tree itself (cycles, unknown nodes and switches) is
// checked by Build.
func ParseSlurmConf(r io.Reader) ([]SwitchConfig, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxSlurmLine)
	var (
		out     []SwitchConfig
		errs    []error
		defined = map[string]int{} // switch name -> line
		logical strings.Builder
		start   int // first physical line of the logical line
		lineNo  int
	)
	flush := func() {
		if s, ok, lineErrs := parseSlurmLine(start, logical.String()); len(lineErrs) > 0 {
			errs = append(errs, lineErrs...)
		} else if ok {
			if prev, dup := defined[s.Name]; dup {
				errs = append(errs, &SyntaxError{start, fmt.Sprintf("switch %q already defined on line %d", s.Name, prev)})
			} else {
				defined[s.Name] = start
				out = append(out, s)
			}
		}
		logical.Reset()
		start = 0
	}
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimRight(line, " \t\r")
		if start == 0 {
			start = lineNo
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			logical.WriteString(cont)
			logical.WriteByte(' ')
			continue
		}
		logical.WriteString(line)
		flush()
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("topology.conf: read after line %d: %w", lineNo, err)
	}
	if start != 0 { // the file ended inside a continuation
		flush()
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// parseSlurmLine parses one logical line. ok is false for a blank line.
func parseSlurmLine(line int, text string) (s SwitchConfig, ok bool, errs []error) {
	fields, err := splitSlurmFields(text)
	if err != nil {
		return s, false, []error{&SyntaxError{line, err.Error()}}
	}
	if len(fields) == 0 {
		return s, false, nil
	}
	bad := func(format string, args ...any) {
		errs = append(errs, &SyntaxError{line, fmt.Sprintf(format, args...)})
	}
	seen := map[string]bool{}
	for _, f := range fields {
		k, v, hasEq := strings.Cut(f, "=")
		key := strings.ToLower(k)
		name, known := slurmKeys[key]
		switch {
		case !hasEq:
			bad("%q is not Key=Value", f)
			continue
		case key == "blockname" || key == "blocksizes":
			bad("%s belongs to Slurm's topology/block, which Tide does not read; describe the tree with SwitchName lines", k)
			continue
		case !known:
			bad("unknown key %q (want %s)", k, knownSlurmKeys())
			continue
		case seen[key]:
			bad("%s given twice", name)
			continue
		}
		seen[key] = true
		v = strings.Trim(v, `"`)
		if v == "" && key != "linkspeed" {
			bad("%s has no value", name)
			continue
		}
		switch key {
		case "switchname":
			if strings.ContainsAny(v, "[],") {
				bad("SwitchName=%s: a line defines one switch, not a list", v)
				continue
			}
			s.Name = v
		case "nodes":
			s.Nodes = v
		case "switches":
			s.Switches = v
		}
	}
	if !seen["switchname"] {
		bad("missing SwitchName")
	}
	if seen["nodes"] && seen["switches"] {
		bad("switch %q has both Nodes and Switches; a switch holds either nodes (leaf) or switches", s.Name)
	}
	return s, true, errs
}

// splitSlurmFields splits on blanks outside double quotes.
func splitSlurmFields(text string) ([]string, error) {
	var (
		fields []string
		cur    strings.Builder
		quoted bool
	)
	for _, c := range text {
		switch {
		case c == '"':
			quoted = !quoted
			cur.WriteRune(c)
		case (c == ' ' || c == '\t') && !quoted:
			if cur.Len() > 0 {
				fields = append(fields, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(c)
		}
	}
	if quoted {
		return nil, errors.New("unterminated quote")
	}
	if cur.Len() > 0 {
		fields = append(fields, cur.String())
	}
	return fields, nil
}

func knownSlurmKeys() string {
	names := make([]string, 0, len(slurmKeys))
	for _, n := range slurmKeys {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// FormatSlurmConf writes switches in topology.conf syntax, one line each
// in the given order, so a Tide topology can be handed to Slurm tools or
// diffed against a site's existing file. ParseSlurmConf reads it back.
func FormatSlurmConf(cfg []SwitchConfig) string {
	var b strings.Builder
	for _, s := range cfg {
		b.WriteString("SwitchName=" + s.Name)
		if s.Nodes != "" {
			b.WriteString(" Nodes=" + s.Nodes)
		}
		if s.Switches != "" {
			b.WriteString(" Switches=" + s.Switches)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
