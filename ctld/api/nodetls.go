package api

import "time"

// Node certificates (issue 21): an operator asks the running controller
// for a one-time join token; a node presents it with a certificate
// request to get its first certificate, and later renews that
// certificate with itself.
const (
	// PathNodeTokens creates a join token (operators, on the socket or
	// api_addr).
	PathNodeTokens = "/api/v1/node-tokens"
	// PathNodeJoin exchanges a join token and a certificate request for
	// a node certificate (node_addr, over TLS, without a client
	// certificate).
	PathNodeJoin = "/api/v1/node/join"
	// PathNodeRenew renews a node's certificate (node_addr, over mutual
	// TLS with the certificate being renewed).
	PathNodeRenew = "/api/v1/node/renew"
)

// NodeTokenRequest asks for a join token.
type NodeTokenRequest struct {
	// TTLS is how long the token may be used, in seconds (0: one hour).
	TTLS int64 `json:"ttl_s,omitempty"`
	// Node, when set, is the only node the token may join.
	Node string `json:"node,omitempty"`
}

// NodeTokenResponse is a new join token.
type NodeTokenResponse struct {
	// Token is what `tided join --token` takes; it is shown once and
	// the controller keeps only a hash of its secret.
	Token string `json:"token"`
	// ID names the token in the controller's log and audit.
	ID      string    `json:"id"`
	Node    string    `json:"node,omitempty"`
	Expires time.Time `json:"expires"`
}

// DefaultNodeTokenTTL is a join token's lifetime when none is asked for.
const DefaultNodeTokenTTL = time.Hour

// NodeJoinRequest is a node's first request for a certificate.
type NodeJoinRequest struct {
	Token string `json:"token"`
	// CSR is a PEM certificate request whose common name is the node's
	// name.
	CSR string `json:"csr"`
}

// NodeRenewRequest asks for a new certificate for the node of the
// connection's client certificate.
type NodeRenewRequest struct {
	CSR string `json:"csr"`
}

// NodeCertResponse is an issued node certificate.
type NodeCertResponse struct {
	// Certificate is the node's certificate (PEM).
	Certificate string `json:"certificate"`
	// CA is the cluster CA's certificate (PEM).
	CA      string    `json:"ca"`
	Expires time.Time `json:"expires"`
}
