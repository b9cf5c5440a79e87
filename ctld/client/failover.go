package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Standby controllers (issue 26). Several tidectld share one store; the
// one that holds its leader lease is the primary, the others answer
// every request but a ping with 503. A client configured with all of
// their addresses sends a call to the endpoint that answered last and,
// when that one cannot be reached (the connection could not be made:
// nothing was sent) or answers 503 (it did nothing), to the next one at
// once, each at most once per call. A call that was sent and got no
// answer is not sent elsewhere here: the controller may have acted on
// it. The retries of retry.go (with a submission's token) repeat it,
// and a repeat goes through the same loop, so it moves on to a live
// controller.

// failoverDialTimeout bounds a connect when a client has several
// controllers: a host that is down answers nothing, and the kernel's
// own timeout (minutes) would hold every call before the next
// controller is tried.
const failoverDialTimeout = 5 * time.Second

// failover sends rq to the endpoints in turn, from the one that
// answered last, until one serves it.
func (c *Client) failover(ctx context.Context, rq *request) error {
	n := len(c.eps)
	start := int(c.cur.Load())
	var fe FailoverError
	for i := range n {
		k := (start + i) % n
		ep := c.eps[k]
		answered, err := c.doAt(ctx, ep, rq)
		if err != nil && ctx.Err() == nil && canFailover(err) {
			fe.Addrs = append(fe.Addrs, ep.where)
			fe.Errs = append(fe.Errs, err)
			continue
		}
		if answered && k != start {
			c.moveTo(start, k)
		}
		if !answered && n > 1 && unanswered(err) {
			// Sent, and no answer came: not resent (see above), but
			// the next call starts at the next controller. One that is
			// paused or cut off accepts connections (the kernel does)
			// and answers nothing, and without this every call, a
			// node's every sync, would wait on it again.
			c.moveTo(k, (k+1)%n)
		}
		return err
	}
	return &fe
}

// unanswered reports whether err is a call that went out and got no
// answer in time: the transport failed after the connection was made,
// or the call's deadline passed while it waited.
func unanswered(err error) bool {
	var re *reachError
	return errors.As(err, &re) || errors.Is(err, context.DeadlineExceeded)
}

// canFailover reports whether err leaves the call to another endpoint:
// the connection could not be made, the controller answered 503 (a
// standby, or a primary that could not act), or its answer came from a
// controller that has lost the lease.
func canFailover(err error) bool {
	var de *dialError
	var ae *answerError
	var se *staleError
	return errors.As(err, &de) || errors.As(err, &ae) && ae.status == 503 || errors.As(err, &se)
}

// moveTo makes calls start at endpoint to instead of from, unless
// another call moved them already, and tells the OnFailover hook.
func (c *Client) moveTo(from, to int) {
	if c.cur.CompareAndSwap(int32(from), int32(to)) && c.onFailover != nil {
		c.onFailover(c.eps[from].where, c.eps[to].where)
	}
}

// OnFailover sets f to be told when calls move from one controller to
// another (from and to are their addresses): once per move, however
// many calls were in flight. Not safe to call while requests are in
// flight.
func (c *Client) OnFailover(f func(from, to string)) { c.onFailover = f }

// Endpoints returns the controllers' addresses (host:port, or the
// socket's path) in the configured order.
func (c *Client) Endpoints() []string {
	r := make([]string, len(c.eps))
	for i, ep := range c.eps {
		r[i] = ep.where
	}
	return r
}

// Current returns the address calls go to first: the controller that
// answered last.
func (c *Client) Current() string { return c.eps[c.cur.Load()].where }

// FailoverError is a call that no controller served: each was
// unreachable, answered 503, or answered as a primary that has lost
// its lease. It matches api.ErrUnavailable (errors.Is) when one of
// its errors does, which is what retries look for.
type FailoverError struct {
	// Addrs are the controllers tried, in order; Errs their errors.
	Addrs []string
	Errs  []error
}

func (e *FailoverError) Error() string {
	var b strings.Builder
	b.WriteString("no tidectld could serve the request: ")
	for i, err := range e.Errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Addrs[i])
		b.WriteString(": ")
		b.WriteString(reason(err))
	}
	return b.String()
}

// Unwrap returns every controller's error.
func (e *FailoverError) Unwrap() []error { return e.Errs }

