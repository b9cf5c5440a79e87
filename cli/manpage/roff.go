package manpage

import (
	"fmt"
	"io"
	"strings"

	"github.com/tide-hpc/tide/cli/getopt"
)

// Write writes p as a roff manual page in the man(7) macros, which
// man-db (groff) and mandoc both read. The output is ASCII: other
// characters are written as groff's named glyphs or \[uXXXX], so that no
// locale is needed to render it.
func Write(w io.Writer, p *Page) error {
	var b strings.Builder
	fmt.Fprintf(&b, ".\\\" Generated from Tide's option tables and documentation (cmd/gen-man); do not edit.\n")
	fmt.Fprintf(&b, ".TH %s %d \"\" %s \"Tide Manual\"\n", quote(strings.ToUpper(p.Name)), p.Section, quote(p.Source))
	// No hyphenation and a ragged right edge: option names, variables
	// and paths must read as they are typed.
	b.WriteString(".nh\n.ad l\n")
	b.WriteString(".SH NAME\n")
	line(&b, escape(p.Name)+` \- `+escape(p.Summary))
	if len(p.Synopsis) > 0 {
		b.WriteString(".SH SYNOPSIS\n")
		for i, s := range p.Synopsis {
			if i > 0 {
				b.WriteString(".br\n")
			}
			line(&b, synopsis(s))
		}
	}
	section(&b, "DESCRIPTION", p.Description, false)
	if len(p.Options) > 0 {
		title := p.OptionsTitle
		if title == "" {
			title = "OPTIONS"
		}
		fmt.Fprintf(&b, ".SH %s\n", quote(title))
		blocks(&b, p.OptionsIntro)
		writeOptions(&b, p.Options)
	}
	for _, s := range p.Sections {
		section(&b, s.Title, s.Blocks, s.Sub)
	}
	section(&b, "EXIT STATUS", p.ExitStatus, false)
	if len(p.SeeAlso) > 0 {
		b.WriteString(".SH \"SEE ALSO\"\n")
		refs := make([]string, len(p.SeeAlso))
		for i, r := range p.SeeAlso {
			name, sec, ok := strings.Cut(r, "(")
			if ok {
				refs[i] = `\fB` + escape(name) + `\fR(` + escape(sec)
			} else {
				refs[i] = `\fB` + escape(r) + `\fR`
			}
		}
		line(&b, strings.Join(refs, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// section writes a titled section (or subsection); an empty one is left
// out.
func section(b *strings.Builder, title string, bs []Block, sub bool) {
	if len(bs) == 0 {
		return
	}
	if sub {
		fmt.Fprintf(b, ".SS %s\n", quote(title))
	} else {
		fmt.Fprintf(b, ".SH %s\n", quote(title))
	}
	blocks(b, bs)
}

func blocks(b *strings.Builder, bs []Block) {
	for _, bl := range bs {
		switch {
		case bl.Pre != "":
			b.WriteString(".PP\n.RS 4\n.nf\n")
			for _, l := range strings.Split(strings.TrimRight(bl.Pre, "\n"), "\n") {
				line(b, escape(l))
			}
			b.WriteString(".fi\n.RE\n")
		case len(bl.Options) > 0:
			writeOptions(b, bl.Options)
		case len(bl.Items) > 0:
			for _, it := range bl.Items {
				b.WriteString(".TP\n")
				line(b, Inline(it.Tag))
				line(b, Inline(it.Text))
			}
		default:
			b.WriteString(".PP\n")
			line(b, Inline(bl.Text))
		}
	}
}

// writeOptions lists the options, grouped, each listed option with the
// hidden spellings that stand for it.
func writeOptions(b *strings.Builder, opts []Option) {
	var groups []string
	seen := map[string]bool{}
	for _, o := range opts {
		if !seen[o.Group] {
			seen[o.Group] = true
			groups = append(groups, o.Group)
		}
	}
	for _, g := range groups {
		if g != "" {
			fmt.Fprintf(b, ".SS %s\n", quote(g))
		}
		for i := range opts {
			o := &opts[i]
			if o.Group != g || (o.Hidden && o.AliasOf != "") {
				continue
			}
			b.WriteString(".TP\n")
			line(b, OptionTag(o))
			line(b, optionText(o, opts))
		}
	}
}

// OptionTag is an option's term as the page sets it: "-p, --partition=
// partition" with the names bold and the argument italic.
func OptionTag(o *Option) string {
	var names []string
	if o.Short != 0 {
		names = append(names, `\fB\-`+escape(string(o.Short))+`\fR`)
	}
	if o.Long != "" {
		names = append(names, `\fB\-\-`+escape(o.Long)+`\fR`)
	}
	tag := strings.Join(names, ", ")
	arg := o.ArgName
	if arg == "" {
		arg = "value"
	}
	arg = `\fI` + escape(arg) + `\fR`
	switch {
	case o.Arg == getopt.RequiredArg && o.Long == "":
		tag += " " + arg
	case o.Arg == getopt.RequiredArg:
		tag += "=" + arg
	case o.Arg == getopt.OptionalArg:
		tag += "[=" + arg + "]"
	}
	return tag
}

// optionText is an option's paragraph: its help, then what the table
// says besides.
func optionText(o *Option, all []Option) string {
	text := Inline(o.Help)
	if o.Help == "" && o.Hidden {
		text = "Another spelling, accepted for compatibility."
	}
	var notes []string
	if o.NoEffect {
		notes = append(notes, "Accepted for compatibility; it has no effect yet.")
	}
	if len(o.Values) > 0 {
		notes = append(notes, "One of: "+codeList(o.Values)+".")
	}
	var aliases []string
	for i := range all {
		a := &all[i]
		if a.Hidden && a.AliasOf != "" && a.AliasOf == o.Name() {
			aliases = append(aliases, `\fB`+escape(a.Name())+`\fR`)
		}
	}
	if len(aliases) > 0 {
		notes = append(notes, "Also written "+strings.Join(aliases, ", ")+".")
	}
	if len(o.Env) > 0 {
		notes = append(notes, "Environment: "+codeList(o.Env)+".")
	}
	if o.Tide && !strings.Contains(o.Help, "Tide") {
		notes = append(notes, "(Tide's own; not in Slurm.)")
	}
	if len(notes) > 0 {
		if text != "" && !strings.HasSuffix(text, ".") {
			text += "."
		}
		text = strings.TrimSpace(text + " " + strings.Join(notes, " "))
	}
	return text
}

func codeList(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = `\fB` + escape(w) + `\fR`
	}
	return strings.Join(out, ", ")
}

// synopsis sets a usage line: the command bold, upper-case words
// (OPTIONS, FILE) italic, the rest as written.
func synopsis(s string) string {
	cmd, rest, _ := strings.Cut(s, " ")
	var b strings.Builder
	b.WriteString(`\fB` + escape(cmd) + `\fR`)
	if rest == "" {
		return b.String()
	}
	b.WriteByte(' ')
	isUpper := func(c byte) bool { return c >= 'A' && c <= 'Z' || c == '_' }
	for i := 0; i < len(rest); {
		j := i
		for j < len(rest) && isUpper(rest[j]) {
			j++
		}
		if j-i >= 2 {
			b.WriteString(`\fI` + escape(rest[i:j]) + `\fR`)
			i = j
			continue
		}
		for j < len(rest) && !(isUpper(rest[j]) && j+1 < len(rest) && isUpper(rest[j+1])) {
			j++
		}
		if j == i {
			j++
		}
		b.WriteString(escape(rest[i:j]))
		i = j
	}
	return b.String()
}

// Inline sets text that uses a little of Markdown: `code` and **bold**
// bold, [text](link) as its text, \| as |. Everything else is escaped.
func Inline(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case s[i] == '`':
			if j := strings.IndexByte(s[i+1:], '`'); j >= 0 {
				// In a Markdown table "\|" is a bar, in code too.
				b.WriteString(`\fB` + escape(strings.ReplaceAll(s[i+1:i+1+j], `\|`, "|")) + `\fR`)
				i += j + 2
				continue
			}
		case strings.HasPrefix(s[i:], "**"):
			if j := strings.Index(s[i+2:], "**"); j > 0 {
				b.WriteString(`\fB` + Inline(s[i+2:i+2+j]) + `\fR`)
				i += j + 4
				continue
			}
		case s[i] == '[':
			if j := strings.Index(s[i:], "]("); j > 0 {
				if k := strings.IndexByte(s[i+j:], ')'); k > 0 {
					b.WriteString(Inline(s[i+1 : i+j]))
					i += j + k + 1
					continue
				}
			}
		case strings.HasPrefix(s[i:], `\|`):
			b.WriteByte('|')
			i += 2
			continue
		}
		// Up to the next character that may open markup.
		j := i + 1
		for j < len(s) && !strings.ContainsRune("`*[\\", rune(s[j])) {
			j++
		}
		// A comma inside a word ("a,b,c") may end a line: running text
		// holds long lists (--format=JobID,Submit,...) that fit no line.
		b.WriteString(commaBreak(escape(s[i:j])))
		i = j
	}
	return b.String()
}

// commaBreak puts a break point (\:, which prints nothing) after each
// comma inside a word.
func commaBreak(s string) string {
	if !strings.Contains(s, ",") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		if s[i] == ',' && i+1 < len(s) && s[i+1] != ' ' {
			b.WriteString(`\:`)
		}
	}
	return b.String()
}

