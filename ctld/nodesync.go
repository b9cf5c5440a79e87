package ctld

import (
	"context"
	"fmt"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/state"
)

func emptyResponse(r api.NodeSyncResponse) bool {
	return len(r.Launch) == 0 && len(r.Signals) == 0 && len(r.Limits) == 0 && len(r.Ack) == 0 &&
		len(r.Forget) == 0 && !r.Unregistered
}

// reconcile applies a node's job reports and returns the commands for it.
// Called with mu held.
func (s *Server) reconcile(n *nodeRec, reports []api.NodeJobReport) api.NodeSyncResponse {
	var resp api.NodeSyncResponse
	reported := make(map[uint64]bool, len(reports))
	clear(n.launching)
	for _, rep := range reports {
		ref := api.JobRef{JobID: rep.JobID, Restart: rep.Restart}
		j := s.jobs[rep.JobID]
		current := j != nil && j.Restarts == rep.Restart && j.State.Active() && j.BatchHost() == n.Name
		if rep.State == api.NodeJobFinished {
			if current {
				s.finish(j, rep)
			}
			resp.Ack = append(resp.Ack, ref)
			continue
		}
		if !current {
			// Ended here meanwhile (NODE_FAIL, requeue) or unknown: the
			// node must stop it.
			resp.Forget = append(resp.Forget, ref)
			continue
		}
		reported[j.ID] = true
		if rep.State == api.NodeJobLaunching {
			// Not launched yet (the node has not committed it): a node
			// that forgets it now lost nothing, and gets the launch
			// again. Meanwhile the launch is not repeated, and a kill
			// may already go to it.
			if n.launching == nil {
				n.launching = map[uint64]bool{}
			}
			n.launching[j.ID] = true
			continue
		}
		if rep.CheckpointAck && j.Preempting != nil && !j.Preempting.Acked {
			// The node repeats the acknowledgement while the file is
			// there; only a victim in its grace time acts on it (tide
			// checkpoint-done records checkpoints at other times).
			s.checkpointAck(j, s.now(), "")
		}
		if !j.Launched {
			j.Launched = true
			s.spool.drop(j.ID)
			s.markLazy(j, api.Event{JobID: j.ID, Time: s.now(), Kind: api.EventLaunch, State: j.State,
				Message: "batch script started on " + n.Name})
		}
	}
	for _, j := range n.batch {
		if reported[j.ID] || s.dirty[j.ID] {
			continue
		}
		switch {
		case j.Launched:
			// The node knew the job and no longer does: it was lost
			// with the node's state.
			s.endJob(j, api.StateNodeFail, api.ReasonNone, api.ExitStatus{Signal: 9}, s.now(),
				"node "+n.Name+" no longer knows the job")
		case j.State == api.StateCompleting:
			// Cancelled before the node ever reported it: nothing runs.
			s.endJob(j, api.StateCancelled, api.ReasonNone, api.ExitStatus{}, s.now(), "cancelled before launch")
		}
	}
	s.commands(n, &resp)
	return resp
}

// commands adds pending launches, kills, signals and limit updates for n.
// Called with mu held.
func (s *Server) commands(n *nodeRec, resp *api.NodeSyncResponse) {
	now := s.now()
	for _, j := range n.batch {
		if s.dirty[j.ID] {
			continue // not committed yet: do not act on it
		}
		if j.Allocation {
			continue // issue 7: allocation-only jobs run nothing on the node
		}
		switch {
		case j.State == api.StateRunning && !j.Launched && !n.launching[j.ID]:
			spec, err := s.launchSpec(j)
			if err != nil {
				s.log.Error("cannot build launch", "job_id", j.ID, "err", err)
				s.endJob(j, api.StateFailed, api.ReasonLaunchFailed, api.ExitStatus{Code: 1}, now, err.Error())
				continue
			}
			resp.Launch = append(resp.Launch, spec)
		case j.State == api.StateCompleting && (j.Launched || n.launching[j.ID]):
			if t, ok := n.killSent[j.ID]; ok && now.Sub(t) < s.cl.Timeouts.KillWait+10*time.Second {
				continue
			}
			n.killSent[j.ID] = now
			resp.Signals = append(resp.Signals, api.SignalCommand{JobRef: ref(j), Kill: true})
		}
	}
	resp.Signals = append(resp.Signals, n.signals...)
	resp.Limits = append(resp.Limits, n.limits...)
	n.signals, n.limits = nil, nil
	s.addHosted(n, resp) // issue 21: the jobs whose steps the node may run
}

