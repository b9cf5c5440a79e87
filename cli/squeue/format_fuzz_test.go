package squeue

import (
	"errors"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
	"github.com/tide-hpc/tide/ctld/api"
)

// FuzzCompileFormat compiles squeue -o (long=false) and -O (long=true)
// formats and renders the header and the reference jobs with them: no
// panic, refusals of class ErrInvalidArgument, and no line wider than
// its fields' widths (at most slurmfmt.MaxWidth each) and values allow.
func FuzzCompileFormat(f *testing.F) {
	for _, s := range []string{DefaultFormat, LongFormat, StartFormat, "%all", "%ALL", "%i %q", "%.4095i%.4096j",
		"%4097i", "%.", "%", "%%", "%\xff", "%Y%S%e%L", "%K %F %A %a", "%b %C %m %N %r %R %Z %z"} {
		f.Add(s, false)
	}
	for _, s := range []string{"JobID,Name", "JobID:10,Name:.9", "jobarrayid:.4096|", "JobID:4097", ",", "Bogus",
		"NodeList:0,Reason,STATE:.5", "tres-per-node,MinMemory,TimeLeft:.99"} {
		f.Add(s, true)
	}
	jobs := slurmfmttest.Jobs()
	e := &env{loc: time.UTC}
	e.setNow(slurmfmttest.Now, nil)
	f.Fuzz(func(t *testing.T, format string, long bool) {
		tbl, err := compileFormat(format, long, e)
		if err != nil {
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("compileFormat(%q, %v): %v is not ErrInvalidArgument", format, long, err)
			}
			return
		}
		bound := len(format) + len(tbl.Prefix) + 1
		for _, c := range tbl.Columns {
			bound += max(c.Width, 512) + len(c.Suffix)
		}
		for _, line := range append([][]byte{tbl.AppendHeader(nil)}, rows(tbl, jobs)...) {
			if len(line) > bound {
				t.Fatalf("compileFormat(%q): a line of %d bytes, more than %d", format, len(line), bound)
			}
		}
	})
}

func rows(tbl *slurmfmt.Table[*api.Job], jobs []api.Job) [][]byte {
	out := make([][]byte, len(jobs))
	for i := range jobs {
		out[i] = tbl.AppendRow(nil, &jobs[i])
	}
	return out
}

// FuzzParseSort checks squeue -S: "-" and "+" alone indexed past the
// end of an empty key.
func FuzzParseSort(f *testing.F) {
	for _, s := range []string{"i", "-p,+i", "-", "+", ",", "", "--i", "ii", "-\xff", " - ", "P,-t,M,l,L,Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := parseSort(s)
		if err != nil {
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("parseSort(%q): %v is not ErrInvalidArgument", s, err)
			}
			return
		}
		if len(keys) == 0 {
			t.Fatalf("parseSort(%q) = no keys, no error", s)
		}
	})
}
