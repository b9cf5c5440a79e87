package squeue

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// sortKey is one -S key: a comparison and its direction.
type sortKey struct {
	cmp     func(e *env, a, b *api.Job) int
	reverse bool
}

func byInt(f func(j *api.Job) int64) func(*env, *api.Job, *api.Job) int {
	return func(_ *env, a, b *api.Job) int { return cmp.Compare(f(a), f(b)) }
}

func byStr(f func(j *api.Job) string) func(*env, *api.Job, *api.Job) int {
	return func(_ *env, a, b *api.Job) int { return strings.Compare(f(a), f(b)) }
}

func byTime(f func(e *env, j *api.Job) time.Time) func(*env, *api.Job, *api.Job) int {
	return func(e *env, a, b *api.Job) int { return compareTime(f(e, a), f(e, b)) }
}

// compareTime orders times with the zero time (unknown) last, as Slurm
// sorts jobs without an expected start after those with one.
func compareTime(a, b time.Time) int {
	switch {
	case a.IsZero() && b.IsZero():
		return 0
	case a.IsZero():
		return 1
	case b.IsZero():
		return -1
	}
	return a.Compare(b)
}

// sortFields are the -S letters, named like the -o letters.
var sortFields = map[byte]func(*env, *api.Job, *api.Job) int{
	'a': byStr(func(j *api.Job) string { return j.Account }),
	'A': byInt(func(j *api.Job) int64 { return int64(j.ID) }),
	'C': byInt(func(j *api.Job) int64 { return int64(numCPUs(j)) }),
	'D': byInt(func(j *api.Job) int64 { return int64(numNodes(j)) }),
	'e': byTime(func(_ *env, j *api.Job) time.Time { return j.EndTime }),
	'g': byStr(func(j *api.Job) string { return j.Group }),
	'G': byInt(func(j *api.Job) int64 { return int64(j.GroupID) }),
	'i': byInt(func(j *api.Job) int64 { return int64(j.ID) }),
	'j': byStr(func(j *api.Job) string { return j.Name }),
	'l': byInt(func(j *api.Job) int64 { return limitKey(j.TimeLimit) }),
	'L': func(e *env, a, b *api.Job) int {
		return cmp.Compare(limitKey(a.TimeLimit)-e.used(a), limitKey(b.TimeLimit)-e.used(b))
	},
	'M': func(e *env, a, b *api.Job) int { return cmp.Compare(e.used(a), e.used(b)) },
	'N': byStr(func(j *api.Job) string {
		if len(j.Alloc) == 0 {
			return ""
		}
		return j.Alloc[0].Node
	}),
	'p': byInt(func(j *api.Job) int64 { return int64(j.EffPriority) }),
	'P': byStr(func(j *api.Job) string { return j.Partition }),
	'q': byStr(func(j *api.Job) string { return j.QOS }),
	'Q': byInt(func(j *api.Job) int64 { return int64(j.EffPriority) }),
	'r': byStr(reason),
	'S': byTime(startTime),
	't': byStr(func(j *api.Job) string { return j.State.Short() }),
	'T': byStr(func(j *api.Job) string { return string(j.State) }),
	'u': byStr(func(j *api.Job) string { return j.User }),
	'U': byInt(func(j *api.Job) int64 { return int64(j.UserID) }),
	'V': byTime(func(_ *env, j *api.Job) time.Time { return j.SubmitTime }),
	'y': byInt(func(j *api.Job) int64 { return int64(j.Nice) }),
	'Z': byStr(func(j *api.Job) string { return j.WorkDir }),
}

// limitKey sorts UNLIMITED after every finite limit.
func limitKey(secs int64) int64 {
	if secs == api.Infinite {
		return 1 << 62
	}
	return secs
}

// parseSort parses -S: comma-separated letters, each optionally
// preceded by '+' (ascending, the default) or '-' (descending).
func parseSort(spec string) ([]sortKey, error) {
	var keys []sortKey
	for _, tok := range strings.Split(spec, ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		k := sortKey{}
		switch tok[0] {
		case '-':
			k.reverse = true
			tok = tok[1:]
		case '+':
			tok = tok[1:]
		}
		if len(tok) != 1 || sortFields[tok[0]] == nil {
			return nil, api.Invalid("Invalid sort specification: %s", tok)
		}
		k.cmp = sortFields[tok[0]]
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, api.Invalid("Invalid sort specification: %q", spec)
	}
	return keys, nil
}

// sortJobs orders jobs by keys, then by job id so that the order is the
// same on every run.
func sortJobs(jobs []*api.Job, keys []sortKey, e *env) {
	slices.SortFunc(jobs, func(a, b *api.Job) int {
		for i := range keys {
			c := keys[i].cmp(e, a, b)
			if c != 0 {
				if keys[i].reverse {
					return -c
				}
				return c
			}
		}
		return cmp.Compare(a.ID, b.ID)
	})
}
