package ctld

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/accounting"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	"github.com/tide-hpc/tide/ctld/state"
	"github.com/tide-hpc/tide/gres"
)

// basePriority is the Slurm-style priority of a job without --nice.
const basePriority = 1000000

// submit validates and stores a submission; the id is returned only after
// the job is committed.
func (s *Server) submit(ctx context.Context, c caller, req api.SubmitRequest) (api.SubmitResponse, error) {
	spec := req.Spec
	if !c.known {
		return api.SubmitResponse{}, api.Errorf(api.ErrUnauthenticated, "submissions are only accepted on the local socket")
	}
	if len(req.Token) > api.MaxTokenLen || len(req.User) > api.MaxStringLen || len(req.Group) > api.MaxStringLen {
		return api.SubmitResponse{}, api.Invalid("Batch job submission failed: %s (submission token, --uid or --gid)", api.ErrTooLong)
	}
	// The job's owner: the caller, or with --uid/--gid (root and
	// operators only) the user it names. Everything below is checked
	// for the owner, and the job runs as the owner.
	o, err := s.jobOwner(c, req.User, req.Group)
	if err != nil {
		return api.SubmitResponse{}, err
	}
	if o.uid == 0 && !s.cl.AllowRootJobs {
		return api.SubmitResponse{}, api.Errorf(api.ErrPermissionDenied, "Access/permission denied: root jobs are not allowed on this cluster (allow_root_jobs)")
	}
	token := tokenKey{uid: o.uid, token: req.Token}
	if req.Token != "" && !req.TestOnly {
		// A repeat of a submission that was stored (its answer lost) or
		// is being stored gets that job, checked before anything that
		// the first job itself could now make fail (max_submit_per_user).
		if id, ok, err := s.awaitToken(ctx, token); err != nil || ok {
			return api.SubmitResponse{JobID: id}, err
		}
	}
	var warn []string
	timeGiven := spec.TimeLimit != api.NoValue
	if err := s.validateSpec(&spec, o, &warn); err != nil {
		return api.SubmitResponse{}, err
	}
	level, err := s.shareSubmit(&spec, o, timeGiven)
	if err != nil {
		return api.SubmitResponse{}, err
	}
	if err := s.checkPartitionsAccess(o, &spec); err != nil {
		return api.SubmitResponse{}, err
	}
	now := s.now()
	j := &api.Job{
		JobSpec: spec, UserID: o.uid, GroupID: o.gid, User: o.user, Group: s.users.group(o.gid),
		State: api.StatePending, Reason: api.ReasonNone, SubmitTime: now, Cluster: s.cl.ClusterName,
		SubmitToken: req.Token,
	}
	j.Level = level
	j.EffPriority = s.priorityOf(j)
	if err := s.prepareArray(j); err != nil {
		return api.SubmitResponse{}, err
	}
	if spec.Hold {
		j.HoldKind = api.HoldUser
		j.Reason = api.ReasonJobHeldUser
		j.EffPriority = 0
	} else {
		j.EligibleTime = now
		if spec.BeginTime.After(now) {
			j.EligibleTime = spec.BeginTime
			j.Reason = api.ReasonBeginTime
		}
	}

	if req.TestOnly {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.testOnly(j, warn), nil
	}
	if spec.Dependency == "" && s.sharing().Queue(j.Account) == nil {
		// Nothing to check under mu: the submission lane
		// (submitlane.go).
		return s.submitLane(ctx, c, o, req, j, token, warn)
	}

	s.mu.Lock()
	dep, err := s.checkDependency(spec.Dependency, nil)
	if err != nil {
		s.mu.Unlock()
		return api.SubmitResponse{}, api.Invalid("Batch job submission failed: %v", err)
	}
	if j.Dependency = dep; dep != "" && j.Reason == api.ReasonNone {
		j.Reason = api.ReasonDependency
	}
	if err := s.checkSubmitLimit(j); err != nil {
		s.mu.Unlock()
		return api.SubmitResponse{}, err
	}
	if s.tokenTaken(token) {
		// A twin of this submission (the same token) got here first
		// while this one was being checked: answer as it is answered.
		s.mu.Unlock()
		return s.submit(ctx, c, req)
	}
	buffered, err := s.admit(j, now)
	if err != nil {
		s.mu.Unlock()
		return api.SubmitResponse{}, err
	}
	tok, twin := s.claimID(j, token)
	if twin {
		s.mu.Unlock()
		return s.submit(ctx, c, req)
	}
	if buffered {
		j.Reason = api.ReasonBuffered
		qb := s.buffer.queue(j.Account)
		qb.waiting = append(qb.waiting, j.ID)
	}
	if s.buffer.storing == nil {
		s.buffer.storing = map[uint64]bool{}
	}
	s.buffer.storing[j.ID] = true
	s.mu.Unlock()

	// The submission is written outside mu: scheduling passes and node
	// syncs never wait behind a storm of submissions' commits (the id
	// is answered only once it is stored).
	werr := s.submits.Write(ctx, s.submitBatch(c, o, j), arrivalOf(ctx))

	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.buffer.storing, j.ID)
	s.settleToken(tok, token, werr)
	if werr != nil {
		if buffered {
			s.buffer.remove(j.Account, j.ID)
		}
		return api.SubmitResponse{}, s.notStored(werr)
	}
	s.adoptJob(j)
	s.metrics.submitted()
	if j.Reason == api.ReasonNone || j.Reason == api.ReasonDependency {
		// Held jobs and jobs with a later --begin cannot start now; the
		// periodic pass picks them up when that changes. A dependency
		// may be satisfied already. Buffered jobs wait for their turn.
		s.Kick()
	}
	return api.SubmitResponse{JobID: j.ID, Warnings: warn}, nil
}

