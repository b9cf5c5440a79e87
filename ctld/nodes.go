package ctld

import (
	"context"
	"fmt"
	"github.com/tide-hpc/tide/topology"
	"slices"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/state"
	"github.com/tide-hpc/tide/gres"
)

// nodeRec is a node's live record: its api.Node plus the controller's
// bookkeeping for the sync protocol.
type nodeRec struct {
	api.Node
	// ledger accounts for what jobs hold of the node (allocate,
	// release); api.Node's Alloc fields mirror it for listings.
	ledger     *state.Ledger
	registered bool
	adminDown  bool
	// inflight counts sync calls being held; a node with one in flight
	// is responding.
	inflight int
	wake     chan struct{}
	// supersede is closed when the node's next long poll arrives (after
	// a reconnect, say): the held one is then answered empty (nil when
	// no sync is held).
	supersede chan struct{}
	// seq is the highest report sequence number applied since the
	// node registered (api.NodeSyncRequest.Seq).
	seq uint64
	// signals and limits are one-shot commands waiting for the next sync.
	signals []api.SignalCommand
	limits  []api.LimitUpdate
	decl    NodeConfig
	// matrix is the node's GPU link matrix (nil without link data),
	// built at registration and shared read-only with scheduling passes.
	matrix *topology.Matrix
	// batch holds the active jobs whose batch script runs here.
	batch map[uint64]*api.Job
	// launching holds the jobs the node reported launching in its last
	// report (api.NodeJobLaunching).
	launching map[uint64]bool
	// killSent remembers when a kill went out, to resend it only if the
	// job outlives the kill wait.
	killSent map[uint64]time.Time
	// hosted holds the active jobs with a share of this node that it does
	// not launch, and hostedAcked the hash of the list the node last
	// said it holds (hosted.go).
	hosted      map[uint64]*api.Job
	hostedAcked uint64
	// reclaimStuck remembers, per GPU index, the last "cannot reclaim"
	// message, so that a GPU stuck over its watermark logs once, not on
	// every heartbeat.
	reclaimStuck map[int]string
	// reclaimHold is, per GPU index, when reclaim may preempt there
	// again: heartbeats repeat the node's last GPU reading for a few
	// seconds, and a preempted slice takes a kill wait to leave.
	reclaimHold map[int]time.Time
}

func newNodeRec(name string, cl *Cluster, ledger *state.Ledger) *nodeRec {
	ledger.Add(name)
	n := &nodeRec{Node: api.Node{Name: name, State: api.NodeUnknown}, ledger: ledger, wake: make(chan struct{}), decl: cl.NodeDecl[name],
		batch: map[uint64]*api.Job{}, killSent: map[uint64]time.Time{},
		reclaimStuck: map[int]string{}, reclaimHold: map[int]time.Time{}}
	n.Switch = cl.Tree.LeafOf(name)
	n.Features = n.decl.Features
	for _, p := range cl.Partitions {
		if slices.Contains(p.Nodes, name) {
			n.Partitions = append(n.Partitions, p.Name)
		}
	}
	return n
}

// allocate adds a job's share of this node, unchecked (the plan was
// checked against the ledger, or the job runs already).
func (n *nodeRec) allocate(a api.NodeAlloc) {
	n.ledger.Record([]api.NodeAlloc{a})
	n.syncUsage()
}

// release returns a job's share of this node.
func (n *nodeRec) release(a api.NodeAlloc) {
	n.ledger.Release([]api.NodeAlloc{a})
	n.syncUsage()
}

// syncUsage copies the ledger's account of the node into the fields
// listings show (AllocCPUs, AllocMemMB, AllocGPUs, SharedGPUs) and
// updates the state. The lists are replaced, not edited, because
// listings share them outside the lock.
func (n *nodeRec) syncUsage() {
	ln := n.ledger.Node(n.Name)
	n.AllocCPUs, n.AllocMemMB, n.AllocGPUs = ln.UsedCPUs, ln.UsedMemMB, ln.Holders()
	var shared []api.GPUShare
	for _, sh := range ln.Shared() {
		shared = append(shared, api.GPUShare{Index: sh.Index, Slices: sh.Slices, MemMB: sh.MemMB, ComputePct: sh.ComputePct})
	}
	n.SharedGPUs = shared
	n.updateState()
}

// gpuShare returns what slices commit on GPU g (zero when not shared).
func (n *nodeRec) gpuShare(g int) api.GPUShare {
	for _, x := range n.SharedGPUs {
		if x.Index == g {
			return x
		}
	}
	return api.GPUShare{Index: g}
}

// updateState derives the base state from registration, liveness and
// allocation.
func (n *nodeRec) updateState() {
	switch {
	case n.adminDown:
		n.State = api.NodeDown
	case !n.registered:
		if n.State != api.NodeDown {
			n.State = api.NodeUnknown
		}
	case !n.Responding:
		n.State = api.NodeDown
	case n.AllocCPUs == 0 && len(n.AllocGPUs) == 0:
		n.State = api.NodeIdle
	case n.AllocCPUs >= n.CPUs || (len(n.GPUs) > 0 && n.GPUsInUse() >= len(n.GPUs)):
		n.State = api.NodeAllocated
	default:
		n.State = api.NodeMixed
	}
}

