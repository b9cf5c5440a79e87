package sinfo

import (
	"errors"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
)

// FuzzCompileLayout compiles sinfo -o (with its %#X auto-width items)
// and -O formats: no panic, refusals of class ErrInvalidArgument, widths
// within slurmfmt.MaxWidth and one auto flag per column at most.
func FuzzCompileLayout(f *testing.F) {
	for _, s := range []string{
		"%#P %.5a %.10l %.6D %.6t %N", "%P %a %l %D %t %N", "%#N %#P", "%#", "%#%", "%%#P", "%.#P", "%#.5P",
		"%4097N", "%q", "%", "%\xff", "%E %H %u", "%R %c %m %G %f",
	} {
		f.Add(s, false)
	}
	for _, s := range []string{"NodeList,Partition:.10", "StateLong:5,GPUsState", "Bogus", ",", "NodeList:4097"} {
		f.Add(s, true)
	}
	e := &env{loc: time.UTC}
	f.Fuzz(func(t *testing.T, format string, long bool) {
		l, err := compileLayout(format, long, e)
		if err != nil {
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("compileLayout(%q, %v): %v is not ErrInvalidArgument", format, long, err)
			}
			return
		}
		if len(l.auto) != len(l.table.Columns) || len(l.fields) != len(l.table.Columns) {
			t.Fatalf("compileLayout(%q): %d auto flags, %d fields, %d columns", format, len(l.auto), len(l.fields), len(l.table.Columns))
		}
		for _, c := range l.table.Columns {
			if c.Width < 0 || c.Width > slurmfmt.MaxWidth {
				t.Fatalf("compileLayout(%q): column %+v", format, c.Spec)
			}
		}
		_ = l.table.AppendHeader(nil)
	})
}

// FuzzParseSortStates checks sinfo -S and -t: no panic, refusals of
// class ErrInvalidArgument.
func FuzzParseSortStates(f *testing.F) {
	for _, s := range []string{"P,-t", "#P", "+-#N", "-", "+", "#", "", ",", "x", "--P", "idle,drain", "IDLE, mix ,", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := parseSort(s); err != nil && !errors.Is(err, api.ErrInvalidArgument) {
			t.Fatalf("parseSort(%q): %v is not ErrInvalidArgument", s, err)
		}
		if _, err := parseStates(s); err != nil && !errors.Is(err, api.ErrInvalidArgument) {
			t.Fatalf("parseStates(%q): %v is not ErrInvalidArgument", s, err)
		}
	})
}
