package slurmfmt

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

// writeShort writes f back in the -o syntax.
func writeShort(f Format) string {
	esc := func(s string) string { return strings.ReplaceAll(s, "%", "%%") }
	var b strings.Builder
	b.WriteString(esc(f.Prefix))
	for _, sp := range f.Specs {
		b.WriteByte('%')
		if sp.Right {
			b.WriteByte('.')
		}
		// A width of 0 is written when the name would otherwise read
		// as the '.' of a right-justified field, or "%%" as a literal.
		if sp.Width > 0 || (sp.Name == "." || sp.Name == "%") && !sp.Right {
			b.WriteString(strconv.Itoa(sp.Width))
		}
		b.WriteString(sp.Name)
		b.WriteString(esc(sp.Suffix))
	}
	return b.String()
}

// writeLong writes f back in the -O syntax.
func writeLong(f Format) string {
	items := make([]string, len(f.Specs))
	for i, sp := range f.Specs {
		if sp.Width == DefaultLongWidth && !sp.Right && sp.Suffix == "" {
			items[i] = sp.Name
			continue
		}
		item := sp.Name + ":"
		if sp.Right {
			item += "."
		}
		// A width of 0 is written when the suffix would otherwise
		// read as the '.' of a right-justified field.
		if sp.Width > 0 || !sp.Right && strings.HasPrefix(sp.Suffix, ".") {
			item += strconv.Itoa(sp.Width)
		}
		items[i] = item + sp.Suffix
	}
	return strings.Join(items, ",")
}

// checkSpecs fails on a width beyond MaxWidth or an empty name.
func checkSpecs(t *testing.T, in string, f Format) {
	t.Helper()
	for _, sp := range f.Specs {
		if sp.Width < 0 || sp.Width > MaxWidth || sp.Name == "" {
			t.Fatalf("format %q: field %+v", in, sp)
		}
	}
}

// FuzzParseShort checks squeue's, sinfo's and sprio's -o parser: widths
// within MaxWidth, refusals of class ErrInvalidArgument, and the parsed
// format written back reads as the same format.
func FuzzParseShort(f *testing.F) {
	for _, s := range []string{
		"%.18i %.9P %R", "%%%i 100%% done", "%.i", "%Äx", "%i %", "%.12", "%99999i", "%4096i", "%4097i",
		"%0.", "%..", "%5%", "%.%", "%\xff", "%\x00", "plain", "", "%", "%%", "%i\t%.8j|%20j|%j",
		"%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R", "%00000000000000000000000001i", "%-5i", "%#P",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseShort(s)
		if err != nil {
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("ParseShort(%q): %v is not ErrInvalidArgument", s, err)
			}
			return
		}
		checkSpecs(t, s, got)
		text := writeShort(got)
		back, err := ParseShort(text)
		if err != nil {
			t.Fatalf("ParseShort(%q) written as %q does not parse: %v", s, text, err)
		}
		if diff := cmp.Diff(got, back); diff != "" {
			t.Fatalf("ParseShort(%q) written as %q reads back otherwise (-first +back):\n%s", s, text, diff)
		}
	})
}

// FuzzParseLong checks the -O parser the same way.
func FuzzParseLong(f *testing.F) {
	for _, s := range []string{
		"JobID,Name", "JobID:10,Name:.9", "JobID:5|,State:.8 end", "Name:", ",JobID,,", "JobID,:5", ",",
		"JobID:100000", "JobID:4096", "JobID:4097", "a:.", "a:0", "a::", "a:5:6", "a:20", "\xff:\x00", "",
		"a:99999999999999999999999", "a:.0005x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseLong(s)
		if err != nil {
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("ParseLong(%q): %v is not ErrInvalidArgument", s, err)
			}
			return
		}
		if len(got.Specs) == 0 || got.Prefix != "" {
			t.Fatalf("ParseLong(%q) = %+v", s, got)
		}
		checkSpecs(t, s, got)
		text := writeLong(got)
		back, err := ParseLong(text)
		if err != nil {
			t.Fatalf("ParseLong(%q) written as %q does not parse: %v", s, text, err)
		}
		if diff := cmp.Diff(got, back); diff != "" {
			t.Fatalf("ParseLong(%q) written as %q reads back otherwise (-first +back):\n%s", s, text, diff)
		}
	})
}

// FuzzAppendCell checks the cell layout every column uses: a cell of
// exactly width bytes when cut or left-justified, never shorter than
// width, and a cut that never splits a UTF-8 sequence of a valid value.
func FuzzAppendCell(f *testing.F) {
	for _, v := range []string{"", "gpu01", "Ääää", "日本語のジョブ", "\xff\xfe", "a\x00b"} {
		for _, w := range []int16{-5, 0, 1, 3, 8, 4096} {
			f.Add(v, w, true, true)
			f.Add(v, w, false, true)
		}
	}
	f.Add("abc", int16(2), true, false)
	f.Fuzz(func(t *testing.T, val string, w int16, right, cut bool) {
		width := int(w)
		got := AppendCell(nil, val, width, right, cut)
		switch {
		case width <= 0:
			if string(got) != val {
				t.Fatalf("AppendCell(%q, %d) = %q", val, width, got)
			}
		case right && !cut:
			if len(got) != max(width, len(val)) || !strings.HasSuffix(string(got), val) {
				t.Fatalf("AppendCell(%q, %d, right) = %q", val, width, got)
			}
		default:
			if len(got) != width {
				t.Fatalf("AppendCell(%q, %d, right=%v) = %q: %d bytes", val, width, right, got, len(got))
			}
			if utf8.ValidString(val) && !utf8.Valid(got) {
				t.Fatalf("AppendCell(%q, %d) = %q splits a character", val, width, got)
			}
		}
		if b := AppendCellBytes(nil, []byte(val), width, right, cut); string(b) != string(got) {
			t.Fatalf("AppendCellBytes(%q, %d) = %q, AppendCell %q", val, width, b, got)
		}
	})
}
