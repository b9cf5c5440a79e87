package ctld

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Request limits: how long a request's phases may take and how large
// its body may be.
//
// The servers set no ReadTimeout or WriteTimeout of their own: both
// run from the start of a request to its end, and the node long poll
// (held up to the node's heartbeat) and CPU profiles (30 s by default)
// legitimately take longer than any timeout that still catches a stuck
// client. A ReadTimeout also cancels the request's context when it
// passes during a handler (the server's background read fails), which
// would end every long poll early. So the headers have the server's
// ReadHeaderTimeout, and requestLimits sets, per request, a deadline on
// reading the body (lifted once the body is read) and one on handling
// plus answering; handlers that wait on purpose push the latter out
// with extendDeadline.

// Body limits of the endpoints other than submission (whose limit is
// config.Config.SubmitBodyLimit).
const (
	// smallBody bounds control requests: cancel, update, drain, a
	// checkpoint, a step's end (a list of 100,000 job ids fits).
	smallBody = 1 << 20
	// stepBody bounds a step request, which may carry an environment.
	stepBody = 8 << 20
	// nodeBody bounds a node's registration and sync, which carry a
	// report for each of its jobs.
	nodeBody = 8 << 20
)

// requestLimits gives every request the body and write timeouts of
// limits.*.
func (s *Server) requestLimits(h http.Handler) http.Handler {
	lim := s.cl.Limits
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		now := time.Now()
		if lim.WriteTimeout > 0 {
			_ = rc.SetWriteDeadline(now.Add(lim.WriteTimeout))
		}
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody && lim.BodyTimeout > 0 {
			_ = rc.SetReadDeadline(now.Add(lim.BodyTimeout))
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
		h.ServeHTTP(w, r)
	})
}

// submitBodyLimit is the submission endpoint's body limit
// (config.Config.SubmitBodyLimit; Validate checked it).
func (s *Server) submitBodyLimit() int64 {
	n, err := s.cl.SubmitBodyLimit()
	if err != nil {
		return 16 << 20
	}
	return n
}

// deadlineBody lifts the body's read deadline at its end: the server
// keeps reading the connection in the background while the handler
// runs (to notice a client that leaves), and a deadline passing then
// would cancel the request.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// extendDeadline gives a handler that waits on purpose d more than the
// write timeout, from now, to answer.
func (s *Server) extendDeadline(w http.ResponseWriter, d time.Duration) {
	if s.cl.Limits.WriteTimeout > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d + s.cl.Limits.WriteTimeout))
	}
}

// maxProfileSeconds bounds the time a profile request may hold its
// connection.
const maxProfileSeconds = 3600

// profileDeadline lets a profile run for its seconds parameter (30 by
// default, as net/http/pprof's CPU profile).
func (s *Server) profileDeadline(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sec, err := strconv.Atoi(r.URL.Query().Get("seconds"))
		if err != nil || sec <= 0 {
			sec = 30
		}
		s.extendDeadline(w, time.Duration(min(sec, maxProfileSeconds))*time.Second)
		h(w, r)
	}
}

// bodyTooLarge is a request body over its endpoint's limit; it is
// answered 413 and matches api.ErrInvalidArgument.
type bodyTooLarge struct {
	// what names the failed operation, as the endpoint's other errors
	// begin ("Batch job submission failed").
	what string
	// size is the body's length, -1 when it was not announced.
	size, limit int64
}

func (e *bodyTooLarge) Error() string {
	if e.size < 0 {
		return fmt.Sprintf("%s: request body is more than the %d bytes allowed", e.what, e.limit)
	}
	return fmt.Sprintf("%s: request body is %d bytes, more than the %d allowed", e.what, e.size, e.limit)
}

func (e *bodyTooLarge) Unwrap() error { return api.ErrInvalidArgument }

// bodyRule is an endpoint's body limit.
type bodyRule struct {
	limit int64
	// what names the operation in the 413's message.
	what string
}

// limitedMux is a ServeMux that bounds every request's body: at its
// endpoint's limit, and at smallBody for endpoints that take none. A
// body that announces a larger Content-Length is answered 413 before
// any of it is read; one without a length is cut at the limit, and
// reading past it fails with a *bodyTooLarge (answered 413 by the
// handler). Every endpoint is bounded, also ones added without a rule.
type limitedMux struct {
	*http.ServeMux
	rules map[string]bodyRule // by pattern
	// floor is the smallest limit: shorter bodies need no lookup.
	floor int64
}

func newLimitedMux() *limitedMux {
	return &limitedMux{ServeMux: http.NewServeMux(), rules: map[string]bodyRule{}, floor: smallBody}
}

// post registers h for POST pattern with a body limit.
func (m *limitedMux) post(pattern string, limit int64, what string, h http.HandlerFunc) {
	m.HandleFunc("POST "+pattern, h)
	m.rules["POST "+pattern] = bodyRule{limit: limit, what: what}
	m.floor = min(m.floor, limit)
}

func (m *limitedMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if n := r.ContentLength; n < 0 || n > m.floor {
		_, pattern := m.Handler(r)
		rule, ok := m.rules[pattern]
		if !ok {
			rule = bodyRule{limit: smallBody, what: "Request failed"}
		}
		if n > rule.limit {
			writeErr(w, &bodyTooLarge{what: rule.what, size: n, limit: rule.limit})
			return
		}
		if n < 0 { // chunked: counted as it is read
			r.Body = &limitedBody{ReadCloser: http.MaxBytesReader(w, r.Body, rule.limit), what: rule.what}
		}
	}
	m.ServeMux.ServeHTTP(w, r)
}

// limitedBody turns the http.MaxBytesError of a body without a length
// into a *bodyTooLarge naming the operation.
type limitedBody struct {
	io.ReadCloser
	what string
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var mbe *http.MaxBytesError
	if err != nil && errors.As(err, &mbe) {
		err = &bodyTooLarge{what: b.what, size: -1, limit: mbe.Limit}
	}
	return n, err
}

// badBody is the answer to a body that could not be read or decoded:
// the *bodyTooLarge itself (413), else invalid_argument.
func badBody(err error) error {
	var tl *bodyTooLarge
	if errors.As(err, &tl) {
		return tl
	}
	return api.Invalid("bad request body: %v", err)
}

// maxSyncWaitMS bounds how far a sync's WaitMS pushes out its write
// deadline. The controller holds a poll for at most a minute
// (Server.sync); the deadline only needs to outlast the hold.
const maxSyncWaitMS = 3600 * 1000