func ref(j *api.Job) api.JobRef { return api.JobRef{JobID: j.ID, Restart: j.Restarts} }

// launchSpec builds what the batch host needs to start j.
func (s *Server) launchSpec(j *api.Job) (api.LaunchSpec, error) {
	script, env, ok := s.spool.get(j.ID)
	if !ok {
		var err error
		if script, env, err = s.store.Spool(context.Background(), j.ID); err != nil {
			return api.LaunchSpec{}, fmt.Errorf("read spool of job %d: %w", j.ID, err)
		}
	}
	spec := api.LaunchSpec{
		JobRef: ref(j), Name: j.Name, UserID: j.UserID, GroupID: j.GroupID, User: j.User,
		Partition: j.Partition, Account: j.Account, Cluster: s.cl.ClusterName,
		Script: script, Args: j.ScriptArgs, WorkDir: j.WorkDir, SubmitDir: j.SubmitDir, SubmitHost: j.SubmitHost, Env: env,
		Stdout: j.Stdout, Stderr: j.Stderr, Stdin: j.Stdin, OpenMode: j.OpenMode,
		TimeLimit: j.TimeLimit, StartTime: j.StartTime, KillWait: int64(s.cl.Timeouts.KillWait / time.Second),
		Signal: j.Signal, Alloc: j.Alloc, NumTasks: j.ReqTasks(), CPUsPerTask: j.ReqCPUsPerTask(),
		ContainerImage: j.ContainerImage, ContainerMounts: j.ContainerMounts,
		Array: api.ArrayLaunchOf(j),
		QOS:   j.QOS, Request: api.EnvRequestOf(&j.JobSpec, s.cl.Scheduler.DefMemPerCPUMB),
	}
	spec.TopoAddr, spec.TopoPattern = s.cl.Tree.NodeAddr(j.BatchHost())
	if spec.Stdout == "" {
		spec.Stdout = api.DefaultStdout
	}
	if j.Restarts > 0 && j.Preemptions > 0 {
		// A preempted job's earlier run wrote output the restart must
		// not wipe (its checkpoint log, its progress).
		spec.OpenMode = "append"
	}
	if n := s.nodes[j.BatchHost()]; n != nil {
		for _, g := range j.Alloc[0].GPUs {
			for _, d := range n.GPUs {
				if d.Index == g {
					spec.GPUUUIDs = append(spec.GPUUUIDs, d.UUID)
				}
			}
		}
	}
	return spec, nil
}

// finish records the end of a job's incarnation as its batch host
// reported it.
func (s *Server) finish(j *api.Job, rep api.NodeJobReport) {
	s.noteBatchUsage(j, rep) // stepacct.go
	end := rep.EndTime
	if end.IsZero() || end.Before(j.StartTime) {
		end = s.now()
	}
	if rep.TimedOut {
		j.TimedOut = true
	}
	state, reason, msg := api.StateCompleted, api.ReasonNone, fmt.Sprintf("exit %s", rep.Exit)
	switch {
	case j.Preempting != nil && !j.CancelRequested && !suspendedRelease(j):
		// Whatever its exit: Tide sent the signal that ended it.
		s.preemptedEnd(j, rep, end)
		return
	case j.RequeueRequested && j.CancelRequested && j.Preempting != nil:
		// Cancelled while being preempted: the cancel wins.
		state, reason = api.StateCancelled, api.ReasonCancelled
	case j.RequeueRequested:
		s.requeue(j, end, "requeued: previous run ended "+rep.Exit.String())
		return
	case j.CancelRequested:
		state, reason = api.StateCancelled, api.ReasonCancelled
	case rep.TimedOut:
		state, reason = api.StateTimeout, api.ReasonTimeLimit
	case rep.OOM:
		state, reason = api.StateOOM, api.ReasonOutOfMemory
	case rep.LaunchFailed && s.retryLaunch(j, rep, end):
		// The node could not launch it: nothing ran (launchfail.go).
		return
	case rep.Error != "":
		state, reason, msg = api.StateFailed, api.ReasonLaunchFailed, rep.Error
	case rep.Exit.Code != 0 || rep.Exit.Signal != 0:
		state, reason = api.StateFailed, api.ReasonNonZeroExit
	}
	s.endJob(j, state, reason, rep.Exit, end, msg)
}

