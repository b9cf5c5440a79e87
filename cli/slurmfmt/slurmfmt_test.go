package slurmfmt

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestParseShort(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Format
		wantErr string
	}{
		{name: "squeue default", in: "%.18i %.9P %R", want: Format{Specs: []Spec{
			{Name: "i", Width: 18, Right: true, Suffix: " "},
			{Name: "P", Width: 9, Right: true, Suffix: " "},
			{Name: "R"},
		}}},
		{name: "prefix and suffixes", in: "id=%i|%20j|", want: Format{Prefix: "id=", Specs: []Spec{
			{Name: "i", Suffix: "|"}, {Name: "j", Width: 20, Suffix: "|"},
		}}},
		{name: "percent literal", in: "%%%i 100%% done", want: Format{Prefix: "%", Specs: []Spec{
			{Name: "i", Suffix: " 100% done"},
		}}},
		{name: "dot without width", in: "%.i", want: Format{Specs: []Spec{{Name: "i", Right: true}}}},
		{name: "only text", in: "hello", want: Format{Prefix: "hello"}},
		{name: "non-ASCII letter kept whole", in: "%Äx", want: Format{Specs: []Spec{{Name: "Ä", Suffix: "x"}}}},
		{name: "empty", in: "", want: Format{}},
		{name: "ends after percent", in: "%i %", wantErr: "ends inside"},
		{name: "ends after width", in: "%.12", wantErr: "ends inside"},
		{name: "width too large", in: "%99999i", wantErr: "exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseShort(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseShort(%q) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				if !errors.Is(err, api.ErrInvalidArgument) {
					t.Errorf("error %v is not ErrInvalidArgument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseShort(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseLong(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Spec
		wantErr string
	}{
		{name: "default width", in: "JobID,Name", want: []Spec{{Name: "JobID", Width: 20}, {Name: "Name", Width: 20}}},
		{name: "widths", in: "JobID:10,Name:.9", want: []Spec{{Name: "JobID", Width: 10}, {Name: "Name", Width: 9, Right: true}}},
		{name: "suffix", in: "JobID:5|,State:.8 end", want: []Spec{{Name: "JobID", Width: 5, Suffix: "|"}, {Name: "State", Width: 8, Right: true, Suffix: " end"}}},
		{name: "colon without width", in: "Name:", want: []Spec{{Name: "Name"}}},
		{name: "empty items skipped", in: ",JobID,,", want: []Spec{{Name: "JobID", Width: 20}}},
		{name: "no name", in: "JobID,:5", wantErr: "no field name"},
		{name: "nothing", in: ",", wantErr: "names no fields"},
		{name: "width too large", in: "JobID:100000", wantErr: "exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLong(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseLong(%q) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Specs); diff != "" {
				t.Errorf("ParseLong(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestAppendCell(t *testing.T) {
	tests := []struct {
		name  string
		val   string
		width int
		right bool
		cut   bool
		want  string
	}{
		{name: "no width", val: "gpu[01-04]", want: "gpu[01-04]"},
		{name: "left pads", val: "ab", width: 5, cut: true, want: "ab   "},
		{name: "left always cuts", val: "preprocessing", width: 8, want: "preproce"},
		{name: "right pads", val: "42", width: 6, right: true, cut: true, want: "    42"},
		{name: "right cuts keeping the start", val: "COMPLETING", width: 8, right: true, cut: true, want: "COMPLETI"},
		{name: "right without cut keeps all", val: "gpu[01-16]", width: 6, right: true, want: "gpu[01-16]"},
		{name: "exact width", val: "abc", width: 3, right: true, cut: true, want: "abc"},
		{name: "left cut keeps whole characters", val: "训练任务", width: 8, want: "训练  "},
		{name: "right cut keeps whole characters", val: "训练任务", width: 8, right: true, cut: true, want: "  训练"},
		{name: "cut on a boundary", val: "训练任务", width: 6, want: "训练"},
		{name: "cut of invalid bytes where asked", val: "a\x80\x80b", width: 2, want: "a\x80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(AppendCell([]byte("x"), tt.val, tt.width, tt.right, tt.cut))
			if got != "x"+tt.want {
				t.Errorf("AppendCell = %q, want %q", got, "x"+tt.want)
			}
			gotB := string(AppendCellBytes([]byte("x"), []byte(tt.val), tt.width, tt.right, tt.cut))
			if gotB != got {
				t.Errorf("AppendCellBytes = %q, AppendCell = %q", gotB, got)
			}
		})
	}
}

func TestCutLen(t *testing.T) {
	tests := []struct {
		s     string
		limit int
		want  int
	}{
		{"abc", 5, 3}, {"abc", 2, 2}, {"abc", 0, 0}, {"abc", -1, 0},
		{"训练", 1, 0}, {"训练", 2, 0}, {"训练", 3, 3}, {"训练", 4, 3}, {"训练", 6, 6},
		{"a🚀", 4, 1}, {"a🚀", 5, 5},
		{"\xe8\xae\xad\xe7", 3, 3},   // a truncated sequence after the cut
		{"a\x80\x80\x80\x80b", 3, 3}, // stray continuation bytes
		{"\uFFFD\uFFFD", 4, 3},
	}
	for _, tt := range tests {
		if got := CutLen(tt.s, tt.limit); got != tt.want {
			t.Errorf("CutLen(%q, %d) = %d, want %d", tt.s, tt.limit, got, tt.want)
		}
	}
}

// TestTableEscapes checks that cells are escaped before they are fitted
// (a name of controls is as wide as its escaped text, cut there) while
// the format's own text, a tab here, is printed as written.
func TestTableEscapes(t *testing.T) {
	f, err := ParseShort("%i\t%.8j|%20j|%j")
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := Compile(f, "item", itemFields)
	if err != nil {
		t.Fatal(err)
	}
	name := "x\x1b[2J\nFAKE\u009b\u202e\xff训"
	got := string(tbl.AppendRow(nil, item{7, name}))
	want := "7\t" + `x\x1b[2J` + "|" + `x\x1b[2J\nFAKE\u009b` + "|" + `x\x1b[2J\nFAKE\u009b\u202e\xff` + "训\n"
	if got != want {
		t.Errorf("row = %q, want %q", got, want)
	}
	col := &tbl.Columns[1]
	if v := string(col.AppendValue([]byte("keep:"), item{7, name})); v != "keep:"+`x\x1b[2J\nFAKE\u009b\u202e\xff`+"训" {
		t.Errorf("AppendValue = %q", v)
	}
	if v := string(col.AppendValue(nil, item{7, "plain 训练"})); v != "plain 训练" {
		t.Errorf("AppendValue of a safe value = %q", v)
	}
}

type item struct {
	id   int
	name string
}

func itemFields(name string) (Field[item], bool) {
	switch name {
	case "i":
		return Field[item]{Header: "ID", Value: func(dst []byte, r item) []byte { return strconv.AppendInt(dst, int64(r.id), 10) }}, true
	case "j":
		return Field[item]{Header: "NAME", Value: func(dst []byte, r item) []byte { return append(dst, r.name...) }}, true
	case "N":
		return Field[item]{Header: "NODELIST", NoCut: true, HeaderNoCut: true,
			Value: func(dst []byte, r item) []byte { return append(dst, r.name...) }}, true
	}
	return Field[item]{}, false
}

func TestTable(t *testing.T) {
	tests := []struct {
		name    string
		format  string
		wantErr string
		want    string
	}{
		{name: "right and left", format: "%.4i %6j|", want: "  ID NAME  |\n   7 train |\n  12 prepro|\n"},
		{name: "prefix repeats", format: ">%i", want: ">ID\n>7\n>12\n"},
		{name: "cut header", format: "%.3j", want: "NAM\ntra\npre\n"},
		{name: "header not cut", format: "%.3N", want: "NODELIST\ntrain\npreprocess\n"},
		{name: "unknown letter", format: "%i %q", wantErr: "Invalid item format specification: q"},
	}
	rows := []item{{7, "train"}, {12, "preprocess"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseShort(tt.format)
			if err != nil {
				t.Fatal(err)
			}
			tbl, err := Compile(f, "item", itemFields)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Compile error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := tbl.AppendHeader(nil)
			for _, r := range rows {
				got = tbl.AppendRow(got, r)
			}
			if string(got) != tt.want {
				t.Errorf("table:\n%q\nwant:\n%q", got, tt.want)
			}
		})
	}
}

func TestAppendSecs(t *testing.T) {
	tests := []struct {
		secs int64
		want string
	}{
		{0, "0:00"}, {10, "0:10"}, {59*60 + 59, "59:59"}, {3600, "1:00:00"},
		{86399, "23:59:59"}, {86400, "1-00:00:00"}, {10*86400 + 3723, "10-01:02:03"},
		{-1, "INVALID"}, {YearSeconds + 1, "INVALID"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := string(AppendSecs(nil, tt.secs)); got != tt.want {
				t.Errorf("AppendSecs(%d) = %q, want %q", tt.secs, got, tt.want)
			}
		})
	}
}

func TestAppendLimit(t *testing.T) {
	tests := []struct {
		name string
		secs int64
		want string
	}{
		{name: "infinite", secs: api.Infinite, want: "infinite"},
		{name: "unset", secs: 0, want: "infinite"},
		{name: "half hour", secs: 1800, want: "30:00"},
		{name: "hours", secs: 4 * 3600, want: "4:00:00"},
		{name: "days", secs: 2 * 86400, want: "2-00:00:00"},
		{name: "beyond a year", secs: 400 * 86400, want: "400-00:00:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(AppendLimit(nil, tt.secs)); got != tt.want {
				t.Errorf("AppendLimit(%d) = %q, want %q", tt.secs, got, tt.want)
			}
		})
	}
}

