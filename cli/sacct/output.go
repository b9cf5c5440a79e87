package sacct

import (
	"io"
	"strings"

	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// layout is how rows are laid out, after Slurm's print_fields_parsable_print.
type layout int

const (
	fixedWidth    layout = iota
	parsableEnd          // -p: every field followed by the delimiter
	parsableNoEnd        // -P: no delimiter after the last field
)

// writeTable prints the header (unless suppressed) and one line per row.
// Fixed-width cells end with a space, as Slurm's do, and the header is
// right-justified whatever the column's justification. Values are
// escaped (termsafe) before they are fitted, in every layout: names,
// comments and paths are other users' text and must not drive the
// reader's terminal or forge rows. The delimiter is the caller's and is
// printed as given.
func writeTable(w io.Writer, cols []column, rows []row, mode layout, delim string, header bool) error {
	var b strings.Builder
	sep := func(i int) string {
		if mode == parsableNoEnd && i == len(cols)-1 {
			return ""
		}
		return delim
	}
	if header {
		for i, c := range cols {
			if mode == fixedWidth {
				abs := absInt(c.width)
				b.WriteString(pad(clip(c.def.name, abs), abs, false))
				b.WriteByte(' ')
			} else {
				b.WriteString(c.def.name + sep(i))
			}
		}
		b.WriteByte('\n')
		if mode == fixedWidth {
			for _, c := range cols {
				b.WriteString(strings.Repeat("-", absInt(c.width)))
				b.WriteByte(' ')
			}
			b.WriteByte('\n')
		}
	}
	for i := range rows {
		r := &rows[i]
		for ci, c := range cols {
			v := ""
			if c.def.value != nil {
				v = termsafe.Escape(c.def.value(r))
			}
			if mode != fixedWidth {
				b.WriteString(v + sep(ci))
				continue
			}
			b.WriteString(fixedCell(c, v))
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fixedCell pads (and for text, truncates with '+') a value to its
// column, followed by the separating space.
func fixedCell(c column, v string) string {
	abs := absInt(c.width)
	switch c.def.kind {
	case kStr:
		if len(v) > abs && abs > 0 {
			v = v[:slurmfmt.CutLen(v, abs-1)] + "+"
		}
	case kDate:
		v = clip(v, abs)
	}
	return pad(v, abs, c.width < 0) + " "
}

// clip cuts s to at most n bytes, never inside a UTF-8 sequence.
func clip(s string, n int) string {
	return s[:slurmfmt.CutLen(s, n)]
}

func pad(s string, n int, left bool) string {
	if len(s) >= n {
		return s
	}
	fill := strings.Repeat(" ", n-len(s))
	if left {
		return s + fill
	}
	return fill + s
}

func absInt(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