// usable reports whether new work may land on the node, and if not, the
// detail code why.
func (n *nodeRec) usable() (bool, api.DetailCode) {
	switch {
	case n.State == api.NodeDown || !n.registered:
		return false, api.DetailNodeDown
	case n.Drain:
		return false, api.DetailNodeDrained
	}
	return true, ""
}

// saved is the operator-set part of the node the store keeps.
func (n *nodeRec) saved() api.Node {
	st := api.NodeIdle
	if n.adminDown {
		st = api.NodeDown
	}
	return api.Node{Name: n.Name, State: st, Drain: n.Drain, Reason: n.Reason, ReasonUser: n.ReasonUser, ReasonTime: n.ReasonTime}
}

// notify wakes a held sync of the node.
func (n *nodeRec) notify() {
	close(n.wake)
	n.wake = make(chan struct{})
}

func (s *Server) wakeAllNodes() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nodes {
		n.notify()
	}
}

// register handles a node daemon's registration.
func (s *Server) register(r api.NodeRegistration) (api.NodeSyncResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[r.Name]
	if n == nil {
		return api.NodeSyncResponse{}, api.Errorf(api.ErrNotFound, "node %q is not declared in the controller's config", r.Name)
	}
	if r.TmpDiskMB < 0 || r.TmpDiskMB > api.MaxMemMB {
		return api.NodeSyncResponse{}, api.Invalid("node %s: temporary disk of %d MB is not between 0 and %d MB", r.Name, r.TmpDiskMB, int64(api.MaxMemMB))
	}
	now := s.now()
	n.registered = true
	n.Responding = true
	n.seq = r.Seq
	n.LastSeen = now
	n.Registered = now
	n.Hostname, n.Addr, n.Version, n.OS, n.Arch, n.BootTime = r.Hostname, r.Addr, r.Version, r.OS, r.Arch, r.BootTime
	n.StepAddr = r.StepAddr // issue 7 steps: where srun reaches the node
	n.CPUs, n.MemoryMB, n.GPUs = r.CPUs, r.MemoryMB, r.GPUs
	s.ledger.SetCapacity(n.Name, state.Capacity{CPUs: r.CPUs, MemoryMB: r.MemoryMB, GPUs: len(r.GPUs), GPUMemMB: gpuMemMB(r.GPUs)})
	n.TmpDiskMB = r.TmpDiskMB
	n.matrix = linkMatrix(r.GPUs)
	s.capVersion.Add(1) // the node's capacity may have changed
	// What the operator declared stays; the node adds what it found
	// (containerd, for one), so a tided without features: of its own
	// does not wipe the declared ones.
	n.Features = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(n.decl.Features), r.Features...))))
	if why := n.shortfall(); why != "" && !n.Drain {
		n.Drain, n.Reason, n.ReasonUser, n.ReasonTime = true, why, "tidectld", now
		s.dirtyNodes[n.Name] = true
		s.log.Warn("node drained at registration", "node", n.Name, "reason", why)
	}
	n.updateState()
	s.log.Info("node registered", "node", n.Name, "cpus", n.CPUs, "memory_mb", n.MemoryMB, "tmp_disk_mb", n.TmpDiskMB, "gpus", len(n.GPUs), "jobs", len(r.Jobs))
	resp := s.reconcile(n, r.Jobs)
	s.registeredSteps(n, &resp) // issue 21: step key and hosted jobs
	s.flushAcks(&resp)
	s.Kick()
	return resp, nil
}

// shortfall says what a node lacks against its declaration ("" if
// nothing).
func (n *nodeRec) shortfall() string {
	d := n.decl
	switch {
	case d.CPUs > 0 && n.CPUs < d.CPUs:
		return fmt.Sprintf("Low CPUs: registered %d, configured %d", n.CPUs, d.CPUs)
	case d.GPUs > 0 && len(n.GPUs) < d.GPUs:
		return fmt.Sprintf("Low GPUs: registered %d, configured %d", len(n.GPUs), d.GPUs)
	}
	if d.Memory != "" {
		if mb, err := api.ParseMemMB(d.Memory); err == nil && n.MemoryMB < mb {
			return fmt.Sprintf("Low RealMemory: registered %dM, configured %dM", n.MemoryMB, mb)
		}
	}
	for _, g := range n.GPUs {
		if g.Health != "" && g.Health != gres.Healthy {
			return fmt.Sprintf("GPU %d unhealthy", g.Index)
		}
	}
	return ""
}

