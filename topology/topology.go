package topology

import (
	"errors"
	"fmt"
	"sort"

	"github.com/tide-hpc/tide/hostlist"
)

// Unreachable is the HopDistance between nodes that share no switch (or
// that the tree does not name): larger than any real distance, yet small
// enough that sums over a few thousand pairs cannot overflow an int.
const Unreachable = 1 << 20

// SwitchConfig is one switch as written in the config: leaf switches name
// Nodes, upper switches name their child Switches (hostlist expressions).
type SwitchConfig struct {
	Name     string `mapstructure:"name" json:"name" yaml:"name"`
	Nodes    string `mapstructure:"nodes" json:"nodes,omitempty" yaml:"nodes,omitempty"`
	Switches string `mapstructure:"switches" json:"switches,omitempty" yaml:"switches,omitempty"`
}

// Tree is a validated switch tree. Build fills every map once; the
// methods only read them, so a Tree is safe for concurrent use. All
// methods accept a nil *Tree (no topology) and then answer as for an
// empty tree. Slices returned by the methods are shared: do not modify.
type Tree struct {
	leafOf   map[string]string
	parent   map[string]string
	switches []string

	children   map[string][]string // child switches, sorted
	level      map[string]int      // leaf = 0, else 1 + highest child level
	nodesUnder map[string][]string // all nodes below a switch, sorted
	ancestors  map[string][]string // per leaf: the leaf, its parent, …, the root
	chainIdx   map[string][]int32  // per node: its ancestors as indexes into switches
	leaves     []string            // switches without child switches, sorted
	roots      []string            // switches without a parent, sorted
	nodes      []string            // every node of the tree, sorted
}

// Build validates the switch list against the known nodes: every switch
// has a unique name, a leaf's nodes exist and sit in one leaf only, child
// switches exist, and the parent links form no cycle. All problems are
// reported together. A nil known map accepts every node name. A switch
// with neither nodes nor switches is an (empty) leaf. A forest (several
// roots) is valid: nodes under different roots are Unreachable.
func Build(cfg []SwitchConfig, known map[string]bool) (*Tree, error) {
	t := &Tree{leafOf: map[string]string{}, parent: map[string]string{}}
	var errs []error
	names := map[string]bool{}
	for _, s := range cfg {
		if s.Name == "" {
			errs = append(errs, errors.New("topology: switch without a name"))
			continue
		}
		if names[s.Name] {
			errs = append(errs, fmt.Errorf("topology: switch %q defined twice", s.Name))
		}
		names[s.Name] = true
		t.switches = append(t.switches, s.Name)
	}
	direct := map[string][]string{} // leaf -> nodes as written
	for _, s := range cfg {
		if s.Nodes != "" && s.Switches != "" {
			errs = append(errs, fmt.Errorf("topology: switch %q has both nodes and switches", s.Name))
		}
		nodes, err := hostlist.Expand(s.Nodes)
		if err != nil {
			errs = append(errs, fmt.Errorf("topology: switch %q: %w", s.Name, err))
		}
		var unknown []string
		for _, n := range nodes {
			if known != nil && !known[n] {
				unknown = append(unknown, n)
				continue
			}
			if prev, ok := t.leafOf[n]; ok {
				errs = append(errs, fmt.Errorf("topology: node %q is in two leaf switches (%s and %s)", n, prev, s.Name))
				continue
			}
			t.leafOf[n] = s.Name
			direct[s.Name] = append(direct[s.Name], n)
		}
		switch {
		case len(unknown) == 1:
			errs = append(errs, fmt.Errorf("topology: switch %q names unknown node %q", s.Name, unknown[0]))
		case len(unknown) > 1: // one line, not one per node of a mistyped range
			errs = append(errs, fmt.Errorf("topology: switch %q names %d unknown nodes %s", s.Name, len(unknown), hostlist.Compress(unknown)))
		}
		children, err := hostlist.Expand(s.Switches)
		if err != nil {
			errs = append(errs, fmt.Errorf("topology: switch %q: %w", s.Name, err))
		}
		for _, c := range children {
			if !names[c] {
				errs = append(errs, fmt.Errorf("topology: switch %q names unknown switch %q", s.Name, c))
				continue
			}
			if prev, ok := t.parent[c]; ok {
				errs = append(errs, fmt.Errorf("topology: switch %q has two parents (%s and %s)", c, prev, s.Name))
				continue
			}
			t.parent[c] = s.Name
		}
	}
	for _, s := range t.switches {
		seen := map[string]bool{}
		for cur := s; cur != ""; cur = t.parent[cur] {
			if seen[cur] {
				errs = append(errs, fmt.Errorf("topology: switch %q is part of a cycle", s))
				break
			}
			seen[cur] = true
		}
	}
	sort.Strings(t.switches)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t.index(direct)
	return t, nil
}

