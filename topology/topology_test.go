package topology

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBuild(t *testing.T) {
	known := map[string]bool{"gpu01": true, "gpu02": true, "gpu03": true, "gpu04": true}
	tests := []struct {
		name    string
		cfg     []SwitchConfig
		anyNode bool // pass a nil known map
		wantErr []string
	}{
		{name: "two leaves and a root", cfg: []SwitchConfig{
			{Name: "s1", Nodes: "gpu[01-02]"}, {Name: "s2", Nodes: "gpu[03-04]"}, {Name: "top", Switches: "s[1-2]"}}},
		{name: "nil known accepts any node", anyNode: true, cfg: []SwitchConfig{
			{Name: "s2", Nodes: "gpu[03-04],other9"}}},
		{name: "unknown node", cfg: []SwitchConfig{{Name: "s1", Nodes: "gpu[01-05]"}}, wantErr: []string{`unknown node "gpu05"`}},
		{name: "unknown nodes in one line", cfg: []SwitchConfig{{Name: "s1", Nodes: "gpu[01-09]"}}, wantErr: []string{`switch "s1" names 5 unknown nodes gpu[05-09]`}},
		{name: "node in two leaves", cfg: []SwitchConfig{{Name: "s1", Nodes: "gpu01"}, {Name: "s2", Nodes: "gpu01"}}, wantErr: []string{"two leaf switches"}},
		{name: "cycle", cfg: []SwitchConfig{{Name: "a", Switches: "b"}, {Name: "b", Switches: "a"}}, wantErr: []string{`switch "a" is part of a cycle`, `switch "b" is part of a cycle`}},
		{name: "switch is its own child", cfg: []SwitchConfig{{Name: "a", Switches: "a"}}, wantErr: []string{"cycle"}},
		{name: "unknown switch", cfg: []SwitchConfig{{Name: "a", Switches: "zz"}}, wantErr: []string{`unknown switch "zz"`}},
		{name: "duplicate", cfg: []SwitchConfig{{Name: "a"}, {Name: "a"}}, wantErr: []string{"defined twice"}},
		{name: "no name", cfg: []SwitchConfig{{Nodes: "gpu01"}}, wantErr: []string{"switch without a name"}},
		{name: "both nodes and switches", cfg: []SwitchConfig{{Name: "s1", Nodes: "gpu01"}, {Name: "a", Nodes: "gpu02", Switches: "s1"}},
			wantErr: []string{`switch "a" has both nodes and switches`}},
		{name: "two parents", cfg: []SwitchConfig{{Name: "s1", Nodes: "gpu01"}, {Name: "a", Switches: "s1"}, {Name: "b", Switches: "s1"}},
			wantErr: []string{`switch "s1" has two parents (a and b)`}},
		{name: "bad hostlist", cfg: []SwitchConfig{{Name: "s1", Nodes: "gpu[01-"}}, wantErr: []string{`switch "s1"`}},
		{name: "all problems together", cfg: []SwitchConfig{
			{Name: "s1", Nodes: "gpu09"}, {Name: "s2", Switches: "nope"}},
			wantErr: []string{`unknown node "gpu09"`, `unknown switch "nope"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := known
			if tt.anyNode {
				k = nil
			}
			tree, err := Build(tt.cfg, k)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Build succeeded, want errors %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("err = %v, want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tree.LeafOf("gpu03"); got != "s2" {
				t.Errorf("LeafOf(gpu03) = %q, want s2", got)
			}
		})
	}
}

// queryTree is unbalanced and a forest, to catch code that assumes one
// root or equal depth:
//
//	core ── a1 ── s1 (n1 n2), s2 (n3)
//	     ├─ a2 ── s3 (n4 n5)
//	     └─ s5 (n6)
//	s4 (empty)     x1 (m1)
func queryTree(t *testing.T) *Tree {
	t.Helper()
	tree, err := Build([]SwitchConfig{
		{Name: "core", Switches: "a[1-2],s5"},
		{Name: "a1", Switches: "s[1-2]"},
		{Name: "a2", Switches: "s3"},
		{Name: "s1", Nodes: "n[1-2]"},
		{Name: "s2", Nodes: "n3"},
		{Name: "s3", Nodes: "n[4-5]"},
		{Name: "s4"},
		{Name: "s5", Nodes: "n6"},
		{Name: "x1", Nodes: "m1"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func TestTreeSwitchQueries(t *testing.T) {
	tree := queryTree(t)
	tests := []struct {
		name       string
		sw         string
		parent     string
		children   []string
		nodesUnder []string
		level      int
	}{
		{name: "root", sw: "core", children: []string{"a1", "a2", "s5"}, nodesUnder: []string{"n1", "n2", "n3", "n4", "n5", "n6"}, level: 2},
		{name: "aggregation with two leaves", sw: "a1", parent: "core", children: []string{"s1", "s2"}, nodesUnder: []string{"n1", "n2", "n3"}, level: 1},
		{name: "aggregation with one leaf", sw: "a2", parent: "core", children: []string{"s3"}, nodesUnder: []string{"n4", "n5"}, level: 1},
		{name: "leaf", sw: "s1", parent: "a1", nodesUnder: []string{"n1", "n2"}, level: 0},
		{name: "leaf directly under root", sw: "s5", parent: "core", nodesUnder: []string{"n6"}, level: 0},
		{name: "empty leaf and root", sw: "s4", level: 0},
		{name: "lone leaf", sw: "x1", nodesUnder: []string{"m1"}, level: 0},
		{name: "unknown switch", sw: "zz", level: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tree.Parent(tt.sw); got != tt.parent {
				t.Errorf("Parent(%s) = %q, want %q", tt.sw, got, tt.parent)
			}
			if diff := cmp.Diff(tt.children, tree.Children(tt.sw)); diff != "" {
				t.Errorf("Children(%s) (-want +got):\n%s", tt.sw, diff)
			}
			if diff := cmp.Diff(tt.nodesUnder, tree.NodesUnder(tt.sw)); diff != "" {
				t.Errorf("NodesUnder(%s) (-want +got):\n%s", tt.sw, diff)
			}
			if got := tree.Level(tt.sw); got != tt.level {
				t.Errorf("Level(%s) = %d, want %d", tt.sw, got, tt.level)
			}
		})
	}
	if diff := cmp.Diff([]string{"s1", "s2", "s3", "s4", "s5", "x1"}, tree.Leaves()); diff != "" {
		t.Errorf("Leaves (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"core", "s4", "x1"}, tree.Roots()); diff != "" {
		t.Errorf("Roots (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"m1", "n1", "n2", "n3", "n4", "n5", "n6"}, tree.Nodes()); diff != "" {
		t.Errorf("Nodes (-want +got):\n%s", diff)
	}
}

func TestTreeNodeQueries(t *testing.T) {
	tree := queryTree(t)
	tests := []struct {
		name       string
		a, b       string
		common     string
		level      int
		hops       int
		ancestorsA []string
	}{
		{name: "same node", a: "n1", b: "n1", common: "s1", level: 0, hops: 0, ancestorsA: []string{"s1", "a1", "core"}},
		{name: "same leaf", a: "n1", b: "n2", common: "s1", level: 0, hops: 1, ancestorsA: []string{"s1", "a1", "core"}},
		{name: "sibling leaves", a: "n3", b: "n1", common: "a1", level: 1, hops: 2, ancestorsA: []string{"s2", "a1", "core"}},
		{name: "across aggregation", a: "n1", b: "n5", common: "core", level: 2, hops: 4, ancestorsA: []string{"s1", "a1", "core"}},
		{name: "short branch meets deep one at the root", a: "n6", b: "n4", common: "core", level: 2, hops: 4, ancestorsA: []string{"s5", "core"}},
		{name: "different roots", a: "m1", b: "n1", common: "", level: -1, hops: Unreachable, ancestorsA: []string{"x1"}},
		{name: "node not in tree", a: "zz", b: "n1", common: "", level: -1, hops: Unreachable},
		{name: "unknown node with itself", a: "zz", b: "zz", common: "", level: -1, hops: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sw, lvl := tree.CommonSwitch(tt.a, tt.b)
			if sw != tt.common || lvl != tt.level {
				t.Errorf("CommonSwitch(%s, %s) = (%q, %d), want (%q, %d)", tt.a, tt.b, sw, lvl, tt.common, tt.level)
			}
			if sw2, lvl2 := tree.CommonSwitch(tt.b, tt.a); sw2 != sw || lvl2 != lvl {
				t.Errorf("CommonSwitch not symmetric: (%q, %d) one way, (%q, %d) the other", sw, lvl, sw2, lvl2)
			}
			if got := tree.HopDistance(tt.a, tt.b); got != tt.hops {
				t.Errorf("HopDistance(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.hops)
			}
			if got := tree.HopDistance(tt.b, tt.a); got != tt.hops {
				t.Errorf("HopDistance(%s, %s) = %d, want %d", tt.b, tt.a, got, tt.hops)
			}
			if diff := cmp.Diff(tt.ancestorsA, tree.Ancestors(tt.a)); diff != "" {
				t.Errorf("Ancestors(%s) (-want +got):\n%s", tt.a, diff)
			}
			var byIndex []string
			for _, k := range tree.AncestorIndexes(tt.a) {
				byIndex = append(byIndex, tree.Switches()[k])
			}
			if diff := cmp.Diff(tt.ancestorsA, byIndex); diff != "" {
				t.Errorf("AncestorIndexes(%s) as names (-want +got):\n%s", tt.a, diff)
			}
		})
	}
}

// TestNilTree pins the nil contract: a cluster without topology config
// has a nil *Tree and every query must answer "no topology" safely.
func TestNilTree(t *testing.T) {
	var tree *Tree
	if tree.LeafOf("n1") != "" || tree.Parent("s1") != "" || tree.Level("s1") != -1 {
		t.Error("nil tree answered a switch or leaf")
	}
	if tree.Switches() != nil || tree.Children("s1") != nil || tree.NodesUnder("s1") != nil ||
		tree.Leaves() != nil || tree.Roots() != nil || tree.Nodes() != nil || tree.Ancestors("n1") != nil ||
		tree.AncestorIndexes("n1") != nil {
		t.Error("nil tree returned a non-nil slice")
	}
	if sw, lvl := tree.CommonSwitch("n1", "n2"); sw != "" || lvl != -1 {
		t.Errorf("CommonSwitch = (%q, %d), want (\"\", -1)", sw, lvl)
	}
	if got := tree.HopDistance("n1", "n2"); got != Unreachable {
		t.Errorf("HopDistance = %d, want Unreachable", got)
	}
	if got := tree.HopDistance("n1", "n1"); got != 0 {
		t.Errorf("HopDistance(same) = %d, want 0", got)
	}
}

func TestEmptyConfigBuildsEmptyTree(t *testing.T) {
	tree, err := Build(nil, map[string]bool{"n1": true})
	if err != nil {
		t.Fatal(err)
	}
	if tree.LeafOf("n1") != "" || len(tree.Leaves()) != 0 || tree.HopDistance("n1", "n2") != Unreachable {
		t.Errorf("empty tree answered as if it had switches: leaves %v", tree.Leaves())
	}
}

func TestBuildErrorsAreJoined(t *testing.T) {
	_, err := Build([]SwitchConfig{{Name: "s1", Nodes: "x"}, {Name: "s2", Nodes: "y"}}, map[string]bool{})
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 2 {
		t.Fatalf("err = %v, want two joined errors", err)
	}
}
