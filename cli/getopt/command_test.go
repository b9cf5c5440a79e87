package getopt

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// demo is a command's options.
type demo struct {
	Header  bool
	Verbose int
	Name    string
	Jobs    string
	JobFlag bool
	Lists   []string
}

var demoCommand = Command[demo]{
	Name: "demo",
	Options: []Option[demo]{
		{Spec: Spec{Long: "noheader", Short: 'h'}, Help: "print no header", Flag: func(d *demo) *bool { return &d.Header }},
		{Spec: Spec{Long: "verbose", Short: 'v'}, Help: "say more", Count: func(d *demo) *int { return &d.Verbose }},
		{Spec: Spec{Long: "name", Short: 'n', Arg: RequiredArg}, ArgName: "name", Help: "a name, which must not be bad",
			Set: func(d *demo, v string, _ bool) error {
				if v == "bad" {
					return errors.New("bad name")
				}
				d.Name = v
				return nil
			}},
		{Spec: Spec{Long: "jobs", Short: 'j', Arg: OptionalArg}, ArgName: "list", Help: "jobs",
			Set: func(d *demo, v string, has bool) error { d.Jobs, d.JobFlag = v, true; return nil }},
		{Spec: Spec{Long: "list", Arg: RequiredArg}, ArgName: "items", Help: "items, comma separated, added up",
			List: func(d *demo) *[]string { return &d.Lists }},
		{Spec: Spec{Long: "lists", Arg: RequiredArg, ID: "list"}, Hidden: true, List: func(d *demo) *[]string { return &d.Lists }},
		{Spec: Spec{Long: "gpus"}, Tide: true, Help: "a Tide option with a description long enough to be wrapped onto a second line"},
		{Spec: Spec{Long: "help"}, Action: Help, Help: "show this help"},
		{Spec: Spec{Long: "usage"}, Action: Usage, Help: "show the usage"},
		{Spec: Spec{Long: "version", Short: 'V'}, Action: Version, Help: "print the version"},
	},
	Operands: "[file]",
}

func TestCommandParse(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		posix    bool
		want     demo
		act      Action
		operands []string
		err      string
	}{
		{name: "options act in order", args: []string{"-hvv", "--name=a", "-nb", "--list=x,y", "--lists", "z"},
			want: demo{Header: true, Verbose: 2, Name: "b", Lists: []string{"x", "y", "z"}}},
		{name: "operands anywhere", args: []string{"f", "-j", "g", "-h"}, want: demo{Header: true, JobFlag: true}, operands: []string{"f", "g"}},
		{name: "POSIXLY_CORRECT stops at the first operand", args: []string{"f", "-h"}, posix: true, operands: []string{"f", "-h"}},
		{name: "help before a syntax error", args: []string{"-v", "--help", "--bogus"}, want: demo{Verbose: 1}, act: Help},
		{name: "help before a bad value", args: []string{"--he", "-n", "bad"}, act: Help},
		{name: "bad value before help", args: []string{"-n", "bad", "--help"}, err: "bad name"},
		{name: "syntax error after the options before it", args: []string{"-v", "--bogus", "--help"}, want: demo{Verbose: 1},
			err: "unrecognized option '--bogus'"},
		{name: "usage", args: []string{"--usa"}, act: Usage},
		{name: "version bundled", args: []string{"-hV"}, want: demo{Header: true}, act: Version},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d demo
			act, ops, err := demoCommand.Parse(&d, tt.args, tt.posix)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.err || act != tt.act {
				t.Errorf("action %d, error %q; want %d, %q", act, gotErr, tt.act, tt.err)
			}
			if diff := cmp.Diff(tt.want, d); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.operands, ops); diff != "" {
				t.Errorf("operands (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCommandRequireOrder(t *testing.T) {
	c := demoCommand
	c.RequireOrder = true
	var d demo
	if _, ops, err := c.Parse(&d, []string{"-h", "script", "-v"}, false); err != nil || !d.Header || d.Verbose != 0 ||
		!cmp.Equal(ops, []string{"script", "-v"}) {
		t.Errorf("operands %q, options %+v, %v", ops, d, err)
	}
}

func TestCommandTexts(t *testing.T) {
	var help, usage strings.Builder
	demoCommand.WriteHelp(&help)
	demoCommand.WriteUsage(&usage)
	wantHelp := `Usage: demo [OPTIONS] [file]
  -h, --noheader                  print no header
  -j, --jobs[=list]               jobs
      --list=items                items, comma separated, added up
  -n, --name=name                 a name, which must not be bad
  -v, --verbose                   say more
  -V, --version                   print the version

Tide options:
      --gpus                      a Tide option with a description long enough
                                  to be wrapped onto a second line

Help options:
  --help                          show this help
  --usage                         show the usage
`
	if diff := cmp.Diff(wantHelp, help.String()); diff != "" {
		t.Errorf("help (-want +got):\n%s", diff)
	}
	wantUsage := "Usage: demo [--gpus] [--help] [--list items] [-n name] [--usage] [-hjvV] [file]\n"
	if diff := cmp.Diff(wantUsage, usage.String()); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}

	c := demoCommand
	c.Name = "a-command-with-a-long-name"
	c.Options = append(c.Options, Option[demo]{Spec: Spec{Long: "another-long-option", Arg: RequiredArg}, ArgName: "value", Help: "x"})
	usage.Reset()
	c.WriteUsage(&usage)
	want := "Usage: a-command-with-a-long-name [--another-long-option value] [--gpus]\n" +
		"                                  [--help] [--list items] [-n name] [--usage]\n" +
		"                                  [-hjvV] [file]\n"
	if diff := cmp.Diff(want, usage.String()); diff != "" {
		t.Errorf("wrapped usage (-want +got):\n%s", diff)
	}

	c.HelpText = func(w io.Writer) { io.WriteString(w, "own help\n") }
	c.UsageText = func(w io.Writer) { io.WriteString(w, "own usage\n") }
	help.Reset()
	usage.Reset()
	c.WriteHelp(&help)
	c.WriteUsage(&usage)
	if help.String() != "own help\n" || usage.String() != "own usage\n" {
		t.Errorf("overrides: %q, %q", help.String(), usage.String())
	}
}

func TestWrapWords(t *testing.T) {
	for _, tt := range []struct {
		text  string
		width int
		want  []string
	}{
		{"", 10, []string{""}},
		{"a b c", 3, []string{"a b", "c"}},
		{"averyveryverylongword x", 5, []string{"averyveryverylongword", "x"}},
	} {
		if got := WrapWords(tt.text, tt.width); !cmp.Equal(got, tt.want) {
			t.Errorf("WrapWords(%q, %d) = %q, want %q", tt.text, tt.width, got, tt.want)
		}
	}
}
