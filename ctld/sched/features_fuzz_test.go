package sched

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// orOf is "(a0|b0|…)" with n distinct features.
func orOf(n int) string {
	fs := make([]string, n)
	for i := range fs {
		fs[i] = fmt.Sprintf("%c%d", 'a'+i%26, i/26)
	}
	return "(" + strings.Join(fs, "|") + ")"
}

// nestedProduct is "(16 features)&((16)&(…(16)&(17 features)))" with
// levels ANDs: each level multiplied the terms by 16 before the product
// was checked against maxConstraintTerms, so that 3 levels (258 bytes)
// built over a million terms and 5 (362 bytes, well within a
// submission's 1024) asked for gigabytes.
func nestedProduct(levels int) string {
	s := orOf(16) + "&" + orOf(17)
	for range levels {
		s = orOf(16) + "&(" + s + ")"
	}
	return s
}

// TestParseConstraintBoundedWork pins the check of a product's size
// before it is built: a refused constraint costs little memory.
func TestParseConstraintBoundedWork(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ParseConstraint(nestedProduct(3))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrConstraint) {
		t.Fatalf("ParseConstraint(nested product) = %v, want ErrConstraint", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Fatalf("ParseConstraint(nested product) allocated %d bytes before refusing it", n)
	}
}

// constraintSeeds are TestParseConstraint's inputs plus hostile ones:
// products of ORs that multiply past maxConstraintTerms, deep nesting,
// and odd bytes.
func constraintSeeds() []string {
	nested := nestedProduct(3)
	return []string{
		"nvlink", "ib&nvlink", "ib,nvlink", "ib|nvlink", "a|b&c", "(a|b)&c", "[r1|r2]", "[rack1|rack2|rack3]",
		"nvlink&[r1|r2]", "(ib|roce)&containerd", "[a&b]", "NVLink", "cpu.gen-4_x", " a & b ", "  ", "!a", "&a",
		"(a|b", "a&", "a)", "a||b", "a b", "[a|b", "[a|[b|c]]", "[a|b]&[c|d]", "nvlink*2", "[a*2&b*4]",
		nested, orOf(257), orOf(256), orOf(16) + "&" + orOf(16), orOf(16) + "&" + orOf(17),
		strings.Repeat("(", 500) + "a" + strings.Repeat(")", 500), strings.Repeat("a|", 300) + "a",
		strings.Repeat("a&", 300) + "a", "a\x00b", "\xff", "a&\xff", "[(a|b)&(c|d)]", "[a|b]*2", "(a)*2",
		"[a]|[b]", "(a|b)&(a|b)&(a|b)",
	}
}

// FuzzParseConstraint checks that a parsed --constraint stays within
// maxConstraintTerms per alternative, lists the features it names, and
// matches exactly the nodes its parse tree says it matches (the DNF is
// the tree multiplied out); every refusal is ErrConstraint.
func FuzzParseConstraint(f *testing.F) {
	for _, s := range constraintSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConstraint(s)
		if err != nil {
			if !errors.Is(err, ErrConstraint) {
				t.Fatalf("ParseConstraint(%q): error %v is not ErrConstraint", s, err)
			}
			return
		}
		if c == nil {
			if strings.TrimSpace(s) != "" {
				t.Fatalf("ParseConstraint(%q) = nil without an error", s)
			}
			return
		}
		if c.String() != strings.TrimSpace(s) || c.Alternatives() < 1 {
			t.Fatalf("ParseConstraint(%q): String %q, %d alternatives", s, c.String(), c.Alternatives())
		}
		names := c.Names()
		if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
			t.Fatalf("ParseConstraint(%q): names %q", s, names)
		}
		var used []string
		for k, terms := range c.alts {
			if len(terms) == 0 || len(terms) > maxConstraintTerms {
				t.Fatalf("ParseConstraint(%q): alternative %d has %d terms", s, k, len(terms))
			}
			for _, term := range terms {
				if len(term) == 0 || !slices.IsSorted(term) || len(slices.Compact(slices.Clone(term))) != len(term) {
					t.Fatalf("ParseConstraint(%q): alternative %d term %q", s, k, term)
				}
				used = append(used, term...)
			}
			if !c.Match(k, names) {
				t.Fatalf("ParseConstraint(%q): alternative %d does not match a node with every feature", s, k)
			}
		}
		slices.Sort(used)
		if diff := cmp.Diff(names, slices.Compact(used)); diff != "" {
			t.Fatalf("ParseConstraint(%q): Names and terms differ (-names +terms):\n%s", s, diff)
		}
		if c.MatchAny(nil) {
			t.Fatalf("ParseConstraint(%q) matches a node without features", s)
		}
		again, err := ParseConstraint(c.String())
		if err != nil || !reflect.DeepEqual(c.alts, again.alts) {
			t.Fatalf("ParseConstraint(%q) differs when parsed again: %v", s, err)
		}
		checkAgainstTree(t, s, c)
	})
}

// checkAgainstTree compares Match with the parse tree evaluated
// directly, for every node that has some of the constraint's first five
// features, under its first eight alternatives.
func checkAgainstTree(t *testing.T, s string, c *Constraint) {
	t.Helper()
	ps := &cparser{src: strings.TrimSpace(s)}
	root, err := ps.parseOr()
	if err != nil {
		t.Fatalf("ParseConstraint(%q) parsed, its tree did not: %v", s, err)
	}
	alts := []*cnode{nil}
	if b := ps.bracket; b != nil {
		alts = b.kids
		if b.inner != nil {
			alts = []*cnode{b.inner}
		}
	}
	names := c.Names()
	names = names[:min(len(names), 5)]
	alts = alts[:min(len(alts), 8)]
	for mask := range 1 << len(names) {
		var have []string
		for i, n := range names {
			if mask&(1<<i) != 0 {
				have = append(have, n)
			}
		}
		for k, alt := range alts {
			if got, want := c.Match(k, have), evalTree(root, ps.bracket, alt, have); got != want {
				t.Fatalf("ParseConstraint(%q) alternative %d on a node with %q: Match %v, tree %v", s, k, have, got, want)
			}
		}
	}
}

// evalTree evaluates n for a node with features have, the bracket b
// standing for its alternative alt.
func evalTree(n, b, alt *cnode, have []string) bool {
	switch n.op {
	case 'f':
		return slices.Contains(have, n.name)
	case '[':
		return n == b && evalTree(alt, nil, nil, have)
	case '|':
		for _, k := range n.kids {
			if evalTree(k, b, alt, have) {
				return true
			}
		}
		return false
	}
	for _, k := range n.kids {
		if !evalTree(k, b, alt, have) {
			return false
		}
	}
	return true
}
