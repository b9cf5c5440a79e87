package ctld

// The --signal=SIG@TIME warning to a job's steps (issue 22). Slurm sends
// it to the steps, not the batch shell, unless B: is given. Steps run on
// any node of the job, and an allocation (salloc, srun outside a batch
// job) has no node that launched it, so the controller, which knows
// every node of every job, sends the steps' warning. The batch shell's
// (B:) stays with tided on the batch host, which owns the shell and
// keeps its timer across its own restarts (noded/jobs.go).

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// warnEventPrefix starts the trail message of a steps' warning; a
// restarted controller finds in the trail whether it was sent.
const warnEventPrefix = "time limit warning: "

// stepsWarnAt returns when running job j's --signal warning is due to
// its steps, and false when the controller sends it none (no --signal,
// B:, no time limit).
func stepsWarnAt(j *api.Job) (time.Time, bool) {
	sp := j.Signal
	if sp == nil || sp.Signal <= 0 || sp.BatchOnly || j.TimeLimit <= 0 || j.StartTime.IsZero() {
		return time.Time{}, false
	}
	return j.StartTime.Add(time.Duration(j.TimeLimit-int64(sp.Seconds)) * time.Second), true
}

// checkSignalWarnings sends the steps' --signal warning of every running
// job whose time has come, once per incarnation. Called every second
// with mu held; jobs being preempted, cancelled or requeued get none.
func (s *Server) checkSignalWarnings(now time.Time) {
	for id, restart := range s.warned {
		if j := s.jobs[id]; j == nil || j.Restarts != restart || !j.State.Active() {
			delete(s.warned, id)
		}
	}
	for _, n := range s.nodes {
		for _, j := range n.batch {
			if j.State != api.StateRunning || j.CancelRequested || j.RequeueRequested || j.Preempting != nil {
				continue
			}
			at, ok := stepsWarnAt(j)
			if !ok || now.Before(at) {
				continue
			}
			if r, sent := s.warned[j.ID]; sent && r == j.Restarts {
				continue
			}
			if s.warned == nil {
				s.warned = map[uint64]int{}
			}
			s.warned[j.ID] = j.Restarts
			nodes := s.signalCommands(j, j.Signal.Signal, false, false)
			s.log.Info("sending time limit warning to the job's steps", "job_id", j.ID, "signal", j.Signal.Signal, "nodes", nodes)
			s.event(j, api.EventSignal, "", fmt.Sprintf("%ssignal %d to the steps, %d s before the time limit",
				warnEventPrefix, j.Signal.Signal, j.Signal.Seconds), "")
		}
	}
}

// recoverSignalWarnings marks, after a restart, the running jobs whose
// steps' warning the controller sent before it stopped (their trail
// says so), so that it is not sent twice. A warning that fell due while
// the controller was down is sent at once. Called by recover, at start.
func (s *Server) recoverSignalWarnings(ctx context.Context) {
	now := s.now()
	for _, j := range s.jobs {
		if j.State != api.StateRunning {
			continue
		}
		if at, ok := stepsWarnAt(j); !ok || now.Before(at) {
			continue
		}
		evs, err := s.store.Events(ctx, j.ID)
		if err != nil {
			s.log.Warn("cannot read job trail: its time limit warning may be sent twice", "job_id", j.ID, "err", err)
			continue
		}
		for _, e := range evs {
			if e.Kind == api.EventSignal && !e.Time.Before(j.StartTime) && strings.HasPrefix(e.Message, warnEventPrefix) {
				if s.warned == nil {
					s.warned = map[uint64]int{}
				}
				s.warned[j.ID] = j.Restarts
				break
			}
		}
	}
}
