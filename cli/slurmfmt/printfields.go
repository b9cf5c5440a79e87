package slurmfmt

import (
	"io"
	"strings"

	"github.com/tide-hpc/tide/internal/termsafe"
)

// The layout of Slurm's accounting reports (sstat; src/common/
// print_fields.c): a header of the field names and a line of dashes,
// then one line per record, each cell of a field's width followed by a
// space; or with -p/-P the values separated by '|'.

// FieldKind says how a print_fields column cuts a value wider than the
// column, after the print_fields_* routine that prints it.
type FieldKind int

// The kinds of print_fields columns.
const (
	// FieldStr cuts to the width with a trailing '+'.
	FieldStr FieldKind = iota
	// FieldDate cuts plainly.
	FieldDate
	// FieldNum never cuts.
	FieldNum
)

// FieldsLayout is print_fields_parsable_print.
type FieldsLayout int

// The layouts.
const (
	// FieldsFixed pads each cell to its width.
	FieldsFixed FieldsLayout = iota
	// FieldsParsable (-p) ends every value with the delimiter.
	FieldsParsable
	// FieldsParsable2 (-P) puts no delimiter after the last value.
	FieldsParsable2
)

// PrintColumn is one print_fields column. Width is Slurm's: negative
// left-justifies the header and the values.
type PrintColumn struct {
	Name  string
	Width int
	Kind  FieldKind
}

// PrintFields writes print_fields output: the header (unless header is
// false) and one line per row of values (row[i] is column i's value).
// Values are escaped (termsafe) before they are fitted: they are other
// users' text. delim separates parsable values ("|" when empty).
func PrintFields(w io.Writer, cols []PrintColumn, rows [][]string, layout FieldsLayout, delim string, header bool) error {
	if delim == "" {
		delim = "|"
	}
	var b strings.Builder
	sep := func(i int) string {
		if layout == FieldsParsable2 && i == len(cols)-1 {
			return ""
		}
		return delim
	}
	if header {
		for i, c := range cols {
			if layout != FieldsFixed {
				b.WriteString(c.Name + sep(i))
				continue
			}
			// printf("%*.*s ", len, abs(len), name)
			abs := absWidth(c.Width)
			b.WriteString(padCell(c.Name[:CutLen(c.Name, abs)], abs, c.Width < 0))
			b.WriteByte(' ')
		}
		b.WriteByte('\n')
		if layout == FieldsFixed {
			for _, c := range cols {
				b.WriteString(strings.Repeat("-", absWidth(c.Width)))
				b.WriteByte(' ')
			}
			b.WriteByte('\n')
		}
	}
	for _, row := range rows {
		for i, c := range cols {
			v := ""
			if i < len(row) {
				v = termsafe.Escape(row[i])
			}
			if layout != FieldsFixed {
				b.WriteString(v + sep(i))
				continue
			}
			abs := absWidth(c.Width)
			switch c.Kind {
			case FieldStr:
				if len(v) > abs && abs > 0 {
					v = v[:CutLen(v, abs-1)] + "+"
				}
			case FieldDate:
				v = v[:CutLen(v, abs)]
			}
			b.WriteString(padCell(v, abs, c.Width < 0))
			b.WriteByte(' ')
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func padCell(s string, n int, left bool) string {
	if len(s) >= n {
		return s
	}
	fill := strings.Repeat(" ", n-len(s))
	if left {
		return s + fill
	}
	return fill + s
}

func absWidth(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
