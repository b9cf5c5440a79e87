package client

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Riding out a controller restart. A submission that finds the
// controller unreachable (connection refused, its socket missing while
// it restarts, the connection broken before an answer) or unavailable
// (503: it could not store the job) is tried again with backoff, as
// Slurm's clients do ("Slurm controller not responding, sleeping and
// retrying"), until the retry window is spent. The submission's token
// makes this safe: the controller answers a repeat with the job the
// first try made, whether that try's answer was lost in transit or with
// the controller that crashed after storing it.

// Bounds of the backoff between tries.
const (
	retryMin = 100 * time.Millisecond
	retryMax = 3 * time.Second
)

// Retry describes one wait before another try of a submission.
type Retry struct {
	// In is how long the client waits; Waited how long it has so far.
	In, Waited time.Duration
	// Err is why the last try failed.
	Err error
}

// SetRetryWindow sets how long Submit keeps trying while the controller
// cannot be reached; 0 (the default) tries once.
func (c *Client) SetRetryWindow(d time.Duration) { c.retryWindow = d }

// OnRetry sets f to be told before each wait for another try.
func (c *Client) OnRetry(f func(Retry)) { c.onRetry = f }

// NewToken returns a fresh submission token: 128 random bits from the
// runtime's generator (ChaCha8 seeded from the kernel), which need to be
// unique, not secret, since the controller keeps tokens per user.
func NewToken() string {
	var b [16]byte
	for i := 0; i < len(b); i += 8 {
		v := rand.Uint64()
		for k := range 8 {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	return hex.EncodeToString(b[:])
}

// retrier paces the tries of one submission.
type retrier struct {
	c      *Client
	waited time.Duration
	delay  time.Duration
	tries  int
	// off stops retrying: the submission has no token (see
	// submitRetrying), so a repeat could be a second job.
	off bool
}

func (c *Client) newRetrier() *retrier { return &retrier{c: c, delay: retryMin} }

// next reports whether err calls for another try, and after how long.
func (r *retrier) next(err error) (time.Duration, bool) {
	if err == nil || !errors.Is(err, api.ErrUnavailable) || r.c.retryWindow <= 0 || r.off {
		return 0, false
	}
	// Jitter spreads the tries of many clients that lost the controller
	// at the same moment.
	wait := r.delay/2 + rand.N(r.delay/2+1)
	if r.waited+wait > r.c.retryWindow {
		return 0, false
	}
	if r.c.onRetry != nil {
		r.c.onRetry(Retry{In: wait, Waited: r.waited, Err: err})
	}
	r.tries++
	r.waited += wait
	r.delay = min(r.delay*2, retryMax)
	return wait, true
}

// retryScope says which failures a call may be repeated after.
type retryScope int

const (
	// anyUnavailable: every ErrUnavailable (the call is idempotent).
	anyUnavailable retryScope = iota
	// unsentOnly: only when the request was never sent (the dial
	// failed) or the controller answered 503 (it did nothing).
	unsentOnly
)

// retrying runs call until it succeeds, fails for good, or the retry
// window is spent (submissions have their own loop: submitRetrying).
func (c *Client) retrying(ctx context.Context, scope retryScope, call func() error) error {
	sleep := c.sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	r := c.newRetrier()
	for {
		err := call()
		if scope == unsentOnly && err != nil && !unsent(err) {
			return err
		}
		wait, ok := r.next(err)
		if !ok {
			return r.final(err)
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// unsent reports whether err says the request never reached the
// controller's handlers: the connection could not be made, or the
// controller answered 503 (every controller tried, with several).
func unsent(err error) bool {
	var fe *FailoverError
	if errors.As(err, &fe) {
		for _, e := range fe.Errs {
			if !unsent(e) {
				return false
			}
		}
		return true
	}
	var de *dialError
	if errors.As(err, &de) {
		return true
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return true
	}
	var ae *answerError
	return errors.As(err, &ae) && ae.status == 503
}

// final words the error after the last try.
func (r *retrier) final(err error) error {
	if r.tries == 0 || err == nil || !errors.Is(err, api.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w (gave up after %d tries in %s)", err, r.tries+1, r.waited.Round(100*time.Millisecond))
}

// DefaultRetryWindow is how long sbatch, srun and salloc keep trying to
// reach the controller unless TIDE_SUBMIT_RETRY says otherwise: long
// enough to ride out a controller restart.
const DefaultRetryWindow = time.Minute

// RetryEnv names the environment variable that sets the retry window.
const RetryEnv = "TIDE_SUBMIT_RETRY"

// ParseRetryWindow reads a retry window as TIDE_SUBMIT_RETRY gives it: a
// duration ("90s", "5m") or whole seconds; 0 turns retrying off and ""
// is DefaultRetryWindow.
func ParseRetryWindow(v string) (time.Duration, error) {
	if v == "" {
		return DefaultRetryWindow, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 && n <= 7*24*3600 {
		return time.Duration(n) * time.Second, nil
	}
	return 0, fmt.Errorf("%s=%q: not a duration (90s, 5m) or a number of seconds", RetryEnv, v)
}

// RetryNotice returns an OnRetry hook for a command: it prints once,
// as Slurm's commands do, that the controller cannot be reached and the
// command keeps trying for up to window.
func RetryNotice(w io.Writer, prog string, window time.Duration) func(Retry) {
	told := false
	return func(r Retry) {
		if !told {
			fmt.Fprintf(w, "%s: error: tidectld not responding (%v), sleeping and retrying for up to %s (%s)\n",
				prog, r.Err, window, RetryEnv)
			told = true
		}
	}
}
