package sched

// Priority blocking is Slurm's main scheduler without backfill: once a job
// stays pending for Resources, lower-priority jobs must not take the nodes
// it waits for, or a stream of small jobs would starve it forever. This
// file is the whole policy, so that the backfill issue can replace it with
// reservations in time (start lower-priority jobs that end before the
// blocked job's expected start).
//
// The policy works per node, which is what "would compete" means here: a
// pending job reserves the nodes it could use (those passing the static
// filters: usable, not excluded, named by -w when -w is the whole
// allocation, right GPU model; and big enough when empty). A later job that cannot fit without a
// reserved node is pending for Priority; one that fits on other nodes
// (another GPU model, nodes outside the blocked job's -w) still starts.
// Jobs pending for Hold, BeginTime, partition limits, BadConstraints,
// ReqNodeNotAvail or NodeDown reserve nothing: they cannot start whatever
// lower-priority jobs do.

// blockedByPriority is the fast path of priority blocking: it reports
// whether every member of partition pi is reserved or unusable, so that
// the job gets Priority without a node scan. It costs O(1), which is what
// keeps a pass over a deep queue behind a blocked partition cheap.
func (p *pass) blockedByPriority(pi int) bool {
	ps := &p.parts[pi]
	return ps.reserved > 0 && ps.reserved+ps.unusable >= len(ps.members)
}

// holdForPriority reserves, for request r that stays pending for
// Resources, every usable node it could use (its required nodes, and the
// partition's nodes that pass its static filters and could hold its
// smallest slot when empty), so that lower-priority jobs of any partition
// holding those nodes do not take them in this pass. Nodes too small for
// the job ever stay open to others.
func (p *pass) holdForPriority(r *Request) {
	for _, i := range r.Required {
		p.reserve(i)
	}
	if r.OnlyRequired {
		return
	}
	smallest := &r.Slots[len(r.Slots)-1]
	for _, i := range p.parts[r.Part].members {
		n := &p.nodes[i]
		if n.Reserved || n.required == r.stamp || p.chain.checkStatic(r, smallest, n) != "" {
			continue
		}
		if p.chain.check(r, smallest, p.emptyView(i)) == "" {
			p.reserve(i)
		}
	}
}

// reserve marks node i as held and counts it in every partition that
// holds it.
func (p *pass) reserve(i int) {
	n := &p.nodes[i]
	if n.Reserved || !n.Usable {
		return
	}
	n.Reserved = true
	p.anyReserved = true
	for _, q := range p.partsOf(i) {
		p.parts[q].reserved++
	}
}
