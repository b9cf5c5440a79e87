package ctld

// Usage accounting of steps (issue 22): what the nodes measured of each
// step, for sacct's usage fields. A node reports its part of a step
// (api.NodeUsage): the batch step's totals with the job's end (in the
// finished job report, so they are stored in the same commit as the
// end and resent until acknowledged), an srun step's totals when its
// tasks there ended, and running values every acct_gather_frequency.
// Final reports are queued for the next write (they ride along with
// the flush: pendingBatch); running ones are kept in memory for sstat.
// The store keeps one row per job, step and node; listUsage sums them
// into Slurm's step statistics (api.SummarizeUsage).

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"

	"github.com/tide-hpc/tide/ctld/api"
)

// usageStore is what usage accounting needs from the store; the SQLite
// store (*accounting.Store) has it. A store without it keeps no usage
// (sacct then prints the usage fields blank).
type usageStore interface {
	Usage(ctx context.Context, jobIDs []uint64) ([]api.NodeUsage, error)
}

// usageAcct is the controller's usage state; guarded by Server.mu.
type usageAcct struct {
	// queue holds final reports until the next write takes them.
	queue []api.NodeUsage
	// live holds each running step's latest report per node.
	live map[usageKey]api.NodeUsage
	// pruneAt is the size of live at which it is next swept of the
	// steps of jobs that no longer run.
	pruneAt int
}

type usageKey struct {
	job  uint64
	step uint32
	node string
}

// maxUsageReports bounds the reports one sync may carry: a node reports
// each of its running steps once per acct_gather_frequency, and far
// fewer run at once.
const maxUsageReports = 4096

// noteBatchUsage queues the batch step's usage that j's batch host
// reported with its end (rep). Called with mu held, from finish.
func (s *Server) noteBatchUsage(j *api.Job, rep api.NodeJobReport) {
	if rep.Usage == nil {
		return
	}
	u := *rep.Usage
	u.JobID, u.StepID, u.Restart, u.Node, u.UserID, u.Final = j.ID, api.BatchStepID, j.Restarts, j.BatchHost(), j.UserID, true
	if !s.usageOK(&u) {
		return
	}
	s.acct.queue = append(s.acct.queue, u)
	s.dropLiveUsage(j.ID, api.BatchStepID)
}

// applyNodeUsage takes the usage reports of node n's sync: final ones
// are queued for the store, running ones kept for sstat (not from a
// stale request, whose values may be older than those applied). A
// report about a job the node does not run, or that the controller no
// longer holds in memory, is dropped. Called with mu held.
func (s *Server) applyNodeUsage(n *nodeRec, reports []api.NodeUsage, stale bool) {
	if len(reports) > maxUsageReports {
		s.log.Warn("node sent too many usage reports; the rest are dropped", "node", n.Name, "reports", len(reports))
		reports = reports[:maxUsageReports]
	}
	for _, u := range reports {
		j := s.jobs[u.JobID]
		if j == nil || !slices.Contains(j.NodeNames(), n.Name) {
			continue
		}
		if u.StepID == api.BatchStepID && (u.Final || j.BatchHost() != n.Name || u.Restart != j.Restarts) {
			// The batch step's totals come with the job's end.
			continue
		}
		u.Node, u.UserID = n.Name, j.UserID
		if !s.usageOK(&u) {
			continue
		}
		key := usageKey{u.JobID, u.StepID, u.Node}
		switch {
		case u.Final:
			s.acct.queue = append(s.acct.queue, u)
			delete(s.acct.live, key)
		case !stale && j.State == api.StateRunning:
			if s.acct.live == nil {
				s.acct.live = map[usageKey]api.NodeUsage{}
			}
			s.acct.live[key] = u
		}
	}
	s.pruneLiveUsage()
}

// usageOK checks what a node may not get wrong: task ranks, and no
// more tasks than api.MaxUsageTasks.
func (s *Server) usageOK(u *api.NodeUsage) bool {
	if len(u.Tasks) > api.MaxUsageTasks {
		s.log.Warn("usage report with too many tasks dropped", "job_id", u.JobID, "node", u.Node, "tasks", len(u.Tasks))
		return false
	}
	for _, t := range u.Tasks {
		if t.Task < 0 {
			s.log.Warn("usage report with a negative task dropped", "job_id", u.JobID, "node", u.Node)
			return false
		}
	}
	return true
}

// dropLiveUsage forgets the running reports of a step that ended.
func (s *Server) dropLiveUsage(jobID uint64, stepID uint32) {
	for k := range s.acct.live {
		if k.job == jobID && k.step == stepID {
			delete(s.acct.live, k)
		}
	}
}

