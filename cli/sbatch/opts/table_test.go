package opts

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// byNameIndices lists table indices sorted by long name: the order of
// Slurm's own option table, which the parser must behave as if it used.
func byNameIndices() []int {
	t := table()
	idx := make([]int, len(t))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return strings.Compare(t[a].Long, t[b].Long) })
	return idx
}

// sortedGetopt is the reference: a plain parser over the table sorted by
// name, its match indices turned back into table indices.
func sortedGetopt() func([]string) ([]Match, []string, error) {
	order := byNameIndices()
	specs := make([]Spec, len(order))
	for i, ti := range order {
		specs[i] = table()[ti].Spec
	}
	g := NewGetopt(specs)
	return func(args []string) ([]Match, []string, error) {
		ms, rest, err := g.Parse(args)
		for i := range ms {
			ms[i].Index = order[ms[i].Index]
		}
		return ms, rest, err
	}
}

// TestTableGetoptMatchesSortedTable checks every prefix of every long
// name, with and without a value, and every short option letter against
// a parser over the table sorted by name.
func TestTableGetoptMatchesSortedTable(t *testing.T) {
	ref := sortedGetopt()
	g := newTableGetopt()
	var cases [][]string
	for _, o := range table() {
		for n := 1; n <= len(o.Long); n++ {
			p := "--" + o.Long[:n]
			cases = append(cases, []string{p}, []string{p + "=v"}, []string{p, "v"}, []string{"-H", p + "=", "x"})
		}
	}
	for c := 1; c < 256; c++ {
		cases = append(cases, []string{"-" + string(rune(c))}, []string{"-" + string([]byte{byte(c)}) + "v", "w"}, []string{"-H" + string([]byte{byte(c)})})
	}
	cases = append(cases, []string{"--"}, []string{"--bogus"}, []string{"--=x"}, []string{"-"}, []string{"--wrap", "true", "-o", "/dev/null"})
	for _, args := range cases {
		wantMs, wantRest, wantErr := ref(args)
		gotMs, gotRest, gotErr := parseArgs(g, args)
		if diff := cmp.Diff(wantMs, gotMs); diff != "" {
			t.Errorf("%q: matches (-sorted +table):\n%s", args, diff)
		}
		if diff := cmp.Diff(wantRest, gotRest); diff != "" {
			t.Errorf("%q: operands (-sorted +table):\n%s", args, diff)
		}
		if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && *wantErr.(*GetoptError) != *gotErr.(*GetoptError)) {
			t.Errorf("%q: error %v, want %v", args, gotErr, wantErr)
		}
	}
}

// TestDefinedInTableOrder checks the -v listing's order against a walk
// of the table sorted by name, with options known under two names.
func TestDefinedInTableOrder(t *testing.T) {
	sets := [][]string{
		{"--queue=q", "--clusters=c", "--cluster-constraint=x", "--wrap=true"},
		{"--cluster=c", "--cluster-constraint=x", "--account=a", "-o", "out", "--wrap=true"},
		{"-M", "c", "--cluster-constraint=x", "--wrap=true", "--mem=1G", "-N2", "--gpus=1", "-H"},
		{"--wrap=true"},
	}
	for _, args := range sets {
		req, err := Parse(Input{Args: args, Cwd: "/w", Host: "h"})
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		set := map[string]string{}
		for _, d := range req.Defined {
			set[d[0]] = d[1]
		}
		var want [][2]string
		seen := map[string]bool{}
		for _, ti := range byNameIndices() {
			id := table()[ti].id()
			if v, ok := set[id]; ok && !seen[id] {
				seen[id] = true
				want = append(want, [2]string{id, v})
			}
		}
		if diff := cmp.Diff(want, req.Defined); diff != "" {
			t.Errorf("%q: defined (-want +got):\n%s", args, diff)
		}
	}
}

// TestTableEntriesAct checks that every option but --help, --usage and
// --version does exactly one thing, and that names are unique.
func TestTableEntriesAct(t *testing.T) {
	longs, shorts := map[string]bool{}, map[byte]bool{}
	for _, o := range table() {
		n := 0
		for _, has := range []bool{o.set != nil, o.str != nil, o.num != nil, o.secs != nil, o.ignore != nil} {
			if has {
				n++
			}
		}
		if want := map[bool]int{true: 0, false: 1}[o.early]; n != want {
			t.Errorf("--%s has %d actions, want %d", o.Long, n, want)
		}
		if longs[o.Long] || (o.Short != 0 && shorts[o.Short]) {
			t.Errorf("--%s: name used twice", o.Long)
		}
		longs[o.Long], shorts[o.Short] = true, true
	}
}
