package scontrol

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/scontroltest"
)

// parsedOpts is the part of Options the parser fills.
type parsedOpts struct {
	OneLiner, Details, Quiet, JSON bool
	Clusters                       string
	Words                          []string
}

func TestParseArgs(t *testing.T) {
	const try = "Try \"scontrol --help\" for more information\n"
	tests := []struct {
		name    string
		args    []string
		want    parsedOpts
		code    int // -1: parsing succeeded
		wantOut string
		wantErr string
	}{
		{name: "options after the command", args: []string{"show", "job", "5", "--json", "-d"},
			want: parsedOpts{JSON: true, Details: true, Words: []string{"show", "job", "5"}}, code: -1},
		{name: "bundled", args: []string{"-odQ", "ping"}, want: parsedOpts{OneLiner: true, Details: true, Quiet: true, Words: []string{"ping"}}, code: -1},
		{name: "abbreviations", args: []string{"--one", "--det", "--clus=tide", "show", "node"},
			want: parsedOpts{OneLiner: true, Details: true, Clusters: "tide", Words: []string{"show", "node"}}, code: -1},
		{name: "update words are not options", args: []string{"update", "JobId=5", "Comment=-x"},
			want: parsedOpts{Words: []string{"update", "JobId=5", "Comment=-x"}}, code: -1},
		{name: "hide undoes details", args: []string{"-d", "--hide", "show", "job"}, want: parsedOpts{Words: []string{"show", "job"}}, code: -1},
		{name: "verbose undoes quiet", args: []string{"-Q", "-vv", "ping"}, want: parsedOpts{Words: []string{"ping"}}, code: -1},
		{name: "no-op options", args: []string{"-aF", "--local", "--sib", "--fed", "ping"}, want: parsedOpts{Words: []string{"ping"}}, code: -1},
		{name: "double dash", args: []string{"--", "show", "-d"}, want: parsedOpts{Words: []string{"show", "-d"}}, code: -1},

		{name: "ambiguous", args: []string{"--h"}, code: 1,
			wantErr: "scontrol: option '--h' is ambiguous; possibilities: '--help' '--hide'\n" + try},
		{name: "unknown short", args: []string{"show", "-x"}, code: 1, wantErr: "scontrol: invalid option -- 'x'\n" + try},
		{name: "uid", args: []string{"-u", "bob", "show", "job"}, code: 1,
			wantErr: "scontrol: error: --uid is not supported by Tide: the controller acts as the user who runs scontrol\n"},
		{name: "help", args: []string{"-h"}, code: 0},
		{name: "usage is help", args: []string{"--usage"}, code: 0},
		{name: "version", args: []string{"show", "-V"}, code: 0, wantOut: "slurm 22.05.8\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, errb := cmdutil.Test()
			o := &Options{IO: ios}
			words, done, err := o.parseArgs(tt.args)
			cmdutil.PrintError(errb, "scontrol", err)
			code := -1
			if done || err != nil {
				code = cmdutil.ExitCode(err)
			}
			if code != tt.code {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.code, errb.String())
			}
			if errb.String() != tt.wantErr {
				t.Errorf("stderr = %q, want %q", errb.String(), tt.wantErr)
			}
			if tt.wantOut != "" && out.String() != tt.wantOut {
				t.Errorf("stdout = %q, want %q", out.String(), tt.wantOut)
			}
			if code == 0 && tt.wantOut == "" && out.String() != helpText {
				t.Errorf("stdout is not the help:\n%s", out.String())
			}
			got := parsedOpts{OneLiner: o.OneLiner, Details: o.Details, Quiet: o.Quiet, JSON: o.JSON, Clusters: o.Clusters, Words: words}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClusters(t *testing.T) {
	if r := run(t, scontroltest.Cluster(), nil, time.UTC, "-M", "all", "ping"); r.code != 0 {
		t.Errorf("-M all: exit %d, stderr %q", r.code, r.errOut)
	}
	r := run(t, scontroltest.Cluster(), nil, time.UTC, "ping", "--cluster=elsewhere")
	want := "scontrol: error: 'elsewhere' can't be reached now, or it is an invalid entry for --cluster.  Use 'sacctmgr list clusters' to see available clusters.\n"
	if r.code != 1 || r.errOut != want || r.out != "" {
		t.Errorf("-M elsewhere: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
}