// pruneLiveUsage forgets the running reports of jobs that no longer
// run, each time the map has doubled since the last sweep.
func (s *Server) pruneLiveUsage() {
	if len(s.acct.live) < s.acct.pruneAt {
		return
	}
	for k, u := range s.acct.live {
		if j := s.jobs[k.job]; j == nil || j.State != api.StateRunning || k.step == api.BatchStepID && u.Restart != j.Restarts {
			delete(s.acct.live, k)
		}
	}
	s.acct.pruneAt = 2*len(s.acct.live) + 64
}

// liveUsage sums the running reports of step (jobID, stepID) over its
// nodes (nil when none came): the values sstat shows. Called with mu
// held.
func (s *Server) liveUsage(jobID uint64, stepID uint32) *api.StepUsage {
	var rs []api.NodeUsage
	for k, u := range s.acct.live {
		if k.job == jobID && k.step == stepID {
			rs = append(rs, u)
		}
	}
	return api.SummarizeUsage(rs)
}

// listLiveUsage returns the running usage of the jobs ids' running
// steps (sstat), by job and step id.
func (s *Server) listLiveUsage(ids []uint64) []api.StepUsage {
	want := map[uint64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	s.mu.Lock()
	var rows []api.NodeUsage
	for k, u := range s.acct.live {
		if want[k.job] {
			rows = append(rows, u)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(rows, func(a, b api.NodeUsage) int {
		return cmp.Or(cmp.Compare(a.JobID, b.JobID), cmp.Compare(a.StepID, b.StepID), cmp.Compare(a.Node, b.Node))
	})
	return summarizeRows(rows)
}

// listUsage returns the stored usage of the jobs ids' steps, one
// StepUsage per step (the batch step's of the job's last incarnation),
// by job and step id.
func (s *Server) listUsage(ctx context.Context, ids []uint64) ([]api.StepUsage, error) {
	st, ok := s.store.(usageStore)
	if !ok {
		return nil, api.Errorf(api.ErrUnavailable, "this controller's store keeps no usage")
	}
	s.mu.Lock()
	s.flushAll()
	s.mu.Unlock()
	rows, err := st.Usage(ctx, ids)
	if err != nil {
		return nil, err
	}
	return summarizeRows(rows), nil
}

// summarizeRows groups stored node reports (sorted by job, step and
// node) by step and sums each group. Of a requeued job's batch step only
// the last incarnation's reports count. It is pure.
func summarizeRows(rows []api.NodeUsage) []api.StepUsage {
	var out []api.StepUsage
	for i := 0; i < len(rows); {
		k := i
		for k < len(rows) && rows[k].JobID == rows[i].JobID && rows[k].StepID == rows[i].StepID {
			k++
		}
		group := rows[i:k]
		if rows[i].StepID == api.BatchStepID {
			last := 0
			for _, r := range group {
				last = max(last, r.Restart)
			}
			group = slices.DeleteFunc(slices.Clone(group), func(r api.NodeUsage) bool { return r.Restart != last })
		}
		if su := api.SummarizeUsage(group); su != nil {
			out = append(out, *su)
		}
		i = k
	}
	return out
}

// handleUsage answers GET /api/v1/accounting/usage?job=N&job=M with the
// usage of the jobs' steps the caller may see: what is stored, or with
// live=1 the running values of their running steps (sstat). With
// &cluster=NAME it answers for another cluster of a shared store, from
// that cluster's tables (their stored usage only: the running values are
// in its own controller's memory).
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	var ids []uint64
	for _, v := range r.URL.Query()["job"] {
		id, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeErr(w, api.Invalid("Invalid job id specified: %s", v))
			return
		}
		ids = append(ids, id)
	}
	cl := r.URL.Query().Get("cluster")
	local := s.onlyLocal([]string{cl})
	var usage []api.StepUsage
	var err error
	switch {
	case r.URL.Query().Get("live") != "" && !local:
		err = api.Invalid("the running usage of cluster %s is with its own controller", cl)
	case r.URL.Query().Get("live") != "":
		usage = s.listLiveUsage(ids)
	case local:
		usage, err = s.listUsage(r.Context(), ids)
	default:
		usage, err = s.clusterUsage(r.Context(), cl, ids)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	// The uids of clusters sharing a store are one user base, as for
	// their jobs (queryAccounting).
	if v := s.accountingView(s.callerOf(r)); v.own {
		usage = slices.DeleteFunc(usage, func(u api.StepUsage) bool { return v.none || u.UserID != v.uid })
	}
	if usage == nil {
		usage = []api.StepUsage{}
	}
	writeJSON(w, api.UsageList{Usage: usage, Cluster: cl})
}
