// Package topology models the network between nodes: a tree of switches
// whose leaves hold nodes. It reads the tree from Tide's YAML (the
// `topology.switches` list) and validates it. The topology issue extends
// it with Slurm's topology.conf syntax and the in-node link matrix.
package topology

import (
	"errors"
	"fmt"
	"sort"

	"github.com/tide-hpc/tide/hostlist"
)

// SwitchConfig is one switch as written in the config: leaf switches name
// Nodes, upper switches name their child Switches (hostlist expressions).
type SwitchConfig struct {
	Name     string `mapstructure:"name" json:"name"`
	Nodes    string `mapstructure:"nodes" json:"nodes,omitempty"`
	Switches string `mapstructure:"switches" json:"switches,omitempty"`
}

// Tree is a validated switch tree.
type Tree struct {
	leafOf   map[string]string
	parent   map[string]string
	switches []string
}

// Build validates the switch list against the known nodes: every switch
// has a unique name, a leaf's nodes exist and sit in one leaf only, child
// switches exist, and the parent links form no cycle. All problems are
// reported together.
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
	for _, s := range cfg {
		if s.Nodes != "" && s.Switches != "" {
			errs = append(errs, fmt.Errorf("topology: switch %q has both nodes and switches", s.Name))
		}
		nodes, err := hostlist.Expand(s.Nodes)
		if err != nil {
			errs = append(errs, fmt.Errorf("topology: switch %q: %w", s.Name, err))
		}
		for _, n := range nodes {
			if known != nil && !known[n] {
				errs = append(errs, fmt.Errorf("topology: switch %q names unknown node %q", s.Name, n))
				continue
			}
			if prev, ok := t.leafOf[n]; ok {
				errs = append(errs, fmt.Errorf("topology: node %q is in two leaf switches (%s and %s)", n, prev, s.Name))
				continue
			}
			t.leafOf[n] = s.Name
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
	return t, nil
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
