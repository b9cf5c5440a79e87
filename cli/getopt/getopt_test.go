package getopt

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
	g := New(testSpecs)
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
				if ge := err.(*Error); ge.Pos != tt.errPos {
					t.Errorf("error position = %d, want %d", ge.Pos, tt.errPos)
				}
			}
			if gotErr != tt.err {
				t.Errorf("error = %q, want %q", gotErr, tt.err)
			}
		})
	}
}

// permuteSpecs is a table in the shape of Slurm's query commands: aliases
// of one option (same ID), an option whose aliases follow another
// option, and a short option without a long name.
var permuteSpecs = []Spec{
	{Long: "noconvert", Arg: NoArg},
	{Long: "node", Short: 'w', Arg: RequiredArg, ID: "nodelist"},
	{Long: "nodes", Short: 'w', Arg: RequiredArg, ID: "nodelist"},
	{Long: "nodelist", Short: 'w', Arg: RequiredArg},
	{Long: "noheader", Short: 'h', Arg: NoArg},
	{Long: "jobs", Short: 'j', Arg: OptionalArg},
	{Long: "user", Short: 'u', Arg: RequiredArg},
	{Long: "users", Short: 'u', Arg: RequiredArg, ID: "user"},
	{Long: "usage", Arg: NoArg},
	{Short: 'U', Arg: RequiredArg},
}

func TestGetoptPermute(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		want     []got
		operands []string
		err      string
		errPos   int
	}{
		{name: "options after operands", args: []string{"12", "-h", "13", "--user=bob"},
			want: []got{{"noheader", "", false, 1}, {"user", "bob", true, 3}}, operands: []string{"12", "13"}},
		{name: "optional argument leaves the operand", args: []string{"-j", "5", "-h"},
			want: []got{{"jobs", "", false, 0}, {"noheader", "", false, 2}}, operands: []string{"5"}},
		{name: "double dash keeps earlier operands first", args: []string{"a", "--", "-h", "b"},
			operands: []string{"a", "-h", "b"}},
		{name: "required argument may look like an operand or option", args: []string{"-u", "-h", "x"},
			want: []got{{"user", "-h", true, 0}}, operands: []string{"x"}},
		{name: "prefix of one option's aliases", args: []string{"--node=a"}, want: []got{{"node", "a", true, 0}}},
		{name: "glibc lists the first candidate and the other options",
			args: []string{"--no"}, err: "option '--no' is ambiguous; possibilities: '--noconvert' '--node' '--nodes' '--nodelist' '--noheader'"},
		{name: "a later alias of the first candidate is not listed",
			args: []string{"--us"}, err: "option '--us' is ambiguous; possibilities: '--user' '--usage'"},
		{name: "short option without a long name", args: []string{"-Uml"}, want: []got{{"", "ml", true, 0}}},
		{name: "empty long name matches every option", args: []string{"--=x"}, errPos: 0,
			err: "option '--=x' is ambiguous; possibilities: '--noconvert' '--node' '--nodes' '--nodelist' '--noheader' '--jobs' '--user' '--users' '--usage'"},
		{name: "error after operands", args: []string{"x", "--bogus"}, err: "unrecognized option '--bogus'", errPos: 1},
	}
	g := New(permuteSpecs)
	g.Permute = true
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, ops, err := g.Parse(tt.args)
			var gotMs []got
			for _, m := range ms {
				gotMs = append(gotMs, got{permuteSpecs[m.Index].Long, m.Value, m.HasValue, m.Pos})
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
				if ge := err.(*Error); ge.Pos != tt.errPos {
					t.Errorf("error position = %d, want %d", ge.Pos, tt.errPos)
				}
			}
			if gotErr != tt.err {
				t.Errorf("error = %q, want %q", gotErr, tt.err)
			}
		})
	}
}
