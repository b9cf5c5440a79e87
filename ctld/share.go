package ctld

import (
	"cmp"
	"context"
	"fmt"
	"os/user"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/config"
	"github.com/tide-hpc/tide/ctld/sched"
)

// Sharing the cluster (issue 5), the controller's part: queues (Slurm
// accounts) and job classes at submit, their state in the scheduler's
// snapshot, and the queue listing. The scheduling rules themselves are
// the pure core's (ctld/sched); preemption is carried out in preempt.go
// and the submission buffer lives in buffer.go.
//
// Without queues or qos in the config, the old behaviour stays: no
// account checks, Slurm-style priorities (--priority for operators
// only), no quotas and no preemption.

// sharing is the validated sharing configuration.
func (s *Server) sharing() *config.Sharing { return &s.cl.Sharing }

// qosOf is the class of j (the default class when it names none or an
// unknown one).
func (s *Server) qosOf(j *api.Job) *sched.QOSInfo {
	sh := s.sharing()
	if q, ok := sh.QOS[j.QOS]; ok && j.QOS != "" {
		return q
	}
	return sh.QOS[sh.DefaultQOS]
}

// shareSubmit applies the sharing rules to a submission: the queue
// (account) must exist and admit the caller, the QOS must exist, the
// level must be allowed, the time limit within the class's MaxTime. It
// fills spec.Account, spec.QOS and returns the job's level. timeGiven
// is false when the time limit is the partition's default, which the
// class's MaxTime then lowers instead of refusing the job. Called
// without mu after validateSpec.
func (s *Server) shareSubmit(spec *api.JobSpec, c caller, timeGiven bool) (int, error) {
	sh := s.sharing()
	if !sh.Configured {
		level := 0
		if spec.Priority >= api.MinLevel && spec.Priority <= api.MaxLevel {
			level = int(spec.Priority)
		}
		return level, nil
	}
	if spec.QOS == "" {
		spec.QOS = sh.DefaultQOS
	}
	qos, ok := sh.QOS[spec.QOS]
	if !ok {
		return 0, api.Invalid("Batch job submission failed: Invalid qos specification: %s (valid: %s)", spec.QOS, strings.Join(sh.QOSOrder, ", "))
	}
	if len(sh.Queues) > 0 {
		groups := s.groupsOf(c)
		if spec.Account == "" {
			for i := range sh.Queues {
				if sh.Queues[i].Member(c.user, groups) {
					spec.Account = sh.Queues[i].Name
					break
				}
			}
			if spec.Account == "" && c.admin {
				// Operators may use every queue: the first one.
				spec.Account = sh.Queues[0].Name
			}
			if spec.Account == "" {
				return 0, api.Errorf(api.ErrPermissionDenied, "Batch job submission failed: Invalid account or account/partition combination specified: user %s is a member of no queue (%s)",
					c.user, s.queueMembers())
			}
		}
		q := sh.Queue(spec.Account)
		if q == nil {
			return 0, api.Invalid("Batch job submission failed: Invalid account or account/partition combination specified: %s is not a queue (valid: %s)",
				spec.Account, strings.Join(sh.QueueNames(), ", "))
		}
		if !c.admin && !q.Member(c.user, groups) {
			return 0, api.Errorf(api.ErrPermissionDenied, "Batch job submission failed: Invalid account or account/partition combination specified: user %s may not submit to queue %s (members: %s)",
				c.user, q.Name, q.Members())
		}
	}
	if err := s.checkClassAccess(c, qos.Name, spec.Account); err != nil {
		return 0, err
	}
	level := qos.DefaultLevel
	if p := int(spec.Priority); p != 0 {
		switch {
		case p < api.MinLevel || p > api.MaxLevel:
			return 0, api.Invalid("Batch job submission failed: --priority %d is not a level from %d to %d", p, api.MinLevel, api.MaxLevel)
		case !c.admin && p > qos.DefaultLevel:
			return 0, api.Errorf(api.ErrPermissionDenied, "Access/permission denied: --priority %d is above qos %s's default level %d; users may only lower their jobs' level (operators raise it)",
				p, qos.Name, qos.DefaultLevel)
		case !c.admin && p < qos.MinLevel:
			return 0, api.Invalid("Batch job submission failed: --priority %d is below qos %s's lowest level %d", p, qos.Name, qos.MinLevel)
		}
		level = p
	}
	if qos.MaxTime > 0 {
		switch {
		case !timeGiven && (spec.TimeLimit == api.NoValue || spec.TimeLimit == api.Infinite || spec.TimeLimit > qos.MaxTime):
			// Slurm's MaxWall is the limit of jobs that give none.
			spec.TimeLimit = qos.MaxTime
		case spec.TimeLimit == api.Infinite || spec.TimeLimit > qos.MaxTime:
			return 0, api.Invalid("Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits): %s: time limit %s is above qos %s's MaxTime %s",
				api.ReasonQOSTimeLimit, api.FormatTimeLimit(spec.TimeLimit), qos.Name, api.FormatTimeLimit(qos.MaxTime))
		}
	}
	return level, nil
}

