package ctld

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/pki"
)

// Join tokens are kept in one small JSON file in the controller's TLS
// directory (<state_dir>/tls/join_tokens.json, mode 0600), rewritten
// whole and atomically (temporary file, fsync, rename, fsync of the
// directory) on every change. Not in the SQLite store: a cluster has a
// handful of tokens at a time, each lives an hour or so, and the file
// sits beside the CA key it is the gate to, with the same protection
// and the same backup; a table would need a migration and a place in
// the accounting store's interface (and its fakes) for a few rows that
// nothing else reads. The file holds no secret: only the SHA-256 of
// each token's secret.

// joinTokensFile is the token file's name in the TLS directory.
const joinTokensFile = "join_tokens.json"

// Bounds of a join token's lifetime.
const (
	minJoinTokenTTL = 10 * time.Second
	maxJoinTokenTTL = 7 * 24 * time.Hour
	// joinTokenKeep is how long used and expired tokens are kept, so
	// that a late attempt is told what happened to its token rather
	// than that it is unknown.
	joinTokenKeep = 24 * time.Hour
	// maxJoinTokens bounds the tokens waiting to be used.
	maxJoinTokens = 1000
)

// joinToken is one token as stored.
type joinToken struct {
	ID string `json:"id"`
	// SecretHash is pki.HashSecret of the secret.
	SecretHash string `json:"secret_sha256"`
	// Node restricts the token to one node ("" = any declared node).
	Node    string    `json:"node,omitempty"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	// CreatedBy and CreatedUID are the operator who asked for it: the
	// join is audited in their name.
	CreatedBy  string `json:"created_by"`
	CreatedUID uint32 `json:"created_uid"`
	// UsedAt, UsedBy (the node) and UsedFrom (its address) are set by
	// the token's one successful use.
	UsedAt   time.Time `json:"used_at,omitzero"`
	UsedBy   string    `json:"used_by,omitempty"`
	UsedFrom string    `json:"used_from,omitempty"`
}

// joinTokens is the token file, loaded. It is safe for concurrent use.
type joinTokens struct {
	path string

	mu   sync.Mutex
	list []joinToken
}

// loadJoinTokens reads path (a missing file is no tokens), refusing one
// that others may access.
func loadJoinTokens(path string) (*joinTokens, error) {
	t := &joinTokens{path: path}
	data, err := pki.ReadPrivate(path)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("join tokens: %w", err)
	}
	if err := json.Unmarshal(data, &t.list); err != nil {
		return nil, fmt.Errorf("join tokens %s: %w", path, err)
	}
	return t, nil
}

// saveLocked writes list as the file. Called with mu held.
func (t *joinTokens) saveLocked(list []joinToken) error {
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	return pki.WriteFileAtomic(t.path, append(data, '\n'), 0o600)
}

// prune drops tokens that expired more than joinTokenKeep ago.
func prune(list []joinToken, now time.Time) []joinToken {
	return slices.DeleteFunc(list, func(e joinToken) bool { return now.Sub(e.Expires) > joinTokenKeep })
}

// add stores a new token (durably, before the token is shown to
// anyone).
func (t *joinTokens) add(e joinToken, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := prune(slices.Clone(t.list), now)
	waiting := 0
	for _, o := range list {
		if o.UsedAt.IsZero() && now.Before(o.Expires) {
			waiting++
		}
	}
	if waiting >= maxJoinTokens {
		return api.Errorf(api.ErrTooManyRequests, "%d join tokens wait to be used, the limit: let some expire", waiting)
	}
	list = append(list, e)
	if err := t.saveLocked(list); err != nil {
		return fmt.Errorf("store the join token: %w: %w", api.ErrInternal, err)
	}
	t.list = list
	return nil
}

// joinRefusal is a token that cannot be used: why (for the node) and
// a short reason (for the log).
type joinRefusal struct {
	reason string
	err    error
}

func (e *joinRefusal) Error() string { return e.err.Error() }
func (e *joinRefusal) Unwrap() error { return e.err }

func refuseJoin(reason string, class error, format string, args ...any) error {
	return &joinRefusal{reason: reason, err: api.Errorf(class, "join refused: "+format, args...)}
}

// consume checks tok for node and, when it is good, marks it used
// (durably) and returns it: a token works once. Unknown tokens, wrong
// secrets, used and expired tokens, and tokens for another node are
// refused with an error saying which.
func (t *joinTokens) consume(tok pki.Token, node, from string, now time.Time) (joinToken, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.IndexFunc(t.list, func(e joinToken) bool { return e.ID == tok.ID })
	// A wrong secret reads as an unknown token: the id is not secret,
	// and its existence tells a guesser nothing then.
	if i < 0 || !pki.SecretMatches(tok.Secret, t.list[i].SecretHash) {
		return joinToken{}, refuseJoin("unknown", api.ErrUnauthenticated,
			"unknown join token %s (create one on the controller: tidectld node-token create)", tok.ID)
	}
	e := t.list[i]
	switch {
	case !e.UsedAt.IsZero():
		return joinToken{}, refuseJoin("used", api.ErrUnauthenticated,
			"join token %s was already used (by node %s from %s at %s); a token works once: create a new one",
			e.ID, e.UsedBy, e.UsedFrom, e.UsedAt.UTC().Format(time.RFC3339))
	case !now.Before(e.Expires):
		return joinToken{}, refuseJoin("expired", api.ErrUnauthenticated,
			"join token %s expired at %s: create a new one", e.ID, e.Expires.UTC().Format(time.RFC3339))
	case e.Node != "" && e.Node != node:
		return joinToken{}, refuseJoin("wrong_node", api.ErrPermissionDenied,
			"join token %s is for node %s, not %s", e.ID, e.Node, node)
	}
	e.UsedAt, e.UsedBy, e.UsedFrom = now, node, from
	list := slices.Clone(t.list)
	list[i] = e
	if err := t.saveLocked(prune(list, now)); err != nil {
		return joinToken{}, fmt.Errorf("join refused: the controller could not record the token's use: %w: %w", api.ErrInternal, err)
	}
	t.list = prune(list, now)
	return e, nil
}
