package opts

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExportEnv(t *testing.T) {
	caller := []string{"HOME=/home/alice", "PATH=/usr/bin", "EDITOR=vi", "SLURM_CONF=/etc/slurm.conf", "EMPTY="}
	tests := []struct {
		name string
		spec string
		want []string
		err  string
	}{
		{name: "default is everything", spec: "", want: caller},
		{name: "ALL", spec: "all", want: caller},
		{name: "NONE keeps only SLURM_", spec: "NONE", want: []string{"SLURM_CONF=/etc/slurm.conf"}},
		{name: "named variables and SLURM_", spec: "PATH,EDITOR=emacs,NEW=1",
			want: []string{"PATH=/usr/bin", "EDITOR=emacs", "NEW=1", "SLURM_CONF=/etc/slurm.conf"}},
		{name: "ALL with overrides", spec: "ALL,EDITOR=emacs,NEW=x",
			want: []string{"HOME=/home/alice", "PATH=/usr/bin", "EDITOR=emacs", "SLURM_CONF=/etc/slurm.conf", "EMPTY=", "NEW=x"}},
		{name: "ALL after an override wins", spec: "EDITOR=emacs,ALL",
			want: []string{"EDITOR=vi", "HOME=/home/alice", "PATH=/usr/bin", "SLURM_CONF=/etc/slurm.conf", "EMPTY="}},
		{name: "unknown name is skipped", spec: "NOPE,HOME", want: []string{"HOME=/home/alice", "SLURM_CONF=/etc/slurm.conf"}},
		{name: "empty value kept", spec: "EMPTY", want: []string{"EMPTY=", "SLURM_CONF=/etc/slurm.conf"}},
		{name: "quoted value holds commas", spec: `LIST="a,b",X='c'`, want: []string{"LIST=a,b", "X=c", "SLURM_CONF=/etc/slurm.conf"}},
		{name: "NONE with variables", spec: "NONE,HOME", err: "Invalid --export specification: NONE cannot be combined with variables"},
		{name: "bad name", spec: "1X=2", err: `Invalid --export specification: "1X" is not a variable name`},
		{name: "unmatched quote", spec: `A="b`, err: "Invalid --export specification: unmatched \""},
		{name: "only commas", spec: ",,", err: "Invalid --export specification: empty list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := exportEnv(tt.spec, caller)
			if errText(err) != tt.err {
				t.Fatalf("error = %q, want %q", errText(err), tt.err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A variable set twice in the caller's environment keeps its first
// place and its last value, and entries that are not NAME=value are
// dropped, as the controller would refuse them.
func TestExportEnvDuplicates(t *testing.T) {
	caller := []string{"A=1", "NOEQUALS", "=x", "A=2", "SLURM_X=1", "B=3", "SLURM_X=2"}
	for _, tt := range []struct {
		spec string
		want []string
	}{
		{"", []string{"A=2", "SLURM_X=2", "B=3"}},
		{"NONE", []string{"SLURM_X=2"}},
		{"B,A", []string{"B=3", "A=2", "SLURM_X=2"}},
	} {
		got, err := exportEnv(tt.spec, caller)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("--export=%q (-want +got):\n%s", tt.spec, diff)
		}
	}
}
