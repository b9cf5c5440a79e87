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
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
// global ranks and each task's GPUs, and what the step holds there.
type stepLayout struct {
	nodes  []api.StepNode
	ntasks int
}

// stepHold is what the live steps of a job hold on one node, summed:
// CPUs, memory and GPU indices that other steps may not take.
type stepHold struct {
	cpus  int
	memMB int64
	gpus  map[int]bool
}

// errStepBusy: the step fits the job but not what its other steps hold
// now; srun waits for them (api.StepBusy).
var errStepBusy = errors.New(api.StepBusy)

// layoutStep lays a step out on j's whole allocation, as if no other
// step ran (layoutStepIn with nothing held). It is pure.
func layoutStep(j *api.Job, req api.StepRequest) (stepLayout, error) {
	return layoutStepIn(j, req, nil)
}

// layoutStepIn lays a step out on j's allocation, the way Slurm's block
// distribution does: ranks fill node 0 first, then node 1…
//
//   - -N picks N nodes of the job; without it the step uses every node
//     (but no more nodes than tasks when -n is given). -w names nodes
//     of the job the step must use, -x nodes it must not, -r the job's
//     node it starts at.
//   - --ntasks-per-node puts that many tasks on each node, up to -n.
//   - -n alone spreads the tasks evenly, the first nodes taking the
//     remainder, except that the job's own task count takes the job's own
//     layout; without -n and --ntasks-per-node the step runs the job's
//     own task layout (SLURM_NTASKS), or one task per node with -N.
//   - -m cyclic deals the ranks out one per node in turn, plane=N N at
//     a time; block (the default) fills each node first.
//   - --pty runs one task, on the first node, whatever the counts.
//   - tasks × cpus-per-task must fit the job's CPUs on each node
//     (unless -O).
//
// What the step holds on each node it uses (Slurm 22.05's rules): with
// --exact (implied by -c) the CPUs its tasks ask for, else every CPU
// of the job there that no other step holds; --mem or --mem-per-cpu of
// the job's memory there; --gpus-per-task, --gpus-per-node or a share
// of --gpus of the job's GPUs there, the lowest free indices first.
// held is what the job's other steps hold, by node (nil: none); a step
// whose needs fit the job but not what is left of it fails with
// errStepBusy, one that can never fit with an invalid-argument error.
// An --overlap step holds nothing and ignores held.
//
// Each task sees the GPUs --gpu-bind gives it among the step's GPUs on
// its node (without GPU options, the job's GPUs there): with
// --gpus-per-task (or per_task:G) task k its own G, with single:N one
// GPU per N tasks, with map_gpu and mask_gpu the listed ones; else all
// of them. layoutStepIn is pure.
func layoutStepIn(j *api.Job, req api.StepRequest, held map[string]stepHold) (stepLayout, error) {
	bad := func(format string, args ...any) (stepLayout, error) {
		return stepLayout{}, api.Invalid("Unable to create step for job %d: "+format, append([]any{j.ID}, args...)...)
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"nodes", req.Nodes}, {"ntasks", req.Tasks}, {"ntasks-per-node", req.TasksPerNode},
		{"cpus-per-task", req.CPUsPerTask}, {"gpus-per-task", req.GPUsPerTask}, {"gpus", req.GPUs},
		{"gpus-per-node", req.GPUsPerNode}} {
		if v.n < 0 {
			return bad("--%s must not be negative", v.name)
		}
	}
	if req.MemPerCPUMB < 0 || req.MemPerNodeMB < api.MemWholeNode {
		return bad("--mem must not be negative")
	}
	jobNodes := len(j.Alloc)
	if jobNodes == 0 {
		return bad("the job has no allocation")
	}
	if req.Nodes > jobNodes {
		return bad("Requested node configuration is not available (%d nodes asked, the job has %d)", req.Nodes, jobNodes)
	}
	bind, err := api.ParseGPUBind(req.GPUBind)
	if err != nil {
		return bad("%v", err)
	}
	if bind.Kind == "per_task" && req.GPUsPerTask == 0 {
		req.GPUsPerTask = bind.N
	}
	hosts, err := arbitraryHosts(&req)
	if err != nil {
		return bad("%v", err)
	}
	if req.Tasks > 0 && req.Nodes > req.Tasks && !req.Pty {
		return bad("%d tasks cannot use %d nodes", req.Tasks, req.Nodes)
	}
	cands, err := stepCandidates(j, req)
	if err != nil {
		return bad("%v", err)
	}
	counts, fixed := stepCounts(j, req, len(cands))
	if hosts != nil {
		// -m arbitrary: each node runs the tasks the host file puts
		// on it, and no other node runs any.
		counts, fixed = make([]int, len(cands)), true
		for k, i := range cands {
			counts[k] = len(hosts[j.Alloc[i].Node])
		}
	}
	if len(counts) == 0 {
		return bad("no tasks to run")
	}
	if len(counts) > len(cands) {
		return bad("Requested node configuration is not available (%d nodes needed, %d of the job's may be used)", len(counts), len(cands))
	}
	if req.TasksPerNode > 0 && req.Tasks > 0 && len(counts) < (req.Tasks+req.TasksPerNode-1)/req.TasksPerNode {
		return bad("%d tasks do not fit %d nodes at %d tasks per node", req.Tasks, len(counts), req.TasksPerNode)
	}
	exact := (req.Exact || req.CPUsPerTask > 0) && !req.Whole
	cpt := max(req.CPUsPerTask, 1)
	gpusAt := func(pos, c int) int {
		switch {
		case req.GPUsPerTask > 0:
			return c * req.GPUsPerTask
		case req.GPUsPerNode > 0:
			return req.GPUsPerNode
		case req.GPUs > 0:
			n := len(counts)
			g := req.GPUs / n
			if pos < req.GPUs%n {
				g++
			}
			return g
		}
		return 0
	}
	// fit checks node a for c tasks at position pos against what the
	// step may take there: all of the job's (free nil) or what other
	// steps left. It returns the step's hold, or why it does not fit
	// (busy is true when only other steps are in the way).
	type take struct {
		cpus  int
		memMB int64
		gpus  []int
	}
	fit := func(a api.NodeAlloc, c, pos int, h stepHold) (take, string, bool) {
		need := c * cpt
		if a.CPUs > 0 && need > a.CPUs && !req.Overcommit {
			return take{}, fmt.Sprintf("More processors requested than permitted (%d tasks × %d CPUs on %s, which gives the job %d)", c, cpt, a.Node, a.CPUs), false
		}
		free := a.CPUs - h.cpus
		var t take
		switch {
		case a.CPUs <= 0:
		case exact:
			t.cpus = min(need, a.CPUs)
			if req.Overcommit {
				t.cpus = min(t.cpus, max(free, 1))
			}
		default:
			// Without --exact the step takes the node's CPUs that
			// no other step holds.
			t.cpus = free
			if !req.Overcommit {
				t.cpus = max(t.cpus, min(need, a.CPUs))
			}
		}
		if t.cpus > free || t.cpus <= 0 && a.CPUs > 0 {
			return take{}, fmt.Sprintf("%d of the job's %d CPUs on %s are held by other steps", h.cpus, a.CPUs, a.Node), true
		}
		switch {
		case req.MemPerNodeMB > 0:
			t.memMB = req.MemPerNodeMB
		case req.MemPerCPUMB > 0:
			t.memMB = req.MemPerCPUMB * int64(max(t.cpus, need))
		}
		if t.memMB > 0 && a.MemoryMB > 0 {
			if t.memMB > a.MemoryMB {
				return take{}, fmt.Sprintf("Memory required by task is not available (%d MB asked on %s, which gives the job %d MB)", t.memMB, a.Node, a.MemoryMB), false
			}
			if t.memMB > a.MemoryMB-h.memMB {
				return take{}, fmt.Sprintf("%d MB of the job's %d MB on %s are held by other steps", h.memMB, a.MemoryMB, a.Node), true
			}
		}
		g := gpusAt(pos, c)
		if g > len(a.GPUs) {
			if req.GPUsPerTask > 0 {
				return take{}, fmt.Sprintf("%d tasks × %d GPUs do not fit the %d GPUs the job has on %s", c, req.GPUsPerTask, len(a.GPUs), a.Node), false
			}
			return take{}, fmt.Sprintf("%d GPUs do not fit the %d GPUs the job has on %s", g, len(a.GPUs), a.Node), false
		}
		for _, x := range a.GPUs {
			if len(t.gpus) == g {
				break
			}
			if !h.gpus[x] {
				t.gpus = append(t.gpus, x)
			}
		}
		if len(t.gpus) < g {
			return take{}, fmt.Sprintf("%d of the job's %d GPUs on %s are held by other steps", len(h.gpus), len(a.GPUs), a.Node), true
		}
		return t, "", false
	}
	holdOf := func(name string) stepHold {
		if req.Overlap || held == nil {
			return stepHold{}
		}
		return held[name]
	}
	// Choose the nodes: the job's own layout uses every candidate; else
	// the first candidates each of which fits its count.
	type pick struct {
		idx int
		t   take
	}
	var picks []pick
	busy := ""
	next := 0
	for pos, c := range counts {
		found := false
		for ; next < len(cands); next++ {
			i := cands[next]
			a := j.Alloc[i]
			if _, why, _ := fit(a, c, pos, stepHold{}); why != "" {
				// Never fits this node, other steps or not.
				if fixed {
					return bad("%s", why)
				}
				continue
			}
			t, why, isBusy := fit(a, c, pos, holdOf(a.Node))
			if why != "" {
				if fixed {
					if isBusy {
						return stepLayout{}, fmt.Errorf("%w: %s", errStepBusy, why)
					}
					return bad("%s", why)
				}
				if busy == "" {
					busy = why
				}
				continue
			}
			picks = append(picks, pick{i, t})
			next++
			found = true
			break
		}
		if !found {
			if busy != "" {
				return stepLayout{}, fmt.Errorf("%w: %s", errStepBusy, busy)
			}
			// Explain with the first candidate's own reason.
			for _, i := range cands {
				if _, why, _ := fit(j.Alloc[i], c, pos, stepHold{}); why != "" {
					return bad("%s", why)
				}
			}
			return bad("Requested node configuration is not available")
		}
	}
	out := stepLayout{}
	ranks := distribute(counts, req.Distribution)
	if hosts != nil {
		for k, p := range picks {
			ranks[k] = hosts[j.Alloc[p.idx].Node]
		}
	}
	for k, p := range picks {
		a := j.Alloc[p.idx]
		sn := api.StepNode{Name: a.Node, CPUs: a.CPUs, MemoryMB: a.MemoryMB, GPUMemMB: a.GPUMemMB, GPUComputePct: a.GPUComputePct,
			StepCPUs: p.t.cpus, StepMemMB: p.t.memMB, StepGPUs: p.t.gpus, Ranks: ranks[k], JobGPUs: a.GPUs}
		seen := a.GPUs
		if gpusAt(k, counts[k]) > 0 {
			seen = p.t.gpus
		}
		per, err := bind.Tasks(seen, len(sn.Ranks), req.GPUsPerTask)
		if err != nil {
			return bad("%v", err)
		}
		sn.GPUs = per
		out.nodes = append(out.nodes, sn)
		out.ntasks += len(sn.Ranks)
	}
	return out, nil
}

