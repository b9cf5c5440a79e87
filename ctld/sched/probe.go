package sched

import (
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Probes (Snapshot.Probes): a probed job is decided in its place in the
// order like any other, and starts where it would start; but when it
// does not start it leaves the pass as it found it: it holds no nodes,
// gets no reservation, estimate, preemption or quota hold, does not
// count against the backfill test limits (it is untested only where the
// jobs before it used them up), and its failure is not remembered for
// later jobs of its shape (failedShape). Its Decision says why it did
// not start (a gate, a limit, a known failure of its shape) or is
// Resources without a diagnosis.
//
// What it is for: a job that does not start changes the pass only by
// restricting later jobs (holds, reservations, test counts), and every
// filter is monotone in what a node has free. So when a probe that
// stands for several jobs of its shape (same request, its limit the
// shortest) does not start right after a queue prefix, none of those
// jobs could start wherever it stood behind that prefix, whatever the
// jobs between did. The simulator hands a prefix of a deep queue plus
// one probe per shape of the jobs it leaves out, and needs the whole
// queue only when a probe starts (sim's representatives).

// decide decides job e, as a probe when probe is set.
func (p *pass) decide(e *entry, probe bool, now time.Time, plan *Plan, pol *policy) (Start, bool) {
	if !probe {
		return p.scheduleJob(e, now, plan, pol)
	}
	p.probe, pol.probing = true, true
	defer func() { p.probe, pol.probing = false, false }()
	req := e.job.ReqPartition()
	if !strings.Contains(req, ",") {
		return p.schedule(e, req, now, plan, pol)
	}
	// In each partition in turn, as scheduleJob's first round; the
	// Decision is the first partition's.
	n := len(plan.Pending)
	for _, name := range api.PartitionNames(req) {
		if start, ok := p.schedule(e, name, now, plan, pol); ok {
			plan.Pending = plan.Pending[:n]
			start.Partition = name
			return start, true
		}
		plan.Pending = plan.Pending[:min(len(plan.Pending), n+1)]
	}
	return Start{}, false
}
