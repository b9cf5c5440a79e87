package ctld

import (
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

// handlePriority is the priority listing (api.PathPriority, sprio):
// the multifactor factors of the pending jobs the caller sees (the job
// list's privacy), computed by the function a pass orders them with,
// and the accounts' usage their fair share reads.
func (s *Server) handlePriority(w http.ResponseWriter, r *http.Request) {
	f, err := api.ParseJobFilter(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	c := s.callerOf(r)
	writeJSON(w, s.priorities(f, c))
}

// priorities builds the priority listing for c.
func (s *Server) priorities(f api.JobFilter, c caller) api.PriorityList {
	f.States = []api.JobState{api.StatePending}
	v := s.jobView(c)
	// Group names come from NSS: looked up before taking the lock.
	var groups []string
	if p := s.cl.Private; (p.Jobs || p.Usage) && !c.admin && c.known {
		groups = s.groupsOf(c)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := api.PriorityList{Now: now, Policy: s.cl.Policy.String(), Jobs: []api.JobPriority{}, Accounts: []api.AccountUsage{}}
	m := s.cl.Scheduler.Priority(s.cl.Policy)
	if m == nil {
		return out
	}
	out.Weights = &api.PriorityWeights{Age: m.AgeWeight, Length: m.LengthWeight, JobSize: m.SizeWeight, Fairshare: m.FairshareWeight,
		MaxAge: int64(m.MaxAge.Seconds()), LengthRef: int64(m.LengthRef.Seconds()), JobSizeRef: m.SizeRef}
	// The fair-share input a pass reads: the usage the last pass left
	// (a pass charges the running jobs up to its own instant first) and
	// the queues' guarantees.
	// The partitions give each job's maximum limit (MaxLimitAs).
	snap := &sched.Snapshot{Partitions: s.partInfos()}
	if s.fair.u != nil {
		snap.Usage = s.fair.u.Map()
	}
	if sh := s.sharing(); sh.Configured {
		snap.Queues = s.queueInfos()
		snap.QOS = sh.QOS
	}
	out.Orders = !snap.ShareMode()
	var jobs []*api.Job
	for _, j := range s.jobs {
		if f.Match(j) && v.sees(j) {
			jobs = append(jobs, j)
		}
	}
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].ID < jobs[b].ID })
	for i, fa := range m.FactorsFor(jobs, snap, now) {
		j := jobs[i]
		out.Jobs = append(out.Jobs, api.JobPriority{JobID: j.ID, Partition: j.Partition, UserID: j.UserID, User: j.User,
			Account: j.Account, Nice: j.Nice, Age: fa.Age, Length: fa.Length, JobSize: fa.Size, Fairshare: fa.Fairshare,
			Priority: fa.Priority})
	}
	out.Accounts = s.visibleUsage(c, groups, snap.Usage)
	return out
}

// visibleUsage lists the accounts' usage c may read: every account,
// or under private_data (jobs or usage) for a regular user only the
// accounts of c's own live jobs and the queues c may submit to, as
// sshare shows a Slurm user only their own associations; groups are
// c's. Called with mu held.
func (s *Server) visibleUsage(c caller, groups []string, usage map[string]float64) []api.AccountUsage {
	total := 0.0
	for _, u := range usage {
		total += u
	}
	keep := func(string) bool { return true }
	if p := s.cl.Private; (p.Jobs || p.Usage) && !c.admin {
		mine := map[string]bool{}
		if c.known {
			for _, j := range s.jobs {
				if j.UserID == c.uid && j.Account != "" {
					mine[j.Account] = true
				}
			}
			for _, q := range s.sharing().Queues {
				if q.Member(c.user, groups) {
					mine[q.Name] = true
				}
			}
		}
		keep = func(a string) bool { return mine[a] }
	}
	out := []api.AccountUsage{}
	for a, u := range usage {
		if !keep(a) {
			continue
		}
		au := api.AccountUsage{Account: a, Usage: u}
		if total > 0 {
			au.Share = u / total
		}
		out = append(out, au)
	}
	slices.SortFunc(out, func(x, y api.AccountUsage) int { return strings.Compare(x.Account, y.Account) })
	return out
}
