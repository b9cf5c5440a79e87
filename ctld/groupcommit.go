package ctld

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/tide-hpc/tide/accounting"
	"github.com/tide-hpc/tide/ctld/api"
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
//
// A commit takes about as long as the next submission of a busy client
// takes to arrive, so rounds rarely found company: a drain of short jobs
// from 16 clients committed three submissions in four alone. So
// submissions announce themselves when their request arrives (arrive),
// and a leader that knows of some on their way (decoding, validating)
// waits up to gatherWait for them to queue before it commits. A lone
// client never waits: nobody else is arriving.
//
// Arrivals are known only once their handler runs, and on a busy
// controller with two cores most of the next submissions' had not: their
// requests had come in, their goroutines were still waiting to run. So
// commits still carried two jobs on average, from 16 clients as from 64
// (BenchmarkSubmitAPI), and each commit appends some nine pages to the
// WAL (eighteen write calls) however few jobs it holds. Hence the leader
// first yields the processor (runtime.Gosched), again while each yield
// brought more submissions (at most maxGatherYields times): what was
// ready to run queues behind it, and commits carry six jobs from 16
// clients and twenty from 64, which took the process's CPU per
// submission down by a third. When nothing else is ready to run, a
// yield returns at once.
type groupCommit struct {
	write func(context.Context, *accounting.Batch) error

	mu      sync.Mutex
	queue   []*commitReq
	leading bool
	// arriving counts arrivals that have neither queued nor left;
	// gathered is closed when it drops to zero while a leader waits.
	arriving int
	gathered chan struct{}
	// wait overrides gatherWait, yield runtime.Gosched (tests).
	wait  time.Duration
	yield func()
}

// gatherWait bounds a leader's wait for arriving submissions.
const gatherWait = time.Millisecond

// maxGatherYields bounds the leader's yields to submissions ready to
// run.
const maxGatherYields = 4

// arrival is a submission on its way to Write.
type arrival struct {
	g    *groupCommit
	done bool
}

// arrive announces a submission that will reach Write or leave.
func (g *groupCommit) arrive() *arrival {
	g.mu.Lock()
	g.arriving++
	g.mu.Unlock()
	return &arrival{g: g}
}

// leave withdraws a (nil allowed) and is a no-op once it queued or
// left; call it on every way out of the submission.
func (a *arrival) leave() {
	if a == nil {
		return
	}
	a.g.mu.Lock()
	a.leaveLocked()
	a.g.mu.Unlock()
}

func (a *arrival) leaveLocked() {
	if a.done {
		return
	}
	a.done = true
	g := a.g
	g.arriving--
	if g.arriving == 0 && g.gathered != nil {
		close(g.gathered)
		g.gathered = nil
	}
}

type commitReq struct {
	b    *accounting.Batch
	done chan error
	lead chan struct{} // closed when this writer is to lead the next round
}

// Write commits b, possibly together with batches written concurrently,
// and returns once it is stored or failed. a is b's arrival (nil when it
// announced none). The commit is not abandoned when ctx ends (other
// submissions share it); ctx's values still reach the store.
func (g *groupCommit) Write(ctx context.Context, b *accounting.Batch, a *arrival) error {
	r := &commitReq{b: b, done: make(chan error, 1), lead: make(chan struct{})}
	g.mu.Lock()
	if a != nil {
		a.leaveLocked()
	}
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
	// Submissions whose goroutines are ready to run (a request just
	// read, decoded or validated) would queue in a moment: yielding
	// lets them, as long as each yield brought some. On a quiet
	// controller the first yield finds nobody and returns at once.
	yield := runtime.Gosched
	if g.yield != nil {
		yield = g.yield
	}
	for range maxGatherYields {
		n := len(g.queue)
		g.mu.Unlock()
		yield()
		g.mu.Lock()
		if len(g.queue) == n {
			break
		}
	}
	if g.arriving > 0 {
		gathered := make(chan struct{})
		g.gathered = gathered
		g.mu.Unlock()
		wait := gatherWait
		if g.wait > 0 {
			wait = g.wait
		}
		t := time.NewTimer(wait)
		select {
		case <-gathered:
		case <-t.C:
		}
		t.Stop()
		g.mu.Lock()
		if g.gathered == gathered {
			g.gathered = nil
		}
	}
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
	var jobs, events, audit int
	for _, r := range reqs {
		jobs += len(r.b.NewJobs)
		events += len(r.b.Events)
		audit += len(r.b.Audit)
	}
	// Sized once: appending grew each slice from empty, a round of
	// copies per doubling on every commit.
	m := &accounting.Batch{NewJobs: make([]*api.Job, 0, jobs), Events: make([]api.Event, 0, events),
		Audit: make([]api.AuditRecord, 0, audit)}
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

// arrivalKey carries a submission's arrival from its HTTP handler to
// submit, through the request's context.
type arrivalKey struct{}

func withArrival(ctx context.Context, a *arrival) context.Context {
	return context.WithValue(ctx, arrivalKey{}, a)
}

// arrivalOf is ctx's arrival, nil when it has none.
func arrivalOf(ctx context.Context) *arrival {
	a, _ := ctx.Value(arrivalKey{}).(*arrival)
	return a
}
