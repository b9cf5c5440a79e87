package manpage

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/tide-hpc/tide/cli/getopt"
	"github.com/tide-hpc/tide/internal/golden"
)

type testOpts struct {
	user  string
	flag  bool
	level int
}

// testTable is a getopt table with what the commands' tables have: a
// hidden alias, a short-only option, an optional argument, Tide's own.
var testTable = []getopt.Option[testOpts]{
	{Spec: getopt.Spec{Long: "user", Short: 'u', Arg: getopt.RequiredArg}, ArgName: "user_name(s)", Help: "users to show",
		Str: func(o *testOpts) *string { return &o.user }},
	{Spec: getopt.Spec{Long: "users", Short: 'u', Arg: getopt.RequiredArg, ID: "user"}, Hidden: true,
		Str: func(o *testOpts) *string { return &o.user }},
	{Spec: getopt.Spec{Short: 'U'}, Help: "short only", Flag: func(o *testOpts) *bool { return &o.flag }},
	{Spec: getopt.Spec{Long: "jobs", Short: 'j', Arg: getopt.OptionalArg}, ArgName: "job(s)", Help: "jobs to show"},
	{Spec: getopt.Spec{Long: "json"}, Tide: true, Help: "print JSON"},
	{Spec: getopt.Spec{Long: "sib", ID: "sibling"}, Hidden: true},
}

func TestFromGetopt(t *testing.T) {
	got := FromGetopt(testTable)
	want := []Option{
		{Long: "user", Short: 'u', Arg: getopt.RequiredArg, ArgName: "user_name(s)", Help: "users to show", Key: "user"},
		{Long: "users", Short: 'u', Arg: getopt.RequiredArg, Key: "user", Hidden: true, AliasOf: "--user"},
		{Short: 'U', Help: "short only"},
		{Long: "jobs", Short: 'j', Arg: getopt.OptionalArg, ArgName: "job(s)", Help: "jobs to show", Key: "jobs"},
		{Long: "json", Help: "print JSON", Key: "json", Tide: true},
		{Long: "sib", Key: "sibling", Hidden: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FromGetopt (-want +got):\n%s", diff)
	}
}

func TestFromFlags(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.BoolP("verbose", "v", false, "say more")
	fs.String("config", "", "read `FILE`")
	fs.Int("limit", 20, "at most this many")
	fs.Duration("ttl", time.Hour, "how long")
	fs.StringSlice("features", nil, "node features")
	fs.String("old", "", "gone")
	_ = fs.MarkDeprecated("old", "use --config")
	got := FromFlags(fs)
	want := []Option{
		{Long: "verbose", Short: 'v', Help: "say more", Key: "verbose"},
		{Long: "config", Arg: getopt.RequiredArg, ArgName: "FILE", Help: "read FILE", Key: "config"},
		{Long: "limit", Arg: getopt.RequiredArg, ArgName: "n", Help: "at most this many (default 20)", Key: "limit"},
		{Long: "ttl", Arg: getopt.RequiredArg, ArgName: "duration", Help: "how long (default 1h0m0s)", Key: "ttl"},
		{Long: "features", Arg: getopt.RequiredArg, ArgName: "list", Help: "node features", Key: "features"},
		{Long: "old", Arg: getopt.RequiredArg, ArgName: "value", Help: "gone", Key: "old", Hidden: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FromFlags (-want +got):\n%s", diff)
	}
}

func TestWords(t *testing.T) {
	tests := []struct {
		o    Option
		want []string
	}{
		{o: Option{ArgName: "model|data"}, want: []string{"model", "data"}},
		{o: Option{ArgName: "0|1"}, want: []string{"0", "1"}},
		{o: Option{ArgName: "user|mcs", Values: []string{"a"}}, want: []string{"a"}},
		{o: Option{ArgName: "[{R|B}:]num[@time]"}},
		{o: Option{ArgName: "partition"}},
		{o: Option{ArgName: "a||b"}},
	}
	for _, tt := range tests {
		if got := tt.o.Words(); !cmp.Equal(got, tt.want) {
			t.Errorf("Words(%q) = %q, want %q", tt.o.ArgName, got, tt.want)
		}
	}
}

func TestInline(t *testing.T) {
	tests := []struct{ in, want string }{
		{in: "plain text", want: "plain text"},
		{in: "use `--partition` here", want: `use \fB\-\-partition\fR here`},
		{in: "**bold** and `a\\|b`", want: `\fBbold\fR and \fBa|b\fR`},
		{in: "see [operations](operations.md#x).", want: "see operations."},
		{in: `a\b -c`, want: `a\eb \-c`},
		{in: "≥ 1 → 2 … é", want: `\(>= 1 \(-> 2 \&... \[u00E9]`},
		{in: "a,b,c and a, b", want: `a,\:b,\:c and a, b`},
		{in: "unclosed `code and [link", want: `unclosed ` + "`" + `code and [link`},
		{in: "x\\|y", want: "x|y"},
	}
	for _, tt := range tests {
		if got := Inline(tt.in); got != tt.want {
			t.Errorf("Inline(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestWrite pins the roff of a page that uses every part of the format.
func TestWrite(t *testing.T) {
	opts := FromGetopt(testTable)
	opts = append(opts,
		Option{Long: "partition", Short: 'p', Arg: getopt.RequiredArg, ArgName: "partition", Help: "partition requested",
			Group: "Constraint options", Key: "partition", Env: []string{"SBATCH_PARTITION"}},
		Option{Long: "gres-flags", Arg: getopt.RequiredArg, ArgName: "opts", Help: "flags related to GRES management",
			Group: "Constraint options", Key: "gres-flags", NoEffect: true, Values: []string{"disable-binding", "enforce-binding"}},
	)
	p := &Page{
		Name: "tst", Section: 1, Summary: "test the page writer", Source: "Tide 0.1.0",
		Synopsis:    []string{"tst [OPTIONS] FILE...", "tst --json"},
		Description: Para(".dot at the start, 'quote too", "a `code` span, a \\backslash, a \"quote\"."),
		Options:     opts,
		Sections: []Section{
			{Title: "COMMANDS", Blocks: []Block{{Items: []Item{{Tag: "`show` *ENTITY*", Text: "show it"}}}}},
			{Title: "tst sub", Sub: true, Blocks: []Block{
				{Pre: "tst sub --x\n.not a request\n"},
				{Options: []Option{{Long: "x", Help: "the x"}}},
			}},
		},
		ExitStatus: []Block{{Items: []Item{{Tag: "0", Text: "success."}}}},
		SeeAlso:    []string{"squeue(1)", "tide.yaml(5)"},
	}
	var b bytes.Buffer
	if err := Write(&b, p); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "page", b.String())
}
