package ctld

import (
	"math"
	"slices"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// The submission buffer. Each queue accepts its submit_rate of jobs per
// second straight into the scheduler (a token bucket that holds one
// second's worth), and each user submit.rate_per_user when set. A
// submission over the rate is still accepted: it gets its id and is
// stored like any other, but waits with reason SubmitBuffer, and the
// queue releases its waiting jobs in arrival order at its rate. Only
// beyond submit.buffer waiting jobs is a submission refused, with 429 and
// a Retry-After of the buffer's drain time. Jobs outside any queue are
// never buffered.
//
// Buffered jobs are left out of the scheduler's snapshot, so a storm of
// submissions costs passes nothing; the buffer itself is a list of ids
// per queue, rebuilt from the stored jobs after a restart.

// tokenBucket is a rate limiter fed by the controller's clock.
type tokenBucket struct {
	tokens float64
	last   time.Time
}

// refill adds what rate earned since the last refill, up to one
// second's worth (at least one token).
func (b *tokenBucket) refill(now time.Time, rate float64) {
	burst := math.Max(rate, 1)
	if b.last.IsZero() {
		b.tokens, b.last = burst, now
		return
	}
	if dt := now.Sub(b.last); dt > 0 {
		b.tokens = math.Min(burst, b.tokens+rate*dt.Seconds())
		b.last = now
	}
}

// queueBuffer is one queue's bucket and its waiting jobs in arrival
// order.
type queueBuffer struct {
	tokenBucket
	waiting []uint64
}

// submitBuffer holds every queue's buffer and the per-user buckets.
// Guarded by the server's mu.
type submitBuffer struct {
	queues map[string]*queueBuffer
	users  map[uint32]*tokenBucket
	// storing are ids whose submission is being written (outside mu):
	// release waits for them rather than dropping them.
	storing map[uint64]bool
}

func (b *submitBuffer) queue(name string) *queueBuffer {
	if b.queues == nil {
		b.queues = map[string]*queueBuffer{}
	}
	q := b.queues[name]
	if q == nil {
		q = &queueBuffer{}
		b.queues[name] = q
	}
	return q
}

func (b *submitBuffer) user(uid uint32) *tokenBucket {
	if b.users == nil {
		b.users = map[uint32]*tokenBucket{}
	}
	u := b.users[uid]
	if u == nil {
		u = &tokenBucket{}
		b.users[uid] = u
	}
	return u
}

// waiting is how many jobs wait in queue name's buffer.
func (b *submitBuffer) waiting(name string) int {
	if q := b.queues[name]; q != nil {
		return len(q.waiting)
	}
	return 0
}

// remove forgets id (a submission that could not be stored).
func (b *submitBuffer) remove(queue string, id uint64) {
	if q := b.queues[queue]; q != nil {
		q.waiting = slices.DeleteFunc(q.waiting, func(x uint64) bool { return x == id })
	}
}

// tooManyRequests is a 429 answer with the seconds to wait.
type tooManyRequests struct {
	error
	retryAfter int
}

func (e *tooManyRequests) Unwrap() error { return e.error }

// admit decides whether job j (not yet numbered) goes straight to the
// scheduler, waits in its queue's buffer, or is refused because the
// buffer is full. Called with mu held.
func (s *Server) admit(j *api.Job, now time.Time) (buffered bool, err error) {
	q := s.sharing().Queue(j.Account)
	if q == nil || (j.Reason != api.ReasonNone && j.Reason != api.ReasonDependency) {
		// Outside queues, held or waiting for --begin: nothing to
		// throttle (a held job reaches the scheduler only when
		// released).
		return false, nil
	}
	qb := s.buffer.queue(q.Name)
	qb.refill(now, q.SubmitRate)
	var ub *tokenBucket
	if rate := s.cl.Submit.RatePerUser; rate > 0 {
		ub = s.buffer.user(j.UserID)
		ub.refill(now, rate)
	}
	if len(qb.waiting) == 0 && qb.tokens >= 1 && (ub == nil || ub.tokens >= 1) {
		qb.tokens--
		if ub != nil {
			ub.tokens--
		}
		return false, nil
	}
	if len(qb.waiting) >= s.cl.Submit.Buffer {
		rate := q.SubmitRate
		if r := s.cl.Submit.RatePerUser; r > 0 {
			rate = math.Min(rate, r)
		}
		wait := int(math.Ceil((float64(len(qb.waiting)+1) - qb.tokens) / rate))
		s.metrics.throttle("refused")
		return false, &tooManyRequests{retryAfter: max(wait, 1),
			error: api.Errorf(api.ErrTooManyRequests, "Batch job submission failed: queue %s's submission buffer is full (%d jobs wait, released at %g/s); retry in %d s",
				q.Name, len(qb.waiting), q.SubmitRate, max(wait, 1))}
	}
	s.metrics.throttle("buffered")
	return true, nil
}

// releaseBuffered moves buffered jobs to the scheduler, in arrival
// order, as far as their queue's (and users') rate allows. It reports
// whether it released any. Called with mu held.
func (s *Server) releaseBuffered(now time.Time) bool {
	released := false
	for name, qb := range s.buffer.queues {
		if len(qb.waiting) == 0 {
			continue
		}
		q := s.sharing().Queue(name)
		if q == nil {
			qb.waiting = nil
			continue
		}
		qb.refill(now, q.SubmitRate)
		for len(qb.waiting) > 0 {
			id := qb.waiting[0]
			j := s.jobs[id]
			if j == nil && s.buffer.storing[id] {
				break // keep the order: it is being stored
			}
			if j == nil || j.State != api.StatePending || j.Reason != api.ReasonBuffered {
				// Cancelled, held or gone meanwhile.
				qb.waiting = qb.waiting[1:]
				continue
			}
			if qb.tokens < 1 {
				break
			}
			var ub *tokenBucket
			if rate := s.cl.Submit.RatePerUser; rate > 0 {
				ub = s.buffer.user(j.UserID)
				ub.refill(now, rate)
				if ub.tokens < 1 {
					break
				}
				ub.tokens--
			}
			qb.tokens--
			qb.waiting = qb.waiting[1:]
			j.Reason = api.ReasonNone
			if j.Dependency != "" {
				j.Reason = api.ReasonDependency
			}
			s.markDirty(j)
			released = true
		}
		if len(qb.waiting) == 0 {
			qb.waiting = nil // let the backing array go
		}
	}
	return released
}

// recoverBuffer rebuilds the buffers from the stored jobs after a
// restart: buffered jobs wait again, in id (arrival) order. Called with
// mu held.
func (s *Server) recoverBuffer() {
	var ids []uint64
	for id, j := range s.jobs {
		if j.State == api.StatePending && j.Reason == api.ReasonBuffered {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		j := s.jobs[id]
		if s.sharing().Queue(j.Account) == nil {
			// Its queue left the config: nothing throttles it now.
			j.Reason = api.ReasonNone
			s.markDirty(j)
			continue
		}
		qb := s.buffer.queue(j.Account)
		qb.waiting = append(qb.waiting, id)
	}
}