// endJob moves an active job to a final state and frees its resources.
func (s *Server) endJob(j *api.Job, to api.JobState, reason api.ReasonCode, exit api.ExitStatus, end time.Time, msg string) {
	c := state.Change{To: to, Reason: reason, Exit: exit, At: end}
	if !s.mayTransition(j, c) {
		return
	}
	s.releaseJob(j) // before the change: it frees what the active job holds
	s.spool.drop(j.ID)
	s.transition(j, c) // allowed, as checked above
	s.markDirty(j)
	s.event(j, api.EventEnd, string(reason), msg, "")
	s.metrics.ended(to)
	s.Kick()
}

// releaseJob frees what an active job holds on its nodes.
func (s *Server) releaseJob(j *api.Job) {
	if !j.State.Active() {
		return
	}
	for _, a := range j.Alloc {
		if n := s.nodes[a.Node]; n != nil && !suspendedRelease(j) {
			n.release(a)
		}
	}
	if n := s.nodes[j.BatchHost()]; n != nil {
		delete(n.batch, j.ID)
		delete(n.killSent, j.ID)
	}
	s.unhostJob(j)
}

// requeue returns an active or finished job to PENDING as a new
// incarnation.
func (s *Server) requeue(j *api.Job, now time.Time, msg string) {
	// An active job carries the reason its requeue was asked for (GPU
	// reclaim); a finished one carries how it ended, which is no reason
	// to wait.
	reason := api.ReasonNone
	if j.State.Active() && j.Reason != "" {
		reason = j.Reason
	}
	c := state.Change{To: api.StatePending, Reason: reason, At: now}
	if !s.mayTransition(j, c) {
		return
	}
	// Before the change: they read the ending incarnation's allocation
	// and preemption.
	s.releaseJob(j)
	s.notePreempted(j, now, msg)
	// A new incarnation (allowed, as checked above): nothing of the last
	// one stays, failed launches included (they count again from none;
	// retryLaunch restores its count).
	s.transition(j, c)
	s.addLive(j)
	s.markDirty(j)
	s.event(j, api.EventRequeue, reasonWord(reason), msg, "")
	s.Kick()
}

// reasonWord is an event's reason: "" for ReasonNone.
func reasonWord(r api.ReasonCode) string {
	if r == api.ReasonNone {
		return ""
	}
	return string(r)
}

// checkNodes marks nodes that stopped syncing as not responding, and
// after the node timeout fails their jobs. Called with mu held.
func (s *Server) checkNodes(now time.Time) {
	s.expireAllocations(now) // issue 7: allocation-only jobs end at their limit here
	s.checkSignalWarnings(now)
	for _, n := range s.nodes {
		if !n.registered {
			// After a controller restart a node that never comes back
			// must not hold its jobs RUNNING forever.
			if n.State != api.NodeDown && now.Sub(s.startTime) > s.cl.Timeouts.Node && s.holdsJobs(n) {
				n.State = api.NodeDown
				s.log.Warn("node did not register after controller restart", "node", n.Name)
				s.failNodeJobs(n, now, "node "+n.Name+" did not return after the controller restarted")
			}
			continue
		}
		if n.inflight > 0 {
			continue
		}
		silent := now.Sub(n.LastSeen)
		if n.Responding && silent > s.cl.Timeouts.Node {
			n.Responding = false
			n.updateState()
			s.log.Warn("node not responding", "node", n.Name, "silent", silent.Round(time.Second).String())
			s.failNodeJobs(n, now, "node "+n.Name+" not responding")
		}
	}
}

// holdsJobs reports whether any active job has resources on n.
func (s *Server) holdsJobs(n *nodeRec) bool {
	return n.AllocCPUs > 0 || len(n.AllocGPUs) > 0 || n.AllocMemMB > 0
}

// failNodeJobs ends every job holding resources on n with NODE_FAIL, or
// requeues it when the job asked for --requeue.
func (s *Server) failNodeJobs(n *nodeRec, now time.Time, why string) {
	for _, j := range s.jobs {
		if !j.State.Active() {
			continue
		}
		for _, a := range j.Alloc {
			if a.Node != n.Name {
				continue
			}
			if j.Requeue != nil && *j.Requeue && !j.CancelRequested {
				s.requeue(j, now, "requeued after node failure: "+why)
			} else {
				s.endJob(j, api.StateNodeFail, api.ReasonNodeDown, api.ExitStatus{}, now, why)
			}
			break
		}
	}
}
