package sched

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
)

// Node features (sbatch -C/--constraint). A constraint is parsed once
// into disjunctive normal form: a node matches when it has every feature
// of at least one term. Slurm's syntax is accepted:
//
//	a          the node has feature a
//	a&b, a,b   AND (the comma is Slurm's older spelling)
//	a|b        OR, per node: each node has a or b
//	(a|b)&c    grouping
//	[a|b]      matching OR: every node of the job has the SAME
//	           alternative (one rack, one CPU generation)
//
// & binds tighter than |. Node counts (a*2) and the multiple-count form
// [a*2&b*4] are refused at submit with a clear error; so is !a.

// maxConstraintTerms bounds the DNF of one constraint (parentheses
// multiply terms out), so a hostile string cannot make the scheduler
// compare thousands of sets per node.
const maxConstraintTerms = 256

// ErrConstraint is the error class of an unparseable --constraint.
var ErrConstraint = errors.New("invalid constraint")

// Constraint is a parsed --constraint. It is immutable once built and may
// be shared between passes and goroutines.
type Constraint struct {
	text string
	// alts holds one DNF per alternative of a matching-OR bracket ([a|b]);
	// without brackets it has exactly one entry. Each term is a sorted,
	// duplicate-free feature set.
	alts [][][]string
	// names lists every feature the constraint mentions, sorted.
	names []string
}

// ParseConstraint parses a Slurm --constraint string. The controller
// calls it at submit (a syntax error there is "Invalid feature
// specification"); the scheduler parses again from the job, so that jobs
// restored from the database need no stored parse. An empty string gives
// (nil, nil): no constraint.
func ParseConstraint(s string) (*Constraint, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	ps := &cparser{src: s}
	root, err := ps.parseOr()
	if err == nil && ps.pos < len(ps.src) {
		err = ps.errorf("unexpected %q", ps.src[ps.pos])
	}
	if err != nil {
		return nil, err
	}
	c := &Constraint{text: s}
	alts := []*cnode{nil}
	if ps.bracket != nil {
		alts = ps.bracket.kids
		if ps.bracket.inner != nil {
			alts = []*cnode{ps.bracket.inner}
		}
	}
	for _, alt := range alts {
		d, ok := dnf(root, ps.bracket, alt)
		if !ok {
			return nil, fmt.Errorf("%w %q: more than %d alternatives after expanding parentheses", ErrConstraint, s, maxConstraintTerms)
		}
		c.alts = append(c.alts, d)
	}
	seen := map[string]bool{}
	collectNames(root, seen)
	for n := range seen {
		c.names = append(c.names, n)
	}
	slices.Sort(c.names)
	return c, nil
}

// String returns the constraint as the user wrote it.
func (c *Constraint) String() string {
	if c == nil {
		return ""
	}
	return c.text
}

// Names lists, sorted, every feature the constraint mentions: the
// controller checks at submit that the partition has each of them.
func (c *Constraint) Names() []string {
	if c == nil {
		return nil
	}
	return slices.Clone(c.names)
}

// Alternatives is the number of matching-OR alternatives ([a|b] has 2);
// 1 for a constraint without brackets.
func (c *Constraint) Alternatives() int {
	if c == nil {
		return 1
	}
	return len(c.alts)
}

