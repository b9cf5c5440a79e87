package sprio

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/cmdutil"
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
)

// parsed is the part of Options the parser fills.
type parsed struct {
	Jobs, Users, Partitions, Clusters        string
	Args                                     []string
	JobsFlag, Long, Norm, NoHeader, Me, JSON bool
	Weights                                  bool
	Verbose                                  int
}

func parsedOf(o *Options) parsed {
	return parsed{Jobs: o.Jobs, Users: o.Users, Partitions: o.Partitions, Clusters: o.Clusters, Args: o.Args,
		JobsFlag: o.JobsFlag, Long: o.Long, Norm: o.Norm, NoHeader: o.NoHeader, Me: o.Me, JSON: o.JSON,
		Weights: o.Weights, Verbose: o.Verbose}
}

// parseLine runs sprio's parser over args; it returns the options, what
// was printed and the exit code a run would end with (-1: it would go
// on to the report).
func parseLine(t *testing.T, args ...string) (*Options, string, string, int) {
	t.Helper()
	ios, _, out, errb := cmdutil.Test()
	o := &Options{IO: ios}
	done, err := o.parseArgs(args)
	cmdutil.PrintError(errb, "sprio", err)
	code := -1
	if done || err != nil {
		code = cmdutil.ExitCode(err)
	}
	return o, out.String(), errb.String(), code
}

func TestParseArgs(t *testing.T) {
	const try = "Try \"sprio --help\" for more information\n"
	tests := []struct {
		name    string
		args    []string
		want    parsed
		code    int // -1: parsing succeeded
		wantOut string
		wantErr string
	}{
		{name: "jobs attached", args: []string{"-j12,13", "-hl"}, want: parsed{Jobs: "12,13", JobsFlag: true, NoHeader: true, Long: true}, code: -1},
		{name: "jobs as operands", args: []string{"--jobs", "12,13", "14", "-n"},
			want: parsed{JobsFlag: true, Args: []string{"12", "13", "14"}, Norm: true}, code: -1},
		{name: "abbreviations and aliases", args: []string{"--part=gpu", "--users=bob", "--clusters=tide", "--nor"},
			want: parsed{Partitions: "gpu", Users: "bob", Clusters: "tide", Norm: true}, code: -1},
		{name: "Tide's options", args: []string{"--me", "--js"}, want: parsed{Me: true, JSON: true}, code: -1},
		{name: "no-op federation options", args: []string{"--local", "--sib", "--federation"}, code: -1},
		{name: "verbose prints the options", args: []string{"-v", "-j", "7"},
			want: parsed{JobsFlag: true, Args: []string{"7"}, Verbose: 1}, code: -1,
			wantOut: "-----------------------------\nformat     = (null)\njob_flag   = 1\njobs       = 7\npartition  = (null)\n" +
				"users      = (null)\nverbose    = 1\n-----------------------------\n\n\n"},

		{name: "unknown option", args: []string{"--frob"}, code: 1, wantErr: "sprio: unrecognized option '--frob'\n" + try},
		{name: "ambiguous", args: []string{"--l"}, code: 1,
			wantErr: "sprio: option '--l' is ambiguous; possibilities: '--long' '--local'\n" + try},
		// -w is read here; the controller's policy decides (multifactor_test.go).
		{name: "weights", args: []string{"-w"}, want: parsed{Weights: true}, code: -1},
		{name: "format", args: []string{"-o", "%i"}, code: 1,
			wantErr: "sprio: error: -o/--format is not supported by Tide's sprio, which shows Tide's own priority factors\n"},
		{name: "help", args: []string{"--help"}, code: 0},
		{name: "usage", args: []string{"--usage"}, code: 0},
		{name: "version", args: []string{"--version"}, code: 0, wantOut: "slurm 22.05.8\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, out, errOut, code := parseLine(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.code, errOut)
			}
			if errOut != tt.wantErr {
				t.Errorf("stderr = %q, want %q", errOut, tt.wantErr)
			}
			if tt.code != 0 && out != tt.wantOut || tt.wantOut != "" && out != tt.wantOut {
				t.Errorf("stdout = %q, want %q", out, tt.wantOut)
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
		res         []string
	}{
		{"--help", "options-help", []string{`sprio \[OPTIONS\]`, `-j, --jobs`, `-l, --long`, `-M, --cluster`, `-p, --partition`,
			`-u, --user`, `-w, --weights`, `\nTide options:\n`}},
		{"--usage", "options-usage", []string{`^Usage: sprio(?:\s+\[-{1,2}[^\]]+(?:\[s\])?\])+\n$`}},
	} {
		_, out, errOut, code := parseLine(t, tt.arg)
		if code != 0 || errOut != "" {
			t.Fatalf("%s: exit %d, stderr %q", tt.arg, code, errOut)
		}
		for _, re := range tt.res {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("%s does not match %s:\n%s", tt.arg, re, out)
			}
		}
		goldenpkg.Check(t, tt.golden, out)
	}
}