// submitLane stores a submission that needs nothing mu guards (no
// dependency, no queue): its id and token come from the lane, and the
// committed job waits in the lane for the next holder of mu
// (submitlane.go). The answer does not wait for a scheduling pass.
func (s *Server) submitLane(ctx context.Context, c, o caller, req api.SubmitRequest, j *api.Job, token tokenKey, warn []string) (api.SubmitResponse, error) {
	tok, twin := s.claimID(j, token)
	if twin {
		return s.submit(ctx, c, req)
	}
	werr := s.submits.Write(ctx, s.submitBatch(c, o, j), arrivalOf(ctx))
	// Held jobs and jobs with a later --begin cannot start now; the
	// periodic pass picks them up when that changes.
	id, kick := j.ID, j.Reason == api.ReasonNone
	if werr == nil {
		// In the lane before its token says it is stored: a twin
		// answered with its id finds it under mu. From here on j is
		// the server's: whoever takes mu next may merge and change it.
		s.laneStore(j)
	}
	s.settleToken(tok, token, werr)
	if werr != nil {
		return api.SubmitResponse{}, s.notStored(werr)
	}
	s.metrics.submitted()
	if kick {
		s.Kick()
	}
	return api.SubmitResponse{JobID: id, Warnings: warn}, nil
}

// claimID numbers job j and, when the submission has a token, claims
// it; twin is true (and j not numbered) when a twin of the submission
// claimed the token first.
func (s *Server) claimID(j *api.Job, token tokenKey) (tok *tokenEntry, twin bool) {
	s.lane.mu.Lock()
	defer s.lane.mu.Unlock()
	if token.token != "" && s.tokens[token] != nil {
		return nil, true
	}
	j.ID = s.nextID
	s.nextID++
	if token.token != "" {
		tok = &tokenEntry{id: j.ID, done: make(chan struct{})}
		s.tokens[token] = tok
	}
	if j.ArrayPending != nil {
		j.ArrayJobID = j.ID
	}
	return tok, false
}

// settleToken tells the waiters of tok (nil allowed) that its
// submission is stored, or, when werr says it failed, drops the token.
func (s *Server) settleToken(tok *tokenEntry, token tokenKey, werr error) {
	if tok == nil {
		return
	}
	s.lane.mu.Lock()
	defer s.lane.mu.Unlock()
	if werr != nil {
		delete(s.tokens, token)
		tok.failed = true
	}
	close(tok.done)
}

// tokenTaken reports whether a submission with token is stored or
// being stored.
func (s *Server) tokenTaken(token tokenKey) bool {
	if token.token == "" {
		return false
	}
	s.lane.mu.Lock()
	defer s.lane.mu.Unlock()
	return s.tokens[token] != nil
}

// notStored logs a submission whose commit failed and is its answer.
func (s *Server) notStored(werr error) error {
	s.log.Error("submission not stored", "err", werr)
	return api.Errorf(api.ErrUnavailable, "Batch job submission failed: could not store the job: %v", werr)
}

