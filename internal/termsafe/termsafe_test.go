package termsafe

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestEscape(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "empty", in: "", want: ""},
		{name: "plain ascii", in: "train-llm_v2.sh", want: "train-llm_v2.sh"},
		{name: "space and punctuation kept", in: `a b "c" ~!@#$%^&*()[]{}`, want: `a b "c" ~!@#$%^&*()[]{}`},
		{name: "backslash kept raw", in: `C:\jobs\x1b`, want: `C:\jobs\x1b`},
		{name: "chinese kept", in: "训练任务", want: "训练任务"},
		{name: "accents and emoji kept", in: "café 🚀", want: "café 🚀"},
		{name: "replacement character kept", in: "a\uFFFDb", want: "a\uFFFDb"},
		{name: "newline", in: "x\nFAKE LINE", want: `x\nFAKE LINE`},
		{name: "carriage return", in: "ok\rPWNED", want: `ok\rPWNED`},
		{name: "tab", in: "a\tb", want: `a\tb`},
		{name: "nul", in: "a\x00b", want: `a\x00b`},
		{name: "bell and backspace", in: "\a\b", want: `\x07\x08`},
		{name: "ESC clear screen", in: "\x1b[2J", want: `\x1b[2J`},
		{name: "OSC title", in: "\x1b]0;pwned\a", want: `\x1b]0;pwned\x07`},
		{name: "unit separator", in: "\x1f", want: `\x1f`},
		{name: "DEL", in: "a\x7fb", want: `a\x7fb`},
		{name: "C1 CSI", in: "a\u009b2Jb", want: `a\u009b2Jb`},
		{name: "C1 bounds", in: "\u0080\u009f\u00a0", want: "\\u0080\\u009f\u00a0"},
		{name: "invalid byte", in: "a\xffb", want: `a\xffb`},
		{name: "raw C1 byte without lead", in: "a\x9bb", want: `a\x9bb`},
		{name: "truncated sequence", in: "a\xe8\xae", want: `a\xe8\xae`},
		{name: "overlong slash", in: "\xc0\xaf", want: `\xc0\xaf`},
		{name: "surrogate half", in: "\xed\xa0\x80", want: `\xed\xa0\x80`},
		{name: "bidi override", in: "exe.\u202etxt", want: `exe.\u202etxt`},
		{name: "bidi embeddings", in: "\u202a\u202b\u202c\u202d", want: `\u202a\u202b\u202c\u202d`},
		{name: "bidi isolates", in: "\u2066\u2067\u2068\u2069", want: `\u2066\u2067\u2068\u2069`},
		{name: "neighbours of bidi kept", in: "\u2029\u202f\u2065\u206a", want: "\u2029\u202f\u2065\u206a"},
		{name: "everything", in: "$'x\x1b[2J\x1b]0;pwned\a\nFAKE LINE",
			want: `$'x\x1b[2J\x1b]0;pwned\x07\nFAKE LINE`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Escape(tt.in)
			if got != tt.want {
				t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if b := string(AppendBytes([]byte(">"), []byte(tt.in))); b != ">"+tt.want {
				t.Errorf("AppendBytes(%q) = %q, want %q", tt.in, b, ">"+tt.want)
			}
			if safe := IsSafe(tt.in); safe != (tt.in == tt.want) {
				t.Errorf("IsSafe(%q) = %v, want %v", tt.in, safe, tt.in == tt.want)
			}
			if IsSafeBytes([]byte(tt.in)) != IsSafe(tt.in) {
				t.Errorf("IsSafeBytes and IsSafe disagree on %q", tt.in)
			}
			if !IsSafe(got) {
				t.Errorf("Escape(%q) = %q is not safe itself", tt.in, got)
			}
		})
	}
}

func TestEscapeKeepsSafeStrings(t *testing.T) {
	s := "训练 job-42 /home/alice/exp"
	if got := Escape(s); got != s {
		t.Fatalf("Escape(%q) = %q", s, got)
	}
	if n := testing.AllocsPerRun(10, func() { _ = Escape(s) }); n != 0 {
		t.Errorf("Escape of a safe string allocates %v times, want 0", n)
	}
}

// FuzzEscape checks the guarantees on any input: the result is valid
// UTF-8 with nothing left to escape, safe input comes back unchanged,
// and the printable runes of the input survive in order.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "plain", "训练", "\x1b[2J\n", "\xff\xfe", "\u009b\u202e", `a\x1b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Escape(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Escape(%q) = %q is not valid UTF-8", s, got)
		}
		if !IsSafe(got) {
			t.Fatalf("Escape(%q) = %q still needs escaping", s, got)
		}
		if IsSafe(s) != (got == s) {
			t.Fatalf("IsSafe(%q) = %v but Escape gives %q", s, IsSafe(s), got)
		}
		var kept strings.Builder
		for i, r := range s {
			if _, n := utf8.DecodeRuneInString(s[i:]); r == utf8.RuneError && n == 1 {
				continue // an invalid byte, escaped
			}
			if r >= 0x20 && r != 0x7f && !escapedRune(r) {
				kept.WriteRune(r)
			}
		}
		rest := got
		for _, r := range kept.String() {
			i := strings.IndexRune(rest, r)
			if i < 0 {
				t.Fatalf("Escape(%q) = %q lost %q", s, got, r)
			}
			rest = rest[i+utf8.RuneLen(r):]
		}
	})
}

func TestEscapeJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "nothing to do", in: `{"name":"训练 \u001b[2J"}`, want: `{"name":"训练 \u001b[2J"}`},
		{name: "C1", in: "{\"name\":\"a\u009b2J\"}", want: `{"name":"a\u009b2J"}`},
		{name: "DEL", in: "[\"a\x7f\"]", want: `["a\u007f"]`},
		{name: "bidi", in: "\"exe.\u202etxt\u2066\u2069\"", want: `"exe.\u202etxt\u2066\u2069"`},
		{name: "kept neighbours", in: "\"\u00a0\u00e9\u2029\u202f\u2065\"", want: "\"\u00a0\u00e9\u2029\u202f\u2065\""},
		{name: "at the ends", in: "\u0085x\u202e", want: `\u0085x\u202e`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(EscapeJSON([]byte(tt.in))); got != tt.want {
				t.Errorf("EscapeJSON(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestEscapeJSONRoundTrip(t *testing.T) {
	type rec struct {
		Name    string            `json:"name"`
		Comment string            `json:"comment"`
		Tags    map[string]string `json:"tags"`
	}
	in := rec{
		Name:    "x\x1b[2J\x1b]0;pwned\a\nFAKE LINE\u009b1m\x7f",
		Comment: "exe.\u202etxt\u2066训练\u2069 \\ \"q\"",
		Tags:    map[string]string{"k\u202d": "v\u0085"},
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	esc := EscapeJSON(b)
	if !IsSafeBytes(esc) {
		t.Errorf("EscapeJSON output %q still holds bytes a terminal acts on", esc)
	}
	var out rec
	if err := json.Unmarshal(esc, &out); err != nil {
		t.Fatalf("EscapeJSON output %q is not JSON: %v", esc, err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("round trip changed the values (-want +got):\n%s", diff)
	}
}

// BenchmarkIsSafe measures the check every table cell pays: most
// values are short printable ASCII.
func BenchmarkIsSafe(b *testing.B) {
	for _, v := range []string{"preprocessing", "/home/alice/experiments/llm-pretraining/run-42/slurm-123456.out", "训练任务-二"} {
		b.Run(fmt.Sprintf("len=%d", len(v)), func(b *testing.B) {
			s := []byte(v)
			if !IsSafeBytes(s) {
				b.Fatalf("%q is not safe", v)
			}
			for b.Loop() {
				IsSafeBytes(s)
			}
		})
	}
}

// TestPlain8 checks the word test against the byte test for every pair
// of byte values in every pair of neighbouring positions (borrows and
// carries cross from one byte to the next), in a word of 'a's.
func TestPlain8(t *testing.T) {
	plain := func(c uint64) bool { return c >= 0x20 && c < 0x7f }
	for p := 0; p < 7; p++ {
		for x := uint64(0); x < 256; x++ {
			for y := uint64(0); y < 256; y++ {
				w := uint64(0x6161616161616161)
				w &^= 0xffff << (8 * p)
				w |= x<<(8*p) | y<<(8*(p+1))
				if got, want := plain8(w), plain(x) && plain(y); got != want {
					t.Fatalf("plain8(%#016x) = %v, want %v", w, got, want)
				}
			}
		}
	}
}

// TestEscapeRandom checks FuzzEscape's first two guarantees on seeded
// random strings long enough to take the eight-byte path, built from
// pieces at the edges of every class.
func TestEscapeRandom(t *testing.T) {
	pieces := []string{"a", "Z", " ", "~", "\x1f", "\x20", "\x7e", "\x7f", "\x80", "\xbf", "\xc2", "\xff",
		"\u0080", "\u009f", "\u00a0", "\u202a", "\u202e", "\u202f", "\u2066", "\u2069", "训", "🚀", "\\", "\n", "\t"}
	rng := rand.New(rand.NewPCG(20, 5))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		got := Escape(s)
		if !IsSafe(got) || !utf8.ValidString(got) {
			t.Fatalf("Escape(%q) = %q still needs escaping", s, got)
		}
		if IsSafe(s) != (got == s) {
			t.Fatalf("IsSafe(%q) = %v but Escape gives %q", s, IsSafe(s), got)
		}
	}
}
