package squeue

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// sortKey is one -S key. Exactly one of num and str is set: the key of a
// job is computed once per sort, then compared as a number or a string.
type sortKey struct {
	num     func(e *env, j *api.Job) int64
	str     func(e *env, j *api.Job) string
	reverse bool
}

func byInt(f func(j *api.Job) int64) sortKey {
	return sortKey{num: func(_ *env, j *api.Job) int64 { return f(j) }}
}

func byStr(f func(j *api.Job) string) sortKey {
	return sortKey{str: func(_ *env, j *api.Job) string { return f(j) }}
}

// byTime sorts unknown (zero) times last, as Slurm sorts jobs without
// an expected start after those with one.
func byTime(f func(e *env, j *api.Job) time.Time) sortKey {
	return sortKey{num: func(e *env, j *api.Job) int64 {
		t := f(e, j)
		if t.IsZero() {
			return math.MaxInt64
		}
		return t.Unix()
	}}
}

// sortField returns the -S key of letter c, named like the -o letters.
// A switch rather than a map of keys, which every CLI command (this is
// one multi-call binary) would build in its package initialisation.
func sortField(c byte) (sortKey, bool) {
	switch c {
	case 'a':
		return byStr(func(j *api.Job) string { return j.Account }), true
	case 'A':
		return byInt(func(j *api.Job) int64 { return int64(j.ID) }), true
	case 'C':
		return byInt(func(j *api.Job) int64 { return int64(numCPUs(j)) }), true
	case 'D':
		return byInt(func(j *api.Job) int64 { return int64(numNodes(j)) }), true
	case 'e':
		return byTime(func(_ *env, j *api.Job) time.Time { return j.EndTime }), true
	case 'g':
		return byStr(func(j *api.Job) string { return j.Group }), true
	case 'G':
		return byInt(func(j *api.Job) int64 { return int64(j.GroupID) }), true
	case 'i':
		return byInt(func(j *api.Job) int64 { return int64(j.ID) }), true
	case 'j':
		return byStr(func(j *api.Job) string { return j.Name }), true
	case 'l':
		return byInt(func(j *api.Job) int64 { return limitKey(j.TimeLimit) }), true
	case 'L':
		return sortKey{num: func(e *env, j *api.Job) int64 { return limitKey(j.TimeLimit) - e.used(j) }}, true
	case 'M':
		return sortKey{num: func(e *env, j *api.Job) int64 { return e.used(j) }}, true
	case 'N':
		return byStr(func(j *api.Job) string {
			if len(j.Alloc) == 0 {
				return ""
			}
			return j.Alloc[0].Node
		}), true
	case 'p':
		return byInt(func(j *api.Job) int64 { return int64(j.EffPriority) }), true
	case 'P':
		return byStr(func(j *api.Job) string { return j.ShownPartition() }), true
	case 'q':
		return byStr(func(j *api.Job) string { return j.QOS }), true
	case 'Q':
		return byInt(func(j *api.Job) int64 { return int64(j.EffPriority) }), true
	case 'r':
		return byStr(reason), true
	case 'S':
		return byTime(startTime), true
	case 't':
		return byStr(func(j *api.Job) string { return j.State.Short() }), true
	case 'T':
		return byStr(func(j *api.Job) string { return string(j.State) }), true
	case 'u':
		return byStr(func(j *api.Job) string { return j.User }), true
	case 'U':
		return byInt(func(j *api.Job) int64 { return int64(j.UserID) }), true
	case 'V':
		return byTime(func(_ *env, j *api.Job) time.Time { return j.SubmitTime }), true
	case 'y':
		return byInt(func(j *api.Job) int64 { return int64(j.Nice) }), true
	case 'Z':
		return byStr(func(j *api.Job) string { return j.WorkDir }), true
	}
	return sortKey{}, false
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
		reverse := false
		switch tok[0] {
		case '-':
			reverse = true
			tok = tok[1:]
		case '+':
			tok = tok[1:]
		}
		if len(tok) != 1 {
			return nil, api.Invalid("Invalid sort specification: %s", tok)
		}
		k, ok := sortField(tok[0])
		if !ok {
			return nil, api.Invalid("Invalid sort specification: %s", tok)
		}
		k.reverse = reverse
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, api.Invalid("Invalid sort specification: %q", spec)
	}
	return keys, nil
}

// sortJobs orders jobs by keys, then by job id so that the order is the
// same on every run. Each key is computed once per job before sorting:
// with ten thousand jobs that is most of squeue's time otherwise.
func sortJobs(jobs []*api.Job, keys []sortKey, e *env) {
	n, k := len(jobs), len(keys)
	nums := make([]int64, n*k)
	strs := make([]string, n*k)
	for i, j := range jobs {
		for x := range keys {
			if keys[x].num != nil {
				nums[i*k+x] = keys[x].num(e, j)
			} else {
				strs[i*k+x] = keys[x].str(e, j)
			}
		}
	}
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		ia, ib := int(a)*k, int(b)*k
		for x := range keys {
			var c int
			if keys[x].num != nil {
				c = cmp.Compare(nums[ia+x], nums[ib+x])
			} else {
				c = strings.Compare(strs[ia+x], strs[ib+x])
			}
			if c != 0 {
				if keys[x].reverse {
					return -c
				}
				return c
			}
		}
		return cmp.Compare(jobs[a].ID, jobs[b].ID)
	})
	sorted := make([]*api.Job, n)
	for i, o := range order {
		sorted[i] = jobs[o]
	}
	copy(jobs, sorted)
}
