// Package hostlist expands and compresses Slurm hostlist expressions such as
// "gpu[001-016,020]" or "rack[1-2]-n[01-04]".
//
// Expansion keeps the order written; compression groups names that share a
// prefix and suffix and differ in one zero-padded number, which is what
// Slurm prints in squeue, sinfo and SLURM_JOB_NODELIST.
package hostlist

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// MaxHosts bounds one expansion so that a typo like n[1-999999999] is an
// error instead of an out-of-memory crash.
const MaxHosts = 1 << 20

// MaxBytes bounds the total length of the names one expansion builds:
// a long prefix before a large range ("<a kilobyte>[0-999999]") would
// otherwise turn a short expression into a gigabyte of names.
const MaxBytes = 64 << 20

// Expand turns an expression into host names. Top-level commas separate
// expressions; commas inside brackets separate ranges. The whole result
// is sized before any name is built, so an expression that would
// exceed MaxHosts or MaxBytes costs no more than its own length.
func Expand(expr string) ([]string, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, nil
	}
	parts, err := splitTop(expr)
	if err != nil {
		return nil, err
	}
	words := make([]word, 0, len(parts))
	hosts, size := 0, 0
	for _, p := range parts {
		w, err := parseWord(p)
		if err != nil {
			return nil, err
		}
		n, b := w.size()
		// n is at most MaxHosts+1 and b at most MaxBytes+1 (both
		// saturate), so the sums cannot overflow.
		hosts, size = hosts+n, size+b
		if hosts > MaxHosts {
			return nil, fmt.Errorf("hostlist %q: more than %d hosts", expr, MaxHosts)
		}
		if size > MaxBytes {
			return nil, fmt.Errorf("hostlist %q: host names longer than %d bytes in all", expr, MaxBytes)
		}
		words = append(words, w)
	}
	out := make([]string, 0, hosts)
	for _, w := range words {
		out = w.appendHosts(out)
	}
	return out, nil
}

