package ctld

import (
	"fmt"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/state"
	"github.com/tide-hpc/tide/hostlist"
)

// updateJobs applies scontrol's hold, uhold, release, requeue and update.
func (s *Server) updateJobs(c caller, u api.JobUpdate) (api.CancelResponse, error) {
	switch u.Action {
	case "hold", "uhold", "release", "requeue", "update":
	default:
		return api.CancelResponse{}, api.Invalid("unknown job action %q", u.Action)
	}
	if len(u.IDs) == 0 && len(u.Tasks) == 0 {
		return api.CancelResponse{}, api.Invalid("no job id given")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var resp api.CancelResponse
	for _, t := range s.taskTargets(u.IDs, u.Tasks, true) {
		res := t.res
		if len(t.jobs) == 0 {
			res.Error = "Invalid job id specified"
		}
		ok := false
		for _, j := range t.jobs {
			var msg string
			switch {
			case !c.admin && c.uid != j.UserID:
				msg = "Access/permission denied"
			default:
				if err := s.updateJob(c, j, u); err != nil {
					msg = err.Error()
				}
			}
			if msg == "" {
				ok = true
			} else if res.Error == "" {
				res.Error = msg
			}
		}
		if ok {
			// An action on a whole array succeeds when it applied to
			// any of its records (holding running tasks cannot work).
			res.Error = ""
		}
		resp.Results = append(resp.Results, res)
	}
	s.flush()
	s.Kick()
	return resp, nil
}

func (s *Server) updateJob(c caller, j *api.Job, u api.JobUpdate) error {
	target := fmt.Sprintf("job %d", j.ID)
	switch u.Action {
	case "hold", "uhold":
		if j.State != api.StatePending {
			return fmt.Errorf("Job is no longer pending execution for job %d", j.ID)
		}
		kind := api.HoldUser
		if u.Action == "hold" && c.admin {
			kind = api.HoldAdmin
		}
		j.HoldKind, j.EffPriority = kind, 0
		j.Reason = api.ReasonJobHeldUser
		if kind == api.HoldAdmin {
			j.Reason = api.ReasonJobHeldAdmin
		}
		s.event(j, api.EventHold, string(j.Reason), "held by "+c.user, c.user)
		s.auditf(c, "hold", target, "%s hold", kind)
	case "release":
		if j.State != api.StatePending || j.HoldKind == api.HoldNone {
			return fmt.Errorf("Job is not held for job %d", j.ID)
		}
		if j.HoldKind == api.HoldAdmin && !c.admin {
			return fmt.Errorf("Access/permission denied: job %d is held by an operator", j.ID)
		}
		j.HoldKind, j.Reason, j.Hold = api.HoldNone, api.ReasonNone, false
		j.EffPriority = s.priorityOf(j)
		j.EligibleTime = s.now()
		if j.BeginTime.After(j.EligibleTime) {
			j.EligibleTime = j.BeginTime
		}
		s.event(j, api.EventRelease, "", "released by "+c.user, c.user)
		s.auditf(c, "release", target, "")
	case "requeue":
		switch {
		case j.State == api.StatePending:
			return fmt.Errorf("Job is pending execution for job %d", j.ID)
		case j.State.Active():
			if j.CancelRequested {
				return fmt.Errorf("Job is being cancelled for job %d", j.ID)
			}
			s.requeueActive(j, api.ReasonNone, "requeued by "+c.user+" before launch")
		default:
			s.requeue(j, s.now(), "requeued by "+c.user)
		}
		s.auditf(c, "requeue", target, "")
	case "update":
		// All or nothing: a field refused after others were set leaves
		// the job as it was.
		before := *j
		if err := s.updateFields(c, j, u); err != nil {
			*j = before
			return err
		}
	}
	s.markDirty(j)
	return nil
}

// requeueActive ends the running incarnation of active job j and
// requeues it: the batch host is told to kill it, and the job returns to
// PENDING when the node reports the end (at once, with unlaunched as the
// trail message, when no node has started it yet). A reason other than
// ReasonNone stays on the job until then and goes with the requeue event,
// so that a preempted job says why. Called with mu held.
func (s *Server) requeueActive(j *api.Job, reason api.ReasonCode, unlaunched string) {
	if !s.transition(j, state.Change{To: api.StateCompleting, Requeue: true, Reason: reason}) {
		return
	}
	s.markDirty(j)
	if n := s.nodes[j.BatchHost()]; n != nil {
		n.notify()
	}
	if !j.Launched {
		s.requeue(j, s.now(), unlaunched)
	}
}

// updateFields handles scontrol update JobId=… Key=Value.
func (s *Server) updateFields(c caller, j *api.Job, u api.JobUpdate) error {
	var changed []string
	if j.State.Terminal() {
		return fmt.Errorf("Job has already finished for job %d", j.ID)
	}
	if u.TimeLimit != nil {
		tl := *u.TimeLimit
		old := j.TimeLimit
		raising := tl == api.Infinite && old != api.Infinite || old != api.Infinite && tl > old
		if raising && !c.admin {
			return fmt.Errorf("Access/permission denied: only operators may raise the time limit of job %d", j.ID)
		}
		if err := api.CheckTimeLimit(tl); err != nil || tl == api.NoValue {
			return fmt.Errorf("Invalid time limit for job %d: %s", j.ID, api.ErrTimeLimit)
		}
		j.TimeLimit = tl
		changed = append(changed, "TimeLimit="+api.FormatTimeLimit(tl))
	}
	if u.Name != nil {
		if err := api.CheckUpdateString("job name", *u.Name); err != nil {
			return err
		}
		j.Name = *u.Name
		changed = append(changed, "JobName="+j.Name)
	}
	if u.Comment != nil {
		if err := api.CheckUpdateString("comment", *u.Comment); err != nil {
			return err
		}
		j.Comment = *u.Comment
		changed = append(changed, "Comment="+j.Comment)
	}
	if u.Account != nil || u.Partition != nil {
		// A move to another queue or partition is checked as a
		// submission there would be: queue membership, class and
		// partition access lists, and whether the job fits at all.
		if j.State != api.StatePending {
			return fmt.Errorf("Job is no longer pending execution for job %d", j.ID)
		}
		account, partition := j.Account, j.ReqPartition()
		if u.Account != nil {
			if err := api.CheckUpdateString("account", *u.Account); err != nil {
				return err
			}
			account = *u.Account
		}
		if u.Partition != nil {
			partition = *u.Partition
		}
		if err := s.checkMove(c, j, partition, account); err != nil {
			return err
		}
		if u.Account != nil {
			j.Account = account
			changed = append(changed, "Account="+j.Account)
		}
		if u.Partition != nil {
			// A list (-p a,b) as sbatch takes it; it replaces the list
			// of a requeued job too.
			j.Partition, j.PartitionList = strings.Join(api.PartitionNames(partition), ","), ""
			changed = append(changed, "Partition="+j.Partition)
		}
	}
	if u.Priority != nil {
		if err := s.updateLevel(c, j, *u.Priority); err != nil {
			return err
		}
		if j.HoldKind == api.HoldNone {
			j.EffPriority = s.priorityOf(j)
		}
		changed = append(changed, fmt.Sprintf("Priority=%d", j.Priority))
	}
	if u.Nice != nil {
		if *u.Nice < 0 && !c.admin {
			return fmt.Errorf("Access/permission denied: only operators may set a negative nice value")
		}
		if *u.Nice < -api.MaxNice || *u.Nice > api.MaxNice {
			return fmt.Errorf("Invalid nice value %d for job %d (at most %d either way)", *u.Nice, j.ID, api.MaxNice)
		}
		j.Nice = *u.Nice
		if j.HoldKind == api.HoldNone {
			j.EffPriority = s.priorityOf(j)
		}
		changed = append(changed, fmt.Sprintf("Nice=%d", j.Nice))
	}
	if u.Dependency != nil {
		if j.State != api.StatePending {
			return fmt.Errorf("Job is no longer pending execution for job %d", j.ID)
		}
		dep, err := s.checkDependency(*u.Dependency, j)
		if err != nil {
			return fmt.Errorf("%v for job %d", err, j.ID)
		}
		j.Dependency, j.KillInvalidDep = dep, j.KillInvalidDep && dep != ""
		switch {
		case dep != "" && j.HoldKind == api.HoldNone:
			j.Reason, j.ReasonDetail = api.ReasonDependency, ""
		case dep == "" && j.Reason.Dependency():
			j.Reason, j.ReasonDetail = api.ReasonNone, ""
		}
		changed = append(changed, "Dependency="+orNone(dep))
	}
	if u.ArrayThrottle != nil {
		if j.ArrayJobID == 0 {
			return fmt.Errorf("Job %d is not a job array", j.ID)
		}
		if *u.ArrayThrottle < 0 || *u.ArrayThrottle > api.MaxArrayTaskLimit {
			return fmt.Errorf("Invalid ArrayTaskThrottle for job %d", j.ID)
		}
		j.ArrayThrottle = *u.ArrayThrottle
		changed = append(changed, fmt.Sprintf("ArrayTaskThrottle=%d", j.ArrayThrottle))
	}
	if len(changed) == 0 {
		return fmt.Errorf("nothing to update for job %d", j.ID)
	}
	if u.TimeLimit != nil && j.State.Active() {
		// Pushed once every field passed.
		if n := s.nodes[j.BatchHost()]; n != nil {
			n.limits = append(n.limits, api.LimitUpdate{JobRef: ref(j), TimeLimit: j.TimeLimit})
			n.notify()
		}
	}
	msg := strings.Join(changed, " ")
	s.event(j, api.EventUpdate, "", msg+" by "+c.user, c.user)
	s.auditf(c, "update", fmt.Sprintf("job %d", j.ID), "%s", msg)
	return nil
}

// orNone is "(null)" for an empty value, as scontrol shows it.
func orNone(s string) string {
	if s == "" {
		return "(null)"
	}
	return s
}

// updateNodes drains, resumes or downs nodes (operators only).
func (s *Server) updateNodes(c caller, u api.NodeUpdate) error {
	if !c.admin {
		return api.Errorf(api.ErrPermissionDenied, "Access/permission denied: only operators may update nodes")
	}
	state := strings.ToUpper(u.State)
	switch state {
	case "DRAIN", "DOWN":
		if strings.TrimSpace(u.Reason) == "" {
			return api.Invalid("You must specify a reason when DOWNING or DRAINING a node. Request denied")
		}
	case "RESUME", "UNDRAIN", "IDLE":
	default:
		return api.Invalid("Invalid node state specified: %s", u.State)
	}
	var names []string
	for _, expr := range u.Names {
		h, err := hostlist.Expand(expr)
		if err != nil {
			return api.Invalid("Invalid node name specified: %v", err)
		}
		names = append(names, h...)
	}
	if len(names) == 0 {
		return api.Invalid("no node named")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		if s.nodes[name] == nil {
			return api.Errorf(api.ErrNotFound, "Invalid node name specified: %s", name)
		}
	}
	now := s.now()
	for _, name := range names {
		n := s.nodes[name]
		switch state {
		case "DRAIN":
			n.Drain, n.Reason, n.ReasonUser, n.ReasonTime = true, u.Reason, c.user, now
		case "DOWN":
			n.adminDown, n.Reason, n.ReasonUser, n.ReasonTime = true, u.Reason, c.user, now
			s.failNodeJobs(n, now, "node "+name+" set DOWN by "+c.user+": "+u.Reason)
		case "RESUME", "UNDRAIN", "IDLE":
			n.Drain, n.adminDown = false, false
			n.Reason, n.ReasonUser, n.ReasonTime = "", "", now
		}
		n.updateState()
		s.dirtyNodes[name] = true
		s.auditf(c, "node_"+strings.ToLower(state), "node "+name, "%s", u.Reason)
		s.log.Info("node updated", "node", name, "state", state, "reason", u.Reason, "by", c.user)
	}
	s.flush()
	s.Kick()
	return nil
}
