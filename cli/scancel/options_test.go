package scancel

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
	"github.com/tide-hpc/tide/ctld/api"
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
)

// parsed is the part of Options the parser fills.
type parsed struct {
	JobIDs                                                                      []string
	Users, Names, Partitions, States, Accounts, NodeList, Signal, QOS, Clusters string
	Me, Batch, Full, Interactive, Quiet                                         bool
	Verbose                                                                     int
}

func parsedOf(o *Options) parsed {
	return parsed{JobIDs: o.JobIDs, Users: o.Users, Names: o.Names, Partitions: o.Partitions, States: o.States,
		Accounts: o.Accounts, NodeList: o.NodeList, Signal: o.Signal, QOS: o.QOS, Clusters: o.Clusters,
		Me: o.Me, Batch: o.Batch, Full: o.Full, Interactive: o.Interactive, Quiet: o.Quiet, Verbose: o.Verbose}
}

// parseLine runs scancel's parser over args; it returns the options, what
// was printed and the exit code a run would end with (-1: it would go
// on to cancel).
func parseLine(t *testing.T, args ...string) (*Options, string, string, int) {
	t.Helper()
	ios, _, out, errb := cmdutil.Test()
	o := &Options{IO: ios}
	done, err := o.parseArgs(args)
	cmdutil.PrintError(errb, "scancel", err)
	code := -1
	if done || err != nil {
		code = cmdutil.ExitCode(err)
	}
	return o, out.String(), errb.String(), code
}

func TestParseArgs(t *testing.T) {
	const try = "Try \"scancel --help\" for more information\n"
	tests := []struct {
		name    string
		args    []string
		want    parsed
		code    int // -1: parsing succeeded
		wantErr string
	}{
		{name: "options after the job ids", args: []string{"12", "--signal=USR1", "13", "-b"},
			want: parsed{JobIDs: []string{"12", "13"}, Signal: "USR1", Batch: true}, code: -1},
		{name: "abbreviations", args: []string{"--sig", "TERM", "--use=bob", "--interact", "--par=gpu"},
			want: parsed{Signal: "TERM", Users: "bob", Interactive: true, Partitions: "gpu"}, code: -1},
		{name: "bundled", args: []string{"-bfiQvs", "HUP", "7"},
			want: parsed{Batch: true, Full: true, Interactive: true, Quiet: true, Verbose: 1, Signal: "HUP", JobIDs: []string{"7"}}, code: -1},
		{name: "Slurm's and Tide's aliases", args: []string{"--jobname=x", "--states=PD", "--users=a", "--accounts=ml", "--nodes=gpu01", "--partitions=p", "--cluster=c"},
			want: parsed{Names: "x", States: "PD", Users: "a", Accounts: "ml", NodeList: "gpu01", Partitions: "p", Clusters: "c"}, code: -1},
		{name: "no-op options", args: []string{"-H", "--ctld", "5"}, want: parsed{JobIDs: []string{"5"}}, code: -1},
		{name: "a step id after --", args: []string{"--", "-5"}, want: parsed{JobIDs: []string{"-5"}}, code: -1},

		{name: "unknown option", args: []string{"--frob", "5"}, code: 1, wantErr: "scancel: unrecognized option '--frob'\n" + try},
		{name: "ambiguous name prefix", args: []string{"--n=x"}, code: 1,
			wantErr: "scancel: option '--n=x' is ambiguous; possibilities: '--name' '--nodelist' '--nodes'\n" + try},
		{name: "missing signal", args: []string{"5", "-s"}, want: parsed{}, code: 1, wantErr: "scancel: option requires an argument -- 's'\n" + try},
		{name: "sibling", args: []string{"--sibling=c2", "5"}, code: 1,
			wantErr: "scancel: error: --sibling is not supported: Tide runs one cluster, with no federation\n"},
		{name: "help", args: []string{"5", "--help"}, code: 0},
		{name: "version", args: []string{"-V", "--bogus"}, code: 0},
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

// TestNewFilters checks the selectors Tide took on with Slurm's table: a
// QOS, and reservations and wckeys, which no Tide job has.
func TestNewFilters(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []api.CancelRequest
	}{
		{name: "qos", args: []string{"-q", "NORMAL"}, want: []api.CancelRequest{{Filter: api.JobFilter{IDs: []uint64{108}}}}},
		{name: "qos and user", args: []string{"--qos=normal", "-u", "bob"}},
		{name: "reservation", args: []string{"-R", "maint", "108"}},
		{name: "wckey", args: []string{"--wckey=x", "-u", "alice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := slurmfmttest.Cluster()
			out, errOut, err := exec(t, fake, "", tt.args...)
			if err != nil || out != "" || errOut != "" {
				t.Fatalf("scancel %v: %v, stdout %q, stderr %q", tt.args, err, out, errOut)
			}
			if diff := cmp.Diff(tt.want, fake.Cancels); diff != "" {
				t.Errorf("cancel requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClusters(t *testing.T) {
	fake := slurmfmttest.Cluster()
	if _, _, err := exec(t, fake, "", "-M", "all", "108"); err != nil {
		t.Errorf("-M all: %v", err)
	}
	_, _, err := exec(t, fake, "", "--clusters=elsewhere", "109")
	if err == nil || !regexp.MustCompile(`'elsewhere' can't be reached now, or it is an invalid entry for --cluster`).MatchString(err.Error()) {
		t.Errorf("-M elsewhere: %v", err)
	}
	if len(fake.Cancels) != 1 {
		t.Errorf("cancels %v, want only -M all's", fake.Cancels)
	}
}

// TestHelpTexts keeps --help and --usage in golden files, and checks
// them against what Slurm's test suite looks for in them.
func TestHelpTexts(t *testing.T) {
	for _, tt := range []struct {
		arg, golden string
		re          *regexp.Regexp
	}{
		{"--help", "options-help", regexp.MustCompile(`(?s)^Usage: scancel \[OPTIONS\] \[job_id\[_array_id\]\[\.step_id\]\]\n.*\nHelp options:\n`)},
		{"--usage", "options-usage", regexp.MustCompile(`^Usage: scancel(?:\s+\[-{1,2}[^\]]+\])+\s+\[job_id.+\]\n$`)},
	} {
		_, out, errOut, code := parseLine(t, tt.arg)
		if code != 0 || errOut != "" {
			t.Fatalf("%s: exit %d, stderr %q", tt.arg, code, errOut)
		}
		if !tt.re.MatchString(out) {
			t.Errorf("%s does not match %s:\n%s", tt.arg, tt.re, out)
		}
		goldenpkg.Check(t, tt.golden, out)
	}
}