// sync handles a node's heartbeat: it applies the node's job reports and
// answers with commands, holding the call up to WaitMS when there is
// nothing to say.
func (s *Server) sync(ctx context.Context, r api.NodeSyncRequest) (api.NodeSyncResponse, error) {
	s.mu.Lock()
	n := s.nodes[r.Name]
	if n == nil {
		s.mu.Unlock()
		return api.NodeSyncResponse{}, api.Errorf(api.ErrNotFound, "node %q is not declared in the controller's config", r.Name)
	}
	if !n.registered {
		s.mu.Unlock()
		return api.NodeSyncResponse{Unregistered: true}, nil
	}
	// A node holds one long poll: a new one answers the held one (empty,
	// see supersede). A sync that does not wait (tided's report of a
	// local change) leaves the held poll to carry the next command.
	if r.WaitMS > 0 && n.supersede != nil {
		close(n.supersede)
		n.supersede = nil
	}
	n.LastSeen = s.now()
	n.hostedAcked = r.HostedGen // issue 21: the hosted list the node holds
	// A request overtaken by a newer one on another connection carries
	// old news: its reports would make a finished job look running or a
	// launched one lost. It still polls for commands, and its GPU
	// reading (each is sent until one request carrying it is answered,
	// and a later request without one means "unchanged") still counts.
	stale := r.Seq != 0 && r.Seq <= n.seq
	if !stale {
		n.seq = max(n.seq, r.Seq)
		n.CPULoad, n.FreeMemMB = r.CPULoad, r.FreeMemMB
	}
	if r.GPUStatus != nil {
		s.applyGPUStatus(n, r.GPUStatus)
		s.reclaimGPUs(n, r.GPUStatus, r.GPUProcJobs)
		s.noteGPUReading(n.Name, r.GPUProcJobs) // jobseries.go
	}
	if !n.Responding {
		n.Responding = true
		n.updateState()
		s.log.Info("node responding again", "node", n.Name)
		s.Kick()
	}
	var resp api.NodeSyncResponse
	if stale {
		s.log.Debug("stale node report ignored", "node", n.Name, "seq", r.Seq, "applied", n.seq)
		s.commands(n, &resp)
	} else {
		resp = s.reconcile(n, r.Jobs)
	}
	s.applyNodeUsage(n, r.Usage, stale) // stepacct.go
	s.flushAcks(&resp)
	if !emptyResponse(resp) || r.WaitMS <= 0 {
		s.mu.Unlock()
		s.metrics.synced("immediate")
		return resp, nil
	}
	wait := time.Duration(min(r.WaitMS, 60000)) * time.Millisecond
	wake := n.wake
	if n.supersede == nil {
		n.supersede = make(chan struct{})
	}
	superseded := n.supersede
	n.inflight++
	s.mu.Unlock()

	t := time.NewTimer(wait)
	quit := false
	select {
	case <-wake:
	case <-t.C:
	case <-superseded:
		quit = true
	case <-ctx.Done():
		quit = true
	}
	t.Stop()

	s.mu.Lock()
	defer s.mu.Unlock()
	n.inflight--
	if n.inflight == 0 && n.supersede == superseded {
		n.supersede = nil
	}
	n.LastSeen = s.now()
	if !n.registered {
		return api.NodeSyncResponse{Unregistered: true}, nil
	}
	var resp2 api.NodeSyncResponse
	if quit {
		// The node's newer sync takes the commands (or, its connection
		// gone, nobody reads them): one-shot signals must not be spent
		// on this answer.
		s.metrics.synced("superseded")
		return resp2, nil
	}
	s.commands(n, &resp2)
	s.metrics.synced("held")
	return resp2, nil
}

// applyGPUStatus records a node's GPU health and usage. A GPU the node
// calls unhealthy (an XID-critical error, a lost GPU) drains the node with
// the reason, so no new work lands there; running jobs keep running.
// Called with mu held.
func (s *Server) applyGPUStatus(n *nodeRec, st []gres.Status) {
	n.GPUStatus = st
	for _, g := range st {
		if g.Health != gres.Unhealthy {
			continue
		}
		for i := range n.GPUs {
			if n.GPUs[i].Index == g.Index && n.GPUs[i].Health != gres.Unhealthy {
				// Copy on write: listings share the slice outside the lock.
				n.GPUs = slices.Clone(n.GPUs)
				n.GPUs[i].Health = gres.Unhealthy
			}
		}
		if n.Drain {
			continue
		}
		why := fmt.Sprintf("GPU %d unhealthy", g.Index)
		if g.Reason != "" {
			why += ": " + g.Reason
		}
		n.Drain, n.Reason, n.ReasonUser, n.ReasonTime = true, why, "tidectld", s.now()
		s.dirtyNodes[n.Name] = true
		s.log.Warn("node drained: GPU unhealthy", "node", n.Name, "gpu", g.Index, "reason", g.Reason)
	}
}

// flushAcks writes what a node's report changed and, when the write
// fails, takes the acknowledgements out of resp: an Ack tells the node
// that its job's end is stored and may be forgotten, and an end that is
// only in memory would be lost with a crash, or for good when the
// write failed because another controller took over (fenced). The node
// reports the end again. Called with mu held.
func (s *Server) flushAcks(resp *api.NodeSyncResponse) {
	if !s.flush() {
		resp.Ack = nil
	}
}
