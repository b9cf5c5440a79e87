package api

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// patternItem is one "%" item of an output pattern: optional width
// digits, then one character (none at the end of the pattern).
var patternItem = regexp.MustCompile(`(?s)%([0-9]*)(.?)`)

// referencePattern expands p the simplest way, item by item with a
// regular expression and without ExpandPattern's cut at
// maxExpandedPattern, so that the fuzz target can compare the two.
func referencePattern(p string, v PatternVars) string {
	return patternItem.ReplaceAllStringFunc(p, func(m string) string {
		sub := patternItem.FindStringSubmatch(m)
		digits, c := strings.TrimLeft(sub[1], "0"), sub[2]
		width := MaxPatternWidth
		if len(digits) <= 2 {
			n, _ := strconv.Atoi("0" + digits)
			width = min(n, MaxPatternWidth)
		}
		pad := func(n uint64) string {
			s := strconv.FormatUint(n, 10)
			return strings.Repeat("0", max(width-len(s), 0)) + s
		}
		switch c {
		case "%":
			return "%"
		case "j":
			return pad(v.JobID)
		case "A":
			if v.ArrayJobID != 0 {
				return pad(v.ArrayJobID)
			}
			return pad(v.JobID)
		case "a":
			if v.ArrayTask >= 0 {
				return pad(uint64(v.ArrayTask))
			}
			return pad(4294967294)
		case "x":
			return v.Name
		case "u":
			return v.User
		case "N":
			return v.Node
		}
		return m
	})
}

// FuzzExpandPattern checks ExpandPattern against referencePattern: the
// same text when that is short, else a prefix of it no longer than
// maxExpandedPattern plus one item, whatever widths and values say.
func FuzzExpandPattern(f *testing.F) {
	for _, p := range []string{
		"slurm-%j.out", "slurm-%A_%a.out", "%x-%u-%N.log", "%%j", "%5j", "%0999999999j", "%99999999999999999999999a",
		"%", "%5", "100%", "%q", "%.j", "%%%", "%-5j", "/home/%u/%x/%j/%N/%A/%a", strings.Repeat("%x", 1000),
		strings.Repeat("%10j", 2000), strings.Repeat("a", 10000) + "%j", "%\x00j", "%\xffj", "%é", "%\n",
		"%00000000000000000001j", "%10%", "%j%", "no pattern",
	} {
		f.Add(p, "job", "alice", "gpu01", uint64(12), uint64(0), -1)
	}
	f.Add("%A_%a-%x", strings.Repeat("n", 5000), "u\x00", "\xff", uint64(1<<63), uint64(7), 3)
	f.Add("%a", "", "", "", uint64(0), uint64(0), int(^uint(0)>>1))
	f.Fuzz(func(t *testing.T, p, name, user, node string, job, arrayJob uint64, task int) {
		v := PatternVars{JobID: job, Name: name, User: user, Node: node, ArrayJobID: arrayJob, ArrayTask: task}
		got := ExpandPattern(p, v)
		want := referencePattern(p, v)
		if !strings.Contains(p, "%") && got != p {
			t.Fatalf("ExpandPattern(%q) = %q, want the pattern itself", p, got)
		}
		if len(want) <= maxExpandedPattern {
			if got != want {
				t.Fatalf("ExpandPattern(%q, %+v) = %q, want %q", p, v, got, want)
			}
			return
		}
		bound := maxExpandedPattern + max(len(p), len(name), len(user), len(node), 20)
		if len(got) > bound || len(got) < maxExpandedPattern || !strings.HasPrefix(want, got) {
			t.Fatalf("ExpandPattern(%q, %+v): %d bytes, not a prefix of the %d-byte expansion of at least %d and at most %d bytes",
				p, v, len(got), len(want), maxExpandedPattern, bound)
		}
	})
}
