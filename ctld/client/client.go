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

// Client talks to one controller.
type Client struct {
	tr  *transport
	key string
	// creds authenticate requests to api_addr (NewRemote).
	creds Credentials
	// where names the endpoint in connection errors.
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

// NewUnix returns a client for the controller's unix socket.
func NewUnix(path string) *Client {
	dial := func(ctx context.Context) (net.Conn, error) { return dialRawUnix(ctx, path) }
	return &Client{tr: &transport{dial: dial, host: "tidectld"}, where: path}
}

// NewTCP returns a client for a controller's node address (host:port),
// authenticating with the cluster key.
func NewTCP(addr, key string) *Client {
	dial := func(ctx context.Context) (net.Conn, error) {
		d := net.Dialer{KeepAlive: 30 * time.Second}
		return d.DialContext(ctx, "tcp", addr)
	}
	return &Client{tr: &transport{dial: dial, host: addr}, key: key, where: addr}
}

// Close releases idle connections.
func (c *Client) Close() { c.tr.closeIdle() }

const (
	methodGet  = "GET"
	methodPost = "POST"
)

func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
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
			return fmt.Errorf("encode request: %w", err)
		}
		body = b
		hdr = append(hdr, [2]string{"Content-Type", "application/json"})
	}
	target := path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	if c.key != "" {
		hdr = append(hdr, [2]string{KeyHeader, c.key})
	}
	lr, isList := out.(*listReader)
	media := ""
	if isList {
		// "" when this build's api.Job has no binary codec: JSON then.
		if media = listing.MediaJobs(); media != "" {
			hdr = append(hdr, [2]string{"Accept", media})
		}
	}
	// Reads and the node protocol (whose reports are resent until
	// acknowledged) may be repeated on a fresh connection.
	repeatable := method == methodGet || strings.HasPrefix(path, "/api/v1/node/")
	resp, err := c.tr.roundTrip(ctx, method, target, hdr, body, repeatable)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ce *credentialError
		if errors.As(err, &ce) {
			return fmt.Errorf("no credential for tidectld at %s: %w", c.where, ce.err)
		}
		var te *TLSError
		if errors.As(err, &te) { // certificates: another try would fail alike
			return fmt.Errorf("cannot reach tidectld: %w", err)
		}
		// One line (two %w, not errors.Join): the CLI escapes newlines
		// in the messages it prints.
		return fmt.Errorf("cannot reach tidectld at %s: %w: %w", c.where, api.ErrUnavailable, err)
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
			return &ThrottledError{Err: err, RetryAfter: parseRetryAfter(resp.Header("Retry-After"), time.Now())}
		}
		return &answerError{status: resp.status, err: err}
	}
	if out == nil {
		return nil
	}
	// The controller answers in binary only when its api.Job is ours
	// (same schema fingerprint), else in JSON, read below.
	if isList && media != "" && resp.Header("Content-Type") == media {
		jobs, err := listing.ReadJobs(resp)
		if err != nil {
			return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
		}
		now, err := time.Parse(time.RFC3339Nano, resp.Header(listing.NowHeader))
		if err != nil {
			return fmt.Errorf("answer of %s %s: bad %s header: %w", method, path, listing.NowHeader, err)
		}
		*lr.l = api.JobList{Jobs: jobs, Now: now}
		return nil
	}
	if isList {
		out = lr.l
	}
	if r, ok := out.(*api.SubmitResponse); ok { // read by hand, as the request is written
		data, err := io.ReadAll(resp)
		if err == nil {
			err = r.DecodeJSON(data)
		}
		if err != nil {
			return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
		}
		return nil
	}
	// The controller's answer to a sync or registration, launches and
	// their environments, is read by hand as the Decoder below reads
	// it: decoding it with encoding/json was a tenth of tided's CPU in a
	// storm of small jobs.
	if r, ok := out.(*api.NodeSyncResponse); ok {
		data, err := io.ReadAll(resp)
		if err == nil {
			err = api.DecodeNodeSyncResponse(data, r)
		}
		if err != nil {
			return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
		}
		return nil
	}
	if err := json.NewDecoder(resp).Decode(out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return nil
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