// submitBatch is what a new job's commit writes: the job, its submit
// event and its audit record. The texts are joined rather than
// formatted: this runs for every submission.
func (s *Server) submitBatch(c, o caller, j *api.Job) *accounting.Batch {
	spec := &j.JobSpec
	id := strconv.FormatUint(j.ID, 10)
	by := c.user + c.authNote()
	other := o.uid != c.uid || o.gid != c.gid
	if other {
		by += " as " + o.user + " (group " + j.Group + ")"
	}
	msg := "submitted by " + by + " from " + spec.SubmitHost + " to partition " + spec.Partition
	if j.Account != "" {
		msg += ", queue " + j.Account + ", qos " + j.QOS + ", level " + strconv.Itoa(j.Level)
	}
	ev := api.Event{JobID: j.ID, Time: j.SubmitTime, Kind: api.EventSubmit, State: j.State, Reason: string(j.Reason),
		Message: msg, Actor: c.user}
	detail := "name=" + j.Name + " partition=" + j.Partition
	if other {
		detail += " uid=" + strconv.FormatUint(uint64(o.uid), 10) + " gid=" + strconv.FormatUint(uint64(o.gid), 10)
	}
	au := api.AuditRecord{Time: j.SubmitTime, UID: c.uid, User: c.user, Action: "submit", Target: "job " + id,
		Detail: withAuthDetail(detail, c)}
	return &accounting.Batch{NewJobs: []*api.Job{j}, MaxJobID: j.ID, Events: []api.Event{ev}, Audit: []api.AuditRecord{au}}
}

// priorityOf is the base priority: an operator-set value, else the base
// lowered by nice. Order among equals is by submit time.
func priorityOf(spec *api.JobSpec) uint32 {
	if spec.Priority > 0 {
		return spec.Priority
	}
	return uint32(max(1, basePriority-spec.Nice))
}

// validateSpec fills defaults and refuses what can never run. Called
// without mu; reads only immutable config.
func (s *Server) validateSpec(spec *api.JobSpec, c caller, warn *[]string) error {
	switch {
	case spec.Allocation && spec.Script != "":
		// Issue 7: an allocation-only job runs nothing of its own.
		return api.Invalid("Batch job submission failed: an allocation (srun, salloc) carries no batch script")
	case spec.Allocation && spec.Array != "":
		return api.Invalid("Batch job submission failed: an allocation (srun, salloc) cannot be a job array")
	case spec.Allocation:
	case len(spec.Script) == 0:
		return api.Invalid("Batch job submission failed: empty batch script")
	}
	if err := api.CheckSpecLimits(spec, s.specLimits()); err != nil {
		return api.Invalid("Batch job submission failed: %v", err)
	}
	if !spec.Allocation && !strings.HasPrefix(spec.Script, "#!") {
		return api.Invalid("Batch job submission failed: the script must start with #! followed by an interpreter path")
	}
	if spec.WorkDir == "" || !filepath.IsAbs(spec.WorkDir) {
		return api.Invalid("Batch job submission failed: working directory %q must be an absolute path", spec.WorkDir)
	}
	if spec.Name == "" {
		spec.Name = "sbatch"
	}
	parts, err := s.reqPartitions(spec)
	if err != nil {
		return err
	}
	if spec.Priority > 0 && !c.admin && !s.sharing().Configured {
		// With queues and classes, --priority is a level that users may
		// lower (shareSubmit checks it).
		return api.Errorf(api.ErrPermissionDenied, "Access/permission denied: only operators may set --priority")
	}
	if spec.Nice < 0 && !c.admin {
		return api.Errorf(api.ErrPermissionDenied, "Access/permission denied: only operators may set a negative --nice")
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"nodes", spec.Nodes}, {"ntasks", spec.Tasks}, {"ntasks-per-node", spec.TasksPerNode},
		{"cpus-per-task", spec.CPUsPerTask}, {"gpus", spec.GPUs}, {"gpus-per-node", spec.GPUsPerNode},
		{"gpus-per-task", spec.GPUsPerTask}, {"cpus-per-gpu", spec.CPUsPerGPU}} {
		if v.n < 0 {
			return api.Invalid("Batch job submission failed: --%s must not be negative", v.name)
		}
	}
	if spec.MaxNodes > 0 && spec.MaxNodes < spec.Nodes {
		return api.Invalid("Batch job submission failed: node count range %d-%d is backwards", spec.Nodes, spec.MaxNodes)
	}
	if err := spec.ResolveGPUs(); err != nil {
		return api.Invalid("Batch job submission failed: Invalid generic resource (gres) specification: %v", err)
	}
	if spec.OpenMode != "" && spec.OpenMode != "append" && spec.OpenMode != "truncate" {
		return api.Invalid("Batch job submission failed: --open-mode must be append or truncate")
	}
	for _, n := range append(slices.Clone(spec.NodeList), spec.Exclude...) {
		if _, ok := s.nodes[n]; !ok {
			return api.Invalid("Batch job submission failed: Invalid node name specified: %s", n)
		}
	}
	if spec.MaxNodes > spec.Nodes && spec.Nodes > 0 {
		*warn = append(*warn, fmt.Sprintf("node count range %d-%d: Tide allocates the minimum, %d, or the fewest nodes in the range that hold the --gpus or -n total", spec.Nodes, spec.MaxNodes, spec.Nodes))
	}
	return s.validateInPartitions(spec, parts)
}