// maxTaskHosts bounds an arbitrary layout's task list.
const maxTaskHosts = 1 << 16

// arbitraryHosts reads an arbitrary layout (req.TaskHosts): the ranks
// each named node runs, and req narrowed to those nodes and that many
// tasks. It returns nil when the step names no hosts.
func arbitraryHosts(req *api.StepRequest) (map[string][]int, error) {
	if len(req.TaskHosts) == 0 {
		return nil, nil
	}
	if len(req.TaskHosts) > maxTaskHosts {
		return nil, fmt.Errorf("%d task hosts given, at most %d", len(req.TaskHosts), maxTaskHosts)
	}
	if req.Tasks > 0 && req.Tasks != len(req.TaskHosts) {
		return nil, fmt.Errorf("%d tasks asked, the host list names %d", req.Tasks, len(req.TaskHosts))
	}
	if req.Pty {
		return nil, errors.New("--distribution=arbitrary lays out every task itself: no --pty")
	}
	// The host file decides the tasks per node (an inherited
	// SLURM_NTASKS_PER_NODE does not).
	req.TasksPerNode = 0
	hosts := map[string][]int{}
	var order []string
	for i, h := range req.TaskHosts {
		if h == "" {
			return nil, fmt.Errorf("task %d has no host", i)
		}
		if _, ok := hosts[h]; !ok {
			order = append(order, h)
		}
		hosts[h] = append(hosts[h], i)
	}
	req.NodeList, req.Nodes, req.Tasks = order, len(order), len(req.TaskHosts)
	return hosts, nil
}

