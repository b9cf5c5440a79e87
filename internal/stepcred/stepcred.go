// Package stepcred signs and verifies step credentials: an HMAC-SHA256
// over the controller's step grant, keyed with the cluster key. The
// controller signs (Sign) and node daemons verify (Verify); srun only
// reads a grant (stepio.Decode) and never links the crypto packages,
// whose initialisation every CLI command would otherwise pay for.
package stepcred

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepio"
)

// Credential errors, for errors.Is.
var (
	// ErrBadCredential: the grant was not signed with the cluster key,
	// or was changed after signing.
	ErrBadCredential = errors.New("invalid step credential")
	// ErrExpired: the grant's job has passed its end.
	ErrExpired = errors.New("step credential expired")
	// ErrWrongNode: the grant does not name this node.
	ErrWrongNode = errors.New("step credential is for other nodes")
)

// Sign encodes g and signs it with key.
func Sign(key string, g *api.StepGrant) (api.SignedGrant, error) {
	body, err := json.Marshal(g)
	if err != nil {
		return api.SignedGrant{}, fmt.Errorf("encode step grant: %w", err)
	}
	return api.SignedGrant{Body: body, Cred: mac(key, body)}, nil
}

func mac(key string, body []byte) string {
	h := hmac.New(sha256.New, []byte(key))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// Verify checks sg's credential against key (in constant time), that the
// grant has not expired at now and that it gives node a part of the
// step, and returns the grant and node's index in it.
func Verify(key string, sg api.SignedGrant, node string, now time.Time) (*api.StepGrant, int, error) {
	want, err := hex.DecodeString(mac(key, sg.Body))
	if err != nil {
		return nil, -1, err
	}
	got, err := hex.DecodeString(sg.Cred)
	if err != nil || !hmac.Equal(want, got) {
		return nil, -1, ErrBadCredential
	}
	g, err := stepio.Decode(sg)
	if err != nil {
		return nil, -1, fmt.Errorf("%w: %v", ErrBadCredential, err)
	}
	if !now.Before(g.Expires) {
		return nil, -1, fmt.Errorf("%w: step %s ended at %s", ErrExpired, g.ID(), g.Expires.UTC().Format(time.RFC3339))
	}
	i := g.NodeIndex(node)
	if i < 0 {
		return nil, -1, fmt.Errorf("%w: step %s does not run on %s", ErrWrongNode, g.ID(), node)
	}
	return g, i, nil
}