// queueMembers lists every queue with its members, for the error of a
// user who belongs to none.
func (s *Server) queueMembers() string {
	var parts []string
	for i := range s.sharing().Queues {
		q := &s.sharing().Queues[i]
		parts = append(parts, q.Name+": "+q.Members())
	}
	return strings.Join(parts, "; ")
}

// checkSubmitLimit refuses a submission over the queue's
// max_submit_per_user: the user's jobs in the queue that have not ended
// (array tasks count one each). Called with mu held.
func (s *Server) checkSubmitLimit(j *api.Job) error {
	q := s.sharing().Queue(j.Account)
	if q == nil || q.MaxSubmitPerUser <= 0 {
		return nil
	}
	n := jobCount(j)
	for _, o := range s.jobs {
		if o.UserID == j.UserID && o.Account == j.Account && !o.State.Terminal() {
			n += jobCount(o)
		}
	}
	if n > q.MaxSubmitPerUser {
		return api.Invalid("Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits): queue %s allows %d submitted jobs per user (MaxSubmitJobs), %s would have %d",
			q.Name, q.MaxSubmitPerUser, j.User, n)
	}
	return nil
}

// jobCount is how many jobs a record stands for: an array's meta record
// counts its pending tasks.
func jobCount(j *api.Job) int {
	if j.ArrayPending != nil {
		return max(j.ArrayPending.Len(), 1)
	}
	return 1
}

// groupCache remembers users' supplementary groups (NSS can be slow).
type groupCache struct {
	mu sync.Mutex
	m  map[uint32]cachedGroups
}

type cachedGroups struct {
	names []string
	at    time.Time
}

var userGroups = groupCache{m: map[uint32]cachedGroups{}}

// groupsOf lists the caller's groups by name: the primary group (the
// caller's gid, which for a job submitted with --gid is not the user's
// own) and the user's groups from NSS. Only the latter are cached, by
// uid, so that one job's --gid never leaks into the groups of another.
func (s *Server) groupsOf(c caller) []string {
	primary := s.users.group(c.gid)
	names := []string{primary}
	for _, g := range s.userGroupNames(c.uid) {
		if g != primary {
			names = append(names, g)
		}
	}
	return names
}

// userGroupNames is the names of uid's groups (primary and
// supplementary) as NSS lists them, cached.
func (s *Server) userGroupNames(uid uint32) []string {
	userGroups.mu.Lock()
	g, ok := userGroups.m[uid]
	userGroups.mu.Unlock()
	if ok && time.Since(g.at) < userCacheTTL {
		return g.names
	}
	var names []string
	if u, err := user.LookupId(fmt.Sprint(uid)); err == nil {
		if ids, err := u.GroupIds(); err == nil {
			for _, id := range ids {
				if gr, err := user.LookupGroupId(id); err == nil && !slices.Contains(names, gr.Name) {
					names = append(names, gr.Name)
				}
			}
		}
	}
	userGroups.mu.Lock()
	userGroups.m[uid] = cachedGroups{names: names, at: time.Now()}
	userGroups.mu.Unlock()
	return names
}

// priorityOf is the priority the scheduler orders j by: its level with
// sharing configured, else Slurm-style (an operator-set value, or the
// base lowered by nice).
func (s *Server) priorityOf(j *api.Job) uint32 {
	if s.sharing().Configured && j.Level > 0 {
		return uint32(j.Level)
	}
	return priorityOf(&j.JobSpec)
}

// gpuTotals counts the GPUs of every partition and of the cluster ("")
// from the nodes (registered ones as they reported, others as
// declared): the base of queue percentages. Called with mu held.
func (s *Server) gpuTotals() map[string]int {
	per := make(map[string]int, len(s.nodes))
	total := 0
	for _, name := range s.cl.NodeOrder {
		n := s.nodes[name]
		g := n.decl.GPUs
		if n.registered {
			g = len(n.GPUs)
		}
		per[name] = g
		total += g
	}
	out := map[string]int{"": total}
	for _, p := range s.partitions {
		t := 0
		for _, name := range p.Nodes {
			t += per[name]
		}
		out[p.Name] = t
	}
	return out
}