// stepCandidates lists the indices of j's nodes the step may use, in
// the job's order, after -r, -w and -x.
func stepCandidates(j *api.Job, req api.StepRequest) ([]int, error) {
	first := 0
	if req.Relative != nil {
		if *req.Relative < 0 || *req.Relative >= len(j.Alloc) {
			return nil, fmt.Errorf("Requested node configuration is not available (--relative=%d, the job has %d nodes)", *req.Relative, len(j.Alloc))
		}
		first = *req.Relative
	}
	inJob := map[string]bool{}
	for _, a := range j.Alloc {
		inJob[a.Node] = true
	}
	want := map[string]bool{}
	for _, n := range req.NodeList {
		if !inJob[n] {
			return nil, fmt.Errorf("Requested node configuration is not available (node %s is not in the job's allocation)", n)
		}
		want[n] = true
	}
	skip := map[string]bool{}
	for _, n := range req.Exclude {
		skip[n] = true
	}
	var out, rest []int
	for i := first; i < len(j.Alloc); i++ {
		n := j.Alloc[i].Node
		switch {
		case skip[n]:
			if want[n] {
				return nil, fmt.Errorf("Requested node configuration is not available (node %s both named and excluded)", n)
			}
		case len(want) == 0 || want[n]:
			out = append(out, i)
		default:
			rest = append(rest, i)
		}
	}
	if len(want) > 0 && len(out) < len(want) {
		return nil, errors.New("Requested node configuration is not available (a named node is before --relative's)")
	}
	if len(want) > 0 && req.Nodes > len(want) {
		// -N above -w's count adds other nodes of the job.
		out = append(out, rest...)
	}
	return out, nil
}

