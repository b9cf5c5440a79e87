package sinfo

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
)

// parsed is the part of Options the parser fills.
type parsed struct {
	Format, FormatLong, Partitions, Nodes, States, Sort, Clusters                    string
	Long, NodeView, Summarize, NoHeader, Exact, Dead, Responding, GPUs, Reservations bool
	Iterate, Verbose                                                                 int
}

func parsedOf(o *Options) parsed {
	return parsed{Format: o.Format, FormatLong: o.FormatLong, Partitions: o.Partitions, Nodes: o.Nodes, States: o.States,
		Sort: o.Sort, Clusters: o.Clusters, Long: o.Long, NodeView: o.NodeView, Summarize: o.Summarize, NoHeader: o.NoHeader,
		Exact: o.Exact, Dead: o.Dead, Responding: o.Responding, GPUs: o.GPUs, Reservations: o.Reservations,
		Iterate: o.Iterate, Verbose: o.Verbose}
}

// parseLine runs sinfo's parser over args; it returns the options, what
// was printed and the exit code a run would end with (-1: it would go
// on to the report).
func parseLine(t *testing.T, args ...string) (*Options, string, string, int) {
	t.Helper()
	ios, _, out, errb := cmdutil.Test()
	o := &Options{IO: ios, Getenv: func(string) string { return "" }}
	done, err := o.parseArgs(args)
	cmdutil.PrintError(errb, "sinfo", err)
	code := -1
	if done || err != nil {
		code = cmdutil.ExitCode(err)
	}
	return o, out.String(), errb.String(), code
}

func TestParseArgs(t *testing.T) {
	const try = "Try \"sinfo --help\" for more information\n"
	tests := []struct {
		name    string
		args    []string
		want    parsed
		code    int // -1: parsing succeeded
		wantErr string
	}{
		{name: "abbreviations", args: []string{"--sum", "--part=gpu", "--resp", "--exa"},
			want: parsed{Summarize: true, Partitions: "gpu", Responding: true, Exact: true}, code: -1},
		{name: "Node is not node", args: []string{"--Nod", "--node=gpu01"}, want: parsed{NodeView: true, Nodes: "gpu01"}, code: -1},
		{name: "bundled", args: []string{"-Nlhv", "-vi3"}, want: parsed{NodeView: true, Long: true, NoHeader: true, Verbose: 2, Iterate: 3}, code: -1},
		{name: "last of -o and -O wins", args: []string{"-o", "%P", "-O", "NodeList"}, want: parsed{FormatLong: "NodeList"}, code: -1},
		{name: "and the other way round", args: []string{"--Format=NodeList", "--format", "%N"}, want: parsed{Format: "%N"}, code: -1},
		{name: "Tide's options and aliases", args: []string{"--gpu", "--partitions=debug", "--cluster=tide"},
			want: parsed{GPUs: true, Partitions: "debug", Clusters: "tide"}, code: -1},
		{name: "options after an operand are read", args: []string{"x", "-h"}, want: parsed{NoHeader: true}, code: 2,
			wantErr: "sinfo: error: Unrecognized option: x\n"},
		{name: "reservations", args: []string{"-T"}, want: parsed{Reservations: true}, code: -1},

		{name: "unknown option", args: []string{"--nodez"}, code: 1, wantErr: "sinfo: unrecognized option '--nodez'\n" + try},
		{name: "ambiguous", args: []string{"--no"}, code: 1,
			wantErr: "sinfo: option '--no' is ambiguous; possibilities: '--nodes' '--noconvert' '--noheader'\n" + try},
		{name: "missing argument", args: []string{"-t"}, code: 1, wantErr: "sinfo: option requires an argument -- 't'\n" + try},
		{name: "flag with a value", args: []string{"--long=yes"}, code: 1, wantErr: "sinfo: option '--long' doesn't allow an argument\n" + try},
		{name: "zero iterate", args: []string{"--iterate=0"}, code: 1,
			wantErr: "sinfo: error: invalid entry for --iterate=0: must be a positive number of seconds\n"},
		{name: "long and format", args: []string{"-O", "NodeList", "-l"}, want: parsed{FormatLong: "NodeList", Long: true}, code: 1,
			wantErr: "sinfo: error: Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry.\n"},
		{name: "all and partition", args: []string{"-p", "gpu", "-a"}, code: 1,
			wantErr: "sinfo: error: Conflicting options, -a and -p, specified. Please choose one or the other.\n"},
		{name: "yaml", args: []string{"--yaml"}, code: 1, wantErr: "sinfo: error: --yaml is not supported by Tide: use --json\n"},

		{name: "help", args: []string{"--help", "--bogus"}, code: 0},
		{name: "usage", args: []string{"--usage"}, code: 0},
		{name: "version", args: []string{"--vers"}, code: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, errOut, code := parseLine(t, tt.args...)
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

// TestHelpTexts keeps --help and --usage in golden files, and checks
// them against what Slurm's test suite looks for in them.
func TestHelpTexts(t *testing.T) {
	for _, tt := range []struct {
		arg, golden string
		re          *regexp.Regexp
	}{
		{"--help", "options-help", regexp.MustCompile(`(?s)^Usage: sinfo \[OPTIONS\]\n.*\nTide options:\n.*\nHelp options:\n`)},
		{"--usage", "options-usage", regexp.MustCompile(`^Usage: sinfo(?:\s+\[-{1,2}[^\]]+])+\n$`)},
	} {
		_, out, errOut, code := parseLine(t, tt.arg)
		if code != 0 || errOut != "" {
			t.Fatalf("%s: exit %d, stderr %q", tt.arg, code, errOut)
		}
		if !tt.re.MatchString(out) {
			t.Errorf("%s does not match %s:\n%s", tt.arg, tt.re, out)
		}
		golden(t, tt.golden, out)
	}
}

func TestReservations(t *testing.T) {
	out, errOut, err := exec(t, slurmfmttest.Cluster(), "--reservation")
	if err != nil || out != "No reservations in the system\n" || errOut != "" {
		t.Errorf("sinfo -T: %v, stdout %q, stderr %q", err, out, errOut)
	}
}
