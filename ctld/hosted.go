package ctld

// Hosted jobs (issue 21): a node daemon starts a step only of a job it
// knows runs on it under the grant's user. It knows the batch jobs it
// launched; the others that hold a share of it — allocation-only jobs
// (salloc, srun outside a batch job) and the nodes of a multi-node batch
// job other than its batch host — the controller tells it of in the sync
// answers (api.NodeSyncResponse.Hosted). The list is state, not a
// message: it goes out whole, named by a hash of its content, and again
// until the node echoes that hash (api.NodeSyncRequest.HostedGen).

import (
	"cmp"
	"slices"

	"github.com/tide-hpc/tide/ctld/api"
)

// hostedOn reports whether node must be told of j: it holds a share of
// the node and the node does not launch it.
func hostedOn(j *api.Job, node string) bool {
	return (j.Allocation || node != j.BatchHost()) && slices.ContainsFunc(j.Alloc, func(a api.NodeAlloc) bool { return a.Node == node })
}

// hostJob records a job that just started on the nodes that host it,
// marking them in touched for the scheduler to wake once the start is
// stored. Called with mu held.
func (s *Server) hostJob(j *api.Job, touched map[string]bool) {
	for _, a := range j.Alloc {
		n := s.nodes[a.Node]
		if n == nil || !hostedOn(j, a.Node) {
			continue
		}
		if n.hosted == nil {
			n.hosted = map[uint64]*api.Job{}
		}
		n.hosted[j.ID] = j
		touched[n.Name] = true
	}
}

// unhostJob removes an ending job from its nodes' lists and wakes their
// held syncs, so that the nodes stop taking its steps at once. Called
// with mu held.
func (s *Server) unhostJob(j *api.Job) {
	for _, a := range j.Alloc {
		if n := s.nodes[a.Node]; n != nil && n.hosted[j.ID] != nil {
			delete(n.hosted, j.ID)
			n.notify()
		}
	}
}

// rehost rebuilds n's list from the active jobs (every one is in its
// batch host's table) when n registers: a restarted controller has
// recovered the jobs but not the lists, and the node's own list is not
// to be trusted after a restart of either side. Called with mu held.
func (s *Server) rehost(n *nodeRec) {
	n.hosted = map[uint64]*api.Job{}
	n.hostedAcked = 0
	for _, host := range s.nodes {
		for _, j := range host.batch {
			if j.State.Active() && hostedOn(j, n.Name) {
				n.hosted[j.ID] = j
			}
		}
	}
}

// addHosted puts n's list in resp unless the node holds it already.
// Jobs not yet stored stay off it, as their launches do. Called with mu
// held.
func (s *Server) addHosted(n *nodeRec, resp *api.NodeSyncResponse) {
	list, gen := s.hostedList(n)
	if gen != n.hostedAcked {
		resp.Hosted, resp.HostedGen = list, gen
	}
}

// hostedList returns n's list, by job id, and its hash (never zero, so
// that a node that has none yet always differs). A job that ended
// without unhostJob seeing it is dropped here.
func (s *Server) hostedList(n *nodeRec) ([]api.HostedJob, uint64) {
	var list []api.HostedJob
	for id, j := range n.hosted {
		if !j.State.Active() || !hostedOn(j, n.Name) {
			delete(n.hosted, id)
			continue
		}
		if s.dirty[id] {
			continue
		}
		list = append(list, api.HostedJob{JobRef: ref(j), UserID: j.UserID, GroupID: j.GroupID})
	}
	slices.SortFunc(list, func(a, b api.HostedJob) int { return cmp.Compare(a.JobID, b.JobID) })
	// FNV-1a over the entries' fields, by hand: this runs on every sync
	// answer, and most nodes host nothing.
	h := uint64(14695981039346656037)
	for _, x := range list {
		for _, v := range [4]uint64{x.JobID, uint64(x.Restart), uint64(x.UserID), uint64(x.GroupID)} {
			for range 8 {
				h = (h ^ (v & 0xff)) * 1099511628211
				v >>= 8
			}
		}
	}
	return list, max(h, 1)
}

// registeredSteps completes a registration answer with what the node
// needs for steps: the public step key and the node's whole list.
// Called with mu held.
func (s *Server) registeredSteps(n *nodeRec, resp *api.NodeSyncResponse) {
	s.rehost(n)
	resp.StepKey = s.stepKeyWire()
	resp.Hosted, resp.HostedGen = s.hostedList(n)
}