// stepCounts returns the tasks per node of a step given ncand usable
// nodes; fixed means the job's own layout, one count per candidate.
func stepCounts(j *api.Job, req api.StepRequest, ncand int) (counts []int, fixed bool) {
	whole := req.Relative == nil && len(req.NodeList) == 0 && len(req.Exclude) == 0
	switch {
	case req.Pty:
		// srun --pty runs task zero alone, on the first node, whatever
		// the other counts say (they shape a new allocation only).
		return []int{1}, false
	case req.TasksPerNode > 0:
		n := req.Nodes
		if n == 0 {
			n = ncand
			if req.Tasks > 0 {
				n = min(ncand, (req.Tasks+req.TasksPerNode-1)/req.TasksPerNode)
			}
		}
		total := req.Tasks
		if total == 0 {
			total = req.TasksPerNode * n
		}
		for left := total; left > 0 && len(counts) < n; {
			c := min(req.TasksPerNode, left)
			counts = append(counts, c)
			left -= c
		}
		return counts, false
	case req.Tasks > 0 && req.Nodes == 0 && whole && req.Tasks == jobTasks(j):
		// The job's own task count: its own layout, which the
		// scheduler fitted to each node's GPUs and CPUs.
		for _, a := range j.Alloc {
			counts = append(counts, max(a.Tasks, 1))
		}
		return counts, true
	case req.Tasks > 0:
		n := req.Nodes
		if n == 0 {
			n = min(ncand, req.Tasks)
			if len(req.NodeList) > 0 {
				n = min(len(req.NodeList), req.Tasks)
			}
		}
		for i := range n {
			c := req.Tasks / n
			if i < req.Tasks%n {
				c++
			}
			counts = append(counts, c)
		}
		return counts, false
	case req.Nodes > 0:
		for range req.Nodes {
			counts = append(counts, 1)
		}
		return counts, false
	case len(req.NodeList) > 0:
		for range min(len(req.NodeList), ncand) {
			counts = append(counts, 1)
		}
		return counts, false
	case !whole:
		for range ncand {
			counts = append(counts, 1)
		}
		return counts, false
	}
	for _, a := range j.Alloc {
		counts = append(counts, max(a.Tasks, 1))
	}
	return counts, true
}

