package api

import (
	"strconv"
	"strings"
)

// DepState is the state of one dependency item, as scontrol prints it
// after the item.
type DepState string

// Dependency item states. An item that is fulfilled or failed stays so:
// the job it names may be forgotten later, the verdict is not.
const (
	DepUnfulfilled DepState = "unfulfilled"
	DepFulfilled   DepState = "fulfilled"
	DepFailed      DepState = "failed"
)

// Dependency kinds (Slurm 22.05's, without the burst buffer and expand
// kinds Tide has no use for).
const (
	DepAfter      = "after"
	DepAfterAny   = "afterany"
	DepAfterOK    = "afterok"
	DepAfterNotOK = "afternotok"
	DepAfterCorr  = "aftercorr"
	DepSingleton  = "singleton"
)

// DepItem is one condition: Kind on JobID (or on task Task of array
// JobID when HasTask). Minutes is after's "+time" delay.
type DepItem struct {
	Kind    string
	JobID   uint64
	Task    int
	HasTask bool
	Minutes int
	State   DepState
}

// ref is how the item names its job: "12", "7_3" or "12+5".
func (it DepItem) ref() string {
	s := strconv.FormatUint(it.JobID, 10)
	if it.HasTask {
		s += "_" + strconv.Itoa(it.Task)
	}
	if it.Minutes > 0 {
		s += "+" + strconv.Itoa(it.Minutes)
	}
	return s
}

// Dependency is a parsed --dependency: every item must be satisfied, or
// with Any (items joined by '?') one of them.
type Dependency struct {
	Items []DepItem
	Any   bool
}

// ErrDependency is Slurm's message for a dependency on unknown jobs or
// one that cannot be parsed.
const ErrDependency = "Job dependency problem"

// ErrCircularDependency is Slurm's message for a dependency that would
// make jobs wait for each other.
const ErrCircularDependency = "Circular job dependency"

// ParseDependency reads --dependency as Slurm takes it:
// "type:id[:id…]" items joined by ',' (all must hold) or '?' (any may),
// where type is after, afterany, afterok, afternotok or aftercorr, an id
// is a job id, an array task "N_I" or ("after" only) "N+MINUTES", or the
// item is "singleton". Each id may carry its state in parentheses as
// the controller writes it back ("afterok:12(unfulfilled)"). An empty
// string is no dependency (nil).
func ParseDependency(s string) (*Dependency, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	bad := func() (*Dependency, error) {
		return nil, Invalid("Invalid dependency specification: %s", s)
	}
	d := &Dependency{}
	hasComma, hasQ := strings.Contains(s, ","), strings.Contains(s, "?")
	if hasComma && hasQ {
		return bad()
	}
	d.Any = hasQ
	sep := ","
	if hasQ {
		sep = "?"
	}
	for _, item := range strings.Split(s, sep) {
		if strings.TrimSpace(item) == "" {
			return bad()
		}
		kind, rest, _ := strings.Cut(item, ":")
		kind = strings.ToLower(strings.TrimSpace(kind))
		if base, state, ok := cutState(kind); ok && base == DepSingleton {
			if rest != "" {
				return bad()
			}
			d.Items = append(d.Items, DepItem{Kind: DepSingleton, State: state})
			continue
		}
		switch kind {
		case DepAfter, DepAfterAny, DepAfterOK, DepAfterNotOK, DepAfterCorr:
		default:
			return bad()
		}
		if rest == "" {
			return bad()
		}
		for _, ref := range strings.Split(rest, ":") {
			it, ok := parseDepRef(kind, ref)
			if !ok {
				return bad()
			}
			d.Items = append(d.Items, it)
		}
	}
	if len(d.Items) == 0 {
		return bad()
	}
	return d, nil
}

// cutState splits "12(failed)" into "12" and its state; without a
// suffix the state is unfulfilled.
func cutState(s string) (string, DepState, bool) {
	base, suffix, ok := strings.Cut(s, "(")
	if !ok {
		return s, DepUnfulfilled, true
	}
	st := DepState(strings.TrimSuffix(suffix, ")"))
	if !strings.HasSuffix(suffix, ")") || (st != DepUnfulfilled && st != DepFulfilled && st != DepFailed) {
		return "", "", false
	}
	return base, st, true
}

func parseDepRef(kind, ref string) (DepItem, bool) {
	ref, state, ok := cutState(strings.TrimSpace(ref))
	if !ok {
		return DepItem{}, false
	}
	it := DepItem{Kind: kind, State: state}
	ref, delay, hasDelay := strings.Cut(ref, "+")
	if hasDelay {
		n, err := strconv.Atoi(delay)
		if kind != DepAfter || err != nil || n < 0 {
			return DepItem{}, false
		}
		it.Minutes = n
	}
	job, task, hasTask := strings.Cut(ref, "_")
	id, err := strconv.ParseUint(job, 10, 64)
	if err != nil || id == 0 {
		return DepItem{}, false
	}
	it.JobID = id
	if hasTask && task != "*" {
		n, err := strconv.Atoi(task)
		if err != nil || n < 0 {
			return DepItem{}, false
		}
		it.Task, it.HasTask = n, true
	}
	return it, true
}

// String renders the dependency as scontrol shows it: each item with
// its state, "afterok:12(unfulfilled),afterany:13(fulfilled)".
func (d *Dependency) String() string {
	if d == nil {
		return ""
	}
	sep := ","
	if d.Any {
		sep = "?"
	}
	parts := make([]string, len(d.Items))
	for i, it := range d.Items {
		if it.Kind == DepSingleton {
			parts[i] = "singleton(" + string(it.State) + ")"
			continue
		}
		parts[i] = it.Kind + ":" + it.ref() + "(" + string(it.State) + ")"
	}
	return strings.Join(parts, sep)
}

// State combines the items: with Any the dependency is fulfilled when
// one item is and fails when all have failed; otherwise it is fulfilled
// when all are and fails when one has failed.
func (d *Dependency) State() DepState {
	if d == nil || len(d.Items) == 0 {
		return DepFulfilled
	}
	var ok, failed int
	for _, it := range d.Items {
		switch it.State {
		case DepFulfilled:
			ok++
		case DepFailed:
			failed++
		}
	}
	switch {
	case d.Any && ok > 0, !d.Any && ok == len(d.Items):
		return DepFulfilled
	case d.Any && failed == len(d.Items), !d.Any && failed > 0:
		return DepFailed
	}
	return DepUnfulfilled
}

// HasKind reports whether an item is of kind k.
func (d *Dependency) HasKind(k string) bool {
	if d == nil {
		return false
	}
	for _, it := range d.Items {
		if it.Kind == k {
			return true
		}
	}
	return false
}
