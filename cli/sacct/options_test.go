package sacct

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
)

// parsed is the part of Options the parser fills.
type parsed struct {
	Jobs, Users, Accounts, Partitions, States, Names, Formats, Clusters []string
	Start, End, Delimiter                                               string
	AllUsers, Parsable, Parsable2, NoHeader, Allocations, Long, Brief   bool
	JSON, HelpFormat                                                    bool
}

func parsedOf(o *Options) parsed {
	return parsed{Jobs: o.Jobs, Users: o.Users, Accounts: o.Accounts, Partitions: o.Partitions, States: o.States,
		Names: o.Names, Formats: o.Formats, Clusters: o.Clusters, Start: o.Start, End: o.End, Delimiter: o.Delimiter,
		AllUsers: o.AllUsers, Parsable: o.Parsable, Parsable2: o.Parsable2, NoHeader: o.NoHeader,
		Allocations: o.Allocations, Long: o.Long, Brief: o.Brief, JSON: o.JSON, HelpFormat: o.HelpFormat}
}

// parseLine runs sacct's parser over args; it returns the options, what
// was printed and the exit code a run would end with (-1: it would go
// on to the report).
func parseLine(t *testing.T, args ...string) (*Options, string, string, int) {
	t.Helper()
	ios, _, out, errb := cmdutil.Test()
	o := &Options{IO: ios}
	done, err := o.parseArgs(args)
	cmdutil.PrintError(errb, "sacct", err)
	code := -1
	if done || err != nil {
		code = cmdutil.ExitCode(err)
	}
	return o, out.String(), errb.String(), code
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    parsed
		code    int // -1: parsing succeeded
		wantErr string
	}{
		{name: "jobs abbreviated, as job libraries write it", args: []string{"--job", "27", "--format=JobID,State", "--noh", "--parsable2"},
			want: parsed{Jobs: []string{"27"}, Formats: []string{"JobID,State"}, NoHeader: true, Parsable2: true}, code: -1},
		{name: "lists add up", args: []string{"-j", "1,2", "--jobs=3", "-A", "a", "--acc", "b,c"},
			want: parsed{Jobs: []string{"1", "2", "3"}, Accounts: []string{"a", "b", "c"}}, code: -1},
		{name: "clusters all", args: []string{"--clusters", "all", "-L"}, want: parsed{Clusters: []string{"all", "all"}}, code: -1},
		{name: "aliases", args: []string{"--uid=5", "--fields=JobID", "--cluster=c", "--help-fields", "-t"},
			want: parsed{Users: []string{"5"}, Formats: []string{"JobID"}, Clusters: []string{"c"}, HelpFormat: true, Allocations: true}, code: -1},
		{name: "bundled", args: []string{"-anXPbS", "now-1hour", "-Enow"},
			want: parsed{AllUsers: true, NoHeader: true, Allocations: true, Parsable2: true, Brief: true, Start: "now-1hour", End: "now"}, code: -1},
		{name: "options after operands are read", args: []string{"x", "--json"}, want: parsed{JSON: true}, code: 2,
			wantErr: "sacct: error: Unknown arguments: x\n"},
		{name: "accepted, changing nothing in Tide", args: []string{"-D", "--local", "--federation", "--noconvert", "--use-local-uid", "-v", "--whole-hetjob"}, code: -1},

		{name: "unknown option has no Try line", args: []string{"--frob"}, code: 1, wantErr: "sacct: unrecognized option '--frob'\n"},
		{name: "ambiguous", args: []string{"--al"}, code: 1,
			wantErr: "sacct: option '--al' is ambiguous; possibilities: '--allusers' '--allocations' '--allclusters'\n"},
		{name: "missing argument", args: []string{"-S"}, code: 1, wantErr: "sacct: option requires an argument -- 'S'\n"},
		{name: "bad node range", args: []string{"-i", "2-x"}, code: 1, wantErr: "sacct: error: invalid node range -i '2-x'\n"},
		{name: "bad time limit", args: []string{"-k", "0"}, code: 1, wantErr: "sacct: error: Invalid time limit specification\n"},
		{name: "bad whole-hetjob", args: []string{"--whole-hetjob=maybe"}, code: 1,
			wantErr: "sacct: error: Invalid --whole-hetjob value \"maybe\". Valid values: [yes|no].\n"},
		{name: "bad nodelist", args: []string{"-N", "gpu[1"}, code: 1, wantErr: "sacct: error: 'gpu[1' invalid entry for --nodelist\n"},
		{name: "second nodelist", args: []string{"-N", "gpu01", "--nodelist=gpu02"}, code: -1,
			wantErr: "sacct: error: Already asked for nodes 'gpu01'\n"},
		{name: "long and format", args: []string{"-l", "-o", "JobID"}, want: parsed{Long: true, Formats: []string{"JobID"}}, code: 1,
			wantErr: "sacct: error: Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry.\n"},
		{name: "refused", args: []string{"--truncate"}, code: 1, wantErr: "sacct: error: -T/--truncate is not supported by Tide's sacct\n"},
		{name: "yaml", args: []string{"--yaml"}, code: 1, wantErr: "sacct: error: --yaml is not supported by Tide: use --json\n"},

		{name: "help waits for the whole line", args: []string{"-h", "--bogus"}, code: 1, wantErr: "sacct: unrecognized option '--bogus'\n"},
		{name: "help", args: []string{"-a", "--help"}, want: parsed{AllUsers: true}, code: 0},
		{name: "the last help option wins", args: []string{"--help", "-e"}, want: parsed{HelpFormat: true}, code: -1},
		{name: "usage", args: []string{"-U"}, code: 0},
		{name: "version at once", args: []string{"-V", "--bogus"}, code: 0},
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

// TestSelectors checks the selectors sacct applies itself on jobs made
// for each.
func TestSelectors(t *testing.T) {
	job := func(f func(j *api.Job)) api.Job {
		j := api.Job{ID: 1, JobSpec: api.JobSpec{QOS: "normal", Constraint: "h100", TimeLimit: 3600},
			Group: "users", GroupID: 100, Reason: api.ReasonCode("Priority"),
			Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 8}, {Node: "gpu02", CPUs: 8}}}
		if f != nil {
			f(&j)
		}
		return j
	}
	tests := []struct {
		name string
		args []string
		job  api.Job
		want bool
	}{
		{name: "no selector", job: job(nil), want: true},
		{name: "node", args: []string{"-N", "gpu[02-03]"}, job: job(nil), want: true},
		{name: "other node", args: []string{"-N", "gpu03"}, job: job(nil)},
		{name: "qos folded", args: []string{"-q", "low,NORMAL"}, job: job(nil), want: true},
		{name: "other qos", args: []string{"--qos=low"}, job: job(nil)},
		{name: "group name", args: []string{"-g", "users"}, job: job(nil), want: true},
		{name: "group id", args: []string{"--gid=100"}, job: job(nil), want: true},
		{name: "other group", args: []string{"--group=staff"}, job: job(nil)},
		{name: "reason", args: []string{"-R", "priority"}, job: job(nil), want: true},
		{name: "constraint", args: []string{"-C", "a100"}, job: job(nil)},
		{name: "nodes exactly", args: []string{"-i", "2"}, job: job(nil), want: true},
		{name: "nodes range", args: []string{"-i", "3-4"}, job: job(nil)},
		{name: "cpus range", args: []string{"-I", "10-20"}, job: job(nil), want: true},
		{name: "cpus exactly", args: []string{"--ncpus=8"}, job: job(nil)},
		{name: "time limit exactly", args: []string{"-k", "1:00:00"}, job: job(nil), want: true},
		{name: "time limit range", args: []string{"-k", "10", "-K", "30"}, job: job(nil)},
		{name: "unlimited", args: []string{"-k", "UNLIMITED"}, job: job(func(j *api.Job) { j.TimeLimit = api.Infinite }), want: true},
		{name: "wckeys", args: []string{"-W", "x"}, job: job(nil)},
		{name: "associations", args: []string{"-x", "1"}, job: job(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, errOut, code := parseLine(t, tt.args...)
			if code != -1 {
				t.Fatalf("parse: exit %d, stderr %q", code, errOut)
			}
			if got := o.keeps(&tt.job); got != tt.want {
				t.Errorf("keeps = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSelectorsEndToEnd runs sacct with a selector over the canned
// cluster: -g users keeps bob's jobs only.
func TestSelectorsEndToEnd(t *testing.T) {
	all := run(t, 0, nil, "-a", "-X", "-n", "-P", "-o", "User", "-S", "2000-01-01")
	got := run(t, 0, nil, "-a", "-X", "-n", "-P", "-o", "User", "-S", "2000-01-01", "-g", "users")
	if all.code != 0 || got.code != 0 {
		t.Fatalf("exit %d/%d: %s %s", all.code, got.code, all.errOut, got.errOut)
	}
	if !strings.Contains(all.out, "alice\n") || !strings.Contains(got.out, "bob\n") || strings.Contains(got.out, "alice") {
		t.Errorf("all users:\n%s\n-g users:\n%s", all.out, got.out)
	}
}

// TestHelpTexts keeps --help and --usage in golden files, and checks
// them against what Slurm's test suite looks for in them.
func TestHelpTexts(t *testing.T) {
	for _, tt := range []struct {
		arg, golden string
		res         []string
	}{
		{"--help", "options-help", []string{`sacct \[<OPTION>\]`, `Valid <OPTION> values are:`, `-A, --accounts:`, `-j, --jobs:`,
			`-s, --state:`, `-S, --starttime:`, `valid start/end time formats are...`}},
		{"--usage", "options-usage", []string{`^Usage: sacct \[options\]\n`}},
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
		golden(t, tt.golden, out)
	}
}
