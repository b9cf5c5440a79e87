package ctld

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/ctld/config"
	"github.com/tide-hpc/tide/internal/pki"
)

// TLS on the controller's TCP listeners (issue 21). With the cluster CA
// in <state_dir>/tls (tls.mode auto, or on):
//
//   - node_addr serves TLS 1.3 with the controller's certificate and
//     asks for a client certificate of the CA, which every node API call
//     needs: the node it names is the only node whose registration and
//     reports its connection may carry (checkNodeIdentity). The cluster
//     key is not accepted there at all. A connection without a client
//     certificate may only join (a one-time token, nodejoin.go) and
//     read /metrics;
//   - api_addr serves TLS with the same certificate; users still prove
//     who they are with MUNGE or a JWT in every request;
//   - metrics_addr stays plain HTTP: metrics carry no credential, and
//     scrapers on a management network need no CA.
//
// A handshake counts as the first request of its connection: it must
// end within limits.header_timeout and, as the connection is not
// authenticated yet, within limits.unauthenticated_timeout of its
// accept, in the listener's unauthenticated pool (connlimit.go), so a
// flood of connections that never finish their handshake holds no more
// than an idle flood did.

// tlsState is the controller's CA and certificates; on is false when
// the listeners serve plain HTTP.
type tlsState struct {
	on bool
	// dir is <state_dir>/tls.
	dir  string
	ca   *pki.CA
	pool *x509.CertPool
	// server holds the controller's certificate (leaf and CA), replaced
	// when it is renewed.
	server pki.Holder
	// hosts is what the server certificate names.
	hosts  []string
	tokens *joinTokens
	// joinLog and identLog note refused joins and node requests whose
	// certificate names another node, at most once per peer per
	// interval.
	joinLog, identLog *refusalLog
}

// tlsWanted reports whether cl's listeners serve TLS: tls.mode on (the
// CA must exist), or auto with a CA in the state directory.
func tlsWanted(cl *Cluster) (bool, error) {
	switch cl.TLS.Mode {
	case config.TLSOff:
		return false, nil
	case config.TLSOn:
		if !pki.Exists(cl.TLSDir()) {
			return false, fmt.Errorf("tls.mode is on but there is no CA in %s: run tidectld ca init", cl.TLSDir())
		}
		return true, nil
	}
	return pki.Exists(cl.TLSDir()), nil
}

// setupTLS loads the CA, the join tokens and the controller's
// certificate (issuing a new one when it is missing, names other hosts
// than it should, or is due for renewal). A no-op when TLS is off.
func (s *Server) setupTLS() error {
	on, err := tlsWanted(s.cl)
	if err != nil || !on {
		return err
	}
	t := &s.tls
	t.dir = s.cl.TLSDir()
	if t.ca, err = pki.LoadCA(t.dir); err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	t.pool = t.ca.Pool()
	if t.tokens, err = loadJoinTokens(filepath.Join(t.dir, joinTokensFile)); err != nil {
		return err
	}
	host, _ := os.Hostname()
	t.hosts = s.cl.ControllerHosts(host)
	if err := s.ensureServerCert(); err != nil {
		return err
	}
	t.joinLog = newRefusalLog(s.log, refusalLogEvery, "refused node join")
	t.identLog = newRefusalLog(s.log, refusalLogEvery, "refused node request: its certificate names another node")
	t.on = true
	return nil
}

// ensureServerCert keeps a good controller certificate in t.server:
// the one in server.pem while it chains to the CA, names every host it
// should and is not due for renewal; else a new one, written to
// server.pem first.
func (s *Server) ensureServerCert() error {
	t := &s.tls
	now := s.now()
	if cur := t.server.Get(); cur != nil && t.certGood(cur.Leaf, now) {
		return nil
	}
	path := filepath.Join(t.dir, pki.ServerFile)
	kp, err := pki.LoadKeyPair(path)
	switch {
	case err == nil && t.certGood(kp.Leaf, now):
		t.server.Set(kp)
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		s.log.Warn("controller certificate unusable: issuing a new one", "file", path, "err", err)
	}
	kp, err = issueServerCert(t.ca, path, t.hosts, now, s.cl.TLS.CertValidity)
	if err != nil {
		return err
	}
	t.server.Set(kp)
	s.log.Info("controller certificate issued", "serial", kp.Leaf.SerialNumber.Text(16),
		"expires", kp.Leaf.NotAfter.UTC().Format(time.RFC3339), "hosts", t.hosts)
	return nil
}

