// Package envlist is a process environment under construction: "K=V"
// entries that keep the order in which each variable was first set,
// with a later set replacing the value in place. sbatch captures the
// caller's environment with it and tided builds a job's on top of that;
// both run once per job, so it keeps the callers' own "K=V" strings
// whole rather than splitting and joining each.
package envlist

import "strings"

// List is an ordered environment. The zero List is empty and ready.
type List struct {
	entries []string       // "K=V", in first-set order
	index   map[string]int // K → its entry
}

// New returns a List with room for size variables.
func New(size int) *List {
	return &List{entries: make([]string, 0, size), index: make(map[string]int, size)}
}

// FromEntries returns the List of entries, an environment such as
// os.Environ returns: entries without '=' or with an empty name are
// dropped, and a variable given twice keeps its first place and its last
// value.
func FromEntries(entries []string) *List {
	l := New(len(entries))
	for _, kv := range entries {
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" {
			l.SetEntry(k, kv)
		}
	}
	return l
}

// Set sets k to v.
func (l *List) Set(k, v string) { l.SetEntry(k, k+"="+v) }

// SetEntry sets k to the value of kv, which must be k + "=" + value.
func (l *List) SetEntry(k, kv string) {
	if i, ok := l.index[k]; ok {
		l.entries[i] = kv
		return
	}
	if l.index == nil {
		l.index = make(map[string]int)
	}
	l.index[k] = len(l.entries)
	l.entries = append(l.entries, kv)
}

// Entry returns k's "K=V" entry.
func (l *List) Entry(k string) (string, bool) {
	i, ok := l.index[k]
	if !ok {
		return "", false
	}
	return l.entries[i], true
}

// Has reports whether k is set.
func (l *List) Has(k string) bool {
	_, ok := l.index[k]
	return ok
}

// Each calls fn with each variable's name, value and entry, in order.
func (l *List) Each(fn func(k, v, kv string)) {
	for _, kv := range l.entries {
		k, v, _ := strings.Cut(kv, "=")
		fn(k, v, kv)
	}
}

// Entries returns the "K=V" entries in order. The slice is the List's
// own: set nothing more on the List while the caller uses it.
func (l *List) Entries() []string { return l.entries }