// glyph returns groff's name for a non-ASCII character Tide's texts
// use ("" for others). A switch rather than a map: a map literal would be
// built when every CLI command starts.
func glyph(r rune) string {
	switch r {
	case '—':
		return `\(em`
	case '–':
		return `\(en`
	case '≥':
		return `\(>=`
	case '≤':
		return `\(<=`
	case '→':
		return `\(->`
	case '←':
		return `\(<-`
	case '×':
		return `\(mu`
	case 'µ':
		return `\(mc`
	case '“':
		return `\(lq`
	case '”':
		return `\(rq`
	case '‘':
		return `\(oq`
	case '’':
		return `\(cq`
	case '…':
		return `\&...`
	case '≠':
		return `\(!=`
	case '±':
		return `\(+-`
	case '°':
		return `\(de`
	case '−':
		return `\-`
	}
	return ""
}

// escape makes s literal text for roff: backslashes and dashes escaped,
// line breaks as spaces, other control characters dropped, non-ASCII as
// glyph escapes.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\e`)
		case r == '-':
			b.WriteString(`\-`)
		case r == '\n' || r == '\t':
			b.WriteByte(' ')
		case r < ' ' || r == 0x7f:
		case r < 0x80:
			b.WriteRune(r)
		default:
			if g := glyph(r); g != "" {
				b.WriteString(g)
			} else {
				fmt.Fprintf(&b, `\[u%04X]`, r)
			}
		}
	}
	return b.String()
}

// line writes one text line, guarding a leading control character: a
// text line may not start with a dot or an apostrophe.
func line(b *strings.Builder, s string) {
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		b.WriteString(`\&`)
	}
	b.WriteString(s)
	b.WriteByte('\n')
}

// quote is a macro argument: in double quotes when it holds a blank or
// is empty (roff writes a quote inside quotes as two).
func quote(s string) string {
	e := escape(s)
	if e != "" && !strings.ContainsAny(e, " \t\"") {
		return e
	}
	return `"` + strings.ReplaceAll(e, `"`, `""`) + `"`
}
