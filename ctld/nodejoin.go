package ctld

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/pki"
)

// Node certificates: join tokens (operators), joins (a token and a
// certificate request, no client certificate) and renewals (mutual TLS
// with the certificate being renewed). See tls.go for the listeners.

// joinBody bounds a join or renewal request: a token and a P-256
// certificate request take well under a kilobyte, and the peer is not
// authenticated before it is read.
const joinBody = 16 << 10

// handleNodeToken answers POST /api/v1/node-tokens: a new join token,
// for operators.
func (s *Server) handleNodeToken(w http.ResponseWriter, r *http.Request) {
	var req api.NodeTokenRequest
	if err := decode(r, &req); err != nil {
		writeErr(w, fmt.Errorf("Join token creation failed: %w", err))
		return
	}
	resp, err := s.createNodeToken(s.callerOf(r), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, resp)
}

// createNodeToken makes and stores a join token for c (an operator):
// stored (its secret's hash) before it is returned, audited without
// its secret.
func (s *Server) createNodeToken(c caller, req api.NodeTokenRequest) (api.NodeTokenResponse, error) {
	const what = "Join token creation failed"
	if !c.admin {
		return api.NodeTokenResponse{}, api.Errorf(api.ErrPermissionDenied, "%s: join tokens are for operators", what)
	}
	if !s.tls.on {
		return api.NodeTokenResponse{}, api.Errorf(api.ErrUnavailable,
			"%s: this controller runs without TLS (no cluster CA): run tidectld ca init, then restart tidectld", what)
	}
	ttl := api.DefaultNodeTokenTTL
	if req.TTLS != 0 {
		ttl = time.Duration(req.TTLS) * time.Second
	}
	if req.TTLS < 0 || ttl < minJoinTokenTTL || ttl > maxJoinTokenTTL {
		return api.NodeTokenResponse{}, api.Invalid("%s: ttl %ds is not between %s and %s", what, req.TTLS, minJoinTokenTTL, maxJoinTokenTTL)
	}
	if req.Node != "" {
		if _, ok := s.cl.NodeDecl[req.Node]; !ok {
			return api.NodeTokenResponse{}, api.Invalid("%s: node %q is not declared in the controller's config", what, req.Node)
		}
	}
	tok, err := pki.NewToken(s.tls.ca.Fingerprint())
	if err != nil {
		return api.NodeTokenResponse{}, fmt.Errorf("%s: %w: %w", what, api.ErrInternal, err)
	}
	now := s.now()
	exp := now.Add(ttl).Truncate(time.Second)
	e := joinToken{ID: tok.ID, SecretHash: tok.SecretHash(), Node: req.Node, Created: now, Expires: exp,
		CreatedBy: c.user, CreatedUID: c.uid}
	if err := s.tls.tokens.add(e, now); err != nil {
		return api.NodeTokenResponse{}, fmt.Errorf("%s: %w", what, err)
	}
	target := "any node"
	if req.Node != "" {
		target = "node " + req.Node
	}
	s.mu.Lock()
	s.auditf(c, "node-token", target, "id=%s expires=%s", tok.ID, exp.UTC().Format(time.RFC3339))
	s.mu.Unlock()
	s.log.Info("join token created", "token", tok.ID, "node", req.Node, "expires", exp.UTC().Format(time.RFC3339), "by", c.user)
	return api.NodeTokenResponse{Token: tok.String(), ID: tok.ID, Node: req.Node, Expires: exp}, nil
}

// handleJoin answers POST /api/v1/node/join: a node without a
// certificate yet sends a join token and a certificate request naming
// itself, and gets its certificate and the CA's. Refusals are logged
// (at most once per peer per interval) and answered with the reason.
func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request) {
	var req api.NodeJoinRequest
	if err := decode(r, &req); err != nil {
		writeErr(w, fmt.Errorf("Node join failed: %w", err))
		return
	}
	resp, err := s.join(req, remoteIP(r))
	if err != nil {
		reason := "invalid"
		var jr *joinRefusal
		if errors.As(err, &jr) {
			reason = jr.reason
		}
		s.tls.joinLog.note(time.Now(), "node", remoteIP(r), reason, err.Error())
		w.Header().Set("Connection", "close")
		writeErr(w, err)
		return
	}
	writeJSON(w, resp)
}

