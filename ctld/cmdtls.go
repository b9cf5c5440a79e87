package ctld

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/internal/pki"
)

// newCACommand is "tidectld ca init|show": the cluster CA in
// <state_dir>/tls.
func newCACommand(load func() (Config, error)) *cobra.Command {
	ca := &cobra.Command{Use: "ca", Short: "The cluster CA: TLS for nodes and clients"}
	ca.AddCommand(&cobra.Command{
		Use:   "init",
		Short: "Create the cluster CA and the controller's certificate in <state_dir>/tls",
		Long: `Create the cluster CA (ECDSA P-256, valid ten years; its key mode 0600) and the
controller's server certificate, which names the host's name, localhost, the
loopback addresses, node_addr's and api_addr's IP addresses and tls.hostnames.
It refuses to replace a CA: a new CA means joining every node again.
Restart tidectld afterwards (with tls.mode auto or on it then serves TLS).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			cl, err := cfg.Validate()
			if err != nil {
				return fmt.Errorf("invalid config:\n%w", err)
			}
			if err := os.MkdirAll(cl.StateDir, 0o700); err != nil {
				return fmt.Errorf("create state dir: %w", err)
			}
			dir := cl.TLSDir()
			now := time.Now()
			ca, err := pki.InitCA(dir, cl.ClusterName, now)
			if errors.Is(err, pki.ErrExists) {
				return fmt.Errorf("%w; ca init makes a CA only where there is none (a new CA means joining every node again: docs/operations.md, \"TLS, the cluster CA and joining nodes\")", err)
			}
			if err != nil {
				return err
			}
			host, _ := os.Hostname()
			hosts := cl.ControllerHosts(host)
			kp, err := issueServerCert(ca, filepath.Join(dir, pki.ServerFile), hosts, now, cl.TLS.CertValidity)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "CA certificate:         %s\n", filepath.Join(dir, pki.CACertFile))
			fmt.Fprintf(out, "CA sha256:              %s\n", ca.Fingerprint())
			fmt.Fprintf(out, "CA valid until:         %s\n", ca.Cert.NotAfter.UTC().Format(time.RFC3339))
			fmt.Fprintf(out, "controller certificate: %s (valid until %s)\n", filepath.Join(dir, pki.ServerFile), kp.Leaf.NotAfter.UTC().Format(time.RFC3339))
			fmt.Fprintf(out, "controller names:       %s\n", strings.Join(hosts, ", "))
			fmt.Fprintf(out, "next: restart tidectld; copy %s to %s on login nodes; join each node:\n", filepath.Join(dir, pki.CACertFile), client.DefaultCA)
			fmt.Fprintf(out, "  tidectld node-token create --node NAME   (here), then tided join --token TOKEN   (on the node)\n")
			return nil
		},
	}, &cobra.Command{
		Use:   "show",
		Short: "Print the CA's and the controller certificate's paths, fingerprints and expiry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			dir := cfg.TLSDir()
			certs, err := pki.ReadCerts(filepath.Join(dir, pki.CACertFile))
			if err != nil {
				return fmt.Errorf("no cluster CA (tidectld ca init makes one): %w", err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "CA certificate:         %s\n", filepath.Join(dir, pki.CACertFile))
			fmt.Fprintf(out, "CA sha256:              %s\n", pki.Fingerprint(certs[0].Raw))
			fmt.Fprintf(out, "CA valid until:         %s\n", certs[0].NotAfter.UTC().Format(time.RFC3339))
			if sc, err := pki.ReadCerts(filepath.Join(dir, pki.ServerFile)); err == nil {
				names := append([]string(nil), sc[0].DNSNames...)
				for _, ip := range sc[0].IPAddresses {
					names = append(names, ip.String())
				}
				fmt.Fprintf(out, "controller certificate: %s (valid until %s, renewed after %s)\n", filepath.Join(dir, pki.ServerFile),
					sc[0].NotAfter.UTC().Format(time.RFC3339), pki.RenewAt(sc[0]).UTC().Format(time.RFC3339))
				fmt.Fprintf(out, "controller names:       %s\n", strings.Join(names, ", "))
			}
			return nil
		},
	})
	return ca
}

// newNodeTokenCommand is "tidectld node-token create": a join token
// from the running controller, over its socket.
func newNodeTokenCommand(load func() (Config, error)) *cobra.Command {
	nt := &cobra.Command{Use: "node-token", Short: "One-time tokens for nodes to join the cluster (tided join)"}
	var ttl time.Duration
	var node string
	create := &cobra.Command{
		Use:   "create",
		Short: "Ask the running controller for a one-time join token (operators)",
		Long: `Ask the running controller, over its socket, for a join token and print it on
standard output, alone on its line. The token is good for one join within
--ttl, by the node --node names (any declared node without it); the controller
keeps only a hash of its secret. Give it to the node over a trusted channel:
  tided join --token TOKEN`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ttl <= 0 {
				return fmt.Errorf("--ttl %s must be positive", ttl)
			}
			cfg, err := load()
			if err != nil {
				return err
			}
			c := client.NewUnix(cfg.Socket)
			defer c.Close()
			secs := int64((ttl + time.Second - 1) / time.Second)
			resp, err := c.NodeToken(cmd.Context(), api.NodeTokenRequest{TTLS: secs, Node: node})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), resp.Token)
			who := "any declared node"
			if resp.Node != "" {
				who = "node " + resp.Node
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "join token %s: one join by %s until %s; on the node: tided join --token <token>\n",
				resp.ID, who, resp.Expires.Local().Format(time.DateTime))
			return nil
		},
	}
	create.Flags().DurationVar(&ttl, "ttl", api.DefaultNodeTokenTTL, "how long the token may be used (10s to 168h)")
	create.Flags().StringVar(&node, "node", "", "the only node the token may join (default: any declared node)")
	nt.AddCommand(create)
	return nt
}
