package ctld

import (
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/tide-hpc/tide/ctld/api"
)

// Failed launches.
//
// A node reports a job finished with LaunchFailed when it could not
// launch it: its job directory could not be written, the supervisor or
// the container did not start, the launch passed the node's
// launch_timeout. Nothing of the job ran, so it is not the job's end:
// the job is requeued (a new incarnation, Restarts+1), placement takes
// the nodes its launch failed on last (Job.LaunchFailNodes), and after
// scheduler.launch_fail_limit failures in a row it is held by an admin
// hold (JobHeldAdmin, "launch failed requeued held", as Slurm says)
// rather than walked from node to node for ever. Every failure is in
// the job's trail with the node and the node's error.
//
// A launch error the job's own request caused (an output file or work
// directory it cannot open, a missing image) comes without
// LaunchFailed: another node would fail it the same way, and the job
// ends FAILED with reason LaunchFailed at once, as before. So does a
// job submitted with --no-requeue, and every failed launch with
// launch_fail_limit 0.

// maxLaunchErrorText bounds how much of a node's error goes into the
// trail and the hold's reason: it may quote a user's path.
const maxLaunchErrorText = 512

// maxLaunchFailNodes bounds Job.LaunchFailNodes.
const maxLaunchFailNodes = 8

// retryLaunch handles the report of a launch that job j's batch host
// could not carry out: it requeues the job, holding it once the failures
// in a row reach the limit, and reports true; false leaves the report to
// end the job (no retries configured, or --no-requeue). Called with mu
// held, for the job's current incarnation.
func (s *Server) retryLaunch(j *api.Job, rep api.NodeJobReport, now time.Time) bool {
	limit := s.cl.Scheduler.LaunchFailLimit
	if limit <= 0 || (j.Requeue != nil && !*j.Requeue) {
		return false
	}
	node := j.BatchHost()
	why := clipText(rep.Error, maxLaunchErrorText)
	failures := j.LaunchFailures + 1
	nodes := slices.DeleteFunc(slices.Clone(j.LaunchFailNodes), func(n string) bool { return n == node })
	nodes = append(nodes, node)
	if len(nodes) > maxLaunchFailNodes {
		nodes = nodes[len(nodes)-maxLaunchFailNodes:]
	}
	s.log.Warn("launch failed on node, job requeued", "job_id", j.ID, "node", node,
		"failures", failures, "launch_fail_limit", limit, "err", why)
	// The requeue carries the reason into the trail and the pending job
	// (until the scheduler's next word on it).
	j.Reason = api.ReasonLaunchFailed
	s.requeue(j, now, fmt.Sprintf("launch failed on %s (%d of %d in a row): %s", node, failures, limit, why))
	// requeue starts the count again (any other requeue should); this
	// one goes on counting.
	j.LaunchFailures, j.LaunchFailNodes = failures, nodes
	if failures >= limit {
		j.HoldKind, j.EffPriority = api.HoldAdmin, 0
		j.Reason = api.ReasonJobHeldAdmin
		j.ReasonDetail = fmt.Sprintf("launch failed requeued held: %d launches in a row failed, the last on %s: %s",
			failures, node, why)
		s.event(j, api.EventHold, string(api.ReasonJobHeldAdmin), j.ReasonDetail, "")
		s.log.Warn("job held after failed launches", "job_id", j.ID, "failures", failures)
	}
	s.markDirty(j)
	return true
}

// clipText cuts s to at most n bytes on a rune boundary, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
