package sched

import (
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Partition lists: a job submitted with -p a,b is eligible in each of
// the partitions and runs in the first, in the order given, where it can
// start (Slurm's rule for equal partition priorities). The pass first
// probes every partition in that order: the first where the job fits
// starts it, and the probes that failed leave nothing behind (no node
// holds, reservations, preemptions or quota holds), so a job that runs
// in b does not block a because it did not fit there. A job that fits
// nowhere is then decided in each partition in turn as a job of that
// partition, which is where its holds and backfill reservation come from
// (Slurm, too, blocks each partition a pending job waits in), and keeps
// one Decision: that of the first partition where it waits in line for
// resources, else of the first partition; a partition where it chose
// preemption victims ends the round.

// scheduleJob decides one job in the partitions it may run in (see
// above); the Start names the partition.
func (p *pass) scheduleJob(e *entry, now time.Time, plan *Plan, pol *policy) (Start, bool) {
	if f, ok := p.tailDecision(e, pol, plan); ok {
		plan.Pending = append(plan.Pending, Decision{JobID: e.id, Reason: f.reason, Detail: f.detail})
		return Start{}, false
	}
	req := e.job.ReqPartition()
	if !strings.Contains(req, ",") {
		return p.schedule(e, req, now, plan, pol)
	}
	names := api.PartitionNames(req)
	if len(names) == 1 {
		start, ok := p.schedule(e, names[0], now, plan, pol)
		start.Partition = names[0]
		return start, ok
	}
	n := len(plan.Pending)
	p.probe = true
	for _, name := range names {
		if start, ok := p.schedule(e, name, now, plan, pol); ok {
			p.probe = false
			plan.Pending = plan.Pending[:n]
			start.Partition = name
			return start, true
		}
		plan.Pending = plan.Pending[:n]
	}
	p.probe = false
	best := -1
	for _, name := range names {
		k := len(plan.Pending)
		start, ok := p.schedule(e, name, now, plan, pol)
		if ok {
			plan.Pending = plan.Pending[:n]
			start.Partition = name
			return start, true
		}
		if k == len(plan.Pending) {
			continue
		}
		d := &plan.Pending[k]
		if d.Detail != "" {
			d.Detail = "partition " + name + ": " + d.Detail
		} else {
			d.Detail = "partition " + name
		}
		if d.Reason.Reclaims() {
			best = k
			break
		}
		if best < 0 || !plan.Pending[best].Reason.WaitsInLine() && d.Reason.WaitsInLine() {
			best = k
		}
	}
	if best >= 0 {
		plan.Pending[n] = plan.Pending[best]
		plan.Pending = plan.Pending[:n+1]
	}
	return Start{}, false
}
