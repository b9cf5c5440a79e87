package ctld

// Job steps (issue 7, parts 3 and 4): srun asks the controller for a step
// of a running job, and the controller lays the step's tasks out on the
// job's nodes and signs a grant with its own step key (stepkey.go, issue
// 21) that the node daemons verify with its public half; they also check
// that the job runs on them under the grant's user (hosted.go). srun then
// talks to the nodes directly; the controller never relays a step's I/O.
// Steps are recorded for sacct. Allocation-only jobs (srun outside an
// allocation, salloc) are released here too.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// stepStore is what steps need from the store beyond Store; the SQLite
// store (*accounting.Store) has it. It is asserted rather than added to
// Store so that stores without steps keep working (steps are refused).
type stepStore interface {
	NextStepID(ctx context.Context, jobID uint64) (uint32, error)
	Step(ctx context.Context, jobID uint64, stepID uint32) (api.StepRecord, error)
	Steps(ctx context.Context, jobIDs []uint64) ([]api.StepRecord, error)
}

// noExpiry is how far ahead an unlimited job ends, for its steps.
const noExpiry = 10 * 365 * 24 * time.Hour

// grantTTL is how long a step grant may be used to start the step: srun
// connects to the nodes as soon as it has the grant, and a node starts a
// step once, so a grant is good for seconds; the margin covers clocks a
// little apart and a slow node.
const grantTTL = 2 * time.Minute

func (s *Server) steps() (stepStore, error) {
	st, ok := s.store.(stepStore)
	if !ok {
		return nil, api.Errorf(api.ErrUnavailable, "this controller's store keeps no job steps")
	}
	return st, nil
}

// stepLayout is where a step's tasks go: per node of the job, the
// global ranks and each task's GPUs.
type stepLayout struct {
	nodes  []api.StepNode
	ntasks int
}

// layoutStep lays a step out on j's allocation the way Slurm's block
// distribution does: ranks fill node 0 first, then node 1…
//
//   - -N picks the first N nodes of the job; without it the step uses
//     every node (but no more nodes than tasks when -n is given).
//   - --ntasks-per-node puts that many tasks on each node, up to -n.
//   - -n alone spreads the tasks evenly, the first nodes taking the
//     remainder, except that the job's own task count takes the job's own
//     layout; without -n and --ntasks-per-node the step runs the job's
//     own task layout (SLURM_NTASKS), or one task per node with -N.
//   - --gpus-per-task=G gives local task k the node's job GPUs
//     [k·G, (k+1)·G); without it every task sees all of the node's job
//     GPUs.
//   - --pty runs one task, on the first node, whatever the counts.
//   - tasks × cpus-per-task must fit the job's CPUs on each node.
//
// layoutStep is pure.
func layoutStep(j *api.Job, req api.StepRequest) (stepLayout, error) {
	bad := func(format string, args ...any) (stepLayout, error) {
		return stepLayout{}, api.Invalid("Unable to create step for job %d: "+format, append([]any{j.ID}, args...)...)
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"nodes", req.Nodes}, {"ntasks", req.Tasks}, {"ntasks-per-node", req.TasksPerNode},
		{"cpus-per-task", req.CPUsPerTask}, {"gpus-per-task", req.GPUsPerTask}} {
		if v.n < 0 {
			return bad("--%s must not be negative", v.name)
		}
	}
	jobNodes := len(j.Alloc)
	if jobNodes == 0 {
		return bad("the job has no allocation")
	}
	if req.Nodes > jobNodes {
		return bad("Requested node configuration is not available (%d nodes asked, the job has %d)", req.Nodes, jobNodes)
	}
	var counts []int
	switch {
	case req.Pty:
		// srun --pty runs task zero alone, on the first node, whatever
		// the other counts say (they shape a new allocation only).
		counts = []int{1}
	case req.TasksPerNode > 0:
		n := req.Nodes
		if n == 0 {
			n = jobNodes
			if req.Tasks > 0 {
				n = min(jobNodes, (req.Tasks+req.TasksPerNode-1)/req.TasksPerNode)
			}
		}
		total := req.Tasks
		if total == 0 {
			total = req.TasksPerNode * n
		}
		if total > req.TasksPerNode*n {
			return bad("%d tasks do not fit %d nodes at %d tasks per node", total, n, req.TasksPerNode)
		}
		for left := total; left > 0; {
			c := min(req.TasksPerNode, left)
			counts = append(counts, c)
			left -= c
		}
	case req.Tasks > 0 && req.Nodes == 0 && req.Tasks == jobTasks(j):
		// The job's own task count: its own layout, which the
		// scheduler fitted to each node's GPUs and CPUs.
		for _, a := range j.Alloc {
			counts = append(counts, max(a.Tasks, 1))
		}
	case req.Tasks > 0:
		n := req.Nodes
		if n == 0 {
			n = min(jobNodes, req.Tasks)
		}
		if req.Tasks < n {
			return bad("%d tasks cannot use %d nodes", req.Tasks, n)
		}
		for i := range n {
			c := req.Tasks / n
			if i < req.Tasks%n {
				c++
			}
			counts = append(counts, c)
		}
	case req.Nodes > 0:
		for range req.Nodes {
			counts = append(counts, 1)
		}
	default:
		for _, a := range j.Alloc {
			counts = append(counts, max(a.Tasks, 1))
		}
	}
	cpt := max(req.CPUsPerTask, 1)
	out := stepLayout{}
	rank := 0
	for i, c := range counts {
		a := j.Alloc[i]
		if c*cpt > a.CPUs && a.CPUs > 0 {
			return bad("More processors requested than permitted (%d tasks × %d CPUs on %s, which gives the job %d)", c, cpt, a.Node, a.CPUs)
		}
		sn := api.StepNode{Name: a.Node, CPUs: a.CPUs, MemoryMB: a.MemoryMB, GPUMemMB: a.GPUMemMB, GPUComputePct: a.GPUComputePct}
		if req.GPUsPerTask > 0 && c*req.GPUsPerTask > len(a.GPUs) {
			return bad("%d tasks × %d GPUs do not fit the %d GPUs the job has on %s", c, req.GPUsPerTask, len(a.GPUs), a.Node)
		}
		for k := range c {
			sn.Ranks = append(sn.Ranks, rank)
			rank++
			switch {
			case req.GPUsPerTask > 0:
				sn.GPUs = append(sn.GPUs, slices.Clone(a.GPUs[k*req.GPUsPerTask:(k+1)*req.GPUsPerTask]))
			case len(a.GPUs) > 0:
				sn.GPUs = append(sn.GPUs, slices.Clone(a.GPUs))
			}
		}
		out.nodes = append(out.nodes, sn)
	}
	out.ntasks = rank
	return out, nil
}

