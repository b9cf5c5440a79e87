package squeue

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
)

// parsed is the part of Options the parser fills.
type parsed struct {
	Accounts, Jobs, Names, Format, FormatLong, Users, Partitions, NodeList, States, Clusters, Steps string
	JobsFlag, NoHeader, Long, Me, Array, JSON, StepsFlag                                            bool
	Iterate, Verbose                                                                                int
}

func parsedOf(o *Options) parsed {
	return parsed{Accounts: o.Accounts, Jobs: o.Jobs, Names: o.Names, Format: o.Format, FormatLong: o.FormatLong,
		Users: o.Users, Partitions: o.Partitions, NodeList: o.NodeList, States: o.States, Clusters: o.Clusters,
		Steps: o.Steps, StepsFlag: o.StepsFlag,
		JobsFlag: o.JobsFlag, NoHeader: o.NoHeader, Long: o.Long, Me: o.Me, Array: o.Array, JSON: o.JSON,
		Iterate: o.Iterate, Verbose: o.Verbose}
}

// parseLine runs squeue's parser over args; it returns the options, what
// was printed and the exit code a run would end with (-1: it would go
// on to list the queue).
func parseLine(t *testing.T, env map[string]string, args ...string) (*Options, string, string, int) {
	t.Helper()
	ios, _, out, errb := cmdutil.Test()
	o := &Options{IO: ios, Getenv: func(k string) string { return env[k] }}
	done, err := o.parseArgs(args)
	cmdutil.PrintError(errb, "squeue", err)
	code := -1
	if done || err != nil {
		code = cmdutil.ExitCode(err)
	}
	return o, out.String(), errb.String(), code
}

