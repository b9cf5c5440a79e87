// Package client is the Go client of tidectld's HTTP/JSON API, used by
// the CLI (over the unix socket, or over TLS to api_addr with a JWT or
// MUNGE credential per request: remote.go, tls.go) and by tided (over
// mutual TLS with its node certificate, or over TCP with the cluster
// key on a controller without TLS).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/api/listing"
)

// DefaultSocket is where tidectld listens for local clients unless
// TIDE_SOCKET says otherwise.
const DefaultSocket = "/run/tide/tidectld.sock"

// KeyHeader carries the cluster key on node-daemon requests to a
// controller without TLS (never over TLS).
const KeyHeader = "X-Tide-Cluster-Key"

// Client talks to a controller. It may know several (standby
// controllers, issue 26): a call goes to the endpoint that answered
// last and moves on to the next at once when that one cannot be
// reached or answers 503 (see failover.go).
type Client struct {
	// eps are the controller's endpoints in the configured order, all
	// of one transport kind.
	eps []*endpoint
	// cur indexes eps: the endpoint that answered last, where calls
	// start.
	cur atomic.Int32
	// epoch is the highest lease epoch a node answer carried
	// (api.NodeSyncResponse.Epoch).
	epoch atomic.Uint64
	// onFailover is told when calls move to another endpoint.
	onFailover func(from, to string)

	key string
	// creds authenticate requests to api_addr (NewRemote).
	creds Credentials
	// where names the endpoints (comma-separated) in messages.
	where string

	// Submission throttling (see throttle.go): the hook told of the
	// first 429 of a Submit, the total wait allowed, and the sleep
	// between tries (tests replace it).
	onThrottle  func(Throttle)
	maxThrottle time.Duration
	sleep       func(context.Context, time.Duration) error

	// Riding out a controller restart (retry.go).
	retryWindow time.Duration
	onRetry     func(Retry)
}

// endpoint is one controller address and the connections to it.
type endpoint struct {
	tr *transport
	// where names it in errors: host:port, or the socket's path.
	where string
}

// newClient returns a client of the given endpoints.
func newClient(eps []*endpoint, key string, creds Credentials) *Client {
	if len(eps) == 0 {
		panic("client: no controller endpoint")
	}
	where := make([]string, len(eps))
	for i, ep := range eps {
		where[i] = ep.where
	}
	return &Client{eps: eps, key: key, creds: creds, where: strings.Join(where, ",")}
}

// NewUnix returns a client for the controller's unix socket.
func NewUnix(path string) *Client { return NewUnixList([]string{path}) }

// NewUnixList is NewUnix for several controllers on one host (each its
// own socket: tests, a development cluster); calls fail over from one
// to the next.
func NewUnixList(paths []string) *Client {
	eps := make([]*endpoint, len(paths))
	for i, path := range paths {
		dial := func(ctx context.Context) (net.Conn, error) { return dialRawUnix(ctx, path) }
		eps[i] = &endpoint{tr: &transport{dial: dial, host: "tidectld"}, where: path}
	}
	return newClient(eps, "", nil)
}

// NewTCP returns a client for a controller's node address (host:port),
// authenticating with the cluster key.
func NewTCP(addr, key string) *Client {
	return NewTCPList([]string{addr}, key)
}

// NewTCPList is NewTCP for every controller's node address (standby
// controllers): calls fail over from one to the next.
func NewTCPList(addrs []string, key string) *Client {
	eps := make([]*endpoint, len(addrs))
	for i, addr := range addrs {
		eps[i] = &endpoint{tr: &transport{dial: tcpDialer(addr, len(addrs)), host: addr}, where: addr}
	}
	return newClient(eps, key, nil)
}

// tcpDialer dials addr. With several controllers a connect is bounded
// (failoverDialTimeout): a host that is down answers nothing, and the
// next controller should not wait for the kernel's own timeout.
func tcpDialer(addr string, endpoints int) func(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{KeepAlive: 30 * time.Second}
	if endpoints > 1 {
		d.Timeout = failoverDialTimeout
	}
	return func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
}

// Close releases idle connections.
func (c *Client) Close() {
	for _, ep := range c.eps {
		ep.tr.closeIdle()
	}
}

const (
	methodGet  = "GET"
	methodPost = "POST"
)

func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	rq, err := c.newRequest(method, path, q, in, out)
	if err != nil {
		return err
	}
	if len(c.eps) == 1 {
		_, err := c.doAt(ctx, c.eps[0], &rq)
		return err
	}
	return c.failover(ctx, &rq)
}

