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

// sortFields are the -S letters, named like the -o letters.
var sortFields = map[byte]sortKey{
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
	'L': {num: func(e *env, j *api.Job) int64 { return limitKey(j.TimeLimit) - e.used(j) }},
	'M': {num: func(e *env, j *api.Job) int64 { return e.used(j) }},
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
		reverse := false
		switch tok[0] {
		case '-':
			reverse = true
			tok = tok[1:]
		case '+':
			tok = tok[1:]
		}
		k, ok := sortFields[tok[0]]
		if len(tok) != 1 || !ok {
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
