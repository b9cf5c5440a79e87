package sinfo

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
)

// layout is a compiled format: the table plus what grouping needs.
type layout struct {
	table  *slurmfmt.Table[*record]
	fields []*nodeField
	// auto marks %#X columns, as wide as their widest value (at least
	// minAutoWidth).
	auto []bool
	// split is set when a column depends on the partition.
	split bool
}

// minAutoWidth is the narrowest %#P/%#N column ("PARTITION", and Slurm's
// minimum node list width).
const minAutoWidth = 9

// stripAuto removes the '#' of "%#P" items, Slurm's notation for "as
// wide as the widest value", and reports which fields had it.
func stripAuto(format string) (string, []bool) {
	var b strings.Builder
	var auto []bool
	for i := 0; i < len(format); i++ {
		c := format[i]
		b.WriteByte(c)
		if c != '%' {
			continue
		}
		if i+1 < len(format) && format[i+1] == '%' {
			b.WriteByte('%')
			i++
			continue
		}
		if i+1 < len(format) && format[i+1] == '#' {
			auto = append(auto, true)
			i++
			continue
		}
		auto = append(auto, false)
	}
	return b.String(), auto
}

// compileLayout compiles a -o format (long=false; extra specs may name
// -O fields, for Tide's own views) or a -O format.
func compileLayout(format string, long bool, e *env, extra ...slurmfmt.Spec) (*layout, error) {
	var f slurmfmt.Format
	var auto []bool
	var err error
	if long {
		f, err = slurmfmt.ParseLong(format)
	} else {
		var s string
		s, auto = stripAuto(format)
		f, err = slurmfmt.ParseShort(s)
	}
	if err != nil {
		return nil, err
	}
	f.Specs = append(f.Specs, extra...)
	l := &layout{auto: make([]bool, len(f.Specs))}
	copy(l.auto, auto)
	l.table, err = slurmfmt.Compile(f, "node", func(name string) (slurmfmt.Field[*record], bool) {
		nf, ok := lookupField(name, long || len(name) > 1)
		if !ok {
			return slurmfmt.Field[*record]{}, false
		}
		l.fields = append(l.fields, nf)
		l.split = l.split || nf.part
		return slurmfmt.Field[*record]{
			Header: nf.header, NoCut: nf.noCut, HeaderNoCut: nf.headerNoCut,
			Value: func(dst []byte, r *record) []byte {
				if len(r.nodes) == 0 && !nf.part {
					return emptyValue(nf, dst)
				}
				return nf.value(e, dst, r)
			},
		}, true
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// emptyValue prints a node field of a partition without nodes.
func emptyValue(nf *nodeField, dst []byte) []byte {
	switch nf.header {
	case "NODES", "CPUS(A/I/O/T)", "NODES(A/I/O/T)", "NODES(A/I)", "GPUS(A/I/T)":
		return nf.value(nil, dst, &record{})
	case "NODELIST", "HOSTNAMES", "NODE_ADDR":
		return dst
	}
	return append(dst, "n/a"...)
}

// filter selects nodes; nil fields select everything.
type filter struct {
	partitions map[string]bool
	nodes      map[string]bool
	states     [][]string
	dead       bool
	responding bool
	reasons    bool // -R: only nodes with a reason or down/drained
}

func (f *filter) active() bool {
	return f.partitions != nil || f.nodes != nil || f.states != nil || f.dead || f.responding
}

func (f *filter) keep(n *api.Node) bool {
	if f.nodes != nil && !f.nodes[n.Name] {
		return false
	}
	if f.dead && n.Responding {
		return false
	}
	if f.responding && !n.Responding {
		return false
	}
	if f.reasons && n.Reason == "" && !n.Drain && n.State != api.NodeDown {
		return false
	}
	if f.states != nil {
		ok := false
		for _, all := range f.states {
			if matchAll(all, n) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// nodeStateNames are the words -t accepts: Tide's states, then Slurm
// states Tide never reports, which scripts may still name and which
// match nothing.
var nodeStateNames = []string{"all", "alloc", "allocated", "down", "drain", "drained", "draining", "drng",
	"idle", "mix", "mixed", "no_respond", "not_responding", "responding", "unk", "unknown",
	"cloud", "comp", "completing", "fail", "failing", "future", "inval", "invalid", "maint",
	"npc", "perfctrs", "planned", "power_down", "power_up", "powered_down", "powering_down",
	"powering_up", "reboot", "reboot_issued", "reboot_requested", "resv", "reserved"}

// parseStates reads -t: states separated by commas match a node in any
// of them, states joined by '&' only a node in all of them (man sinfo).
func parseStates(list string) ([][]string, error) {
	var out [][]string
	for _, group := range strings.Split(list, ",") {
		var all []string
		for _, s := range strings.Split(group, "&") {
			s = strings.ToLower(strings.TrimSpace(s))
			if s == "" {
				continue
			}
			if !slices.Contains(nodeStateNames, s) {
				return nil, api.Invalid("Invalid node state specified: %s", s)
			}
			all = append(all, s)
		}
		if len(all) > 0 {
			out = append(out, all)
		}
	}
	return out, nil
}

// matchAll reports whether n is in every state of all.
func matchAll(all []string, n *api.Node) bool {
	for _, s := range all {
		if !matchState(s, n) {
			return false
		}
	}
	return true
}

// baseState is n's state without its flags (DRAIN, NOT_RESPONDING), as
// Slurm's -t compares them: a drained idle node is idle, a node that
// runs something is allocated or mixed.
func baseState(n *api.Node) string {
	switch {
	case n.State == api.NodeDown:
		return "down"
	case n.State == api.NodeUnknown:
		return "unk"
	case n.State == api.NodeAllocated:
		return "alloc"
	case n.State == api.NodeMixed || busy(n):
		return "mix"
	}
	return "idle"
}

func matchState(s string, n *api.Node) bool {
	base := baseState(n)
	switch s {
	case "all":
		return true
	case "alloc", "allocated":
		return base == "alloc"
	case "mix", "mixed":
		return base == "mix"
	case "idle":
		return base == "idle"
	case "down":
		return base == "down"
	case "drain":
		return n.Drain
	case "drained":
		return n.Drain && base != "alloc" && base != "mix"
	case "draining", "drng":
		return n.Drain && (base == "alloc" || base == "mix")
	case "unk", "unknown":
		return base == "unk"
	case "no_respond", "not_responding":
		return !n.Responding
	case "responding":
		return n.Responding
	}
	return false // a Slurm state Tide never reports
}

// buildRecords groups nodes into output lines. In node view (-N) every
// node of every partition is a line; otherwise nodes of a partition that
// share all key values of the format share a line.
func buildRecords(list *api.NodeList, l *layout, f *filter, nodeView bool, e *env) []*record {
	byName := make(map[string]*api.Node, len(list.Nodes))
	for i := range list.Nodes {
		byName[list.Nodes[i].Name] = &list.Nodes[i]
	}
	var keys []*nodeField
	for _, nf := range l.fields {
		if nf.key != nil && (!nf.exactOnly || e.exact) {
			keys = append(keys, nf)
		}
	}
	var out []*record
	index := map[string]*record{}
	member := map[*record]map[string]bool{}
	var kb strings.Builder
	for pi := range list.Partitions {
		p := &list.Partitions[pi]
		if f.partitions != nil && !f.partitions[p.Name] {
			continue
		}
		found := false
		for _, name := range p.Nodes {
			n := byName[name]
			if n == nil || !f.keep(n) {
				continue
			}
			found = true
			if nodeView {
				out = append(out, &record{part: p, partIdx: pi, nodes: []*api.Node{n}})
				continue
			}
			kb.Reset()
			if l.split {
				kb.WriteString(strconv.Itoa(pi))
			}
			for _, k := range keys {
				kb.WriteByte(0)
				kb.WriteString(k.key(e, n))
			}
			key := kb.String()
			r := index[key]
			if r == nil {
				r = &record{partIdx: pi}
				if l.split {
					r.part = p
				}
				index[key] = r
				member[r] = map[string]bool{}
				out = append(out, r)
			}
			if !member[r][n.Name] {
				member[r][n.Name] = true
				r.nodes = append(r.nodes, n)
			}
		}
		if !found && !nodeView && l.split && !f.active() && !f.reasons {
			out = append(out, &record{part: p, partIdx: pi})
		}
	}
	return out
}

// sortKey is one -S key.
type sortKey struct {
	cmp     func(a, b *record) int
	reverse bool
}

func firstNode(r *record) string {
	if len(r.nodes) == 0 {
		return ""
	}
	return r.nodes[0].Name
}

// natural compares host names as Slurm does: at the first difference,
// digit runs compare by value ("gpu2" < "gpu10").
func natural(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] == b[i] {
			continue
		}
		if isDigit(a[i]) && isDigit(b[i]) {
			x, y := leadingNum(a[i:]), leadingNum(b[i:])
			if x != y {
				return cmp.Compare(x, y)
			}
		}
		return strings.Compare(a, b)
	}
	return cmp.Compare(len(a), len(b))
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func leadingNum(s string) int64 {
	var n int64
	for i := 0; i < len(s) && isDigit(s[i]) && i < 18; i++ {
		n = n*10 + int64(s[i]-'0')
	}
	return n
}

func stateOf(r *record) int {
	if len(r.nodes) == 0 {
		return 0
	}
	return stateRank(r.nodes[0])
}

func partNameOf(r *record) string {
	if r.part == nil {
		return ""
	}
	return r.part.Name
}

func minOf(r *record, f func(n *api.Node) int64) int64 {
	if len(r.nodes) == 0 {
		return 0
	}
	v := f(r.nodes[0])
	for _, n := range r.nodes[1:] {
		v = min(v, f(n))
	}
	return v
}

// parseSort parses -S: letters with optional '+', '-' (descending) or
// '#' (partitions in configuration order, for P).
func parseSort(spec string) ([]sortKey, error) {
	var keys []sortKey
	for _, tok := range strings.Split(spec, ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		k := sortKey{}
		order := false
		for len(tok) > 1 && strings.ContainsRune("+-#", rune(tok[0])) {
			switch tok[0] {
			case '-':
				k.reverse = true
			case '#':
				order = true
			}
			tok = tok[1:]
		}
		switch tok {
		case "P", "R":
			if order {
				k.cmp = func(a, b *record) int { return cmp.Compare(a.partIdx, b.partIdx) }
			} else {
				k.cmp = func(a, b *record) int { return strings.Compare(partNameOf(a), partNameOf(b)) }
			}
		case "t", "T":
			k.cmp = func(a, b *record) int { return cmp.Compare(stateOf(a), stateOf(b)) }
		case "N", "n":
			k.cmp = func(a, b *record) int { return natural(firstNode(a), firstNode(b)) }
		case "D":
			k.cmp = func(a, b *record) int { return cmp.Compare(len(a.nodes), len(b.nodes)) }
		case "c":
			k.cmp = func(a, b *record) int { return cmp.Compare(minOf(a, cpus), minOf(b, cpus)) }
		case "m":
			k.cmp = func(a, b *record) int { return cmp.Compare(minOf(a, memory), minOf(b, memory)) }
		case "O":
			k.cmp = func(a, b *record) int { return cmp.Compare(minOf(a, cpuLoad), minOf(b, cpuLoad)) }
		case "E":
			k.cmp = func(a, b *record) int { return strings.Compare(reasonOf(a), reasonOf(b)) }
		case "l":
			k.cmp = func(a, b *record) int { return cmp.Compare(limitOf(a), limitOf(b)) }
		default:
			return nil, api.Invalid("Invalid sort specification: %s", tok)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, api.Invalid("Invalid sort specification: %q", spec)
	}
	return keys, nil
}

func reasonOf(r *record) string {
	if len(r.nodes) == 0 {
		return ""
	}
	return r.nodes[0].Reason
}

func limitOf(r *record) int64 {
	if r.part == nil || r.part.MaxTime <= 0 {
		return 1 << 62
	}
	return r.part.MaxTime
}

// sortRecords orders records by keys, then by partition order and first
// node so that output is stable.
func sortRecords(rs []*record, keys []sortKey) {
	slices.SortStableFunc(rs, func(a, b *record) int {
		for _, k := range keys {
			if c := k.cmp(a, b); c != 0 {
				if k.reverse {
					return -c
				}
				return c
			}
		}
		if c := cmp.Compare(a.partIdx, b.partIdx); c != 0 {
			return c
		}
		return natural(firstNode(a), firstNode(b))
	})
}

// fitAuto widens %#X columns to their widest value as printed (escaped).
func (l *layout) fitAuto(rs []*record) {
	var buf []byte
	for i := range l.table.Columns {
		c := &l.table.Columns[i]
		if !l.auto[i] {
			continue
		}
		w := max(minAutoWidth, len(c.Header))
		for _, r := range rs {
			buf = c.AppendValue(buf[:0], r)
			w = max(w, len(buf))
		}
		l.table.Columns[i].Width = w
	}
}