// Match reports whether a node with features (any order) satisfies
// alternative alt of the constraint. A nil constraint matches every node.
func (c *Constraint) Match(alt int, features []string) bool {
	if c == nil {
		return true
	}
	if alt < 0 || alt >= len(c.alts) {
		return false
	}
	for _, term := range c.alts[alt] {
		ok := true
		for _, f := range term {
			if !slices.Contains(features, f) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// MatchAny reports whether a node satisfies some alternative: whether it
// could ever run part of the job.
func (c *Constraint) MatchAny(features []string) bool {
	if c == nil {
		return true
	}
	for k := range c.alts {
		if c.Match(k, features) {
			return true
		}
	}
	return false
}

// cnode is a parse tree node: a feature name, an AND or OR of kids, or
// the matching-OR bracket (kids are its alternatives; inner is set
// instead when the bracket holds no top-level OR and just groups).
type cnode struct {
	op    byte // 'f' feature, '&', '|', '['
	name  string
	kids  []*cnode
	inner *cnode
}

// cparser is a recursive-descent parser over the constraint string:
//
//	or     = and { "|" and }
//	and    = factor { ("&" | ",") factor }
//	factor = name | "(" or ")" | "[" or "]"
type cparser struct {
	src     string
	pos     int
	bracket *cnode
	inBrack bool
}

func (ps *cparser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w %q at offset %d: %s", ErrConstraint, ps.src, ps.pos, fmt.Sprintf(format, args...))
}

func (ps *cparser) peek() byte {
	for ps.pos < len(ps.src) && ps.src[ps.pos] == ' ' {
		ps.pos++
	}
	if ps.pos >= len(ps.src) {
		return 0
	}
	return ps.src[ps.pos]
}

func (ps *cparser) parseOr() (*cnode, error) {
	return ps.parseList('|', ps.parseAnd)
}

func (ps *cparser) parseAnd() (*cnode, error) {
	return ps.parseList('&', ps.parseFactor)
}

// parseList parses operands of op (',' counts as '&') with next; one
// operand is returned as is.
func (ps *cparser) parseList(op byte, next func() (*cnode, error)) (*cnode, error) {
	first, err := next()
	if err != nil {
		return nil, err
	}
	kids := []*cnode{first}
	for c := ps.peek(); c == op || op == '&' && c == ','; c = ps.peek() {
		ps.pos++
		k, err := next()
		if err != nil {
			return nil, err
		}
		kids = append(kids, k)
	}
	if len(kids) == 1 {
		return first, nil
	}
	return &cnode{op: op, kids: kids}, nil
}

func (ps *cparser) parseFactor() (*cnode, error) {
	switch c := ps.peek(); c {
	case 0:
		return nil, ps.errorf("a feature name is missing at the end")
	case '(':
		ps.pos++
		n, err := ps.parseOr()
		if err != nil {
			return nil, err
		}
		if ps.peek() != ')' {
			return nil, ps.errorf("missing )")
		}
		ps.pos++
		return ps.count(n)
	case '[':
		if ps.inBrack {
			return nil, ps.errorf("brackets cannot nest")
		}
		if ps.bracket != nil {
			return nil, ps.errorf("only one [...] group is supported")
		}
		ps.pos++
		ps.inBrack = true
		inner, err := ps.parseOr()
		ps.inBrack = false
		if err != nil {
			return nil, err
		}
		if ps.peek() != ']' {
			return nil, ps.errorf("missing ]")
		}
		ps.pos++
		b := &cnode{op: '['}
		if inner.op == '|' {
			b.kids = inner.kids
		} else {
			b.inner = inner
		}
		ps.bracket = b
		return ps.count(b)
	case '!':
		return nil, ps.errorf("negated features (!) are not supported")
	case '&', '|', ',', ')', ']', '*':
		return nil, ps.errorf("a feature name is missing before %q", c)
	}
	start := ps.pos
	for ps.pos < len(ps.src) && !strings.ContainsRune("&|,()[]*! ", rune(ps.src[ps.pos])) {
		ps.pos++
	}
	return ps.count(&cnode{op: 'f', name: ps.src[start:ps.pos]})
}

// count refuses a node count after a factor (a*2): Tide cannot yet ask
// for "at least N nodes with a" inside one allocation.
func (ps *cparser) count(n *cnode) (*cnode, error) {
	if ps.peek() != '*' {
		return n, nil
	}
	return nil, ps.errorf("node counts (feature*N) are not supported; ask for the feature on every node or split the job")
}

// dnf expands n into OR-of-AND terms, with the bracket node b replaced by
// its alternative alt. ok is false when the expansion would pass
// maxConstraintTerms: the size of a product is checked before it is
// built, as each level of "(a|…|p)&(…)" multiplies it, and a few
// hundred bytes of constraint would otherwise ask for gigabytes.
func dnf(n, b, alt *cnode) (terms [][]string, ok bool) {
	switch n.op {
	case 'f':
		return [][]string{{n.name}}, true
	case '[':
		if n == b {
			return dnf(alt, nil, nil)
		}
		return nil, true
	case '|':
		var out [][]string
		for _, k := range n.kids {
			kt, ok := dnf(k, b, alt)
			if !ok || len(out)+len(kt) > maxConstraintTerms {
				return nil, false
			}
			out = append(out, kt...)
		}
		return dedupTerms(out), true
	}
	out := [][]string{{}}
	for _, k := range n.kids {
		kt, ok := dnf(k, b, alt)
		if !ok || len(out)*len(kt) > maxConstraintTerms {
			return nil, false
		}
		next := make([][]string, 0, len(out)*len(kt))
		for _, a := range out {
			for _, t := range kt {
				term := append(slices.Clone(a), t...)
				slices.Sort(term)
				next = append(next, slices.Compact(term))
			}
		}
		out = next
	}
	return dedupTerms(out), true
}

// dedupTerms drops repeated terms, keeping the first of each.
func dedupTerms(ts [][]string) [][]string {
	out := ts[:0]
	for _, t := range ts {
		if !slices.ContainsFunc(out, func(o []string) bool { return slices.Equal(o, t) }) {
			out = append(out, t)
		}
	}
	return out
}

func collectNames(n *cnode, seen map[string]bool) {
	if n.op == 'f' {
		seen[n.name] = true
	}
	if n.inner != nil {
		collectNames(n.inner, seen)
	}
	for _, k := range n.kids {
		collectNames(k, seen)
	}
}

// SortedFeatures returns fs sorted: fs itself when it already is (the
// snapshot shares it read-only), else a sorted copy. Controllers use it
// to fill NodeInfo.Features without a copy per node and pass.
func SortedFeatures(fs []string) []string {
	if slices.IsSorted(fs) {
		return fs
	}
	out := slices.Clone(fs)
	slices.Sort(out)
	return out
}

// featureFilter keeps only nodes whose features satisfy the job's
// --constraint (the alternative being tried for a matching OR). It is
// static: it reads only the node's facts.
type featureFilter struct{}

func (featureFilter) Name() string             { return "features" }
func (featureFilter) Relevant(r *Request) bool { return r.Features != nil || r.FeatureErr != "" }
func (featureFilter) Check(r *Request, _ *Slot, n *NodeState) api.DetailCode {
	if r.FeatureErr != "" || !r.Features.Match(r.FeatureAlt, n.Info.Features) {
		return api.DetailNodeFeatures
	}
	return ""
}

// constraintOf parses (once per pass and constraint string) the job's
// --constraint into r.Features, or sets r.FeatureErr when it does not
// parse: such a job (stored before the check at submit existed) can then
// never start and is pending for BadConstraints.
func (c *chain) constraintOf(r *Request) {
	r.Features, r.FeatureErr = nil, ""
	if r.Job == nil || r.Job.Constraint == "" {
		return
	}
	if c.constraints == nil {
		c.constraints = map[string]constraintEntry{}
	}
	e, ok := c.constraints[r.Job.Constraint]
	if !ok {
		cons, err := ParseConstraint(r.Job.Constraint)
		e = constraintEntry{c: cons}
		if err != nil {
			e.err = err.Error()
		}
		c.constraints[r.Job.Constraint] = e
	}
	r.Features, r.FeatureErr = e.c, e.err
	if r.FeatureAlt >= r.Features.Alternatives() {
		r.FeatureAlt = 0
	}
}

// constraintEntry is one cached parse.
type constraintEntry struct {
	c   *Constraint
	err string
}

// findFeatures is find for every alternative of a matching-OR
// constraint in turn: the first alternative under which the job fits now
// wins, so all its nodes share that alternative. When none fits it
// settles on the first alternative that would fit on empty usable nodes
// (else with every node up, else the first) and runs find once more, so
// that p.hist, the diagnosis and a backfill reservation all describe that
// one alternative.
func (p *pass) findFeatures(r *Request) bool {
	if r.Features.Alternatives() < 2 {
		return p.find(r)
	}
	for k := range r.Features.Alternatives() {
		r.FeatureAlt, p.topoWait = k, false
		if p.find(r) {
			return true
		}
	}
	r.FeatureAlt = p.likelyAlt(r)
	p.topoWait = false
	return p.find(r)
}

// likelyAlt is the first matching-OR alternative under which r would fit
// on the empty usable nodes, else on all nodes up, else 0. It leaves
// r.FeatureAlt as it found it.
func (p *pass) likelyAlt(r *Request) int {
	saved := r.FeatureAlt
	defer func() { r.FeatureAlt = saved }()
	for _, allUp := range []bool{false, true} {
		for k := range r.Features.Alternatives() {
			if r.FeatureAlt = k; p.fitsEmpty(r, allUp) {
				return k
			}
		}
	}
	return 0
}

// explainFeatures says why no node of the partition can ever satisfy the
// constraint ("" when some node can).
func (p *pass) explainFeatures(r *Request) string {
	part := p.parts[r.Part].info.Name
	if r.FeatureErr != "" {
		return r.FeatureErr
	}
	if r.Features == nil {
		return ""
	}
	for _, i := range p.parts[r.Part].members {
		if r.Features.MatchAny(p.nodes[i].Info.Features) {
			return ""
		}
	}
	return fmt.Sprintf("no node of partition %s has features matching --constraint=%s", part, r.Features)
}