// newRequest encodes a call.
func (c *Client) newRequest(method, path string, q url.Values, in, out any) (request, error) {
	var body []byte
	hdr := make([][2]string, 0, 3)
	if in != nil {
		var b []byte
		var err error
		// The submission has a hand-written encoder: in a short-lived
		// CLI process encoding/json's first use of a large type
		// (building its reflection caches) costs more than the whole
		// encoding. It is matched by its type, not by an interface,
		// whose itab every sbatch would build at run time.
		//
		// The node daemon's heartbeat has one too, for the CPU
		// encoding/json's reflection takes over its reports on every
		// sync.
		switch r := in.(type) {
		case *api.SubmitRequest:
			b, err = r.AppendJSON(nil)
		case *api.NodeSyncRequest:
			b, err = r.AppendJSON(nil)
		default:
			b, err = json.Marshal(in)
		}
		if err != nil {
			return request{}, fmt.Errorf("encode request: %w", err)
		}
		body = b
		hdr = append(hdr, [2]string{"Content-Type", "application/json"})
	}
	rq := request{method: method, path: path, target: path, body: body, out: out}
	if len(q) > 0 {
		rq.target += "?" + q.Encode()
	}
	if c.key != "" {
		hdr = append(hdr, [2]string{KeyHeader, c.key})
	}
	rq.lr, rq.isList = out.(*listReader)
	if rq.isList {
		// "" when this build's api.Job has no binary codec: JSON then.
		if rq.media = listing.MediaJobs(); rq.media != "" {
			hdr = append(hdr, [2]string{"Accept", rq.media})
		}
	}
	rq.hdr = hdr
	// Reads and the node protocol (whose reports are resent until
	// acknowledged) may be repeated on a fresh connection.
	rq.repeatable = method == methodGet || strings.HasPrefix(path, "/api/v1/node/")
	return rq, nil
}

// request is one call, encoded, as doAt sends it to an endpoint.
type request struct {
	method, path, target string
	hdr                  [][2]string
	body                 []byte
	repeatable           bool
	out                  any
	lr                   *listReader
	isList               bool
	media                string
}

// doAt sends rq to ep and reads the answer into rq.out. answered
// reports whether ep answered (a success, or an error it sent back),
// as opposed to a failure to reach it or an answer refused as stale.
func (c *Client) doAt(ctx context.Context, ep *endpoint, rq *request) (answered bool, err error) {
	method, path := rq.method, rq.path
	resp, err := ep.tr.roundTrip(ctx, method, rq.target, rq.hdr, rq.body, rq.repeatable)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		var ce *credentialError
		if errors.As(err, &ce) {
			return false, fmt.Errorf("no credential for tidectld at %s: %w", c.where, ce.err)
		}
		var te *TLSError
		if errors.As(err, &te) { // certificates: another try would fail alike
			return false, fmt.Errorf("cannot reach tidectld: %w", err)
		}
		// One line (two wrapped errors, not errors.Join): the CLI
		// escapes newlines in the messages it prints.
		return false, &reachError{where: ep.where, err: err}
	}
	defer resp.Close()
	if resp.status/100 != 2 {
		var eb api.ErrorBody
		data, _ := io.ReadAll(io.LimitReader(resp, 1<<20))
		if json.Unmarshal(data, &eb) != nil || eb.Error.Code == "" {
			eb.Error.Message = fmt.Sprintf("controller answered HTTP %d: %s", resp.status, bytes.TrimSpace(data))
		}
		err := api.FromBody(resp.status, eb)
		if resp.status == 429 {
			if !errors.Is(err, api.ErrTooManyRequests) { // a proxy's 429
				err = api.Errorf(api.ErrTooManyRequests, "%s", err.Error())
			}
			return true, &ThrottledError{Err: err, RetryAfter: parseRetryAfter(resp.Header("Retry-After"), time.Now())}
		}
		return true, &answerError{status: resp.status, err: err}
	}
	out := rq.out
	if out == nil {
		return true, nil
	}
	// The controller answers in binary only when its api.Job is ours
	// (same schema fingerprint), else in JSON, read below.
	if rq.isList && rq.media != "" && resp.Header("Content-Type") == rq.media {
		jobs, err := listing.ReadJobs(resp)
		if err != nil {
			return true, fmt.Errorf("decode answer of %s %s: %w", method, path, err)
		}
		now, err := time.Parse(time.RFC3339Nano, resp.Header(listing.NowHeader))
		if err != nil {
			return true, fmt.Errorf("answer of %s %s: bad %s header: %w", method, path, listing.NowHeader, err)
		}
		*rq.lr.l = api.JobList{Jobs: jobs, Now: now}
		return true, nil
	}
	if rq.isList {
		out = rq.lr.l
	}
	if r, ok := out.(*api.SubmitResponse); ok { // read by hand, as the request is written
		data, err := io.ReadAll(resp)
		if err == nil {
			err = r.DecodeJSON(data)
		}
		if err != nil {
			return true, fmt.Errorf("decode answer of %s %s: %w", method, path, err)
		}
		return true, nil
	}
	// The controller's answer to a sync or registration, launches and
	// their environments, is read by hand as the Decoder below reads
	// it: decoding it with encoding/json was a tenth of tided's CPU in a
	// storm of small jobs.
	if r, ok := out.(*api.NodeSyncResponse); ok {
		var got api.NodeSyncResponse
		data, err := io.ReadAll(resp)
		if err == nil {
			err = api.DecodeNodeSyncResponse(data, &got)
		}
		if err != nil {
			return true, fmt.Errorf("decode answer of %s %s: %w", method, path, err)
		}
		// The commands of a controller that lost the lease are not
		// carried out (failover.go).
		if err := c.checkEpoch(ep.where, got.Epoch); err != nil {
			return false, err
		}
		*r = got
		return true, nil
	}
	if err := json.NewDecoder(resp).Decode(out); err != nil {
		return true, fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return true, nil
}