// certGood reports whether the controller's certificate may be kept.
func (t *tlsState) certGood(c *x509.Certificate, now time.Time) bool {
	if c == nil || t.ca.Verify(c, now, x509.ExtKeyUsageServerAuth) != nil || !pki.IsController(c) || !now.Before(pki.RenewAt(c)) {
		return false
	}
	named := make([]string, 0, len(c.DNSNames)+len(c.IPAddresses))
	named = append(named, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		named = append(named, ip.String())
	}
	for _, h := range t.hosts {
		if ip := net.ParseIP(h); ip != nil {
			h = ip.String()
		}
		if !slices.Contains(named, h) {
			return false
		}
	}
	return true
}

// issueServerCert issues the controller's certificate for hosts with a
// new key and writes it, with the CA's certificate, to path.
func issueServerCert(ca *pki.CA, path string, hosts []string, now time.Time, validity time.Duration) (*tls.Certificate, error) {
	key, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	der, err := ca.IssueController(key.Public(), hosts, now, validity)
	if err != nil {
		return nil, fmt.Errorf("controller certificate: %w", err)
	}
	if err := pki.WriteKeyPair(path, [][]byte{der, ca.Cert.Raw}, key); err != nil {
		return nil, fmt.Errorf("controller certificate: %w", err)
	}
	return pki.LoadKeyPair(path)
}

// renewServerCert renews the controller's certificate when it is due,
// checking every tenth of its validity (at most hourly) until ctx
// ends. A failure is logged and tried again at the next check; the
// certificate in use stays until it is replaced.
func (s *Server) renewServerCert(ctx context.Context) {
	every := min(time.Hour, s.cl.TLS.CertValidity/10)
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			if err := s.ensureServerCert(); err != nil {
				s.log.Error("controller certificate renewal failed", "err", err)
			}
		}
	}
}

// tlsConfigs are the TLS configurations of node_addr (client
// certificates of the CA asked for, not required) and api_addr (none
// asked for); both nil when TLS is off.
func (s *Server) tlsConfigs() (node, apiCfg *tls.Config) {
	if !s.tls.on {
		return nil, nil
	}
	return pki.ServerConfig(&s.tls.server, s.tls.pool), pki.ServerConfig(&s.tls.server, nil)
}

// withTLS wraps l in TLS with cfg (none when cfg is nil).
func withTLS(l net.Listener, cfg *tls.Config) net.Listener {
	if cfg == nil {
		return l
	}
	return tls.NewListener(l, cfg)
}

// caPEM is the CA's certificate for clients (srun), "" when TLS is off.
func (s *Server) caPEM() string {
	if !s.tls.on {
		return ""
	}
	return string(s.tls.ca.CertPEM())
}

// nodeCertKey is the context key of the node a request's client
// certificate names.
type nodeCertKey struct{}

// withNodeCert admits node API requests whose connection presented a
// node certificate of the CA (verified in the handshake), not expired
// since; the node it names goes into the request's context for
// checkNodeIdentity, and the connection leaves the unauthenticated
// pool. Anything else is 401, the cluster key included.
func (s *Server) withNodeCert(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		leaf, name, err := pki.VerifiedNode(r.TLS)
		if err == nil && !s.now().Before(leaf.NotAfter) {
			err = fmt.Errorf("the certificate of node %s expired at %s: join the node again (tidectld node-token create, tided join)",
				name, leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		if err != nil {
			msg := "a node certificate of this cluster's CA is required (" + err.Error() + "): join the node (tided join)"
			if r.Header.Get(client.KeyHeader) != "" {
				msg = "the cluster key is not accepted over TLS: join the node (tidectld node-token create, then tided join) and restart tided"
			}
			if s.keyLog != nil {
				s.keyLog.note(time.Now(), "node", remoteIP(r), "no_cert", r.Method+" "+r.URL.Path)
			}
			w.Header().Set("Connection", "close")
			writeErr(w, api.Errorf(api.ErrUnauthenticated, "%s", msg))
			return
		}
		if tc := connOf(r); tc != nil {
			if err := tc.l.promote(tc); err != nil {
				w.Header().Set("Retry-After", "1")
				w.Header().Set("Connection", "close")
				writeErr(w, err)
				return
			}
		}
		h(w, r.WithContext(context.WithValue(r.Context(), nodeCertKey{}, name)))
	}
}

// checkNodeIdentity refuses a registration or report for another node
// than the one the request's certificate names. Without TLS (the
// cluster key) there is no name to check.
func (s *Server) checkNodeIdentity(r *http.Request, claimed string) error {
	name, ok := r.Context().Value(nodeCertKey{}).(string)
	if !ok || name == claimed {
		return nil
	}
	s.tls.identLog.note(time.Now(), "node", remoteIP(r), "wrong_node",
		fmt.Sprintf("certificate of node %s used to report as node %q (%s)", name, claimed, r.URL.Path))
	return api.Errorf(api.ErrPermissionDenied, "the certificate of node %s does not allow acting as node %q", name, claimed)
}

// unwrapTLS returns the connection under a TLS one.
func unwrapTLS(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		return tc.NetConn()
	}
	return c
}