func splitTop(expr string) ([]string, error) {
	var parts []string
	depth, start := 0, 0
	for i, c := range expr {
		switch c {
		case '[':
			depth++
			if depth > 1 {
				return nil, fmt.Errorf("hostlist %q: nested brackets", expr)
			}
		case ']':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("hostlist %q: unbalanced ']'", expr)
			}
		case ',':
			if depth == 0 {
				parts = append(parts, expr[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("hostlist %q: missing ']'", expr)
	}
	parts = append(parts, expr[start:])
	for _, p := range parts {
		if strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("hostlist %q: empty host name", expr)
		}
	}
	return parts, nil
}

// word is one top-level item of an expression: literal text and bracket
// groups in turn ("r[1-2]-n[01-04]" is "r", a group, "-n", a group).
// Its hosts are every combination of one number per group, the last
// group varying fastest.
type word struct {
	lits   []string // len(groups)+1 pieces of literal text around the groups
	groups [][]numRange
}

// numRange is lo-hi of one bracket group, printed zero-padded to width.
type numRange struct{ lo, hi, width int }

// parseWord parses a word that may hold several bracket groups.
func parseWord(s string) (word, error) {
	s = strings.TrimSpace(s)
	var w word
	rest := s
	for {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			break
		}
		closeIdx := strings.IndexByte(rest[open:], ']')
		if closeIdx < 0 {
			return word{}, fmt.Errorf("hostlist: missing ']' in %q", s)
		}
		closeIdx += open
		rs, err := parseRanges(rest[open+1:closeIdx], s)
		if err != nil {
			return word{}, err
		}
		w.lits = append(w.lits, rest[:open])
		w.groups = append(w.groups, rs)
		rest = rest[closeIdx+1:]
	}
	w.lits = append(w.lits, rest)
	for _, l := range w.lits {
		if strings.ContainsAny(l, "] \t") {
			return word{}, fmt.Errorf("hostlist: bad host name %q", s)
		}
	}
	return w, nil
}

func parseRanges(body, word string) ([]numRange, error) {
	if body == "" {
		return nil, fmt.Errorf("hostlist: empty brackets in %q", word)
	}
	var out []numRange
	for _, r := range strings.Split(body, ",") {
		lo, hi, found := strings.Cut(r, "-")
		if !found {
			hi = lo
		}
		if !isDigits(lo) || !isDigits(hi) {
			if strings.Trim(lo+hi, "0123456789") == "" && lo != "" && hi != "" {
				return nil, fmt.Errorf("hostlist: range %q in %q is too large (numbers have at most 9 digits)", r, word)
			}
			return nil, fmt.Errorf("hostlist: bad range %q in %q", r, word)
		}
		a, _ := strconv.Atoi(lo)
		b, _ := strconv.Atoi(hi)
		if b < a {
			return nil, fmt.Errorf("hostlist: range %q in %q runs backwards", r, word)
		}
		if b-a >= MaxHosts {
			return nil, fmt.Errorf("hostlist: range %q in %q is too large", r, word)
		}
		out = append(out, numRange{lo: a, hi: b, width: len(lo)})
	}
	return out, nil
}

// size returns how many hosts w expands to and a bound on their total
// length, each saturated just past MaxHosts and MaxBytes.
func (w word) size() (hosts, bytes int) {
	hosts = 1
	for _, g := range w.groups {
		n := 0
		for _, r := range g {
			n = min(n+r.hi-r.lo+1, MaxHosts+1)
		}
		hosts = min(hosts*n, MaxHosts+1)
	}
	return hosts, min(hosts*w.maxLen(), MaxBytes+1)
}

// maxLen is the length of w's longest host name.
func (w word) maxLen() int {
	n := 0
	for _, l := range w.lits {
		n += len(l)
	}
	for _, g := range w.groups {
		digits := 0
		for _, r := range g {
			digits = max(digits, r.width, len(strconv.Itoa(r.hi)))
		}
		n += digits
	}
	return n
}

// appendHosts appends w's hosts to out; size has bounded them.
func (w word) appendHosts(out []string) []string {
	if len(w.groups) == 0 {
		return append(out, w.lits[0])
	}
	nums := make([][]string, len(w.groups))
	for g, rs := range w.groups {
		for _, r := range rs {
			for n := r.lo; n <= r.hi; n++ {
				nums[g] = append(nums[g], fmt.Sprintf("%0*d", r.width, n))
			}
		}
	}
	idx := make([]int, len(w.groups))
	longest := w.maxLen()
	var b strings.Builder
	for {
		b.Reset()
		b.Grow(longest)
		for g := range w.groups {
			b.WriteString(w.lits[g])
			b.WriteString(nums[g][idx[g]])
		}
		b.WriteString(w.lits[len(w.groups)])
		out = append(out, b.String())
		g := len(idx) - 1
		for ; g >= 0; g-- {
			if idx[g]++; idx[g] < len(nums[g]) {
				break
			}
			idx[g] = 0
		}
		if g < 0 {
			return out
		}
	}
}

func isDigits(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// name splits a host name into prefix, number (with its width) and suffix
// around its last run of digits.
type name struct {
	prefix, suffix string
	num, width     int
	hasNum         bool
}

func splitName(h string) name {
	end := len(h)
	for end > 0 && (h[end-1] < '0' || h[end-1] > '9') {
		end--
	}
	start := end
	for start > 0 && h[start-1] >= '0' && h[start-1] <= '9' {
		start--
	}
	if start == end || end-start > 9 {
		return name{prefix: h}
	}
	n, _ := strconv.Atoi(h[start:end])
	return name{prefix: h[:start], suffix: h[end:], num: n, width: end - start, hasNum: true}
}

// Compress returns the shortest Slurm-style expression for hosts, sorted the
// way Slurm sorts them (by prefix, then number). Duplicates are dropped.
func Compress(hosts []string) string {
	if len(hosts) == 0 {
		return ""
	}
	names := make([]name, 0, len(hosts))
	seen := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		names = append(names, splitName(h))
	}
	sort.SliceStable(names, func(i, j int) bool {
		a, b := names[i], names[j]
		if a.prefix != b.prefix {
			return a.prefix < b.prefix
		}
		if a.suffix != b.suffix {
			return a.suffix < b.suffix
		}
		if a.width != b.width {
			return a.width < b.width
		}
		return a.num < b.num
	})
	var groups []string
	for i := 0; i < len(names); {
		n := names[i]
		if !n.hasNum {
			groups = append(groups, n.prefix)
			i++
			continue
		}
		j := i
		for j < len(names) && names[j].hasNum && names[j].prefix == n.prefix &&
			names[j].suffix == n.suffix && names[j].width == n.width {
			j++
		}
		groups = append(groups, group(names[i:j]))
		i = j
	}
	return strings.Join(groups, ",")
}

func group(ns []name) string {
	n := ns[0]
	if len(ns) == 1 {
		return fmt.Sprintf("%s%0*d%s", n.prefix, n.width, n.num, n.suffix)
	}
	var ranges []string
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1].num == ns[j].num+1 {
			j++
		}
		if i == j {
			ranges = append(ranges, fmt.Sprintf("%0*d", n.width, ns[i].num))
		} else {
			ranges = append(ranges, fmt.Sprintf("%0*d-%0*d", n.width, ns[i].num, n.width, ns[j].num))
		}
		i = j + 1
	}
	return n.prefix + "[" + strings.Join(ranges, ",") + "]" + n.suffix
}
