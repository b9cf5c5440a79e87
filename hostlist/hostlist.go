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

// Expand turns an expression into host names. Top-level commas separate
// expressions; commas inside brackets separate ranges.
func Expand(expr string) ([]string, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, nil
	}
	parts, err := splitTop(expr)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range parts {
		hosts, err := expandOne(p)
		if err != nil {
			return nil, err
		}
		out = append(out, hosts...)
		if len(out) > MaxHosts {
			return nil, fmt.Errorf("hostlist %q: more than %d hosts", expr, MaxHosts)
		}
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

// expandOne expands a single word that may hold several bracket groups.
func expandOne(word string) ([]string, error) {
	word = strings.TrimSpace(word)
	open := strings.IndexByte(word, '[')
	if open < 0 {
		if strings.ContainsAny(word, "] \t") {
			return nil, fmt.Errorf("hostlist: bad host name %q", word)
		}
		return []string{word}, nil
	}
	closeIdx := strings.IndexByte(word[open:], ']')
	if closeIdx < 0 {
		return nil, fmt.Errorf("hostlist: missing ']' in %q", word)
	}
	closeIdx += open
	prefix, body, rest := word[:open], word[open+1:closeIdx], word[closeIdx+1:]
	nums, err := expandRanges(body, word)
	if err != nil {
		return nil, err
	}
	tails, err := expandOne(rest)
	if rest == "" {
		tails, err = []string{""}, nil
	}
	if err != nil {
		return nil, err
	}
	if len(nums)*len(tails) > MaxHosts {
		return nil, fmt.Errorf("hostlist %q: more than %d hosts", word, MaxHosts)
	}
	out := make([]string, 0, len(nums)*len(tails))
	for _, n := range nums {
		for _, t := range tails {
			out = append(out, prefix+n+t)
		}
	}
	return out, nil
}

func expandRanges(body, word string) ([]string, error) {
	if body == "" {
		return nil, fmt.Errorf("hostlist: empty brackets in %q", word)
	}
	var out []string
	for _, r := range strings.Split(body, ",") {
		lo, hi, found := strings.Cut(r, "-")
		if !found {
			hi = lo
		}
		if !isDigits(lo) || !isDigits(hi) {
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
		width := len(lo)
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%0*d", width, n))
		}
	}
	return out, nil
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
