package slurmfmt

import (
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
)

// Field is one kind of column a command offers, for rows of type T.
type Field[T any] struct {
	// Header is the column title.
	Header string
	// Value appends the row's value to dst and returns the extended
	// slice. It must not keep dst.
	Value func(dst []byte, row T) []byte
	// NoCut keeps right-justified values whole when they are wider than
	// the column, as Slurm does for node lists and durations.
	NoCut bool
	// HeaderNoCut does the same for the header.
	HeaderNoCut bool
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
		dst = AppendCell(dst, c.Header, c.Width, c.Right, !c.HeaderNoCut)
		dst = append(dst, c.Suffix...)
	}
	return append(dst, '\n')
}

// AppendRow appends one row, newline included.
func (t *Table[T]) AppendRow(dst []byte, row T) []byte {
	dst = append(dst, t.Prefix...)
	for i := range t.Columns {
		c := &t.Columns[i]
		t.scratch = c.Value(t.scratch[:0], row)
		dst = AppendCellBytes(dst, t.scratch, c.Width, c.Right, !c.NoCut)
		dst = append(dst, c.Suffix...)
	}
	return append(dst, '\n')
}

// Header returns the header line without its newline; handy in tests
// and error messages.
func (t *Table[T]) Header() string {
	return strings.TrimSuffix(string(t.AppendHeader(nil)), "\n")
}

// AppendCell appends val in a cell of width bytes as Slurm's _print_str
// does. Width 0 appends val as it is. A left-justified value is cut to
// width and padded after; a right-justified one is padded before and, when
// cut is set, cut to its first width bytes.
func AppendCell(dst []byte, val string, width int, right, cut bool) []byte {
	return appendCell(dst, val, width, right, cut)
}

// AppendCellBytes is AppendCell for a value held in a byte slice.
func AppendCellBytes(dst, val []byte, width int, right, cut bool) []byte {
	return appendCell(dst, val, width, right, cut)
}

func appendCell[S ~string | ~[]byte](dst []byte, val S, width int, right, cut bool) []byte {
	n := len(val)
	switch {
	case width <= 0:
		return append(dst, val...)
	case right:
		for ; n < width; n++ {
			dst = append(dst, ' ')
		}
		if cut && len(val) > width {
			return append(dst, val[:width]...)
		}
		return append(dst, val...)
	}
	if n > width {
		return append(dst, val[:width]...)
	}
	dst = append(dst, val...)
	for ; n < width; n++ {
		dst = append(dst, ' ')
	}
	return dst
}
