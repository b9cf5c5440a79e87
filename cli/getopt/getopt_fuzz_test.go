package getopt

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParsePermute checks getopt_long's contract in glibc's permuting
// mode: matches come in the order of the words they began in, with
// values only for options that take them; the operands are the words
// that are neither options nor their arguments, in order (a "--" ends
// the options and is dropped); an error points at a word of the list.
func FuzzParsePermute(f *testing.F) {
	for _, a := range []string{
		"12\n-h\n13", "-j\n5\n-h", "a\n--\n-h", "--no", "--us=x", "-Uml", "--=x", "-u", "--node", "-\n-", "--jobs=\xff",
	} {
		f.Add(a)
	}
	g := New(permuteSpecs)
	g.Permute = true
	f.Fuzz(func(t *testing.T, words string) {
		args := strings.Split(words, "\n")
		ms, operands, err := g.Parse(args)
		pos := 0
		for _, m := range ms {
			if m.Index < 0 || m.Index >= len(permuteSpecs) || m.Pos < pos || m.Pos >= len(args) {
				t.Fatalf("match %+v of %q", m, args)
			}
			pos = m.Pos
			if permuteSpecs[m.Index].Arg == NoArg && m.HasValue {
				t.Fatalf("match %+v of %q: a value for an option without one", m, args)
			}
		}
		if err != nil {
			var ge *Error
			if !errors.As(err, &ge) || ge.Pos < 0 || ge.Pos >= len(args) || operands != nil {
				t.Fatalf("error %v (%T), operands %q, for %q", err, err, operands, args)
			}
			return
		}
		// The operands are a subsequence of the words, and every word
		// is an option, an option's argument, "--", or an operand.
		k := 0
		for _, a := range args {
			if k < len(operands) && a == operands[k] {
				k++
			}
		}
		if k != len(operands) {
			t.Fatalf("operands %q are not a subsequence of %q", operands, args)
		}
		if len(ms)+len(operands) < countNonOptionWords(args) {
			t.Fatalf("%d matches and operands %q account for fewer words of %q", len(ms), operands, args)
		}
	})
}

// countNonOptionWords counts the words before any "--" that do not
// start with '-' (or are "-"), and every word after it: each must turn
// up as an operand or as an option's argument (counted with its match).
func countNonOptionWords(args []string) int {
	n := 0
	for i, a := range args {
		if a == "--" {
			return n + len(args) - i - 1
		}
		if a == "-" || !strings.HasPrefix(a, "-") {
			n++
		}
	}
	return n
}
