package ctld

import (
	"context"

	"github.com/tide-hpc/tide/ctld/api"
)

// Idempotent submission. A client that lost the answer to a submission
// (the controller restarted, the connection broke) cannot tell whether
// its job exists; it sends the same request again with the same random
// token (api.SubmitRequest.Token), and the controller answers with the
// job the first request made. Tokens are kept per job owner, in memory
// for as long as their job is (Server.jobs), and with the job's record,
// so that a restarted controller knows them again (recover).

// tokenKey scopes a token to the job's owner: one user's token says
// nothing about another's jobs.
type tokenKey struct {
	uid   uint32
	token string
}

// tokenEntry is a token's job: stored once done is closed, unless
// failed (its commit failed and the token was dropped).
type tokenEntry struct {
	id     uint64
	done   chan struct{}
	failed bool
}

// storedToken stands for the tokens of jobs read back from the store.
var storedToken = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// awaitToken returns the job of a submission token: at once for a
// stored job, after its commit for one being stored, and ok false when
// the token is unknown (or its first submission failed to store).
func (s *Server) awaitToken(ctx context.Context, k tokenKey) (uint64, bool, error) {
	for {
		s.lane.mu.Lock()
		e := s.tokens[k]
		s.lane.mu.Unlock()
		if e == nil {
			return 0, false, nil
		}
		// This request will not be written while it waits: a commit
		// gathering arrivals must not wait for it.
		arrivalOf(ctx).leave()
		select {
		case <-e.done:
		case <-ctx.Done():
			return 0, false, api.Errorf(api.ErrUnavailable, "Batch job submission failed: gave up waiting for the first submission of this request: %v", ctx.Err())
		}
		if !e.failed {
			return e.id, true, nil
		}
	}
}

// rememberToken notes the token of a recovered job. Called with mu
// held.
func (s *Server) rememberToken(j *api.Job) {
	if j.SubmitToken == "" || j.ArrayJobID != 0 && j.ID != j.ArrayJobID {
		return // a task split off its array carries its array's token
	}
	s.lane.mu.Lock() // tokens are the submission lane's (submitlane.go)
	defer s.lane.mu.Unlock()
	s.tokens[tokenKey{uid: j.UserID, token: j.SubmitToken}] = &tokenEntry{id: j.ID, done: storedToken}
}

// forgetToken drops the token of a job leaving memory. Called with mu
// held.
func (s *Server) forgetToken(j *api.Job) {
	if j.SubmitToken == "" {
		return
	}
	k := tokenKey{uid: j.UserID, token: j.SubmitToken}
	s.lane.mu.Lock()
	defer s.lane.mu.Unlock()
	if e := s.tokens[k]; e != nil && e.id == j.ID {
		delete(s.tokens, k)
	}
}