// index precomputes the query maps of a validated, acyclic tree.
func (t *Tree) index(direct map[string][]string) {
	n := len(t.switches)
	t.children = make(map[string][]string, n)
	t.level = make(map[string]int, n)
	t.nodesUnder = make(map[string][]string, n)
	t.ancestors = make(map[string][]string)
	for c, p := range t.parent {
		t.children[p] = append(t.children[p], c)
	}
	for _, s := range t.switches { // sorted, so leaves and roots come out sorted
		sort.Strings(t.children[s])
		if len(t.children[s]) == 0 {
			t.leaves = append(t.leaves, s)
		}
		if _, ok := t.parent[s]; !ok {
			t.roots = append(t.roots, s)
		}
	}
	// Walk each root depth-first: levels and node sets come from the
	// children, so compute them on the way back up.
	var walk func(s string) int
	walk = func(s string) int {
		lvl := 0
		nodes := append([]string(nil), direct[s]...)
		for _, c := range t.children[s] {
			if l := walk(c) + 1; l > lvl {
				lvl = l
			}
			nodes = append(nodes, t.nodesUnder[c]...)
		}
		sort.Strings(nodes)
		t.level[s] = lvl
		t.nodesUnder[s] = nodes
		return lvl
	}
	for _, r := range t.roots {
		walk(r)
		t.nodes = append(t.nodes, t.nodesUnder[r]...)
	}
	sort.Strings(t.nodes)
	pos := make(map[string]int32, n)
	for i, s := range t.switches {
		pos[s] = int32(i)
	}
	byLeaf := make(map[string][]int32, len(t.leaves))
	for _, l := range t.leaves {
		var chain []string
		var idx []int32
		for cur := l; cur != ""; cur = t.parent[cur] {
			chain = append(chain, cur)
			idx = append(idx, pos[cur])
		}
		t.ancestors[l] = chain
		byLeaf[l] = idx
	}
	t.chainIdx = make(map[string][]int32, len(t.leafOf))
	for node, leaf := range t.leafOf {
		t.chainIdx[node] = byLeaf[leaf]
	}
}

// LeafOf returns the leaf switch of node ("" when the tree does not name
// it or t is nil).
func (t *Tree) LeafOf(node string) string {
	if t == nil {
		return ""
	}
	return t.leafOf[node]
}

// Switches lists the switch names, sorted.
func (t *Tree) Switches() []string {
	if t == nil {
		return nil
	}
	return t.switches
}

// Parent returns the switch above sw; "" for a root or an unknown switch.
func (t *Tree) Parent(sw string) string {
	if t == nil {
		return ""
	}
	return t.parent[sw]
}

// Children returns the switches directly below sw, sorted; nil for a leaf
// (whose nodes NodesUnder lists) or an unknown switch.
func (t *Tree) Children(sw string) []string {
	if t == nil {
		return nil
	}
	return t.children[sw]
}

// NodesUnder returns every node below sw at any depth, sorted: the pool a
// job confined to sw may use. Nil for an unknown or empty switch.
func (t *Tree) NodesUnder(sw string) []string {
	if t == nil {
		return nil
	}
	return t.nodesUnder[sw]
}

// Leaves lists the switches that have no child switches, sorted; these are
// the units `--switches=N` counts.
func (t *Tree) Leaves() []string {
	if t == nil {
		return nil
	}
	return t.leaves
}

// Roots lists the switches without a parent, sorted. More than one root
// means parts of the cluster cannot reach each other through the tree.
func (t *Tree) Roots() []string {
	if t == nil {
		return nil
	}
	return t.roots
}

// Nodes lists every node the tree names, sorted.
func (t *Tree) Nodes() []string {
	if t == nil {
		return nil
	}
	return t.nodes
}

// Level returns sw's height: 0 for a leaf, otherwise one more than its
// highest child (so in an unbalanced tree a switch sits above all of its
// subtrees, as in Slurm's topology/tree). -1 for an unknown switch.
func (t *Tree) Level(sw string) int {
	if t == nil {
		return -1
	}
	if l, ok := t.level[sw]; ok {
		return l
	}
	return -1
}

// Ancestors returns the switches a node's traffic climbs through: its
// leaf first, then each parent up to the root. Nil for a node the tree
// does not name.
func (t *Tree) Ancestors(node string) []string {
	if t == nil {
		return nil
	}
	return t.ancestors[t.leafOf[node]]
}

// AncestorIndexes is Ancestors as positions in Switches(), for callers
// that resolve the tree once per pass into arrays (one map read per
// node instead of one per switch). Nil for a node the tree does not name.
func (t *Tree) AncestorIndexes(node string) []int32 {
	if t == nil {
		return nil
	}
	return t.chainIdx[node]
}

// CommonSwitch returns the lowest switch above both nodes and its Level:
// (leaf, 0) when they share a leaf, ("", -1) when they share no switch or
// either node is not in the tree. The cost is O(depth).
func (t *Tree) CommonSwitch(a, b string) (string, int) {
	ca, cb := t.Ancestors(a), t.Ancestors(b)
	if len(ca) == 0 || len(cb) == 0 {
		return "", -1
	}
	// Both chains end at a root; walk down from the roots while they agree.
	common := ""
	for i, j := len(ca)-1, len(cb)-1; i >= 0 && j >= 0 && ca[i] == cb[j]; i, j = i-1, j-1 {
		common = ca[i]
	}
	if common == "" {
		return "", -1
	}
	return common, t.level[common]
}

// HopDistance is the placement cost between two nodes: 0 for the same
// node, 1 for two nodes of one leaf, 2 × the Level of their common switch
// otherwise (each level climbed up and back down), and Unreachable when
// they share no switch or the tree does not name one of them.
func (t *Tree) HopDistance(a, b string) int {
	if a == b {
		return 0
	}
	_, lvl := t.CommonSwitch(a, b)
	switch {
	case lvl < 0:
		return Unreachable
	case lvl == 0:
		return 1
	}
	return 2 * lvl
}