// validateInPartition fills the defaults of partition part and refuses
// what can never run there. Called without mu, by validateInPartitions.
func (s *Server) validateInPartition(spec *api.JobSpec, part *api.Partition) error {
	if spec.Comm == "" {
		spec.Comm = part.Comm
	}
	if spec.Comm != "" && spec.Comm != "model" && spec.Comm != "data" {
		return api.Invalid("Batch job submission failed: --comm must be model or data, not %q", spec.Comm)
	}
	if _, err := sched.ParseConstraint(spec.Constraint); err != nil {
		return api.Invalid("Batch job submission failed: Invalid feature specification (%v)", err)
	}
	if err := s.containerSpec(spec, part); err != nil {
		return err
	}
	if err := s.checkFeatures(spec.Constraint, part); err != nil {
		return err
	}
	capa := s.partCapacity(part)
	if err := sliceSpec(spec, part, capa.nodes); err != nil {
		return err
	}
	// A slice brings no per-GPU CPU or memory defaults: a 10% slice is
	// not a GPU's worth of host resources.
	if spec.ReqGPUs() > 0 && !spec.Sliced() {
		if spec.CPUsPerGPU == 0 && spec.CPUsPerTask == 0 && part.DefCPUsPerGPU > 0 {
			spec.CPUsPerGPU = part.DefCPUsPerGPU
		}
		if spec.MemPerGPUMB == 0 && spec.MemPerNodeMB == 0 && spec.MemPerCPUMB == 0 && part.DefMemPerGPUMB > 0 {
			spec.MemPerGPUMB = part.DefMemPerGPUMB
		}
	}
	if spec.TimeLimit == api.NoValue && part.DefaultTime != api.Infinite {
		spec.TimeLimit = part.DefaultTime
	}
	if ok, why := capa.feasible.Check(spec); !ok {
		return api.Invalid("Batch job submission failed: Requested node configuration is not available (%s)", why)
	}
	return nil
}

// specLimits are the configured bounds of a submission.
func (s *Server) specLimits() api.SpecLimits {
	sub := &s.cl.Submit
	return api.SpecLimits{MaxScriptSize: sub.MaxScriptSize, MaxEnvSize: sub.MaxEnvSize, MaxEnvVars: sub.MaxEnvVars}
}