func TestParseArgs(t *testing.T) {
	const try = "Try \"squeue --help\" for more information\n"
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    parsed
		code    int // -1: parsing succeeded
		wantErr string
	}{
		{name: "long option abbreviated", args: []string{"--form=%i", "--me", "--part=gpu"},
			want: parsed{Format: "%i", Me: true, Partitions: "gpu"}, code: -1},
		{name: "capital Format prefix", args: []string{"--Form", "JobID"}, want: parsed{FormatLong: "JobID"}, code: -1},
		{name: "Slurm's aliases", args: []string{"--users=bob", "--nodes=gpu01", "--cluster=tide", "-U", "ml"},
			want: parsed{Users: "bob", NodeList: "gpu01", Clusters: "tide", Accounts: "ml"}, code: -1},
		{name: "prefix shared by one option's names", args: []string{"--node=gpu[01-02]"}, want: parsed{NodeList: "gpu[01-02]"}, code: -1},
		{name: "account is a prefix of accounts", args: []string{"--account", "ml"}, want: parsed{Accounts: "ml"}, code: -1},
		{name: "bundled short options", args: []string{"-hlrv", "-vu", "alice"},
			want: parsed{NoHeader: true, Long: true, Array: true, Verbose: 2, Users: "alice"}, code: -1},
		{name: "optional argument attached", args: []string{"-hj12,13"}, want: parsed{NoHeader: true, Jobs: "12,13", JobsFlag: true}, code: -1},
		{name: "optional argument as the operand", args: []string{"-j", "12", "-h"},
			want: parsed{Jobs: "12", JobsFlag: true, NoHeader: true}, code: -1},
		{name: "long optional argument as the operand", args: []string{"--jobs", "7"}, want: parsed{Jobs: "7", JobsFlag: true}, code: -1},
		{name: "operand replaces the attached list", args: []string{"--job=5", "6"}, want: parsed{Jobs: "6", JobsFlag: true}, code: -1},
		{name: "jobs without a list", args: []string{"-j"}, want: parsed{JobsFlag: true}, code: -1},
		{name: "options after operands", args: []string{"-j", "4", "--json"}, want: parsed{Jobs: "4", JobsFlag: true, JSON: true}, code: -1},
		{name: "value after equals keeps dashes", args: []string{"--states=-x"}, want: parsed{States: "-x"}, code: -1},
		{name: "double dash ends options", args: []string{"-j", "--", "-h"}, want: parsed{Jobs: "-h", JobsFlag: true}, code: -1},
		{name: "iterate read as atoi", args: []string{"-i5s"}, want: parsed{Iterate: 5}, code: -1},
		{name: "steps without a list", args: []string{"-s"}, want: parsed{StepsFlag: true}, code: -1},
		{name: "steps attached", args: []string{"-s7.0,8.batch"}, want: parsed{Steps: "7.0,8.batch", StepsFlag: true}, code: -1},
		{name: "steps as the operand", args: []string{"--steps", "7.1"}, want: parsed{Steps: "7.1", StepsFlag: true}, code: -1},
		{name: "jobs take the operand before steps", args: []string{"-s", "-j", "7"}, want: parsed{Jobs: "7", JobsFlag: true, StepsFlag: true}, code: -1},
		{name: "last value wins", args: []string{"-u", "a", "--user=b"}, want: parsed{Users: "b"}, code: -1},

		{name: "unknown long option", args: []string{"--bogus=1"}, code: 1,
			wantErr: "squeue: unrecognized option '--bogus=1'\n" + try},
		{name: "unknown short option", args: []string{"-hZ"}, want: parsed{NoHeader: true}, code: 1,
			wantErr: "squeue: invalid option -- 'Z'\n" + try},
		{name: "ambiguous prefix lists Slurm's candidates", args: []string{"--us=x"}, code: 1,
			wantErr: "squeue: option '--us=x' is ambiguous; possibilities: '--usage' '--user' '--users'\n" + try},
		{name: "ambiguous across options", args: []string{"--no"}, code: 1,
			wantErr: "squeue: option '--no' is ambiguous; possibilities: '--noconvert' '--node' '--nodes' '--nodelist' '--noheader'\n" + try},
		{name: "missing argument, long", args: []string{"--iterate"}, code: 1,
			wantErr: "squeue: option '--iterate' requires an argument\n" + try},
		{name: "missing argument, short", args: []string{"-u"}, code: 1,
			wantErr: "squeue: option requires an argument -- 'u'\n" + try},
		{name: "argument to a flag", args: []string{"--me=1"}, code: 1,
			wantErr: "squeue: option '--me' doesn't allow an argument\n" + try},
		{name: "escapes what it echoes", args: []string{"--\x1b[2J"}, code: 1,
			wantErr: "squeue: unrecognized option '--\\x1b[2J'\n" + try},
		{name: "zero iterate", args: []string{"-i", "x"}, code: 1, wantErr: "squeue: error: --iterate=x: must be a positive number of seconds\n"},
		{name: "format then Format", args: []string{"-o", "%i", "-O", "JobID"}, want: parsed{Format: "%i"}, code: 1,
			wantErr: "squeue: error: -O (--Format) is incompatible with -o (--format)\n"},
		{name: "Format then format", args: []string{"-O", "JobID", "-o", "%i"}, want: parsed{FormatLong: "JobID"}, code: 1,
			wantErr: "squeue: error: -o (--format) is incompatible with -O (--Format)\n"},
		{name: "long and format", args: []string{"-l", "-o", "%i"}, want: parsed{Long: true, Format: "%i"}, code: 1,
			wantErr: "squeue: error: Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry.\n"},
		{name: "yaml", args: []string{"--yaml"}, code: 1, wantErr: "squeue: error: --yaml is not supported by Tide: use --json\n"},
		{name: "POSIXLY_CORRECT stops at the operand", args: []string{"-j", "4", "-h"}, env: map[string]string{"POSIXLY_CORRECT": "1"},
			want: parsed{Jobs: "4", JobsFlag: true}, code: 1, wantErr: "squeue: error: Unrecognized option: -h\n"},

		{name: "help", args: []string{"--help"}, code: 0},
		{name: "help before a mistake wins", args: []string{"--hel", "--bogus"}, code: 0},
		{name: "mistake before help", args: []string{"--bogus", "--help"}, code: 1,
			wantErr: "squeue: unrecognized option '--bogus'\n" + try},
		{name: "version", args: []string{"-V"}, code: 0},
		{name: "usage", args: []string{"--usa"}, code: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, errOut, code := parseLine(t, tt.env, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.code, errOut)
			}
			if errOut != tt.wantErr {
				t.Errorf("stderr = %q, want %q", errOut, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, parsedOf(o)); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStrayOperand checks Slurm's answer to an operand squeue has no
// use for: the error, then the usage on stdout, exit 1.
func TestStrayOperand(t *testing.T) {
	_, out, errOut, code := parseLine(t, nil, "-h", "123")
	if code != 1 || errOut != "squeue: error: Unrecognized option: 123\n" {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	if !regexp.MustCompile(`^Usage: squeue(?:\s+\[-{1,2}[^\]]+\])+\n$`).MatchString(out) {
		t.Errorf("stdout is not the usage:\n%s", out)
	}
}

// TestHelpTexts keeps --help and --usage in golden files, and checks
// them against what Slurm's test suite looks for in them.
func TestHelpTexts(t *testing.T) {
	for _, tt := range []struct {
		arg, golden string
		re          *regexp.Regexp
	}{
		{"--help", "options-help", regexp.MustCompile(`(?s)^Usage: squeue \[OPTIONS\]\n.*\nHelp options:\n`)},
		{"--usage", "options-usage", regexp.MustCompile(`^Usage: squeue(?:\s+\[-{1,2}[^\]]+\])+\n$`)},
	} {
		_, out, errOut, code := parseLine(t, nil, tt.arg)
		if code != 0 || errOut != "" {
			t.Fatalf("%s: exit %d, stderr %q", tt.arg, code, errOut)
		}
		if !tt.re.MatchString(out) {
			t.Errorf("%s does not match %s:\n%s", tt.arg, tt.re, out)
		}
		golden(t, tt.golden, out)
	}
}

// TestLicensesAndReservationsSelectNothing: no Tide job uses a license
// or a reservation.
func TestLicensesAndReservationsSelectNothing(t *testing.T) {
	for _, args := range [][]string{{"-L", "matlab"}, {"--reservation=maint"}} {
		out, errOut, err := exec(t, slurmfmttest.Cluster(), nil, append(args, "-h", "-t", "all")...)
		if err != nil || out != "" || errOut != "" {
			t.Errorf("squeue %v: %v, stdout %q, stderr %q", args, err, out, errOut)
		}
	}
}
