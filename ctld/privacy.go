package ctld

import (
	"context"
	"slices"
	"strconv"

	"github.com/tide-hpc/tide/ctld/api"
)

// Privacy: private_data (Slurm's PrivateData) decides what regular users
// see of other users' work. Operators (root, the controller's own user
// and `operators`) always see everything. What each word hides, and
// why, is in docs/operations.md ("Private data"); in short:
//
//   - jobs: listings of live jobs (squeue, sprio, scontrol show job,
//     the binary listing and its cache) and accounting (sacct, steps)
//     hold only the caller's jobs; another user's job is answered
//     "Invalid job id specified", Slurm's answer, as if it did not
//     exist. Acting on it by id (scancel, scontrol update/hold, srun)
//     stays "Access/permission denied", as in Slurm.
//   - usage: accounting (sacct, steps) holds only the caller's jobs,
//     and the queue listing only the queues the caller may submit to
//     (sshare shows a Slurm user only their own associations).
//   - nodes: the node listing (sinfo, scontrol show node/partition) is for
//     operators, as Slurm refuses REQUEST_NODE_INFO.
//   - events: the trail of another user's job (tide events) is refused.
//
// The handlers call the functions below and nothing else decides.

// view is what one caller sees of the jobs: every job, or only those of
// one user.
type view struct {
	// own restricts the view to the jobs of uid; none (an
	// unauthenticated caller under a private view) sees no job at all.
	own, none bool
	uid       uint32
}

// seeAll sees every job.
var seeAll = view{}

// ownJobs is the view of c's own jobs.
func ownJobs(c caller) view {
	return view{own: true, none: !c.known, uid: c.uid}
}

// sees reports whether j is in the view.
func (v view) sees(j *api.Job) bool {
	return !v.own || !v.none && j.UserID == v.uid
}

// cacheKey is the list cache's key for the binary listing of query
// through v. The cache is shared by every caller: a private listing has
// a key of its own per uid, and the prefixes keep the two kinds apart
// whatever the query holds.
func (v view) cacheKey(query string) string {
	switch {
	case !v.own:
		return "*" + query
	case v.none:
		return "-" + query
	}
	return "u" + strconv.FormatUint(uint64(v.uid), 10) + ":" + query
}

// narrow lets the store read only the view's rows when the filter names
// no users: a user's sacct on a cluster with a million jobs then reads
// theirs. keepJobs still filters the answer by uid (a user name may look
// like another user's uid).
func (v view) narrow(f api.JobFilter) api.JobFilter {
	if v.own && !v.none && len(f.Users) == 0 {
		f.Users = []string{strconv.FormatUint(uint64(v.uid), 10)}
	}
	return f
}

// keepJobs keeps the jobs in the view (in place).
func (v view) keepJobs(jobs []api.Job) []api.Job {
	if !v.own {
		return jobs
	}
	return slices.DeleteFunc(jobs, func(j api.Job) bool { return !v.sees(&j) })
}

// keepSteps keeps the steps of the jobs in the view (in place). A step
// record carries its job's owner.
func (v view) keepSteps(steps []api.StepRecord) []api.StepRecord {
	if !v.own {
		return steps
	}
	return slices.DeleteFunc(steps, func(st api.StepRecord) bool { return v.none || st.UserID != v.uid })
}

// jobView is c's view of the live jobs: squeue, sprio, scontrol show
// job, and scancel's filters (private_data: jobs).
func (s *Server) jobView(c caller) view {
	if !s.cl.Private.Jobs || c.admin {
		return seeAll
	}
	return ownJobs(c)
}

// accountingView is c's view of the accounting records and steps:
// sacct (private_data: jobs or usage).
func (s *Server) accountingView(c caller) view {
	if !s.cl.Private.Jobs && !s.cl.Private.Usage || c.admin {
		return seeAll
	}
	return ownJobs(c)
}

// hiddenJob is the answer about a job the caller may not see: Slurm's
// scontrol answers "Invalid job id specified" for a job that private
// data hides, the same words as for a job that does not exist.
func hiddenJob() error {
	return api.Errorf(api.ErrNotFound, "Invalid job id specified")
}

// checkTrail reports whether c may read the trail of job id (tide
// events). Under private_data: jobs another user's job does not exist
// for c; under events alone it exists (squeue shows it) but its trail
// is refused. Unknown ids are left to the caller to answer.
func (s *Server) checkTrail(ctx context.Context, c caller, id uint64) error {
	p := s.cl.Private
	if !p.Jobs && !p.Events || c.admin {
		return nil
	}
	owner, found, err := s.jobOwnerUID(ctx, id)
	if err != nil || !found || c.known && owner == c.uid {
		return err
	}
	if p.Jobs {
		return hiddenJob()
	}
	return api.Errorf(api.ErrPermissionDenied,
		"Access/permission denied: the events of other users' jobs are for operators on this cluster (private_data: events)")
}

// jobOwnerUID is the uid that owns job id, from memory or the store;
// found is false for an id that names no job.
func (s *Server) jobOwnerUID(ctx context.Context, id uint64) (uid uint32, found bool, err error) {
	s.mu.Lock()
	j := s.jobs[id]
	if j != nil {
		uid = j.UserID
	}
	s.mu.Unlock()
	if j != nil {
		return uid, true, nil
	}
	// An id names a job or a whole array, whose records share an owner.
	jobs, err := s.store.QueryJobs(ctx, api.JobFilter{IDs: []uint64{id}, All: true})
	if err != nil || len(jobs) == 0 {
		return 0, false, err
	}
	return jobs[0].UserID, true, nil
}

// checkNodeList refuses the node listing (sinfo, scontrol show node and
// show partition) to regular users under private_data: nodes, as
// Slurm refuses them REQUEST_NODE_INFO.
func (s *Server) checkNodeList(c caller) error {
	if !s.cl.Private.Nodes || c.admin {
		return nil
	}
	return api.Errorf(api.ErrPermissionDenied,
		"Access/permission denied: node information is for operators on this cluster (private_data: nodes)")
}

// visibleQueues keeps, under private_data: usage, the queues c may
// submit to (an open queue, or one naming c or one of c's groups):
// Slurm's sshare shows a user only their own associations, and a
// queue's use is its members' use. Job classes are configuration and
// stay.
func (s *Server) visibleQueues(c caller, ql api.QueueList) api.QueueList {
	if !s.cl.Private.Usage || c.admin {
		return ql
	}
	sh := s.sharing()
	var groups []string
	if c.known {
		groups = s.groupsOf(c)
	}
	ql.Queues = slices.DeleteFunc(ql.Queues, func(q api.QueueStatus) bool {
		cq := sh.Queue(q.Name)
		return !c.known || cq == nil || !cq.Member(c.user, groups)
	})
	return ql
}