// containerSpec normalises --container-image and constrains the job to
// nodes that run containers (feature containerd), refusing it when the
// partition has none.
func (s *Server) containerSpec(spec *api.JobSpec, part *api.Partition) error {
	if spec.ContainerImage == "" {
		if len(spec.ContainerMounts) > 0 {
			return api.Invalid("Batch job submission failed: --container-mounts needs --container-image")
		}
		return nil
	}
	img, err := api.NormalizeImage(spec.ContainerImage)
	if err != nil {
		return api.Invalid("Batch job submission failed: %v", err)
	}
	for i, m := range spec.ContainerMounts {
		if err := m.Check(); err != nil {
			return api.Invalid("Batch job submission failed: invalid container mount %s: %v", m, err)
		}
		spec.ContainerMounts[i].Source, spec.ContainerMounts[i].Destination = path.Clean(m.Source), path.Clean(m.Destination)
	}
	spec.ContainerImage = img
	has := false
	for _, f := range strings.FieldsFunc(spec.Constraint, func(r rune) bool { return strings.ContainsRune("&|,[]*() ", r) }) {
		has = has || f == api.FeatureContainerd
	}
	if !has {
		if spec.Constraint == "" {
			spec.Constraint = api.FeatureContainerd
		} else {
			spec.Constraint = "(" + spec.Constraint + ")&" + api.FeatureContainerd
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range part.Nodes {
		if n := s.nodes[name]; n != nil && slices.Contains(n.Features, api.FeatureContainerd) {
			return nil
		}
	}
	return api.Invalid("Batch job submission failed: Requested node configuration is not available (no node of partition %s runs containers: none has feature %s)", part.Name, api.FeatureContainerd)
}

// checkFeatures refuses, as Slurm does, a --constraint that names a
// feature no node of the partition has (even inside an OR): such a typo
// would otherwise leave the job pending for ever. Whether enough nodes
// match is CheckFeasible's to say.
func (s *Server) checkFeatures(constraint string, part *api.Partition) error {
	c, err := sched.ParseConstraint(constraint)
	if err != nil || c == nil {
		// containerSpec only wraps a constraint that parsed.
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range c.Names() {
		found := false
		for _, name := range part.Nodes {
			if n := s.nodes[name]; n != nil && slices.Contains(n.Features, f) {
				found = true
				break
			}
		}
		if !found {
			return api.Invalid("Batch job submission failed: Invalid feature specification (no node of partition %s has feature %s)", part.Name, f)
		}
	}
	return nil
}

// partInfo converts a partition for the scheduler.
func (s *Server) partInfo(p *api.Partition) *sched.PartitionInfo {
	return &sched.PartitionInfo{Name: p.Name, Nodes: p.Nodes, Up: p.State == "UP", DefaultTime: p.DefaultTime,
		MaxTime: p.MaxTime, MaxNodes: p.MaxNodes, Spread: p.Spread,
		NoGPUSlicing: !p.GPUSlicing, GPUMemRatio: p.GPUMemOversubscribe, GPUComputeRatio: p.GPUComputeOversubscribe}
}

// partInfos is every partition as the core takes it, by name.
func (s *Server) partInfos() map[string]*sched.PartitionInfo {
	out := make(map[string]*sched.PartitionInfo, len(s.partitions))
	for name, p := range s.partitions {
		out[name] = s.partInfo(p)
	}
	return out
}

// sliceSpec checks a slice request against its partition and turns
// --gres=shard:N into GPU memory: N × the smallest GPU memory that the
// partition's nodes report / shards_per_gpu. Whether the slice fits a GPU
// at all is CheckFeasible's to say.
func sliceSpec(spec *api.JobSpec, part *api.Partition, nodes []sched.NodeInfo) error {
	switch {
	case spec.GPUMemMB < 0 || spec.GPUShards < 0:
		return api.Invalid("Batch job submission failed: --gpu-mem and --gres=shard must not be negative")
	case spec.GPUComputePct < 0 || spec.GPUComputePct > 100:
		return api.Invalid("Batch job submission failed: --gpu-compute must be a percentage from 1 to 100, not %d", spec.GPUComputePct)
	case !spec.Sliced():
		return nil
	case !part.GPUSlicing:
		return api.Invalid("Batch job submission failed: partition %s does not allow GPU slices (gpu_slicing: false); ask for whole GPUs with --gpus", part.Name)
	case spec.GPUShards == 0:
		return nil
	}
	var shardOf int64
	per := int64(max(part.ShardsPerGPU, 1))
	for _, n := range nodes {
		if n.GPUs > 0 && n.GPUMemMB > 0 && (shardOf == 0 || n.GPUMemMB/per < shardOf) {
			shardOf = n.GPUMemMB / per
		}
	}
	if shardOf == 0 {
		return api.Invalid("Batch job submission failed: --gres=shard cannot be sized yet: no node of partition %s has reported its GPU memory", part.Name)
	}
	mem := shardOf * int64(spec.GPUShards)
	if spec.GPUMemMB > 0 && spec.GPUMemMB != mem {
		return api.Invalid("Batch job submission failed: --gres=shard:%d (%s) and --gpu-mem=%s disagree; give one of them",
			spec.GPUShards, api.FormatMemMB(mem), api.FormatMemMB(spec.GPUMemMB))
	}
	spec.GPUMemMB = mem
	return nil
}

// capacityList is a partition's nodes at full capacity as of a
// capVersion, and the feasibility checks against them.
type capacityList struct {
	version  uint64
	nodes    []sched.NodeInfo
	feasible *sched.Feasibility
}

// partCapacity describes part's nodes at full capacity, by their
// declared values or, once registered, reported ones, with the checks of
// whether a request could ever run there. Every submission goes through
// them: on 512 nodes, building the list and the checks' pass anew each
// time was most of a submission's cost, so both are kept until a node
// registers again (partitions and the scheduler's settings do not change
// while the controller runs). The lists are read without mu while
// capVersion says they are current, so that submissions need not wait
// for a scheduling pass (submitlane.go). Callers share the list and must
// not modify it.
func (s *Server) partCapacity(part *api.Partition) capacityList {
	if m := s.lane.caps.Load(); m != nil {
		if c, ok := (*m)[part.Name]; ok && c.version == s.capVersion.Load() {
			return c
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.partCapacityLocked(part)
}

// partCapacityLocked is partCapacity with mu held.
func (s *Server) partCapacityLocked(part *api.Partition) capacityList {
	version := s.capVersion.Load() // only changed with mu held
	if c, ok := s.capacities[part.Name]; ok && c.version == version {
		return c
	}
	out := make([]sched.NodeInfo, 0, len(part.Nodes))
	for _, name := range part.Nodes {
		if n := s.nodes[name]; n != nil {
			out = append(out, s.capacity(n))
		}
	}
	c := capacityList{version: version, nodes: out, feasible: sched.NewFeasibility(s.partInfo(part), out, s.schedConfig())}
	s.capacities[part.Name] = c
	// Published anew for readers without mu: the current lists only.
	pub := make(map[string]capacityList, len(s.capacities))
	for name, l := range s.capacities {
		if l.version == version {
			pub[name] = l
		}
	}
	s.lane.caps.Store(&pub)
	return c
}

// capacity is a node at full capacity: declared values until the node
// registers.
func (s *Server) capacity(n *nodeRec) sched.NodeInfo {
	cpus, mem, gpus, model := n.CPUs, n.MemoryMB, len(n.GPUs), n.GPUModel()
	if !n.registered {
		cpus, mem, gpus = n.decl.CPUs, s.cl.NodeMemoryMB[n.Name], n.decl.GPUs
	}
	free := make([]int, gpus)
	for i := range free {
		free[i] = i
	}
	gpuMem := gpuMemMB(n.GPUs)
	if !n.registered && gpus > 0 {
		gpuMem = sched.GPUMemUnknown
	}
	tmp := n.TmpDiskMB
	if !n.registered {
		// Only the node measures it: a --tmp job waits for the node
		// rather than be refused before it has said.
		tmp = sched.TmpDiskUnknown
	}
	return sched.NodeInfo{Name: n.Name, Usable: true, CPUs: cpus, FreeCPUs: cpus, MemoryMB: mem, FreeMemMB: mem,
		TmpDiskMB: tmp, GPUModel: model, GPUs: gpus, FreeGPUs: free, Idle: true, Switch: n.Switch, GPUMemMB: gpuMem,
		Features: sched.SortedFeatures(n.Features)}
}

// gpuMemMB is the memory of the node's smallest GPU (0 when unknown or
// the node has none): the size every slice cap on the node is based on.
func gpuMemMB(gpus []gres.Device) int64 {
	var m int64
	for i, g := range gpus {
		if i == 0 || g.MemoryMB < m {
			m = g.MemoryMB
		}
	}
	return max(m, 0)
}

// testOnly answers sbatch --test-only: where the job would start if it
// were submitted now. Called with mu held.
func (s *Server) testOnly(j *api.Job, warn []string) api.SubmitResponse {
	snap := s.snapshot()
	snap.Pending = []*api.Job{j}
	plan := sched.Schedule(snap, s.now(), s.schedConfig())
	resp := api.SubmitResponse{Warnings: warn, TestPartition: j.Partition}
	if len(plan.Starts) == 1 {
		st := plan.Starts[0]
		if st.Partition != "" {
			resp.TestPartition = st.Partition
		}
		names := make([]string, len(st.Alloc))
		for i, a := range st.Alloc {
			names[i] = a.Node
			resp.TestCPUs += a.CPUs
		}
		resp.TestNodes = strings.Join(names, ",")
		resp.TestStart = s.now()
		return resp
	}
	if len(plan.Pending) == 1 {
		d := plan.Pending[0]
		resp.Warnings = append(resp.Warnings, fmt.Sprintf("job would pend now: %s %s", d.Reason, d.Detail))
	}
	return resp
}

// listJobs returns copies of the in-memory jobs that match f and that
// v sees (privacy.go).
func (s *Server) listJobs(f api.JobFilter, v view) api.JobList {
	keep := func(j *api.Job) bool {
		return (f.All || len(f.States) > 0 || !j.State.Terminal()) && f.Match(j) && v.sees(j)
	}
	s.mu.Lock()
	var match []*api.Job
	direct := len(f.IDs) > 0 && len(f.Tasks) == 0
	if direct {
		// squeue -j: look the ids up instead of scanning every job;
		// arrays (whose tasks have ids of their own) need the scan.
		for _, id := range f.IDs {
			j := s.jobs[id]
			if j == nil || j.ArrayJobID != 0 {
				direct, match = false, nil
				break
			}
			if keep(j) {
				match = append(match, j)
			}
		}
	}
	if !direct {
		match = make([]*api.Job, 0, len(s.jobs))
		for _, j := range s.jobs {
			if keep(j) {
				match = append(match, j)
			}
		}
	}
	out := make([]api.Job, len(match))
	for i, j := range match {
		out[i] = *j
	}
	now := s.now()
	s.mu.Unlock()
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return api.JobList{Jobs: out, Now: now}
}

// getJob returns one job; the script and environment are included for its
// owner and operators.
func (s *Server) getJob(ctx context.Context, c caller, id uint64) (api.Job, error) {
	s.mu.Lock()
	j, ok := s.jobs[id]
	var cp api.Job
	if ok {
		cp = *j
	}
	s.mu.Unlock()
	if !ok {
		found, err := s.store.QueryJobs(ctx, api.JobFilter{IDs: []uint64{id}})
		if err != nil {
			return api.Job{}, err
		}
		if len(found) == 0 {
			return api.Job{}, api.Errorf(api.ErrNotFound, "Invalid job id specified")
		}
		cp = found[0]
	}
	if !s.jobView(c).sees(&cp) || !ok && !s.accountingView(c).sees(&cp) {
		return api.Job{}, hiddenJob()
	}
	if c.admin || c.uid == cp.UserID {
		if script, env, err := s.store.Spool(ctx, id); err == nil {
			cp.Script, cp.Environment = script, env
		}
	}
	return cp, nil
}

// cancel cancels or signals the selected jobs.
func (s *Server) cancel(c caller, req api.CancelRequest) (api.CancelResponse, error) {
	f := req.Filter
	if len(f.IDs) == 0 && len(f.Tasks) == 0 && len(f.Users) == 0 && len(f.Names) == 0 && len(f.Partitions) == 0 &&
		len(f.States) == 0 && len(f.Accounts) == 0 && len(req.Steps) == 0 {
		return api.CancelResponse{}, api.Invalid("No job identification provided")
	}
	if req.Signal < 0 || req.Signal > api.MaxSignal {
		return api.CancelResponse{}, api.Invalid("Unknown job signal: %d", req.Signal)
	}
	if req.BatchOnly && req.Signal == 0 {
		// scancel -b without -s: Slurm sends SIGKILL to the batch shell
		// (with -f too, to its process group).
		req.Signal = int(syscall.SIGKILL)
	}
	v := s.jobView(c) // filters select only the jobs the caller sees
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var resp api.CancelResponse
	if len(req.Steps) > 0 {
		// scancel J.S (steplive.go).
		resp.Results = s.cancelSteps(c, req)
		if len(f.IDs) == 0 && len(f.Tasks) == 0 && len(f.Users) == 0 && len(f.Names) == 0 && len(f.Partitions) == 0 &&
			len(f.States) == 0 && len(f.Accounts) == 0 {
			s.flush()
			return resp, nil
		}
	}
	var targets []target
	if len(f.IDs) > 0 || len(f.Tasks) > 0 {
		// A task still on its array's meta record is split off only to
		// be cancelled; a signal to a pending task needs no record.
		targets = s.taskTargets(f.IDs, f.Tasks, req.Signal == 0 || req.Signal == int(syscall.SIGKILL))
	} else {
		var ids []uint64
		for id, j := range s.jobs {
			if !j.State.Terminal() && f.Match(j) && v.sees(j) {
				ids = append(ids, id)
			}
		}
		sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
		for _, id := range ids {
			targets = append(targets, target{res: api.JobResult{JobID: id}, jobs: []*api.Job{s.jobs[id]}})
		}
	}
	for _, t := range targets {
		res := t.res
		if len(t.jobs) == 0 && !s.knownFinished(res.JobID) {
			res.Error = "Invalid job id specified"
		}
		ok := false
		for _, j := range t.jobs {
			msg := ""
			switch {
			case !f.Match(j):
				continue
			case !c.admin && c.uid != j.UserID:
				msg = "Access/permission denied"
			case req.Signal != 0:
				msg = s.signalJob(c, j, req, now)
			default:
				s.cancelJob(c, j, now)
			}
			if msg == "" {
				ok = true
			} else if res.Error == "" {
				res.Error = msg
			}
		}
		if ok {
			// An array succeeds when any of its records did (signals
			// reach the running tasks, not the pending ones).
			res.Error = ""
		}
		resp.Results = append(resp.Results, res)
	}
	s.flush()
	return resp, nil
}

// knownFinished reports whether id was a job that has left memory (its
// cancel is a no-op, not an error). Called with mu held.
func (s *Server) knownFinished(id uint64) bool {
	return id > 0 && id < s.nextJobID() && id >= s.cl.FirstJobID
}

// signalJob carries out scancel --signal (and -b, -f) on one job as
// Slurm does: the signal goes to the job's steps on every node of the
// job, not to the batch shell; -b sends it to the batch shell alone and
// -f to the batch shell's process group (srun passes it on to its
// tasks). SIGKILL other than with -b is a cancel. A running job without
// steps gets nothing, and that is no error. It returns the error text
// for the job ("" on success). Called with mu held.
func (s *Server) signalJob(c caller, j *api.Job, req api.CancelRequest, now time.Time) string {
	sig := req.Signal
	if sig == int(syscall.SIGKILL) && (!req.BatchOnly || j.State != api.StateRunning) {
		// Slurm's job_signal: SIGKILL ends a pending or suspended job
		// whatever the flags, and a running one unless -b names its
		// batch shell.
		s.cancelJob(c, j, now)
		return ""
	}
	switch {
	case j.State.Terminal() || j.State == api.StateCompleting:
		return ""
	case j.State == api.StatePending:
		return "Job is pending execution"
	case j.State != api.StateRunning:
		return "Job can not be altered now, try again later"
	}
	batchOnly := req.BatchOnly && !req.Full
	target := "steps"
	switch {
	case batchOnly && j.Allocation:
		return "Job script not specified"
	case batchOnly:
		target = "batch shell"
	case req.Full && !j.Allocation:
		target = "batch shell and its children"
	}
	if s.signalCommands(j, sig, batchOnly, req.Full) == 0 {
		return "Job's node is unknown"
	}
	s.event(j, api.EventSignal, "", fmt.Sprintf("signal %d to the %s sent by %s", sig, target, c.user), c.user)
	s.auditf(c, "signal", fmt.Sprintf("job %d", j.ID), "signal=%d target=%s", sig, target)
	return ""
}

// signalCommands queues sig for running job j on the nodes that carry it
// out and wakes them; it returns how many nodes got it. batchOnly sends
// it to the batch shell alone, full to the batch shell's process group,
// neither to the job's steps on every node of the job. A job without a
// batch shell (an allocation) has only steps to signal. Called with mu
// held.
func (s *Server) signalCommands(j *api.Job, sig int, batchOnly, full bool) int {
	if (batchOnly || full) && !j.Allocation {
		n := s.nodes[j.BatchHost()]
		if n == nil {
			return 0
		}
		n.signals = append(n.signals, api.SignalCommand{JobRef: ref(j), Signal: sig, BatchOnly: batchOnly && !full})
		n.notify()
		return 1
	}
	if batchOnly {
		return 0 // an allocation has no batch shell
	}
	sent := 0
	for _, a := range j.Alloc {
		n := s.nodes[a.Node]
		if n == nil {
			continue
		}
		n.signals = append(n.signals, api.SignalCommand{JobRef: ref(j), Signal: sig, Steps: true})
		n.notify()
		sent++
	}
	return sent
}

// cancelJob ends a pending job at once and asks the node to kill a running
// one. Called with mu held.
func (s *Server) cancelJob(c caller, j *api.Job, now time.Time) {
	uid := c.uid
	switch {
	case j.State.Terminal() || j.CancelRequested:
		return
	case j.State == api.StatePending:
		if !s.transition(j, state.Change{To: api.StateCancelled, Reason: api.ReasonCancelled, At: now}) {
			return
		}
		j.CancelledBy = &uid
		s.auditf(c, "cancel", fmt.Sprintf("job %d", j.ID), "pending")
		s.markDirty(j)
		s.event(j, api.EventCancel, string(api.ReasonCancelled), "cancelled by "+c.user, c.user)
		s.metrics.ended(api.StateCancelled)
	default:
		suspended := j.State == api.StateSuspended
		if !s.transition(j, state.Change{To: api.StateCompleting, Cancel: true}) {
			return
		}
		j.CancelledBy = &uid
		s.auditf(c, "cancel", fmt.Sprintf("job %d", j.ID), "running on %s", j.BatchHost())
		s.markDirty(j)
		s.event(j, api.EventCancel, string(api.ReasonCancelled), "cancel requested by "+c.user, c.user)
		if n := s.nodes[j.BatchHost()]; n != nil {
			if suspended {
				// A stopped job must run to handle its SIGTERM.
				n.signals = append(n.signals, api.SignalCommand{JobRef: ref(j), Signal: int(syscall.SIGCONT)})
			}
			n.notify()
		}
	}
}
