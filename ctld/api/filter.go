package api

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Values encodes f as query parameters for GET /api/v1/jobs and
// /api/v1/accounting.
func (f JobFilter) Values() url.Values {
	v := url.Values{}
	if len(f.IDs) > 0 {
		ids := make([]string, len(f.IDs))
		for i, id := range f.IDs {
			ids[i] = strconv.FormatUint(id, 10)
		}
		v.Set("id", strings.Join(ids, ","))
	}
	if len(f.Tasks) > 0 {
		ts := make([]string, len(f.Tasks))
		for i, t := range f.Tasks {
			ts[i] = t.String()
		}
		v.Set("task", strings.Join(ts, ","))
	}
	set := func(k string, xs []string) {
		if len(xs) > 0 {
			v.Set(k, strings.Join(xs, ","))
		}
	}
	set("user", f.Users)
	set("name", f.Names)
	set("partition", f.Partitions)
	set("account", f.Accounts)
	if len(f.States) > 0 {
		st := make([]string, len(f.States))
		for i, s := range f.States {
			st[i] = string(s)
		}
		v.Set("state", strings.Join(st, ","))
	}
	// RFC3339Nano prints whole seconds as RFC3339 does, and keeps a
	// fraction that ParseJobFilter accepted.
	if !f.Since.IsZero() {
		v.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		v.Set("until", f.Until.UTC().Format(time.RFC3339Nano))
	}
	if f.All {
		v.Set("all", "1")
	}
	set("cluster", f.Clusters)
	return v
}

// ParseJobFilter decodes query parameters written by Values.
func ParseJobFilter(v url.Values) (JobFilter, error) {
	var f JobFilter
	split := func(k string) []string {
		s := v.Get(k)
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	for _, s := range split("id") {
		id, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return f, Invalid("invalid job id specified: %s", s)
		}
		f.IDs = append(f.IDs, id)
	}
	for _, s := range split("task") {
		// The tasks are listed one by one: a query of a few bytes
		// ("7_[0-3999999]", many times over) must not list millions.
		ids, tasks, err := parseJobIDs(s, MaxArrayTaskLimit-len(f.Tasks))
		if err != nil || len(ids) > 0 {
			return f, Invalid("invalid array task specified: %s", s)
		}
		f.Tasks = append(f.Tasks, tasks...)
	}
	f.Users = split("user")
	f.Names = split("name")
	f.Partitions = split("partition")
	f.Accounts = split("account")
	for _, s := range split("state") {
		st, err := ParseJobState(s)
		if err != nil {
			return f, err
		}
		f.States = append(f.States, st)
	}
	for k, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if s := v.Get(k); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return f, Invalid("invalid %s time %q", k, s)
			}
			*dst = t
		}
	}
	f.All = v.Get("all") == "1"
	f.Clusters = split("cluster")
	return f, nil
}

// Match reports whether j passes the filter's id, user, name, partition,
// account and state tests (not the time window). With IDs or Tasks the
// job must match one of them (see MatchID).
func (f *JobFilter) Match(j *Job) bool {
	if (len(f.IDs) > 0 || len(f.Tasks) > 0) && !f.MatchID(j) {
		return false
	}
	if len(f.Users) > 0 && !slices.Contains(f.Users, j.User) && !slices.Contains(f.Users, strconv.FormatUint(uint64(j.UserID), 10)) {
		return false
	}
	if len(f.Names) > 0 && !slices.Contains(f.Names, j.Name) {
		return false
	}
	if len(f.Partitions) > 0 && !slices.ContainsFunc(f.Partitions, j.InPartition) {
		return false
	}
	if len(f.Accounts) > 0 && !slices.Contains(f.Accounts, j.Account) {
		return false
	}
	if len(f.States) > 0 {
		ok := false
		for _, s := range f.States {
			if s == j.State {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// MatchID reports whether j is one of the filter's jobs: its id or array
// id is in IDs, or it is (or its meta record still holds) a task in
// Tasks.
func (f *JobFilter) MatchID(j *Job) bool {
	if slices.Contains(f.IDs, j.ID) || (j.ArrayJobID != 0 && slices.Contains(f.IDs, j.ArrayJobID)) {
		return true
	}
	if j.ArrayJobID == 0 {
		return false
	}
	for _, t := range f.Tasks {
		if t.JobID != j.ArrayJobID {
			continue
		}
		if j.IsArrayMeta() && j.ArrayPending.Contains(t.Task) || !j.IsArrayMeta() && j.ArrayTaskID == t.Task {
			return true
		}
	}
	return false
}
