package ui

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tide-hpc/tide/ctld/api"
)

// The queue page: the jobs in memory that the caller sees, filtered
// by user, queue, partition and state, ordered as the scheduler looks
// at them, one page of PageSize rows at a time (10,000 pending jobs
// are one sort and one page, not 10,000 rows).

// PageSize is how many jobs one queue page lists.
const PageSize = 100

// stateFilters are the state filter's choices, in the order the page
// offers them, and the states each keeps.
var stateFilters = []stateFilter{
	{"active", "pending and running", func(s api.JobState) bool { return !s.Terminal() }},
	{"pending", "pending", func(s api.JobState) bool { return s == api.StatePending }},
	{"running", "running", func(s api.JobState) bool { return s.Active() }},
	{"finished", "finished", func(s api.JobState) bool { return s.Terminal() }},
	{"all", "all", func(api.JobState) bool { return true }},
}

// stateFilter is one choice of the state filter.
type stateFilter struct {
	key, label string
	keep       func(api.JobState) bool
}

// findState returns the index of the state filter key, -1 for none.
func findState(key string) int {
	return slices.IndexFunc(stateFilters, func(s stateFilter) bool { return s.key == key })
}

// queueFilter is the page's query.
type queueFilter struct {
	User, Queue, Partition, State string
	Page                          int
}

// maxFilterValue bounds a filter's text (user, queue and partition
// names are short).
const maxFilterValue = 256

// parseQueueFilter reads and checks the query.
func parseQueueFilter(q url.Values) (queueFilter, error) {
	f := queueFilter{User: strings.TrimSpace(q.Get("user")), Queue: q.Get("queue"), Partition: q.Get("partition"),
		State: q.Get("state"), Page: 1}
	for name, v := range map[string]string{"user": f.User, "queue": f.Queue, "partition": f.Partition} {
		if len(v) > maxFilterValue || !utf8.ValidString(v) {
			return f, errBadParam(name, v, "a name of at most 256 bytes of UTF-8")
		}
	}
	if f.State == "" {
		f.State = "active"
	}
	if findState(f.State) < 0 {
		keys := make([]string, len(stateFilters))
		for i, s := range stateFilters {
			keys[i] = s.key
		}
		return f, errBadParam("state", f.State, "one of "+strings.Join(keys, ", "))
	}
	if p := q.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return f, errBadParam("page", p, "a page number from 1")
		}
		f.Page = n
	}
	return f, nil
}

