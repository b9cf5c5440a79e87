package opts

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testSpecs is a small table exercising every getopt feature.
var testSpecs = []Spec{
	{Long: "nodes", Short: 'N', Arg: RequiredArg},
	{Long: "ntasks", Short: 'n', Arg: RequiredArg},
	{Long: "ntasks-per-node", Arg: RequiredArg},
	{Long: "hold", Short: 'H', Arg: NoArg},
	{Long: "job-name", Short: 'J', Arg: RequiredArg},
	{Long: "exclusive", Arg: OptionalArg},
	{Long: "no-kill", Short: 'k', Arg: OptionalArg},
	{Long: "clusters", Short: 'M', Arg: RequiredArg, ID: "clusters"},
	{Long: "clustersx", Arg: RequiredArg, ID: "clusters"},
	{Long: "verbose", Short: 'v', Arg: NoArg},
}

// got is a compact view of a match: the long name and its value.
type got struct {
	Name, Value string
	Has         bool
	Pos         int
}

func TestGetopt(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		want     []got
		operands []string
		err      string
		errPos   int
	}{
		{name: "long with equals", args: []string{"--nodes=2"}, want: []got{{"nodes", "2", true, 0}}},
		{name: "long with separate value", args: []string{"--nodes", "2"}, want: []got{{"nodes", "2", true, 0}}},
		{name: "separate value may start with a dash", args: []string{"--job-name", "-x"}, want: []got{{"job-name", "-x", true, 0}}},
		{name: "empty value after equals", args: []string{"--job-name="}, want: []got{{"job-name", "", true, 0}}},
		{name: "value keeps later equals signs", args: []string{"--job-name=a=b"}, want: []got{{"job-name", "a=b", true, 0}}},
		{name: "unambiguous prefix", args: []string{"--nod=3"}, want: []got{{"nodes", "3", true, 0}}},
		{name: "exact match beats longer names", args: []string{"--ntasks=4"}, want: []got{{"ntasks", "4", true, 0}}},
		{name: "prefix of aliases is not ambiguous", args: []string{"--clus=a"}, want: []got{{"clusters", "a", true, 0}}},
		{name: "ambiguous prefix names candidates", args: []string{"--n=1"},
			err: "option '--n=1' is ambiguous; possibilities: '--nodes' '--ntasks' '--ntasks-per-node' '--no-kill'"},
		{name: "prefix across a dash", args: []string{"-v", "--ntasks-=2"},
			want: []got{{"verbose", "", false, 0}, {"ntasks-per-node", "2", true, 1}}},
		{name: "error position points at the bad word", args: []string{"-v", "--nodes=1", "--bogus"},
			want: []got{{"verbose", "", false, 0}, {"nodes", "1", true, 1}}, err: "unrecognized option '--bogus'", errPos: 2},
		{name: "unrecognized long keeps value", args: []string{"--foo=bar"}, err: "unrecognized option '--foo=bar'"},
		{name: "no-arg option given a value", args: []string{"--hol=1"}, err: "option '--hold' doesn't allow an argument"},
		{name: "required argument missing", args: []string{"--nodes"}, err: "option '--nodes' requires an argument"},
		{name: "optional argument only with equals", args: []string{"--exclusive", "user"},
			want: []got{{"exclusive", "", false, 0}}, operands: []string{"user"}},
		{name: "optional argument with equals", args: []string{"--exclusive=user"}, want: []got{{"exclusive", "user", true, 0}}},
		{name: "short with attached value", args: []string{"-N2", "-n4"},
			want: []got{{"nodes", "2", true, 0}, {"ntasks", "4", true, 1}}},
		{name: "short with separate value", args: []string{"-N", "2"}, want: []got{{"nodes", "2", true, 0}}},
		{name: "bundled shorts end in an argument", args: []string{"-HJname"},
			want: []got{{"hold", "", false, 0}, {"job-name", "name", true, 0}}},
		{name: "bundled shorts then separate argument", args: []string{"-vHJ", "name"},
			want: []got{{"verbose", "", false, 0}, {"hold", "", false, 0}, {"job-name", "name", true, 0}}},
		{name: "short optional argument attached", args: []string{"-koff"}, want: []got{{"no-kill", "off", true, 0}}},
		{name: "short optional argument never separate", args: []string{"-k", "off"},
			want: []got{{"no-kill", "", false, 0}}, operands: []string{"off"}},
		{name: "unknown short", args: []string{"-vZ"}, want: []got{{"verbose", "", false, 0}}, err: "invalid option -- 'Z'"},
		{name: "short missing argument", args: []string{"-HN"}, want: []got{{"hold", "", false, 0}},
			err: "option requires an argument -- 'N'"},
		{name: "double dash ends options", args: []string{"-H", "--", "--nodes=2"},
			want: []got{{"hold", "", false, 0}}, operands: []string{"--nodes=2"}},
		{name: "first operand stops parsing", args: []string{"-H", "job.sh", "-N", "2"},
			want: []got{{"hold", "", false, 0}}, operands: []string{"job.sh", "-N", "2"}},
		{name: "lone dash is an operand", args: []string{"-", "-H"}, operands: []string{"-", "-H"}},
		{name: "empty list", args: nil},
	}
	g := NewGetopt(testSpecs)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, ops, err := g.Parse(tt.args)
			var gotMs []got
			for _, m := range ms {
				gotMs = append(gotMs, got{testSpecs[m.Index].Long, m.Value, m.HasValue, m.Pos})
			}
			if diff := cmp.Diff(tt.want, gotMs); diff != "" {
				t.Errorf("matches (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.operands, ops); diff != "" {
				t.Errorf("operands (-want +got):\n%s", diff)
			}
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
				if ge := err.(*GetoptError); ge.Pos != tt.errPos {
					t.Errorf("error position = %d, want %d", ge.Pos, tt.errPos)
				}
			}
			if gotErr != tt.err {
				t.Errorf("error = %q, want %q", gotErr, tt.err)
			}
		})
	}
}

func TestGetoptSbatchTable(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // long name matched, or the error
	}{
		{name: "partition prefix", args: []string{"--part=gpu"}, want: "partition"},
		{name: "gpus exact beats gpus-per-node", args: []string{"--gpus=1"}, want: "gpus"},
		{name: "mem exact beats mem-per-cpu", args: []string{"--mem=1"}, want: "mem"},
		{name: "ambiguous in Slurm order", args: []string{"--ntasks-per=1"},
			want: "option '--ntasks-per=1' is ambiguous; possibilities: '--ntasks-per-core' '--ntasks-per-gpu' '--ntasks-per-node' '--ntasks-per-socket'"},
		{name: "cluster is its own name", args: []string{"--cluster=a"}, want: "cluster"},
		{name: "W is wait", args: []string{"-W"}, want: "wait"},
		{name: "wra prefix", args: []string{"--wra", "hostname"}, want: "wrap"},
	}
	g := newTableGetopt()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, _, err := parseArgs(g, tt.args)
			got := ""
			if err != nil {
				got = err.Error()
			} else if len(ms) == 1 {
				got = table()[ms[0].Index].Long
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
