package topology

import "strings"

// NodeAddr returns node's address in the tree the way Slurm's
// topology/tree plugin writes SLURM_TOPOLOGY_ADDR and
// SLURM_TOPOLOGY_ADDR_PATTERN: one component per switch level, from the
// highest level of the whole tree down to the leaves, then the node
// ("s0.s4.tux1" with pattern "switch.switch.node"). A level the node's
// chain skips (an unbalanced tree) is an empty component, as in Slurm.
//
// Without switches the address is the node alone with pattern "node".
// A node the tree does not name gets the same (Slurm's slurmd fails to
// build an address for it and sets none).
func (t *Tree) NodeAddr(node string) (addr, pattern string) {
	anc := t.Ancestors(node)
	if len(anc) == 0 {
		return node, "node"
	}
	top := 0
	for _, s := range t.switches {
		top = max(top, t.level[s])
	}
	at := make([]string, top+1)
	for _, s := range anc {
		at[t.level[s]] = s
	}
	var a, p strings.Builder
	for lvl := top; lvl >= 0; lvl-- {
		a.WriteString(at[lvl])
		a.WriteByte('.')
		p.WriteString("switch.")
	}
	a.WriteString(node)
	p.WriteString("node")
	return a.String(), p.String()
}
