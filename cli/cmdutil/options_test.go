package cmdutil

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/cli/getopt"
)

type toy struct{ Quiet bool }

func toyCommand(try bool) *getopt.Command[toy] {
	return &getopt.Command[toy]{
		Name:    "toy",
		TryHelp: try,
		Options: []getopt.Option[toy]{
			{Spec: getopt.Spec{Long: "quiet", Short: 'Q'}, Help: "say nothing", Flag: func(o *toy) *bool { return &o.Quiet }},
			{Spec: getopt.Spec{Long: "fail"}, Help: "fail", Set: func(*toy, string, bool) error { return errors.New("it failed") }},
			{Spec: getopt.Spec{Long: "help"}, Action: getopt.Help, Help: "help"},
			{Spec: getopt.Spec{Long: "version", Short: 'V'}, Action: getopt.Version, Help: "version"},
		},
	}
}

func TestParseOptions(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		try      bool
		env      map[string]string
		operands []string
		done     bool
		code     int
		out, err string
	}{
		{name: "operands", args: []string{"a", "-Q", "b"}, operands: []string{"a", "b"}},
		{name: "POSIXLY_CORRECT", args: []string{"a", "-Q"}, env: map[string]string{"POSIXLY_CORRECT": "y"}, operands: []string{"a", "-Q"}},
		{name: "version", args: []string{"-V"}, done: true, out: "slurm 22.05.8\n"},
		{name: "help", args: []string{"--help"}, done: true, out: "Usage: toy [OPTIONS]\n"},
		{name: "syntax error with the hint", args: []string{"--qu=1"}, try: true, done: true, code: 1,
			err: "toy: option '--quiet' doesn't allow an argument\nTry \"toy --help\" for more information\n"},
		{name: "syntax error without it", args: []string{"-x"}, done: true, code: 1, err: "toy: invalid option -- 'x'\n"},
		{name: "an option's own error is the caller's to print", args: []string{"--fail"}, done: true, code: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, errb := Test()
			var o toy
			ops, done, err := ParseOptions(ios, toyCommand(tt.try), &o, tt.args, func(k string) string { return tt.env[k] })
			if done != tt.done || ExitCode(err) != tt.code {
				t.Errorf("done %v, exit %d (%v); want %v, %d", done, ExitCode(err), err, tt.done, tt.code)
			}
			if !slices.Equal(ops, tt.operands) {
				t.Errorf("operands %q, want %q", ops, tt.operands)
			}
			if !strings.HasPrefix(out.String(), tt.out) || (tt.out == "" && out.Len() > 0) || errb.String() != tt.err {
				t.Errorf("stdout %q, stderr %q; want %q, %q", out.String(), errb.String(), tt.out, tt.err)
			}
		})
	}
}

func TestAtoi(t *testing.T) {
	for in, want := range map[string]int{"5": 5, " 12s": 12, "-3": -3, "+7": 7, "x": 0, "": 0, "99999999999999": 999999999} {
		if got := Atoi(in); got != want {
			t.Errorf("Atoi(%q) = %d, want %d", in, got, want)
		}
	}
}