// join checks a join request and, when the token is good for the node
// the request names, uses the token up and issues the certificate.
func (s *Server) join(req api.NodeJoinRequest, from string) (api.NodeCertResponse, error) {
	tok, err := pki.ParseToken(req.Token)
	if err != nil {
		return api.NodeCertResponse{}, refuseJoin("malformed", api.ErrUnauthenticated, "%v", err)
	}
	if fp := s.tls.ca.Fingerprint(); tok.CAHash != fp {
		// tided checks this before it sends the token; a token reaching
		// here with another hash was not sent by tided join.
		return api.NodeCertResponse{}, refuseJoin("wrong_ca", api.ErrUnauthenticated,
			"join token %s is for the CA with sha256 %s; this cluster's CA is %s", tok.ID, tok.CAHash, fp)
	}
	csr, err := pki.ParseCSR([]byte(req.CSR))
	if err != nil {
		return api.NodeCertResponse{}, api.Invalid("join refused: %v", err)
	}
	name := csr.Subject.CommonName
	if _, ok := s.cl.NodeDecl[name]; !ok {
		return api.NodeCertResponse{}, refuseJoin("undeclared", api.ErrInvalidArgument,
			"node %q is not declared in the controller's config", name)
	}
	now := s.now()
	e, err := s.tls.tokens.consume(tok, name, from, now)
	if err != nil {
		return api.NodeCertResponse{}, err
	}
	resp, serial, err := s.issueNode(csr, now)
	if err != nil {
		return api.NodeCertResponse{}, err
	}
	s.mu.Lock()
	s.audit = append(s.audit, api.AuditRecord{Time: now, UID: e.CreatedUID, User: e.CreatedBy, Action: "node-join",
		Target: "node " + name, Detail: fmt.Sprintf("token=%s serial=%s expires=%s addr=%s", e.ID, serial,
			resp.Expires.UTC().Format(time.RFC3339), from)})
	s.mu.Unlock()
	s.log.Info("node joined", "node", name, "token", e.ID, "serial", serial, "expires", resp.Expires.UTC().Format(time.RFC3339), "addr", from)
	return resp, nil
}

// issueNode signs a node certificate for csr (whose name the caller
// checked) and returns it with the CA's, and its serial number in hex.
func (s *Server) issueNode(csr *x509.CertificateRequest, now time.Time) (api.NodeCertResponse, string, error) {
	der, err := s.tls.ca.IssueNode(csr, now, s.cl.TLS.CertValidity)
	if err != nil {
		return api.NodeCertResponse{}, "", fmt.Errorf("issue the node certificate: %w: %w", api.ErrInternal, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return api.NodeCertResponse{}, "", fmt.Errorf("issue the node certificate: %w: %w", api.ErrInternal, err)
	}
	return api.NodeCertResponse{Certificate: string(pki.CertPEM(der)), CA: string(s.tls.ca.CertPEM()), Expires: cert.NotAfter},
		cert.SerialNumber.Text(16), nil
}

// handleRenew answers POST /api/v1/node/renew (withNodeCert): a new
// certificate for the node the connection's certificate names, for a
// new key of its own.
func (s *Server) handleRenew(w http.ResponseWriter, r *http.Request) {
	var req api.NodeRenewRequest
	if err := decode(r, &req); err != nil {
		writeErr(w, fmt.Errorf("Certificate renewal failed: %w", err))
		return
	}
	name, _ := r.Context().Value(nodeCertKey{}).(string)
	csr, err := pki.ParseCSR([]byte(req.CSR))
	if err != nil {
		writeErr(w, api.Invalid("Certificate renewal failed: %v", err))
		return
	}
	if err := s.checkNodeIdentity(r, csr.Subject.CommonName); err != nil {
		writeErr(w, err)
		return
	}
	// A node taken out of the config keeps its certificate until it
	// expires, but gets no new one.
	if _, ok := s.cl.NodeDecl[name]; !ok {
		writeErr(w, api.Errorf(api.ErrPermissionDenied, "Certificate renewal failed: node %q is not declared in the controller's config", name))
		return
	}
	now := s.now()
	resp, serial, err := s.issueNode(csr, now)
	if err != nil {
		writeErr(w, err)
		return
	}
	s.mu.Lock()
	s.audit = append(s.audit, api.AuditRecord{Time: now, UID: s.self, User: s.users.name(s.self), Action: "node-renew",
		Target: "node " + name, Detail: fmt.Sprintf("serial=%s expires=%s addr=%s", serial, resp.Expires.UTC().Format(time.RFC3339), remoteIP(r))})
	s.mu.Unlock()
	s.log.Info("node certificate renewed", "node", name, "serial", serial, "expires", resp.Expires.UTC().Format(time.RFC3339))
	writeJSON(w, resp)
}
