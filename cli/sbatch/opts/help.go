package opts

import (
	"fmt"
	"io"
	"strings"
)

// noEffect reports whether --help marks o as accepted without effect
// yet: the options with an ignore check, and three whose handlers check
// more and warn that they are ignored.
func (o *option) noEffect() bool {
	switch o.Long {
	case "deadline", "no-kill", "oversubscribe", "distribution":
		return true
	}
	return o.ignore != nil
}

const (
	helpIndent = 30
	helpWidth  = 80
)

// Help writes the --help listing, grouped as sbatch groups it.
func Help(w io.Writer) {
	fmt.Fprintln(w, "Usage: sbatch [OPTIONS...] script [args...]")
	for g := range groupTitles {
		fmt.Fprintf(w, "\n%s\n", groupTitles[g])
		for _, o := range table() {
			if o.hidden || o.group != group(g) {
				continue
			}
			writeHelpLine(w, o)
		}
	}
	fmt.Fprintln(w, "\nOptions marked \"(no effect yet)\" are accepted for compatibility and")
	fmt.Fprintln(w, "ignored with a warning.")
}

func writeHelpLine(w io.Writer, o option) {
	var b strings.Builder
	if o.Short != 0 {
		fmt.Fprintf(&b, "  -%c, --%s", o.Short, o.Long)
	} else {
		fmt.Fprintf(&b, "      --%s", o.Long)
	}
	switch o.Arg {
	case RequiredArg:
		b.WriteString("=" + o.argName)
	case OptionalArg:
		b.WriteString("[=" + o.argName + "]")
	}
	head := b.String()
	text := o.help
	if o.noEffect() {
		text += " (no effect yet)"
	}
	lines := wrapWords(text, helpWidth-helpIndent)
	pad := strings.Repeat(" ", helpIndent)
	if len(head) < helpIndent {
		fmt.Fprintf(w, "%-*s%s\n", helpIndent, head, lines[0])
		lines = lines[1:]
	} else {
		fmt.Fprintln(w, head)
	}
	for _, l := range lines {
		fmt.Fprintln(w, pad+l)
	}
}

// wrapWords breaks text into lines of at most width columns.
func wrapWords(text string, width int) []string {
	var lines []string
	cur := ""
	for _, word := range strings.Fields(text) {
		switch {
		case cur == "":
			cur = word
		case len(cur)+1+len(word) <= width:
			cur += " " + word
		default:
			lines = append(lines, cur)
			cur = word
		}
	}
	return append(lines, cur)
}

// Usage writes the brief --usage synopsis.
func Usage(w io.Writer) {
	const lead = "Usage: sbatch "
	pad := strings.Repeat(" ", len(lead))
	line := lead
	emit := func(item string) {
		if len(line)+len(item)+1 > helpWidth && line != lead && line != pad {
			fmt.Fprintln(w, strings.TrimRight(line, " "))
			line = pad
		}
		line += item + " "
	}
	for _, o := range table() {
		if o.hidden {
			continue
		}
		arg := o.argName
		if arg == "" {
			arg = "arg"
		}
		switch {
		case o.Short != 0 && o.Arg == RequiredArg:
			emit(fmt.Sprintf("[-%c %s]", o.Short, arg))
		case o.Short != 0:
			emit(fmt.Sprintf("[-%c]", o.Short))
		case o.Arg == RequiredArg:
			emit(fmt.Sprintf("[--%s=%s]", o.Long, arg))
		case o.Arg == OptionalArg:
			emit(fmt.Sprintf("[--%s[=%s]]", o.Long, arg))
		default:
			emit(fmt.Sprintf("[--%s]", o.Long))
		}
	}
	emit("executable [args...]") // Slurm's word (its test suite matches it)
	fmt.Fprintln(w, strings.TrimRight(line, " "))
}

// DefinedLines renders the "defined options" block sbatch -v prints,
// one line per entry, without the program prefix.
func DefinedLines(defined [][2]string) []string {
	const rule = "-------------------- --------------------"
	out := []string{"defined options", rule}
	for _, d := range defined {
		out = append(out, fmt.Sprintf("%-20s: %s", d[0], d[1]))
	}
	return append(out, rule, "end of defined options")
}