// queueInfos resolves the queues for a pass. Called with mu held.
func (s *Server) queueInfos() map[string]*sched.QueueInfo {
	sh := s.sharing()
	if len(sh.Queues) == 0 {
		return nil
	}
	totals := s.gpuTotals()
	out := make(map[string]*sched.QueueInfo, len(sh.Queues))
	for i := range sh.Queues {
		q := &sh.Queues[i]
		t := totals[q.Partition]
		out[q.Name] = &sched.QueueInfo{Name: q.Name, Parent: q.Parent, Guaranteed: q.Guaranteed.Resolve(t),
			Cap: q.Cap.Resolve(t), LendLimit: q.LendLimit, BorrowLimit: q.BorrowLimit,
			MaxRunningPerUser: q.MaxRunningPerUser, MaxGPUsPerUser: q.MaxGPUsPerUser}
	}
	return out
}

// shareSnapshot fills the sharing part of a pass's input: queues, job
// classes and the running jobs (suspended ones hold nothing). Called
// with mu held.
func (s *Server) shareSnapshot(snap *sched.Snapshot) {
	sh := s.sharing()
	if !sh.Configured {
		return
	}
	snap.Queues = s.queueInfos()
	snap.QOS, snap.DefaultQOS = sh.QOS, sh.DefaultQOS
	for _, name := range s.cl.NodeOrder {
		for _, j := range s.nodes[name].batch {
			if !j.State.Active() || j.State == api.StateSuspended || suspendedRelease(j) {
				continue
			}
			rj := sched.RunningJob{JobID: j.ID, Partition: j.Partition, Queue: j.Account, QOS: j.QOS, User: j.User,
				Level: j.Level, Start: j.StartTime, LastCheckpoint: j.LastCheckpoint, Alloc: j.Alloc,
				Borrowing: j.Borrowing, Starved: j.StartedStarving, NoRequeue: j.Requeue != nil && !*j.Requeue}
			if j.Preempting != nil || j.State == api.StateCompleting {
				// A job on its way out is never chosen again.
				rj.Preempting = true
				if j.Preempting != nil {
					rj.PreemptFor = j.Preempting.By
				}
			}
			snap.Running = append(snap.Running, rj)
		}
	}
	// Map order must not decide anything in the pure core.
	slices.SortFunc(snap.Running, func(a, b sched.RunningJob) int { return cmp.Compare(a.JobID, b.JobID) })
}

// queueList answers GET /api/v1/queues: every queue with its live use,
// and the job classes.
func (s *Server) queueList() api.QueueList {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.sharing()
	out := api.QueueList{DefaultQOS: sh.DefaultQOS, StarvationAge: int64(s.starvationAge() / time.Second),
		Queues: []api.QueueStatus{}}
	for _, name := range sh.QOSOrder {
		q := sh.QOS[name]
		a := sh.QOSAccess[name]
		out.QOS = append(out.QOS, api.QOSStatus{Name: q.Name, MinLevel: q.MinLevel, MaxLevel: q.MaxLevel,
			DefaultLevel: q.DefaultLevel, Mode: q.Mode, PreemptGap: q.PreemptGap, GraceTime: q.GraceTime,
			MaxTime: q.MaxTime, MinRuntime: q.MinRuntime, Open: a == nil || a.All})
		if a != nil && !a.All {
			last := &out.QOS[len(out.QOS)-1]
			last.Users, last.Groups, last.Accounts = a.Users, a.Groups, a.Accounts
		}
	}
	infos := s.queueInfos()
	idx := map[string]int{}
	for i := range sh.Queues {
		q := &sh.Queues[i]
		in := infos[q.Name]
		idx[q.Name] = len(out.Queues)
		out.Queues = append(out.Queues, api.QueueStatus{Name: q.Name, Parent: q.Parent, Users: q.Users, Groups: q.Groups,
			Guaranteed: in.Guaranteed, Cap: in.Cap, LendLimit: q.LendLimit, BorrowLimit: q.BorrowLimit,
			MaxRunningPerUser: q.MaxRunningPerUser, MaxSubmitPerUser: q.MaxSubmitPerUser, MaxGPUsPerUser: q.MaxGPUsPerUser,
			SubmitRate: q.SubmitRate, Buffered: s.buffer.waiting(q.Name)})
	}
	for _, j := range s.jobs {
		k, ok := idx[j.Account]
		if !ok {
			continue
		}
		qs := &out.Queues[k]
		switch {
		case j.State == api.StatePending:
			qs.Pending += jobCount(j)
		case j.State.Active() && j.State != api.StateSuspended && !suspendedRelease(j):
			qs.Running++
			qs.UsedGPUs += j.AllocGPUs()
		}
	}
	// A child's use counts against its parent too.
	for i := range out.Queues {
		for p := out.Queues[i].Parent; p != ""; {
			k, ok := idx[p]
			if !ok {
				break
			}
			out.Queues[k].UsedGPUs += out.Queues[i].UsedGPUs
			p = out.Queues[k].Parent
		}
	}
	// Borrowed is use above the guarantee; the lent GPUs are spread over
	// the top-level queues with idle guaranteed share, in order.
	borrowed := 0
	for i := range out.Queues {
		q := &out.Queues[i]
		q.BorrowedGPUs = max(q.UsedGPUs-q.Guaranteed, 0)
		if q.Parent == "" {
			borrowed += q.BorrowedGPUs
		}
	}
	for i := range out.Queues {
		q := &out.Queues[i]
		if q.Parent != "" || borrowed == 0 {
			continue
		}
		idle := max(q.Guaranteed-q.UsedGPUs, 0)
		if q.LendLimit >= 0 {
			idle = min(idle, q.LendLimit)
		}
		q.LentGPUs = min(idle, borrowed)
		borrowed -= q.LentGPUs
	}
	return out
}