func TestValues(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	ts := time.Date(2026, 11, 29, 18, 31, 5, 0, time.UTC)
	tests := []struct {
		name string
		got  string
		want string
	}{
		{name: "mb", got: string(AppendMB(nil, 4000)), want: "4000M"},
		{name: "gb", got: string(AppendMB(nil, 32768)), want: "32G"},
		{name: "tb", got: string(AppendMB(nil, 2*1024*1024)), want: "2T"},
		{name: "zero mb", got: string(AppendMB(nil, 0)), want: "0M"},
		{name: "ranges", got: string(AppendRanges(nil, []int{0, 1, 2, 5, 7, 8})), want: "0-2,5,7-8"},
		{name: "single", got: string(AppendRanges(nil, []int{3})), want: "3"},
		{name: "duplicates", got: string(AppendRanges(nil, []int{1, 1, 2})), want: "1-2"},
		{name: "timestamp in zone", got: string(AppendTimestamp(nil, ts, loc)), want: "2026-11-29T19:31:05"},
		{name: "zero time", got: string(AppendTimestamp(nil, time.Time{}, loc)), want: "N/A"},
		{name: "date line", got: ts.Format(DateLayout), want: "Sun Nov 29 18:31:05 2026"},
		{name: "date line single digit day", got: time.Date(2026, 3, 1, 1, 2, 3, 0, time.UTC).Format(DateLayout), want: "Sun Mar  1 01:02:03 2026"},
		{name: "or null", got: OrNull(""), want: "(null)"},
		{name: "or value", got: OrNull("ml"), want: "ml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func BenchmarkAppendRow(b *testing.B) {
	f, err := ParseShort("%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R")
	if err != nil {
		b.Fatal(err)
	}
	tbl, err := Compile(f, "item", func(name string) (Field[item], bool) {
		fd, ok := itemFields(name)
		if !ok {
			fd, ok = itemFields("j")
		}
		return fd, ok
	})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 256)
	r := item{123456, "preprocessing"}
	for b.Loop() {
		buf = tbl.AppendRow(buf[:0], r)
	}
}
