package api

import "time"

// PathTokens mints JSON Web Tokens for the TCP API (`tide token`).
const PathTokens = "/api/v1/tokens"

// TokenRequest asks the controller for a token, as `scontrol token`
// does Slurm's.
type TokenRequest struct {
	// LifespanS is how long the token lives, in seconds; 0 means the
	// default (DefaultTokenLifespan, or jwt.max_lifespan when that is
	// shorter).
	LifespanS int64 `json:"lifespan_s,omitempty"`
	// User names the user the token is for: "" is the caller; another
	// user only for operators.
	User string `json:"username,omitempty"`
}

// TokenResponse is a minted token.
type TokenResponse struct {
	// Token is the JWT, sent as "Authorization: Bearer <token>".
	Token   string    `json:"token"`
	User    string    `json:"username"`
	Expires time.Time `json:"expires"`
}

// DefaultTokenLifespan is the lifespan of a token asked for without
// one (Slurm's scontrol token default).
const DefaultTokenLifespan = 30 * time.Minute
