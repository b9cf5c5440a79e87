package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// DefaultMaxThrottleWait bounds how long Submit keeps retrying a
// submission the controller throttles (429) before it gives up: long
// enough to ride out a burst of thousands of jobs, short enough that a
// stuck controller does not hang a script forever.
const DefaultMaxThrottleWait = 10 * time.Minute

// defaultRetryAfter is the wait when a 429 carries no usable
// Retry-After header.
const defaultRetryAfter = time.Second

// Throttle describes one 429 answer to a submission: the controller's
// submission buffer for the job's queue is full and it asked the client
// to come back later.
type Throttle struct {
	// RetryIn is how long the client waits before it tries again.
	RetryIn time.Duration
	// Waited is how long this submission has waited so far.
	Waited time.Duration
	// Message is the controller's explanation, if it gave one.
	Message string
}

// ThrottledError is an answer with HTTP 429; it matches
// api.ErrTooManyRequests with errors.Is and carries the Retry-After.
type ThrottledError struct {
	Err        error
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string { return e.Err.Error() }

// Unwrap returns the class error (api.ErrTooManyRequests).
func (e *ThrottledError) Unwrap() error { return e.Err }

// parseRetryAfter reads a Retry-After value: whole seconds (what
// tidectld sends) or an HTTP date. Missing, malformed or past values
// mean defaultRetryAfter.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return defaultRetryAfter
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 1 {
			return defaultRetryAfter
		}
		if n > 24*3600 {
			n = 24 * 3600
		}
		return time.Duration(n) * time.Second
	}
	if t, err := time.Parse(time.RFC1123, v); err == nil {
		if d := t.Sub(now).Round(time.Second); d >= time.Second {
			return d
		}
	}
	return defaultRetryAfter
}

// OnThrottle sets f to be told, once per Submit call, that the controller
// throttled the submission and the client waits; the CLI prints it.
// Later retries of the same submission are silent. Not safe to call
// while requests are in flight.
func (c *Client) OnThrottle(f func(Throttle)) { c.onThrottle = f }

// SetMaxThrottleWait bounds the total time one Submit waits on 429
// answers (0 restores DefaultMaxThrottleWait; negative turns retrying
// off, so the first 429 is returned).
func (c *Client) SetMaxThrottleWait(d time.Duration) { c.maxThrottle = d }

// submitRetrying posts a submission, waiting out 429 answers as their
// Retry-After says, up to the throttle budget, and a controller that
// cannot be reached (restarting, its socket gone, the connection broken
// before an answer, 503) with backoff, up to the retry window
// (retry.go). Every try carries the same token, so that a try whose
// answer was lost is never a second job.
func (c *Client) submitRetrying(ctx context.Context, req api.SubmitRequest) (api.SubmitResponse, error) {
	budget := c.maxThrottle
	if budget == 0 {
		budget = DefaultMaxThrottleWait
	}
	sleep := c.sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	if req.Token == "" && !req.TestOnly {
		req.Token = NewToken()
	}
	var waited time.Duration
	told := false
	retry := c.newRetrier()
	for {
		var r api.SubmitResponse
		err := c.do(ctx, methodPost, "/api/v1/jobs", nil, &req, &r)
		if wait, ok := retry.next(err); ok {
			if err := sleep(ctx, wait); err != nil {
				return r, err
			}
			continue
		}
		if req.Token != "" && errors.Is(err, api.ErrInvalidArgument) && strings.Contains(err.Error(), `unknown field "token"`) {
			// A controller older than submission tokens: submit without
			// one (and without retries a lost answer could duplicate).
			req.Token, retry.off = "", true
			continue
		}
		var te *ThrottledError
		if !errors.As(err, &te) {
			return r, retry.final(err)
		}
		if budget < 0 {
			return r, err
		}
		// tidectld words its refusal for sbatch to print as it is
		// ("Batch job submission failed: …"); here it is a detail.
		msg := strings.TrimPrefix(te.Error(), "Batch job submission failed: ")
		if waited+te.RetryAfter > budget {
			return r, &ThrottledError{RetryAfter: te.RetryAfter, Err: api.Errorf(api.ErrTooManyRequests,
				"submission throttled by the controller (queue buffer full); gave up after waiting %s: %s", waited.Round(time.Second), msg)}
		}
		if !told && c.onThrottle != nil {
			c.onThrottle(Throttle{RetryIn: te.RetryAfter, Waited: waited, Message: msg})
			told = true
		}
		if err := sleep(ctx, te.RetryAfter); err != nil {
			return r, err
		}
		waited += te.RetryAfter
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Queues returns every queue with its use and every job class (tide
// queues, sprio).
func (c *Client) Queues(ctx context.Context) (api.QueueList, error) {
	var r api.QueueList
	err := c.do(ctx, methodGet, api.PathQueues, nil, nil, &r)
	return r, err
}

// Checkpoint tells the controller that job id finished a checkpoint
// (tide checkpoint-done): a preemption waiting in its grace time goes on
// at once.
func (c *Client) Checkpoint(ctx context.Context, id uint64) error {
	return c.do(ctx, methodPost, fmt.Sprintf(api.PathCheckpoint, id), nil, nil, nil)
}