// query is f as a query string, with state and page replaced.
func (f queueFilter) query(state string, page int) string {
	v := url.Values{}
	if f.User != "" {
		v.Set("user", f.User)
	}
	if f.Queue != "" {
		v.Set("queue", f.Queue)
	}
	if f.Partition != "" {
		v.Set("partition", f.Partition)
	}
	if state != "active" {
		v.Set("state", state)
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	if len(v) == 0 {
		return Prefix + "queue"
	}
	return Prefix + "queue?" + v.Encode()
}

// queueView is the queue page's data.
type queueView struct {
	F          queueFilter
	States     []stateTab
	Queues     []string
	Partitions []string
	Users      []string
	Rows       []jobRow
	// From, To and Total number the rows shown; Page of Pages.
	From, To, Total, Page, Pages int
	Prev, Next                   string
}

// stateTab is one state filter with its count.
type stateTab struct {
	Key, Label, Href string
	Count            int
	Active           bool
}

// jobRow is one job of the queue.
type jobRow struct {
	ID, Href, Name, User, Queue, QOS, Partition string
	State, StateClass                           string
	GPUs, Nodes, Time, TimeTitle                string
	Priority                                    string
	Reason, ReasonHelp, Detail                  string
	Start, StartTitle                           string
	Mine                                        bool
	// Count is how many jobs the row stands for (an array's pending
	// tasks), shown when more than one.
	Count int
}

func (h *Handler) serveQueue(w http.ResponseWriter, r *http.Request) {
	h.page(w, r, "queue", "Queue", func(rq *request) (string, any, error) {
		f, err := parseQueueFilter(r.URL.Query())
		if err != nil {
			return "", nil, err
		}
		v := h.buildQueue(rq, f)
		return "Queue", v, nil
	})
}

func (h *Handler) buildQueue(rq *request, f queueFilter) queueView {
	jf := api.JobFilter{All: true}
	if f.User != "" {
		jf.Users = []string{f.User}
	}
	if f.Queue != "" {
		jf.Accounts = []string{f.Queue}
	}
	if f.Partition != "" {
		jf.Partitions = []string{f.Partition}
	}
	jl := h.src.Jobs(rq.r, jf)
	v := queueView{F: f, Partitions: rq.cl.Partitions}
	for _, q := range h.src.Queues(rq.r).Queues {
		v.Queues = append(v.Queues, q.Name)
	}
	// The users for the filter's suggestions: those of every job, or
	// (with a user filter) of that one alone, which is all the list
	// holds then.
	users := map[string]bool{}
	counts := make([]int, len(stateFilters))
	keep := stateFilters[findState(f.State)].keep
	var sel []*api.Job
	for i := range jl.Jobs {
		j := &jl.Jobs[i]
		users[j.User] = true
		for k, s := range stateFilters {
			if s.keep(j.State) {
				counts[k] += jobCount(j)
			}
		}
		if keep(j.State) {
			sel = append(sel, j)
		}
	}
	for u := range users {
		v.Users = append(v.Users, u)
	}
	slices.Sort(v.Users)
	for i, s := range stateFilters {
		v.States = append(v.States, stateTab{Key: s.key, Label: s.label, Count: counts[i], Href: f.query(s.key, 1), Active: s.key == f.State})
	}
	slices.SortFunc(sel, queueOrder)
	v.Total = len(sel)
	v.Pages = max((v.Total+PageSize-1)/PageSize, 1)
	v.Page = min(f.Page, v.Pages)
	lo := (v.Page - 1) * PageSize
	hi := min(lo+PageSize, v.Total)
	if v.Total > 0 {
		v.From, v.To = lo+1, hi
	}
	if v.Page > 1 {
		v.Prev = f.query(f.State, v.Page-1)
	}
	if v.Page < v.Pages {
		v.Next = f.query(f.State, v.Page+1)
	}
	now := jl.Now
	v.Rows = make([]jobRow, 0, hi-lo)
	for _, j := range sel[lo:hi] {
		v.Rows = append(v.Rows, rowOf(j, now, rq.who.User))
	}
	return v
}

// queueOrder puts running jobs first (longest running first), then
// pending ones as the scheduler considers them (highest priority
// first, then the earlier planned start, then submission), then
// finished ones (latest end first).
func queueOrder(a, b *api.Job) int {
	rank := func(j *api.Job) int {
		switch {
		case j.State.Active():
			return 0
		case j.State == api.StatePending:
			return 1
		}
		return 2
	}
	if c := cmp.Compare(rank(a), rank(b)); c != 0 {
		return c
	}
	switch rank(a) {
	case 0:
		return cmp.Or(a.StartTime.Compare(b.StartTime), cmp.Compare(a.ID, b.ID))
	case 1:
		return cmp.Or(cmp.Compare(b.EffPriority, a.EffPriority), startCompare(a, b), cmp.Compare(a.ID, b.ID))
	}
	return cmp.Or(b.EndTime.Compare(a.EndTime), cmp.Compare(a.ID, b.ID))
}

// startCompare orders known planned starts before unknown ones.
func startCompare(a, b *api.Job) int {
	switch {
	case a.ExpectedStart.IsZero() && b.ExpectedStart.IsZero():
		return 0
	case a.ExpectedStart.IsZero():
		return 1
	case b.ExpectedStart.IsZero():
		return -1
	}
	return a.ExpectedStart.Compare(b.ExpectedStart)
}

// rowOf is one job as the queue lists it.
func rowOf(j *api.Job, now time.Time, me string) jobRow {
	r := jobRow{ID: j.ArrayID(), Href: Prefix + "jobs/" + strconv.FormatUint(j.ID, 10), Name: j.Name, User: j.User,
		Queue: j.Account, QOS: j.QOS, Partition: j.Partition, State: string(j.State), StateClass: stateClass(j.State),
		Priority: strconv.FormatUint(uint64(j.EffPriority), 10), Mine: j.User == me && me != "", Count: jobCount(j)}
	if j.PartitionList != "" && j.State == api.StatePending {
		r.Partition = j.PartitionList
	}
	if g := j.AllocGPUs(); g > 0 && j.State.Active() {
		r.GPUs = strconv.Itoa(g)
		if j.Sliced() {
			r.GPUs += " slices"
		}
	} else {
		r.GPUs = gpuRequest(j)
	}
	switch {
	case len(j.Alloc) > 0 && j.State.Active():
		r.Nodes = strings.Join(j.NodeNames(), ",")
	default:
		r.Nodes = strconv.Itoa(j.ReqNodes())
	}
	switch {
	case j.State.Active() && !j.StartTime.IsZero():
		r.Time = fmtSecs(int64(now.Sub(j.StartTime) / time.Second))
		r.TimeTitle = "running since " + fmtTime(j.StartTime) + ", limit " + fmtLimit(j.TimeLimit)
	case j.State == api.StatePending:
		r.Time = fmtSecs(int64(now.Sub(j.SubmitTime) / time.Second))
		r.TimeTitle = "waiting since " + fmtTime(j.SubmitTime)
	case j.State.Terminal() && !j.EndTime.IsZero():
		r.Time = fmtTime(j.EndTime)
		r.TimeTitle = "ended; exit " + j.Exit.String()
	}
	r.Reason, r.ReasonHelp = reasonText(j)
	r.Detail = j.ReasonDetail
	if j.State == api.StatePending {
		switch {
		case !j.ExpectedStart.IsZero():
			r.Start = fmtTime(j.ExpectedStart)
			r.StartTitle = "the scheduler's plan: the earliest start it could reserve, in " +
				fmtSecs(int64(j.ExpectedStart.Sub(now)/time.Second))
		case !j.BeginTime.IsZero() && j.BeginTime.After(now):
			r.Start = fmtTime(j.BeginTime)
			r.StartTitle = "not before its --begin time"
		default:
			r.Start = "N/A"
			r.StartTitle = "no planned start: the scheduler found no time when the running jobs' limits free enough for it (or a hold, dependency or quota keeps it waiting)"
		}
	}
	return r
}
