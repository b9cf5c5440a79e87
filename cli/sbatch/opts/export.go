package opts

import "strings"

// envSet is an environment that keeps first-insertion order, so that the
// captured environment reads like the caller's. It holds whole "K=V"
// entries: the caller's own strings pass through without being split and
// joined again (sbatch runs in loops; this is on every submission).
type envSet struct {
	entries []string       // "K=V", in first-insertion order
	index   map[string]int // K → its entry
}

func newEnvSet(size int) *envSet {
	return &envSet{entries: make([]string, 0, size), index: make(map[string]int, size)}
}

// setEntry sets kv ("K=V") under key k.
func (e *envSet) setEntry(k, kv string) {
	if i, ok := e.index[k]; ok {
		e.entries[i] = kv
		return
	}
	e.index[k] = len(e.entries)
	e.entries = append(e.entries, kv)
}

func (e *envSet) set(k, v string) { e.setEntry(k, k+"="+v) }

// entry returns K's "K=V" entry.
func (e *envSet) entry(k string) (string, bool) {
	i, ok := e.index[k]
	if !ok {
		return "", false
	}
	return e.entries[i], true
}

// copyTo sets every entry of e in out.
func (e *envSet) copyTo(out *envSet, keep func(kv string) bool) {
	for _, kv := range e.entries {
		if keep == nil || keep(kv) {
			k, _, _ := strings.Cut(kv, "=")
			out.setEntry(k, kv)
		}
	}
}

func (e *envSet) list() []string { return e.entries }

// exportEnv builds the job's environment from --export and the caller's
// environment, as sbatch does:
//
//	"" or ALL    the whole caller environment
//	NONE         only the caller's SLURM_* variables
//	a list       its items in order: ALL merges the caller environment,
//	             NAME copies the caller's NAME, NAME=value sets it; the
//	             caller's SLURM_* variables are added last
//
// A value may be quoted to hold commas (NAME="a,b").
func exportEnv(spec string, environ []string) ([]string, error) {
	caller := newEnvSet(len(environ))
	for _, kv := range environ {
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" {
			caller.setEntry(k, kv)
		}
	}
	out := newEnvSet(0)
	addSlurm := func() {
		caller.copyTo(out, func(kv string) bool { return strings.HasPrefix(kv, "SLURM_") })
	}
	s := strings.TrimSpace(spec)
	switch {
	case s == "" || strings.EqualFold(s, "ALL"):
		return caller.list(), nil
	case strings.EqualFold(s, "NONE"):
		addSlurm()
		return out.list(), nil
	}
	items, err := splitQuoted(s)
	if err != nil {
		return nil, err
	}
	for _, item := range items {
		switch {
		case strings.EqualFold(item, "ALL"):
			caller.copyTo(out, nil)
			continue
		case strings.EqualFold(item, "NONE"):
			return nil, errorf("Invalid --export specification: NONE cannot be combined with variables")
		}
		k, v, hasVal := strings.Cut(item, "=")
		if !validEnvName(k) {
			return nil, errorf("Invalid --export specification: %q is not a variable name", k)
		}
		if hasVal {
			out.set(k, unquote(v))
		} else if kv, ok := caller.entry(k); ok {
			out.setEntry(k, kv)
		}
	}
	addSlurm()
	return out.list(), nil
}

// splitQuoted splits a comma list, keeping commas inside quotes.
func splitQuoted(s string) ([]string, error) {
	var (
		out   []string
		start int
		quote byte
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == ',':
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if quote != 0 {
		return nil, errorf("Invalid --export specification: unmatched %c", quote)
	}
	out = append(out, s[start:])
	var items []string
	for _, it := range out {
		if it = strings.TrimSpace(it); it != "" {
			items = append(items, it)
		}
	}
	if len(items) == 0 {
		return nil, errorf("Invalid --export specification: empty list")
	}
	return items, nil
}

func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case i > 0 && c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return true
}
