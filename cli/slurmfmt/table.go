package slurmfmt

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// Field is one kind of column a command offers, for rows of type T.
type Field[T any] struct {
	// Header is the column title.
	Header string
	// Value appends the row's value to dst and returns the extended
	// slice. It must not keep dst. It appends the value as it is;
	// Column.AppendValue escapes it for printing.
	Value func(dst []byte, row T) []byte
	// NoCut keeps right-justified values whole when they are wider than
	// the column, as Slurm does for node lists and durations.
	NoCut bool
	// HeaderNoCut does the same for the header.
	HeaderNoCut bool
	// HeaderLeft left-justifies the header whatever the column's
	// justification, as squeue -s does for START_TIME.
	HeaderLeft bool
}

// Lookup resolves a field name or letter to a Field.
type Lookup[T any] func(name string) (Field[T], bool)

// Column is a compiled field: what to print and how wide.
type Column[T any] struct {
	Spec
	Field[T]
}

// Table renders rows of type T in a compiled format. A Table keeps a
// scratch buffer, so it is not safe for concurrent use.
type Table[T any] struct {
	Prefix  string
	Columns []Column[T]
	scratch []byte
}

// Compile resolves every field of f with lookup. kind names the records
// in the error for an unknown field, which reads like Slurm's:
// "Invalid job format specification: X".
func Compile[T any](f Format, kind string, lookup Lookup[T]) (*Table[T], error) {
	t := &Table[T]{Prefix: f.Prefix, Columns: make([]Column[T], 0, len(f.Specs))}
	for _, sp := range f.Specs {
		fd, ok := lookup(sp.Name)
		if !ok {
			return nil, api.Invalid("Invalid %s format specification: %s", kind, sp.Name)
		}
		t.Columns = append(t.Columns, Column[T]{Spec: sp, Field: fd})
	}
	return t, nil
}

// AppendHeader appends the header line, newline included.
func (t *Table[T]) AppendHeader(dst []byte) []byte {
	dst = append(dst, t.Prefix...)
	for i := range t.Columns {
		c := &t.Columns[i]
		dst = AppendCell(dst, c.Header, c.Width, c.Right && !c.HeaderLeft, !c.HeaderNoCut)
		dst = append(dst, c.Suffix...)
	}
	return append(dst, '\n')
}

// AppendRow appends one row, newline included. Values are escaped
// (AppendValue) before they are fitted to their columns, so that widths
// and cuts apply to the text as printed. The format's own literal text
// (prefix, suffixes) is the caller's and is printed as written: a tab
// in "-o %i\t%j" stays a tab.
func (t *Table[T]) AppendRow(dst []byte, row T) []byte {
	dst = append(dst, t.Prefix...)
	for i := range t.Columns {
		c := &t.Columns[i]
		t.scratch = c.AppendValue(t.scratch[:0], row)
		dst = AppendCellBytes(dst, t.scratch, c.Width, c.Right, !c.NoCut)
		dst = append(dst, c.Suffix...)
	}
	return append(dst, '\n')
}

// AppendValue appends the row's value as a cell prints it: with
// control characters, invalid UTF-8 and bidi controls escaped
// (termsafe), since values such as job names, comments, paths and node
// reasons are other users' text and must not drive the reader's
// terminal or forge lines. Code that measures cells (auto-sized
// columns) must measure this text, not Value's.
func (c *Column[T]) AppendValue(dst []byte, row T) []byte {
	start := len(dst)
	dst = c.Value(dst, row)
	if termsafe.IsSafeBytes(dst[start:]) {
		return dst
	}
	// Rare: only hostile or broken values get here, so the copy does
	// not matter.
	return termsafe.AppendBytes(dst[:start], bytes.Clone(dst[start:]))
}

// Header returns the header line without its newline; handy in tests
// and error messages.
func (t *Table[T]) Header() string {
	return strings.TrimSuffix(string(t.AppendHeader(nil)), "\n")
}

// AppendCell appends val in a cell of width bytes as Slurm's _print_str
// does. Width 0 appends val as it is. A left-justified value is cut to
// width and padded after; a right-justified one is padded before and, when
// cut is set, cut to its first width bytes. Unlike Slurm, a cut never
// splits a UTF-8 sequence (which would print as garbage): it falls back
// to the start of the character and pads the cell to its width, so the
// cell keeps its width in bytes.
func AppendCell(dst []byte, val string, width int, right, cut bool) []byte {
	return appendCell(dst, val, width, right, cut)
}

// AppendCellBytes is AppendCell for a value held in a byte slice.
func AppendCellBytes(dst, val []byte, width int, right, cut bool) []byte {
	return appendCell(dst, val, width, right, cut)
}

func appendCell[S ~string | ~[]byte](dst []byte, val S, width int, right, cut bool) []byte {
	if width <= 0 || (right && !cut) {
		for n := len(val); n < width; n++ {
			dst = append(dst, ' ')
		}
		return append(dst, val...)
	}
	n := len(val)
	if n > width {
		n = cutLen(val, width)
	}
	if right {
		for i := n; i < width; i++ {
			dst = append(dst, ' ')
		}
		return append(dst, val[:n]...)
	}
	dst = append(dst, val[:n]...)
	for i := n; i < width; i++ {
		dst = append(dst, ' ')
	}
	return dst
}

// CutLen returns the length of the longest prefix of s of at most limit
// bytes that does not end inside a UTF-8 sequence, for commands that cut
// values to a column themselves (sacct).
func CutLen(s string, limit int) int { return cutLen(s, limit) }

func cutLen[S ~string | ~[]byte](s S, limit int) int {
	if limit >= len(s) {
		return len(s)
	}
	if limit <= 0 {
		return 0
	}
	// s[limit] is the first byte left out; when it continues a sequence,
	// back up to that sequence's first byte (at most UTFMax-1 bytes),
	// provided the sequence is valid and runs past limit.
	n := limit
	for n > 0 && n > limit-utf8.UTFMax && !utf8.RuneStart(s[n]) {
		n--
	}
	if n == limit || !utf8.RuneStart(s[n]) {
		return limit
	}
	var buf [utf8.UTFMax]byte
	if _, size := utf8.DecodeRune(buf[:copy(buf[:], s[n:])]); size > 1 && n+size > limit {
		return n
	}
	return limit // not UTF-8 there anyway: cut where asked
}