// distribute numbers the tasks of nodes holding counts tasks each: block
// fills each node in turn, cyclic deals one task per node round the
// nodes, plane=N deals N at a time. It is pure.
func distribute(counts []int, dist string) [][]int {
	out := make([][]int, len(counts))
	first, _, _ := strings.Cut(dist, ":")
	first, _, _ = strings.Cut(first, ",")
	block := 0
	switch {
	case first == "cyclic":
		block = 1
	case strings.HasPrefix(first, "plane="):
		if n, err := strconv.Atoi(first[len("plane="):]); err == nil && n > 0 {
			block = n
		}
	}
	rank := 0
	if block == 0 {
		for i, c := range counts {
			for range c {
				out[i] = append(out[i], rank)
				rank++
			}
		}
		return out
	}
	for left := true; left; {
		left = false
		for i, c := range counts {
			for k := 0; k < block && len(out[i]) < c; k++ {
				out[i] = append(out[i], rank)
				rank++
			}
			if len(out[i]) < c {
				left = true
			}
		}
	}
	return out
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
	lay, err := layoutStepIn(j, req, s.stepHolds(j))
	if errors.Is(err, errStepBusy) {
		return api.StepResponse{}, api.Errorf(api.ErrConflict, "Unable to create step for job %d: %s", id, api.StepBusy)
	}
	if err != nil {
		return api.StepResponse{}, err
	}
	if len(req.TaskArgv) > 0 && len(req.TaskArgv) != lay.ntasks {
		return api.StepResponse{}, api.Invalid("Unable to create step for job %d: --multi-prog names %d tasks, the step has %d", id, len(req.TaskArgv), lay.ntasks)
	}
	for i, a := range req.TaskArgv {
		if len(a) == 0 || a[0] == "" {
			return api.StepResponse{}, api.Invalid("Unable to create step for job %d: --multi-prog gives task %d no program", id, i)
		}
	}
	for i := range lay.nodes {
		n := s.nodes[lay.nodes[i].Name]
		if n == nil || n.StepAddr == "" {
			return api.StepResponse{}, api.Errorf(api.ErrUnavailable,
				"Unable to create step for job %d: node %s accepts no steps (its tided registered no step listener)", id, lay.nodes[i].Name)
		}
		lay.nodes[i].Addr = stepAddrOf(n)
		lay.nodes[i].TopoAddr, lay.nodes[i].TopoPattern = s.cl.Tree.NodeAddr(n.Name)
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
	stepEnd := jobEnd
	if req.TimeLimit > 0 {
		// The step's own -t ends its tasks before the job's end.
		if e := now.Add(time.Duration(req.TimeLimit) * time.Second); e.Before(stepEnd) {
			stepEnd = e
		}
	}
	expires := now.Add(grantTTL)
	if stepEnd.Before(expires) {
		expires = stepEnd
	}
	g := &api.StepGrant{JobID: id, Restart: j.Restarts, StepID: stepID, JobName: j.Name, UserID: j.UserID, GroupID: j.GroupID, User: j.User,
		Partition: j.Partition, Cluster: s.cl.ClusterName, Account: j.Account, QOS: j.QOS,
		Issued: now.UTC(), Expires: expires.UTC(), JobEnd: stepEnd.UTC(), JobNodes: j.NodeNames(),
		Nodes: lay.nodes, NTasks: lay.ntasks, Argv: req.Argv, Cwd: req.Cwd, Env: req.Env, Pty: req.Pty,
		CPUBind: req.CPUBind, GPUBind: req.GPUBind, TaskArgv: req.TaskArgv, TaskProlog: req.TaskProlog,
		TaskEpilog: req.TaskEpilog, MPI: req.MPI, PreserveEnv: req.PreserveEnv}
	signed, err := signer.Sign(g)
	if err != nil {
		return api.StepResponse{}, err
	}
	name := req.Name
	if name == "" {
		name = filepath.Base(req.Argv[0])
	}
	rec := stepRecord(j, stepID, name, now, req, lay)
	b := s.pendingBatch()
	b.Steps = []api.StepRecord{rec}
	b.Events = append(b.Events, api.Event{JobID: id, Time: now, Kind: api.EventStepStart, State: j.State,
		Message: fmt.Sprintf("step %d.%d (%s) started: %d tasks on %d nodes", id, stepID, name, lay.ntasks, len(lay.nodes)), Actor: c.user})
	if err := s.storeWrite(ctx, b); err != nil {
		return api.StepResponse{}, api.Errorf(api.ErrUnavailable, "Unable to create step for job %d: could not store the step: %v", id, err)
	}
	s.stored()
	s.addLiveStep(j, rec, req.Overlap, lay)
	return api.StepResponse{Grant: signed, CA: s.caPEM()}, nil
}

// stepRecord is the record of a step just laid out: its nodes, tasks
// and what it holds on each node. It is pure.
func stepRecord(j *api.Job, stepID uint32, name string, now time.Time, req api.StepRequest, lay stepLayout) api.StepRecord {
	rec := api.StepRecord{JobID: j.ID, StepID: stepID, Name: name, State: api.StateRunning, UserID: j.UserID,
		Start: now, NTasks: lay.ntasks, TimeLimit: req.TimeLimit, Exact: (req.Exact || req.CPUsPerTask > 0) && !req.Whole,
		Overlap: req.Overlap, SrunHost: req.SrunHost, SrunPID: req.SrunPID, Argv: req.Argv}
	for _, sn := range lay.nodes {
		rec.Nodes = append(rec.Nodes, sn.Name)
		cpus := sn.StepCPUs
		if cpus == 0 {
			cpus = min(sn.CPUs, len(sn.Ranks)*max(req.CPUsPerTask, 1))
		}
		rec.CPUs += cpus
		rec.MemoryMB += sn.StepMemMB
		seen := map[int]bool{}
		var gpus []int
		for _, gs := range sn.GPUs {
			for _, x := range gs {
				if !seen[x] {
					seen[x] = true
					gpus = append(gpus, x)
				}
			}
		}
		slices.Sort(gpus)
		rec.GPUs += len(gpus)
		rec.Layout = append(rec.Layout, api.StepNodeUse{Node: sn.Name, Tasks: slices.Clone(sn.Ranks), CPUs: cpus,
			MemoryMB: sn.StepMemMB, GPUs: gpus})
	}
	return rec
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
	scancelled := s.removeLiveStep(id, stepID)
	if rec.State != api.StateRunning {
		return nil // reported twice: the first report stands
	}
	rec.End, rec.Exit = s.now(), e.Exit
	switch {
	case e.Cancelled || scancelled:
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

// handleSteps answers GET /api/v1/accounting/steps?job=N&job=M, and
// with &cluster=NAME the steps of another cluster of a shared store.
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
	var steps []api.StepRecord
	var err error
	cl := r.URL.Query().Get("cluster")
	if s.onlyLocal([]string{cl}) {
		steps, err = s.listSteps(r.Context(), ids)
	} else {
		steps, err = s.clusterSteps(r.Context(), cl, ids)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	// The uids of clusters sharing a store are one user base, as for
	// their jobs (queryAccounting).
	writeJSON(w, api.StepList{Steps: s.accountingView(s.callerOf(r)).keepSteps(steps), Cluster: cl})
}