// jobTasks is the task count of j's allocation.
func jobTasks(j *api.Job) int {
	n := 0
	for _, a := range j.Alloc {
		n += max(a.Tasks, 1)
	}
	return n
}

// stepAddrOf is where srun reaches node n's step listener: the
// registered address, with an unspecified host (0.0.0.0, ::) replaced by
// the node's own address or hostname.
func stepAddrOf(n *nodeRec) string {
	host, port, err := net.SplitHostPort(n.StepAddr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		switch {
		case n.Addr != "":
			if h, _, err := net.SplitHostPort(n.Addr); err == nil {
				host = h
			} else {
				host = n.Addr
			}
		case n.Hostname != "":
			host = n.Hostname
		default:
			host = n.Name
		}
	}
	return net.JoinHostPort(host, port)
}

// createStep grants a step of job id to caller c.
func (s *Server) createStep(ctx context.Context, c caller, id uint64, req api.StepRequest) (api.StepResponse, error) {
	if !c.known {
		return api.StepResponse{}, api.Errorf(api.ErrUnauthenticated, "steps are only created on the local socket")
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return api.StepResponse{}, api.Invalid("Unable to create step for job %d: no command given", id)
	}
	if req.Cwd == "" || !filepath.IsAbs(req.Cwd) {
		return api.StepResponse{}, api.Invalid("Unable to create step for job %d: working directory %q must be an absolute path", id, req.Cwd)
	}
	st, err := s.steps()
	if err != nil {
		return api.StepResponse{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	switch {
	case j == nil:
		return api.StepResponse{}, api.Errorf(api.ErrNotFound, "Unable to create step for job %d: Invalid job id specified", id)
	case !c.admin && c.uid != j.UserID:
		return api.StepResponse{}, api.Errorf(api.ErrPermissionDenied, "Unable to create step for job %d: Access/permission denied", id)
	case j.State != api.StateRunning:
		return api.StepResponse{}, api.Errorf(api.ErrConflict, "Unable to create step for job %d: Job is not running (%s)", id, j.State)
	}
	lay, err := layoutStep(j, req)
	if err != nil {
		return api.StepResponse{}, err
	}
	for i := range lay.nodes {
		n := s.nodes[lay.nodes[i].Name]
		if n == nil || n.StepAddr == "" {
			return api.StepResponse{}, api.Errorf(api.ErrUnavailable,
				"Unable to create step for job %d: node %s accepts no steps (its tided registered no step listener)", id, lay.nodes[i].Name)
		}
		lay.nodes[i].Addr = stepAddrOf(n)
	}
	signer, err := s.stepSigner()
	if err != nil {
		return api.StepResponse{}, api.Errorf(api.ErrUnavailable, "Unable to create step for job %d: %v", id, err)
	}
	stepID, err := st.NextStepID(ctx, id)
	if err != nil {
		return api.StepResponse{}, fmt.Errorf("Unable to create step for job %d: %w", id, err)
	}
	now := s.now()
	jobEnd := j.StartTime.Add(noExpiry)
	if j.TimeLimit > 0 {
		jobEnd = j.StartTime.Add(time.Duration(j.TimeLimit) * time.Second)
	}
	expires := now.Add(grantTTL)
	if jobEnd.Before(expires) {
		expires = jobEnd
	}
	g := &api.StepGrant{JobID: id, Restart: j.Restarts, StepID: stepID, JobName: j.Name, UserID: j.UserID, GroupID: j.GroupID, User: j.User,
		Partition: j.Partition, Cluster: s.cl.ClusterName,
		Issued: now.UTC(), Expires: expires.UTC(), JobEnd: jobEnd.UTC(), JobNodes: j.NodeNames(),
		Nodes: lay.nodes, NTasks: lay.ntasks, Argv: req.Argv, Cwd: req.Cwd, Env: req.Env, Pty: req.Pty}
	signed, err := signer.Sign(g)
	if err != nil {
		return api.StepResponse{}, err
	}
	name := req.Name
	if name == "" {
		name = filepath.Base(req.Argv[0])
	}
	rec := api.StepRecord{JobID: id, StepID: stepID, Name: name, State: api.StateRunning, UserID: j.UserID,
		Start: now, NTasks: lay.ntasks}
	for _, sn := range lay.nodes {
		rec.Nodes = append(rec.Nodes, sn.Name)
		rec.CPUs += min(sn.CPUs, len(sn.Ranks)*max(req.CPUsPerTask, 1))
		seen := map[int]bool{}
		for _, gs := range sn.GPUs {
			for _, x := range gs {
				seen[x] = true
			}
		}
		rec.GPUs += len(seen)
	}
	b := s.pendingBatch()
	b.Steps = []api.StepRecord{rec}
	b.Events = append(b.Events, api.Event{JobID: id, Time: now, Kind: api.EventStepStart, State: j.State,
		Message: fmt.Sprintf("step %d.%d (%s) started: %d tasks on %d nodes", id, stepID, name, lay.ntasks, len(lay.nodes)), Actor: c.user})
	if err := s.storeWrite(ctx, b); err != nil {
		return api.StepResponse{}, api.Errorf(api.ErrUnavailable, "Unable to create step for job %d: could not store the step: %v", id, err)
	}
	s.stored()
	return api.StepResponse{Grant: signed, CA: s.caPEM()}, nil
}

// endStep records how a step ended, as srun reports it.
func (s *Server) endStep(ctx context.Context, c caller, id uint64, stepID uint32, e api.StepEnd) error {
	st, err := s.steps()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := st.Step(ctx, id, stepID)
	if err != nil {
		return err
	}
	if !c.admin && c.uid != rec.UserID {
		return api.Errorf(api.ErrPermissionDenied, "Access/permission denied")
	}
	if rec.State != api.StateRunning {
		return nil // reported twice: the first report stands
	}
	rec.End, rec.Exit = s.now(), e.Exit
	switch {
	case e.Cancelled:
		rec.State = api.StateCancelled
	case e.Exit.Code != 0 || e.Exit.Signal != 0:
		rec.State = api.StateFailed
	default:
		rec.State = api.StateCompleted
	}
	b := s.pendingBatch()
	b.Steps = []api.StepRecord{rec}
	b.Events = append(b.Events, api.Event{JobID: id, Time: rec.End, Kind: api.EventStepEnd, State: rec.State,
		Message: fmt.Sprintf("step %d.%d ended %s exit %s", id, stepID, rec.State, rec.Exit), Actor: c.user})
	if err := s.storeWrite(ctx, b); err != nil {
		return api.Errorf(api.ErrUnavailable, "record end of step %d.%d: %v", id, stepID, err)
	}
	s.stored()
	return nil
}

// listSteps returns the steps of jobs ids for sacct. A step still
// RUNNING in the store whose job has ended (srun died without
// reporting) is shown as ended with its job: CANCELLED at the job's end.
func (s *Server) listSteps(ctx context.Context, ids []uint64) ([]api.StepRecord, error) {
	st, err := s.steps()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.flushAll()
	s.mu.Unlock()
	steps, err := st.Steps(ctx, ids)
	if err != nil {
		return nil, err
	}
	var open []uint64
	for _, x := range steps {
		if x.State == api.StateRunning {
			open = append(open, x.JobID)
		}
	}
	if len(open) == 0 {
		return steps, nil
	}
	ended := map[uint64]api.Job{}
	s.mu.Lock()
	for _, id := range open {
		if j := s.jobs[id]; j != nil && j.State.Terminal() {
			ended[id] = *j
		}
	}
	s.mu.Unlock()
	for _, id := range open {
		if _, ok := ended[id]; ok {
			continue
		}
		s.mu.Lock()
		_, live := s.jobs[id]
		s.mu.Unlock()
		if live {
			continue
		}
		if js, err := s.store.QueryJobs(ctx, api.JobFilter{IDs: []uint64{id}, All: true}); err == nil && len(js) > 0 && js[0].State.Terminal() {
			ended[id] = js[0]
		}
	}
	for i := range steps {
		if j, ok := ended[steps[i].JobID]; ok && steps[i].State == api.StateRunning {
			steps[i].State, steps[i].End = api.StateCancelled, j.EndTime
		}
	}
	return steps, nil
}

// releaseAllocation ends an allocation-only job as its srun or salloc
// reports: COMPLETED for 0:0, FAILED otherwise. A pending one is
// cancelled; an ended one is left as it is.
func (s *Server) releaseAllocation(c caller, id uint64, exit api.ExitStatus) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	switch {
	case j == nil:
		return api.Errorf(api.ErrNotFound, "Invalid job id specified")
	case !c.admin && c.uid != j.UserID:
		return api.Errorf(api.ErrPermissionDenied, "Access/permission denied")
	case !j.Allocation:
		return api.Invalid("job %d is a batch job, not an allocation: cancel it with scancel", id)
	case j.State.Terminal():
		return nil
	case j.State == api.StatePending:
		s.cancelJob(c, j, s.now())
	default:
		state, reason := api.StateCompleted, api.ReasonNone
		switch {
		case j.CancelRequested:
			state, reason = api.StateCancelled, api.ReasonCancelled
		case exit.Code != 0 || exit.Signal != 0:
			state, reason = api.StateFailed, api.ReasonNonZeroExit
		}
		s.endJob(j, state, reason, exit, s.now(), "allocation released by "+c.user+", exit "+exit.String())
	}
	s.flush()
	return nil
}

// expireAllocations ends allocation-only jobs at their time limit: no
// node enforces it, since no node runs them. Called with mu held.
func (s *Server) expireAllocations(now time.Time) {
	for _, n := range s.nodes {
		for _, j := range n.batch {
			if !j.Allocation || j.State != api.StateRunning || j.TimeLimit <= 0 || s.dirty[j.ID] {
				continue
			}
			if end := j.StartTime.Add(time.Duration(j.TimeLimit) * time.Second); !now.Before(end) {
				j.TimedOut = true
				s.endJob(j, api.StateTimeout, api.ReasonTimeLimit, api.ExitStatus{}, now, "allocation reached its time limit")
			}
		}
	}
}

// --- HTTP handlers (routes in http.go) ---

func stepPath(r *http.Request) (uint32, error) {
	n, err := strconv.ParseUint(r.PathValue("step"), 10, 32)
	if err != nil {
		return 0, api.Invalid("Invalid job step specified: %s", r.PathValue("step"))
	}
	return uint32(n), nil
}

func (s *Server) handleCreateStep(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	var req api.StepRequest
	if err := decode(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	resp, err := s.createStep(r.Context(), s.callerOf(r), id, req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, resp)
}

func (s *Server) handleStepEnd(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	step, err := stepPath(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	var e api.StepEnd
	if err := decode(r, &e); err != nil {
		writeErr(w, err)
		return
	}
	if err := s.endStep(r.Context(), s.callerOf(r), id, step, e); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, struct{}{})
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	var req api.ReleaseRequest
	if err := decode(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if err := s.releaseAllocation(s.callerOf(r), id, req.Exit); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, struct{}{})
}

// handleSteps answers GET /api/v1/accounting/steps?job=N&job=M.
func (s *Server) handleSteps(w http.ResponseWriter, r *http.Request) {
	var ids []uint64
	for _, v := range r.URL.Query()["job"] {
		id, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeErr(w, api.Invalid("Invalid job id specified: %s", v))
			return
		}
		ids = append(ids, id)
	}
	steps, err := s.listSteps(r.Context(), ids)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, api.StepList{Steps: s.accountingView(s.callerOf(r)).keepSteps(steps)})
}