// reason words one controller's error without the address the
// FailoverError puts before it.
func reason(err error) string {
	var re *reachError
	if errors.As(err, &re) {
		return re.err.Error()
	}
	var te *TLSError
	if errors.As(err, &te) {
		return te.Error()
	}
	return err.Error()
}

// reachError is a call that could not be sent to, or answered by, the
// controller at where.
type reachError struct {
	where string
	err   error
}

func (e *reachError) Error() string {
	return fmt.Sprintf("cannot reach tidectld at %s: %v: %v", e.where, api.ErrUnavailable, e.err)
}

// Unwrap returns api.ErrUnavailable and the transport's error.
func (e *reachError) Unwrap() []error { return []error{api.ErrUnavailable, e.err} }

// staleError is a node answer from a controller whose lease epoch is
// lower than one seen before: it has lost the lease to another, and its
// commands must not be carried out.
type staleError struct{ err error }

func (e *staleError) Error() string { return e.err.Error() }

// Unwrap returns the api.ErrUnavailable error.
func (e *staleError) Unwrap() error { return e.err }

// checkEpoch refuses a node answer of lease epoch e from the controller
// at where when a higher one was seen, and otherwise remembers e. An
// epoch of 0 (a controller without a lease) is always accepted.
func (c *Client) checkEpoch(where string, e uint64) error {
	if e == 0 {
		return nil
	}
	for {
		seen := c.epoch.Load()
		if e < seen {
			return &staleError{err: api.Errorf(api.ErrUnavailable,
				"stale primary: tidectld at %s answered with lease epoch %d, but epoch %d was seen (it has lost the lease)", where, e, seen)}
		}
		if e == seen || c.epoch.CompareAndSwap(seen, e) {
			return nil
		}
	}
}

// Epoch returns the highest lease epoch a node answer carried (0 for
// none).
func (c *Client) Epoch() uint64 { return c.epoch.Load() }

// Ping asks the controller that answered last who it is and who the
// primary is (GET api.PathPing). It does not move on to another: a
// standby answers pings too.
func (c *Client) Ping(ctx context.Context) (api.PingResponse, error) {
	var r api.PingResponse
	rq, err := c.newRequest(methodGet, api.PathPing, nil, nil, &r)
	if err != nil {
		return r, err
	}
	_, err = c.doAt(ctx, c.eps[c.cur.Load()], &rq)
	return r, err
}

// PingResult is one controller's answer to PingAll.
type PingResult struct {
	// Addr is the controller's address as configured.
	Addr string
	// Resp is its answer when Err is nil.
	Resp api.PingResponse
	Err  error
	// Latency is how long it took to answer (or to fail).
	Latency time.Duration
}

// PingAll pings every controller, all at once, and returns their
// answers in the configured order (scontrol ping).
func (c *Client) PingAll(ctx context.Context) []PingResult {
	res := make([]PingResult, len(c.eps))
	var wg sync.WaitGroup
	for i, ep := range c.eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &res[i]
			r.Addr = ep.where
			rq, err := c.newRequest(methodGet, api.PathPing, nil, nil, &r.Resp)
			if err != nil {
				r.Err = err
				return
			}
			start := time.Now()
			_, r.Err = c.doAt(ctx, ep, &rq)
			r.Latency = time.Since(start)
		}()
	}
	wg.Wait()
	return res
}

// ParseControllers reads TIDE_CONTROLLER: one controller's api_addr
// (host:port), or several, comma-separated, for standby controllers.
// Errors name the variable and the element at fault.
func ParseControllers(v string) ([]string, error) {
	if !strings.Contains(v, ",") {
		if err := checkAddr(v); err != nil {
			return nil, err
		}
		return []string{v}, nil
	}
	const eg = "a comma-separated list of the controllers' api_addr, e.g. ctl1:6820,ctl2:6820"
	parts := strings.Split(v, ",")
	addrs := make([]string, 0, len(parts))
	seen := make(map[string]bool, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, fmt.Errorf("%s=%q: element %d is empty (%s)", ControllerEnv, v, i+1, eg)
		}
		if !validHostPort(p) {
			return nil, fmt.Errorf("%s=%q: %q is not host:port with a port number (%s)", ControllerEnv, v, p, eg)
		}
		if seen[p] {
			return nil, fmt.Errorf("%s=%q names %s twice", ControllerEnv, v, p)
		}
		seen[p] = true
		addrs = append(addrs, p)
	}
	return addrs, nil
}

// validHostPort reports whether addr is host:port with a host and a
// port number.
func validHostPort(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	return checkPort(port)
}
