package ctld

// The running steps of running jobs (issue 22): what each holds of its
// job's allocation, so that a step that does not fit beside the others
// waits (srun retries on api.StepBusy), and scancel J.S, which signals
// or cancels one step on its nodes.
//
// The controller learns of a step's end from srun (endStep). A step
// whose srun was killed with SIGKILL before it could report keeps what
// it holds until scancel J.S or the end of its job. A job's live steps
// are read from the store the first time they are needed, so that a
// restarted controller still knows what its running steps hold.

import (
	"context"
	"fmt"
	"sort"
	"syscall"

	"github.com/tide-hpc/tide/ctld/api"
)

// liveStep is one running step.
type liveStep struct {
	restart int
	overlap bool
	// cancelled: scancel J.S ended it; it holds nothing any more and
	// its end is recorded CANCELLED whatever srun reports.
	cancelled bool
	rec       api.StepRecord
}

// addLiveStep records a step just granted; it also forgets the steps of
// jobs that no longer run. Called with mu held.
func (s *Server) addLiveStep(j *api.Job, rec api.StepRecord, overlap bool, lay stepLayout) {
	s.pruneLiveSteps()
	s.jobLiveSteps(j)[rec.StepID] = &liveStep{restart: j.Restarts, overlap: overlap, rec: rec}
}

// removeLiveStep forgets a step that ended and reports whether scancel
// had cancelled it. The job's (maybe empty) set stays: it says that
// its steps were read from the store already. Called with mu held.
func (s *Server) removeLiveStep(jobID uint64, stepID uint32) (cancelled bool) {
	m := s.liveSteps[jobID]
	if ls := m[stepID]; ls != nil {
		cancelled = ls.cancelled
		delete(m, stepID)
	}
	return cancelled
}

// loadLiveSteps reads running job j's steps that are still running
// from the store: those of this run of the job whose end no srun
// reported. Called with mu held.
func (s *Server) loadLiveSteps(j *api.Job) map[uint32]*liveStep {
	if s.liveSteps == nil {
		s.liveSteps = map[uint64]map[uint32]*liveStep{}
	}
	m := map[uint32]*liveStep{}
	s.liveSteps[j.ID] = m
	st, err := s.steps()
	if err != nil {
		return m
	}
	recs, err := st.Steps(context.Background(), []uint64{j.ID})
	if err != nil {
		s.log.Warn("cannot read the job's steps: a new step may share what they hold", "job_id", j.ID, "err", err)
		return m
	}
	for _, r := range recs {
		if r.State == api.StateRunning && !r.Start.Before(j.StartTime) {
			m[r.StepID] = &liveStep{restart: j.Restarts, overlap: r.Overlap, rec: r}
		}
	}
	return m
}

// pruneLiveSteps forgets the steps of jobs that ended or were requeued.
// Called with mu held.
func (s *Server) pruneLiveSteps() {
	for id, m := range s.liveSteps {
		j := s.jobs[id]
		for sid, ls := range m {
			if j == nil || j.State != api.StateRunning || j.Restarts != ls.restart {
				delete(m, sid)
			}
		}
		if len(m) == 0 {
			delete(s.liveSteps, id)
		}
	}
}

// jobLiveSteps returns running job j's live steps, by step id; steps of
// an earlier incarnation are dropped. Called with mu held.
func (s *Server) jobLiveSteps(j *api.Job) map[uint32]*liveStep {
	m, loaded := s.liveSteps[j.ID]
	if !loaded {
		m = s.loadLiveSteps(j)
	}
	for sid, ls := range m {
		if j.State != api.StateRunning || j.Restarts != ls.restart {
			delete(m, sid)
		}
	}
	return m
}

// stepHolds sums, by node, what job j's running steps hold: the CPUs,
// memory and GPUs a new step may not take. --overlap steps and
// cancelled ones hold nothing. Called with mu held.
func (s *Server) stepHolds(j *api.Job) map[string]stepHold {
	out := map[string]stepHold{}
	for _, ls := range s.jobLiveSteps(j) {
		if ls.overlap || ls.cancelled {
			continue
		}
		for _, u := range ls.rec.Layout {
			h := out[u.Node]
			h.cpus += u.CPUs
			h.memMB += u.MemoryMB
			if len(u.GPUs) > 0 && h.gpus == nil {
				h.gpus = map[int]bool{}
			}
			for _, g := range u.GPUs {
				h.gpus[g] = true
			}
			out[u.Node] = h
		}
	}
	return out
}

// cancelSteps carries out scancel J.S: req.Signal (SIGKILL when none,
// a cancel) goes to the tasks of each named step on its nodes, and to
// nothing else of the job. A cancelled step stops holding its resources
// at once: the steps waiting for them may start while its tasks die.
// Called with mu held.
func (s *Server) cancelSteps(c caller, req api.CancelRequest) []api.JobResult {
	sig := req.Signal
	if sig == 0 {
		sig = int(syscall.SIGKILL)
	}
	refs := append([]api.StepRef(nil), req.Steps...)
	sort.SliceStable(refs, func(a, b int) bool {
		if refs[a].JobID != refs[b].JobID {
			return refs[a].JobID < refs[b].JobID
		}
		return refs[a].StepID < refs[b].StepID
	})
	var out []api.JobResult
	for _, r := range refs {
		res := api.JobResult{JobID: r.JobID, ID: r.String()}
		j := s.jobs[r.JobID]
		var ls *liveStep
		if j != nil {
			ls = s.jobLiveSteps(j)[r.StepID]
		}
		switch {
		case j == nil && s.knownFinished(r.JobID):
			res.Error = "Job/step already completing or completed"
		case j == nil:
			res.Error = "Invalid job id specified"
		case !c.admin && c.uid != j.UserID:
			res.Error = "Access/permission denied"
		case j.State != api.StateRunning:
			res.Error = "Job/step already completing or completed"
		case ls == nil || ls.cancelled:
			res.Error = "Invalid job step id specified"
		default:
			sent := 0
			for _, name := range ls.rec.Nodes {
				n := s.nodes[name]
				if n == nil {
					continue
				}
				n.signals = append(n.signals, api.SignalCommand{JobRef: ref(j), Signal: sig, Steps: true, StepIDs: []uint32{r.StepID}})
				n.notify()
				sent++
			}
			what := fmt.Sprintf("signal %d to step %s sent by %s", sig, r, c.user)
			if sig == int(syscall.SIGKILL) {
				ls.cancelled = true
				what = fmt.Sprintf("step %s cancelled by %s", r, c.user)
				// Recorded ended now: srun's report, if it comes,
				// finds the step ended (the first report stands),
				// and one that never comes leaves no step running.
				rec := ls.rec
				rec.State, rec.End, rec.Exit = api.StateCancelled, s.now(), api.ExitStatus{Signal: sig}
				b := s.pendingBatch()
				b.Steps = []api.StepRecord{rec}
				if err := s.storeWrite(context.Background(), b); err != nil {
					s.log.Error("record a cancelled step", "job_id", j.ID, "step", r.StepID, "err", err)
				} else {
					s.stored()
				}
			}
			s.event(j, api.EventSignal, "", what, c.user)
			s.auditf(c, "signal", fmt.Sprintf("step %s", r), "signal=%d nodes=%d", sig, sent)
		}
		out = append(out, res)
	}
	return out
}