// answerError is an error the controller answered (as opposed to a
// failure to reach it): retries look at its status (retry.go).
type answerError struct {
	status int
	err    error
}

func (e *answerError) Error() string { return e.err.Error() }

// Unwrap returns the class error.
func (e *answerError) Unwrap() error { return e.err }

// Submit submits a batch job (or tests it with req.TestOnly). When the
// controller's submission buffer is full (429) it waits as the answer's
// Retry-After says and tries again, telling the OnThrottle hook once,
// until SetMaxThrottleWait's budget is spent; the error then matches
// api.ErrTooManyRequests.
func (c *Client) Submit(ctx context.Context, req api.SubmitRequest) (api.SubmitResponse, error) {
	return c.submitRetrying(ctx, req)
}

// Jobs lists the jobs the controller holds (pending, running, and
// recently finished) that match f.
func (c *Client) Jobs(ctx context.Context, f api.JobFilter) (api.JobList, error) {
	return c.list(ctx, "/api/v1/jobs", f)
}

// list fetches a job listing, asking for the binary form (see
// listing.MediaJobs).
func (c *Client) list(ctx context.Context, path string, f api.JobFilter) (api.JobList, error) {
	var l api.JobList
	err := c.do(ctx, methodGet, path, f.Values(), nil, &listReader{l: &l})
	return l, err
}

// listReader marks a do() target decoded as a job listing.
type listReader struct{ l *api.JobList }

// Job returns one job, including its script when the caller may see it.
func (c *Client) Job(ctx context.Context, id uint64) (api.Job, error) {
	var r api.Job
	err := c.do(ctx, methodGet, "/api/v1/jobs/"+strconv.FormatUint(id, 10), nil, nil, &r)
	return r, err
}

// Accounting lists jobs from the accounting store, finished ones included
// (sacct).
func (c *Client) Accounting(ctx context.Context, f api.JobFilter) (api.JobList, error) {
	return c.list(ctx, "/api/v1/accounting/jobs", f)
}

// Cancel cancels or signals the jobs the request selects.
func (c *Client) Cancel(ctx context.Context, req api.CancelRequest) (api.CancelResponse, error) {
	var r api.CancelResponse
	err := c.do(ctx, methodPost, "/api/v1/jobs/cancel", nil, req, &r)
	return r, err
}

// UpdateJobs holds, releases, requeues or updates jobs.
func (c *Client) UpdateJobs(ctx context.Context, u api.JobUpdate) (api.CancelResponse, error) {
	var r api.CancelResponse
	err := c.do(ctx, methodPost, "/api/v1/jobs/update", nil, u, &r)
	return r, err
}

// Events returns a job's trail.
func (c *Client) Events(ctx context.Context, id uint64) ([]api.Event, error) {
	var r []api.Event
	err := c.do(ctx, methodGet, "/api/v1/jobs/"+strconv.FormatUint(id, 10)+"/events", nil, nil, &r)
	return r, err
}

// Audit returns the newest audit records (at most limit).
func (c *Client) Audit(ctx context.Context, limit int) ([]api.AuditRecord, error) {
	var r []api.AuditRecord
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	err := c.do(ctx, methodGet, "/api/v1/audit", q, nil, &r)
	return r, err
}

// Nodes lists nodes and partitions.
func (c *Client) Nodes(ctx context.Context) (api.NodeList, error) {
	var r api.NodeList
	err := c.do(ctx, methodGet, "/api/v1/nodes", nil, nil, &r)
	return r, err
}

// UpdateNodes drains, resumes or downs nodes (operators only).
func (c *Client) UpdateNodes(ctx context.Context, u api.NodeUpdate) error {
	return c.do(ctx, methodPost, "/api/v1/nodes/update", nil, u, nil)
}

// Cluster returns the controller's identity and configuration summary.
func (c *Client) Cluster(ctx context.Context) (api.ClusterInfo, error) {
	var r api.ClusterInfo
	err := c.do(ctx, methodGet, "/api/v1/cluster", nil, nil, &r)
	return r, err
}

// Register announces a node daemon and its inventory. The answer carries
// the commands that were waiting for the node (acks of finished reports,
// kills, forgets), exactly as a sync's would.
func (c *Client) Register(ctx context.Context, r api.NodeRegistration) (api.NodeSyncResponse, error) {
	var resp api.NodeSyncResponse
	err := c.do(ctx, methodPost, "/api/v1/node/register", nil, r, &resp)
	return resp, err
}

// Sync sends a node's heartbeat and job reports and returns its commands;
// the controller may hold the call up to req.WaitMS.
func (c *Client) Sync(ctx context.Context, req api.NodeSyncRequest) (api.NodeSyncResponse, error) {
	var r api.NodeSyncResponse
	err := c.do(ctx, methodPost, "/api/v1/node/sync", nil, &req, &r)
	return r, err
}
