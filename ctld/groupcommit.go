package ctld

import (
	"context"
	"sync"

	"github.com/tide-hpc/tide/accounting"
)

// groupCommit writes the batches of concurrent submissions in one
// transaction. Each submission must be committed before its id is
// answered, and on SQLite a commit costs about the same for one job as
// for sixteen (the same index pages are written to the log), so under a
// storm of parallel sbatch calls one commit per job is most of the
// controller's work. The writer that finds no commit in progress leads:
// it writes everything queued so far (its own batch included) as one
// batch, hands the lead to the first writer that queued meanwhile, and
// returns. A merged batch that fails is retried batch by batch, so that
// one bad submission never fails the others.
type groupCommit struct {
	write func(context.Context, *accounting.Batch) error

	mu      sync.Mutex
	queue   []*commitReq
	leading bool
}

type commitReq struct {
	b    *accounting.Batch
	done chan error
	lead chan struct{} // closed when this writer is to lead the next round
}

// Write commits b, possibly together with batches written concurrently,
// and returns once it is stored or failed. The commit is not abandoned
// when ctx ends (other submissions share it); ctx's values still reach
// the store.
func (g *groupCommit) Write(ctx context.Context, b *accounting.Batch) error {
	r := &commitReq{b: b, done: make(chan error, 1), lead: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, r)
	if g.leading {
		g.mu.Unlock()
		select {
		case err := <-r.done:
			return err
		case <-r.lead:
		}
		g.mu.Lock()
	} else {
		g.leading = true
	}
	// Leading: r is still queued (only the leader empties the queue).
	reqs := g.queue
	g.queue = nil
	g.mu.Unlock()
	g.commit(context.WithoutCancel(ctx), reqs)
	g.mu.Lock()
	if len(g.queue) > 0 {
		close(g.queue[0].lead)
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	return <-r.done
}

// commit writes reqs as one batch, or one by one when that fails.
func (g *groupCommit) commit(ctx context.Context, reqs []*commitReq) {
	if len(reqs) == 1 {
		reqs[0].done <- g.write(ctx, reqs[0].b)
		return
	}
	if err := g.write(ctx, mergeBatches(reqs)); err == nil {
		for _, r := range reqs {
			r.done <- nil
		}
		return
	}
	for _, r := range reqs {
		r.done <- g.write(ctx, r.b)
	}
}

// mergeBatches joins the batches of reqs in order; Batch applies its
// parts in field order, so every new job is inserted before any event
// that names it.
func mergeBatches(reqs []*commitReq) *accounting.Batch {
	m := &accounting.Batch{}
	for _, r := range reqs {
		b := r.b
		m.NewJobs = append(m.NewJobs, b.NewJobs...)
		m.Jobs = append(m.Jobs, b.Jobs...)
		m.Events = append(m.Events, b.Events...)
		m.Audit = append(m.Audit, b.Audit...)
		m.Nodes = append(m.Nodes, b.Nodes...)
		m.Steps = append(m.Steps, b.Steps...)
		m.MaxJobID = max(m.MaxJobID, b.MaxJobID)
	}
	return m
}
