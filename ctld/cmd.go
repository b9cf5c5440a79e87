package ctld

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/internal/pki"
)

// NewCommand returns the tidectld command: run the controller, or print
// its configuration.
func NewCommand() *cobra.Command {
	var cfgPath string
	var overrides struct{ socket, nodeAddr, stateDir, keyFile, logLevel string }
	load := func() (Config, error) {
		cfg, err := LoadConfig(cfgPath)
		if err != nil {
			return cfg, err
		}
		for _, o := range []struct {
			dst *string
			val string
		}{
			{&cfg.Socket, overrides.socket}, {&cfg.NodeAddr, overrides.nodeAddr},
			{&cfg.StateDir, overrides.stateDir}, {&cfg.KeyFile, overrides.keyFile}, {&cfg.LogLevel, overrides.logLevel},
		} {
			if o.val != "" {
				*o.dst = o.val
			}
		}
		return cfg, nil
	}
	root := &cobra.Command{
		Use:           "tidectld",
		Short:         "Tide's controller: owns cluster state and all scheduling decisions",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			cl, err := cfg.Validate()
			if err != nil {
				return fmt.Errorf("invalid config:\n%w", err)
			}
			logger, level := newLogger(cfg.LogLevel)
			log := logger.With("component", "tidectld")
			slog.SetDefault(log)
			// Primary while it holds the store's lease, standby
			// otherwise (leader.go).
			return RunHA(cmd.Context(), cl, log, func(s *Server) (func(), error) {
				if err := s.CheckStepKey(); err != nil {
					return nil, err
				}
				// scontrol reconfigure and SIGHUP re-read what load
				// reads (reconfigure.go).
				s.EnableReconfigure(cfgPath, load, level)
				return s.ReloadOnHangup(cmd.Context()), nil
			})
		},
	}
	f := root.PersistentFlags()
	f.StringVarP(&cfgPath, "config", "f", os.Getenv("TIDE_CONF"), "config file (YAML)")
	f.StringVar(&overrides.socket, "socket", "", "unix socket for local clients (overrides config)")
	f.StringVar(&overrides.nodeAddr, "node-addr", "", "TCP address for node daemons (overrides config)")
	f.StringVar(&overrides.stateDir, "state-dir", "", "state directory (overrides config)")
	f.StringVar(&overrides.keyFile, "key-file", "", "cluster key file (overrides config)")
	f.StringVar(&overrides.logLevel, "log-level", "", "debug, info, warn or error (overrides config)")

	cfgCmd := &cobra.Command{Use: "config", Short: "Print the default or the effective configuration"}
	cfgCmd.AddCommand(&cobra.Command{
		Use: "default", Short: "Print the built-in defaults", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return printJSON(cmd, DefaultConfig()) },
	}, &cobra.Command{
		Use: "dump", Short: "Print the effective configuration after file, environment and flags", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			if _, err := cfg.Validate(); err != nil {
				return fmt.Errorf("invalid config:\n%w", err)
			}
			return printJSON(cmd, cfg)
		},
	}, &cobra.Command{
		Use: "check", Short: "Validate the configuration and exit", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			cl, err := cfg.Validate()
			if err != nil {
				return fmt.Errorf("invalid config:\n%w", err)
			}
			tlsOn, err := tlsWanted(cl)
			if err != nil {
				return err
			}
			if tlsOn {
				if _, err := pki.LoadCA(cl.TLSDir()); err != nil {
					return fmt.Errorf("cluster CA: %w", err)
				}
			} else if _, err := readKey(cfg.KeyFile); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "config ok")
			return nil
		},
	})
	root.AddCommand(cfgCmd, newCACommand(load), newNodeTokenCommand(load), &cobra.Command{
		Use: "keygen FILE", Short: "Write a new random cluster key (mode 0600)", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			b := make([]byte, 32)
			if _, err := rand.Read(b); err != nil {
				return err
			}
			return os.WriteFile(args[0], []byte(base64.StdEncoding.EncodeToString(b)+"\n"), 0o600)
		},
	}, &cobra.Command{
		Use: "version", Short: "Print the version", Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "tidectld", Version) },
	})
	return root
}

func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newLogger returns the daemon's logger and its level, which a reload
// of log_level changes.
func newLogger(level string) (*slog.Logger, *slog.LevelVar) {
	lv := new(slog.LevelVar)
	lv.Set(logLevel(level))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv})), lv
}

// logLevel reads log_level (validated: debug, info, warn or error).
func logLevel(level string) slog.Level {
	switch strings.ToLower(level) {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
