package noded

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/internal/pki"
)

// joinTimeout bounds a join: one handshake and one request.
const joinTimeout = 30 * time.Second

// JoinResult is what a join stored.
type JoinResult struct {
	// Cert is the node's new certificate; CA the cluster CA's.
	Cert, CA *x509.Certificate
	// Files are the paths written.
	CertFile, CAFile string
}

// Join trades a join token for this node's certificate: it makes a new
// key and a certificate request naming cfg.Name, reaches the controller
// at cfg.Controller (with standby controllers, the first of them that
// serves the request) over TLS that trusts nothing but the CA whose
// SHA-256 the token carries (the token's secret is sent only once the
// controller proved it holds a certificate of that CA), and stores the
// certificate, its key and the CA's certificate in cfg.TLSDir.
func Join(ctx context.Context, cfg Config, token string) (JoinResult, error) {
	tok, err := pki.ParseToken(token)
	if err != nil {
		return JoinResult{}, err
	}
	if err := pki.ValidNodeName(cfg.Name); err != nil {
		return JoinResult{}, fmt.Errorf("name: %w", err)
	}
	if err := checkControllers(cfg.Controller); err != nil {
		return JoinResult{}, err
	}
	if !filepath.IsAbs(cfg.TLSDir) {
		return JoinResult{}, fmt.Errorf("tls_dir: %q must be an absolute path", cfg.TLSDir)
	}
	key, err := pki.NewKey()
	if err != nil {
		return JoinResult{}, err
	}
	csr, err := pki.CreateCSR(key, cfg.Name)
	if err != nil {
		return JoinResult{}, err
	}
	// With standby controllers, one after the other until one answers
	// (a standby answers 503, as to everything but a ping).
	c := client.NewTLSList(cfg.Controllers(), func(addr string) (*tls.Config, string) {
		host, _, _ := net.SplitHostPort(addr)
		return pki.PinnedClient(tok.CAHash, host), ""
	})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	resp, err := c.Join(ctx, api.NodeJoinRequest{Token: tok.String(), CSR: string(csr)})
	if err != nil {
		var rh tls.RecordHeaderError
		if errors.As(err, &rh) {
			return JoinResult{}, fmt.Errorf("%w: the controller at %s does not serve TLS (no cluster CA, or tidectld was not restarted after tidectld ca init)", err, cfg.Controller)
		}
		return JoinResult{}, err
	}
	cas, err := pki.ParseCerts([]byte(resp.CA))
	if err != nil {
		return JoinResult{}, fmt.Errorf("the controller's answer: CA: %w", err)
	}
	ca := cas[0]
	if fp := pki.Fingerprint(ca.Raw); fp != tok.CAHash {
		return JoinResult{}, fmt.Errorf("the controller answered with the CA of sha256 %s, not the token's %s", fp, tok.CAHash)
	}
	leaf, err := acceptCert(resp, ca, cfg.Name, key, time.Now())
	if err != nil {
		return JoinResult{}, err
	}
	// The parents as any directory (0755: they may hold state_dir,
	// which job users traverse), tls_dir itself private.
	if err := os.MkdirAll(filepath.Dir(cfg.TLSDir), 0o755); err != nil {
		return JoinResult{}, fmt.Errorf("tls_dir: %w", err)
	}
	if err := os.Mkdir(cfg.TLSDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return JoinResult{}, fmt.Errorf("tls_dir: %w", err)
	}
	r := JoinResult{Cert: leaf, CA: ca, CertFile: filepath.Join(cfg.TLSDir, NodeCertFile), CAFile: filepath.Join(cfg.TLSDir, CACertFile)}
	if err := pki.WriteFileAtomic(r.CAFile, pki.CertPEM(ca.Raw), 0o644); err != nil {
		return JoinResult{}, err
	}
	if err := pki.WriteKeyPair(r.CertFile, [][]byte{leaf.Raw, ca.Raw}, key); err != nil {
		return JoinResult{}, err
	}
	return r, nil
}

// newJoinCommand is "tided join --token TOKEN": the node's first
// certificate.
func newJoinCommand() *cobra.Command {
	var token string
	c := &cobra.Command{
		Use:   "join --token TOKEN",
		Short: "Join the cluster: trade a one-time join token for this node's certificate",
		Long: `Join the cluster with a token from "tidectld node-token create" (on the
controller). tided makes a new key and a certificate request naming this node
(name), reaches the controller (controller, or --controller) over TLS trusting
only the CA whose SHA-256 the token carries, and stores the certificate, its key
and the CA's certificate in tls_dir (default /var/lib/tide/tided). From then on
tided talks to the controller over mutual TLS and renews the certificate itself;
restart tided to use it. "--token -" reads the token from standard input (a
command line is visible to every user of the host).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if token == "-" {
				line, err := bufio.NewReader(io.LimitReader(cmd.InOrStdin(), 4096)).ReadString('\n')
				if err != nil && line == "" {
					return fmt.Errorf("read the token from standard input: %w", err)
				}
				token = strings.TrimSpace(line)
			}
			if token == "" {
				return errors.New("--token is required (from tidectld node-token create on the controller)")
			}
			cfg, err := LoadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			had := Joined(cfg.TLSDir)
			r, err := Join(cmd.Context(), cfg, token)
			if err != nil {
				return fmt.Errorf("join: %w", err)
			}
			out := cmd.OutOrStdout()
			verb := "joined"
			if had {
				verb = "joined again (the previous certificate is replaced)"
			}
			fmt.Fprintf(out, "%s the cluster as node %s\n", verb, cfg.Name)
			fmt.Fprintf(out, "certificate: %s (valid until %s, renewed by tided after %s)\n", r.CertFile,
				r.Cert.NotAfter.Local().Format(time.DateTime), pki.RenewAt(r.Cert).Local().Format(time.DateTime))
			fmt.Fprintf(out, "cluster CA:  %s (sha256 %s)\n", r.CAFile, pki.Fingerprint(r.CA.Raw))
			fmt.Fprintln(out, "restart tided to use it (it then needs no key_file)")
			return nil
		},
	}
	c.Flags().StringVar(&token, "token", "", `join token from "tidectld node-token create" ("-": read it from standard input)`)
	return c
}