// starvationAge is the aging threshold in effect.
func (s *Server) starvationAge() time.Duration {
	if a := s.cl.Scheduler.StarvationAge; a != 0 {
		return a
	}
	return config.DefaultStarvationAge
}

// checkpoint records that job id finished a checkpoint (POST
// /api/v1/jobs/{id}/checkpoint, from tide checkpoint-done inside the
// job): its owner or an operator may say so.
func (s *Server) checkpoint(_ context.Context, c caller, id uint64) error {
	if !c.known {
		return api.Errorf(api.ErrUnauthenticated, "checkpoints are only acknowledged on the local socket")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	if j == nil {
		return api.Errorf(api.ErrNotFound, "Invalid job id specified")
	}
	if !c.admin && c.uid != j.UserID {
		return api.Errorf(api.ErrPermissionDenied, "Access/permission denied: job %d is not yours", id)
	}
	if j.State != api.StateRunning && j.State != api.StateSuspended {
		return api.Errorf(api.ErrConflict, "Job %d is not running (%s)", id, j.State)
	}
	s.checkpointAck(j, s.now(), c.user)
	s.flush()
	return nil
}

// shareStarted records the sharing side of a start: a borrowing job is
// marked (reclaim takes it first) with an event naming the lenders, a
// backfilled one gets an event naming the reservations it passed.
// Called with mu held.
func (s *Server) shareStarted(j *api.Job, st sched.Start, snap *sched.Snapshot, plan *sched.Plan) {
	j.StartedStarving = !j.Starving.IsZero()
	j.Starving, j.ExpectedStart = time.Time{}, time.Time{}
	if st.Borrowed > 0 {
		j.Borrowing = true
		s.event(j, api.EventBorrow, "", fmt.Sprintf("queue %s borrows %d of the job's %d GPUs beyond its guarantee from %s",
			orNone(j.Account), st.Borrowed, j.AllocGPUs(), lenders(snap, j.Account)), "")
	}
	if st.Backfilled {
		s.event(j, api.EventBackfill, "", backfillMessage(st, plan), "")
	}
}

// maxBackfillNamed bounds the reservations a backfill event names: a
// pass may hold hundreds (backfill_max_job_test), and the event is
// stored with every backfilled start.
const maxBackfillNamed = 5

// backfillMessage says why a backfilled start delays no reserved job,
// naming the reservations on the nodes the start took (those it had to
// stay clear of in time), at most maxBackfillNamed of them, then how
// many more.
func backfillMessage(st sched.Start, plan *sched.Plan) string {
	mine := make(map[string]bool, len(st.Alloc))
	for _, a := range st.Alloc {
		mine[a.Node] = true
	}
	var ahead []string
	more := 0
	for _, r := range plan.Reservations {
		if !slices.ContainsFunc(r.Nodes, func(n string) bool { return mine[n] }) {
			continue
		}
		if len(ahead) == maxBackfillNamed {
			more++
			continue
		}
		ahead = append(ahead, fmt.Sprintf("job %d at %s", r.JobID, r.At.Format(time.DateTime)))
	}
	msg := "backfilled: ends before the reserved start of higher-priority jobs or stays off their nodes"
	if len(ahead) > 0 {
		if more > 0 {
			ahead = append(ahead, fmt.Sprintf("%d more", more))
		}
		msg += " (reserved on its nodes: " + strings.Join(ahead, ", ") + ")"
	}
	return msg
}

// lenders names the queues other than own with idle guaranteed GPUs
// in snap: the ones a borrowing job borrows from.
func lenders(snap *sched.Snapshot, own string) string {
	used := map[string]int{}
	for _, r := range snap.Running {
		n := 0
		for _, a := range r.Alloc {
			n += len(a.GPUs)
		}
		used[r.Queue] += n
	}
	var out []string
	for name, q := range snap.Queues {
		if name == own || q.Parent != "" {
			continue
		}
		if idle := q.Guaranteed - used[name]; idle > 0 && q.LendLimit != 0 {
			out = append(out, fmt.Sprintf("%s (%d idle)", name, idle))
		}
	}
	if len(out) == 0 {
		return "idle capacity no queue guarantees"
	}
	slices.Sort(out)
	return "queues " + strings.Join(out, ", ")
}

// shareDecision stores what the pass says about a pending job's aging
// and expected start: Starving (with a starving event the first time)
// and ExpectedStart for squeue --start. Only changes touch the job.
// Called with mu held.
func (s *Server) shareDecision(j *api.Job, d *sched.Decision) {
	if !d.StarvingSince.Equal(j.Starving) {
		first := j.Starving.IsZero()
		j.Starving = d.StarvingSince
		s.markDirty(j)
		if first && !d.StarvingSince.IsZero() {
			s.event(j, api.EventStarving, "", fmt.Sprintf("waiting since %s, longer than the starvation age %s: aged to level %d",
				j.EligibleTime.Format(time.DateTime), s.starvationAge(), d.Level), "")
		}
	}
	if !d.ExpectedStart.Equal(j.ExpectedStart) {
		// Estimates move with every pass: kept in memory (listings see
		// them), stored with the job's next real change.
		j.ExpectedStart = d.ExpectedStart
		s.jobsVersion++
	}
}

// sameDetail reports whether cur is decisionDetail(d), without building
// it: most pending jobs' decisions do not change between passes, and
// 10,000 joins a pass would be garbage for nothing.
func sameDetail(cur string, d *sched.Decision) bool {
	first := true
	take := func(part string) bool {
		if part == "" {
			return true
		}
		if !first {
			var ok bool
			if cur, ok = strings.CutPrefix(cur, "; "); !ok {
				return false
			}
		}
		first = false
		var ok bool
		cur, ok = strings.CutPrefix(cur, part)
		return ok
	}
	if len(d.More) == 0 {
		return cur == d.Detail
	}
	if !take(d.Detail) {
		return false
	}
	for _, m := range d.More {
		if !take(m) {
			return false
		}
	}
	return cur == ""
}

// decisionDetail is a pending job's ReasonDetail: the decisive detail,
// then every other reason that applies.
func decisionDetail(d *sched.Decision) string {
	if len(d.More) == 0 {
		return d.Detail
	}
	parts := make([]string, 0, len(d.More)+1)
	if d.Detail != "" {
		parts = append(parts, d.Detail)
	}
	for _, m := range d.More {
		if m != "" {
			parts = append(parts, m)
		}
	}
	return strings.Join(parts, "; ")
}

// updateLevel applies scontrol update Priority=N: with sharing
// configured N is a level (1-10) that users may only lower and
// operators set freely; otherwise an operator-set Slurm priority.
func (s *Server) updateLevel(c caller, j *api.Job, p uint32) error {
	if !s.sharing().Configured {
		if !c.admin {
			return fmt.Errorf("Access/permission denied: only operators may set the priority of job %d", j.ID)
		}
		j.Priority = p
		return nil
	}
	switch {
	case p < api.MinLevel || p > api.MaxLevel:
		return fmt.Errorf("Invalid priority %d for job %d: a level from %d to %d", p, j.ID, api.MinLevel, api.MaxLevel)
	case !c.admin && int(p) > j.Level:
		return fmt.Errorf("Access/permission denied: users may only lower the level of job %d (now %d)", j.ID, j.Level)
	}
	j.Priority, j.Level = p, int(p)
	return nil
}
