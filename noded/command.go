package noded

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/internal/gcfloor"
	"github.com/tide-hpc/tide/internal/image"
	"github.com/tide-hpc/tide/noded/ctr"
	"github.com/tide-hpc/tide/noded/stepd"
)

// tidedGCFloorBytes is the heap size below which tided does not collect
// (internal/gcfloor).
const tidedGCFloorBytes = 16 << 20

// NewCommand returns the root "tided" command: the daemon itself, "config
// default|dump", and the hidden "stepd"/"stepd-exec"/"stepd-serve" the daemon re-execs
// for every job. Cancelling the command's context stops the daemon and
// leaves jobs running.
func NewCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "tided",
		Short:         "Tide node daemon: runs batch jobs for tidectld",
		Version:       Version,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: false,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := LoadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("invalid configuration:\n%w", err)
			}
			level, _ := parseLevel(cfg.LogLevel)
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level})).
				With("component", "tided")
			if os.Getenv("GOGC") == "" {
				// tided's live heap is a megabyte or two, and the default
				// target collected it after every 2-3 MB of garbage: 19
				// times per thousand short jobs, 7 % of its CPU. The floor
				// makes that a few (memory: at most the floor).
				gcfloor.Start(gcfloor.Target{Percent: 100, Floor: tidedGCFloorBytes})
			}
			if ec, on, err := emulateFromFlags(cmd.Flags()); err != nil || on {
				if err != nil {
					return err
				}
				return runFleet(cmd.Context(), cfg, ec, log) // emulate.go
			}
			d, err := Setup(cmd.Context(), cfg, Options{Logger: log})
			if err != nil {
				return err
			}
			return d.Run(cmd.Context())
		},
	}
	addConfigFlags(root.PersistentFlags())
	addEmulateFlags(root.PersistentFlags())
	root.AddCommand(newConfigCommand(), newStepdCommand(), newStepdExecCommand(), newStepdServeCommand(), newImageCommand(), newJoinCommand(),
		newEmulateConfigCommand())
	return root
}

// newImageCommand is "tided image import|ls|rm" (also reached as "tide
// image"): the image commands against the containerd of tided's
// configuration (containerd.socket, namespace and snapshotter), which
// --containerd-socket (else $TIDE_CONTAINERD_SOCKET), --namespace and
// --snapshotter override.
func newImageCommand() *cobra.Command {
	var t image.Target
	var ns, snap string
	c := image.Command(image.System(), &t, image.Connect, time.Now)
	c.PersistentFlags().StringVar(&ns, "namespace", "", "containerd namespace of Tide's images (default: containerd.namespace)")
	c.PersistentFlags().StringVar(&snap, "snapshotter", "", "snapshotter that unpacks images (default: containerd.snapshotter)")
	c.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := LoadConfig(cmd.Flags())
		if err != nil {
			return err
		}
		if cfg.Containerd.Socket == "" {
			cfg.Containerd.Socket = os.Getenv("TIDE_CONTAINERD_SOCKET")
		}
		if cfg.Containerd.Socket == "" {
			return errors.New("no containerd socket: set containerd.socket in tided's configuration, TIDE_CONTAINERD_SOCKET, or pass --containerd-socket")
		}
		t = image.Target{Socket: cfg.Containerd.Socket, Namespace: cfg.Containerd.Namespace, Snapshotter: cfg.Containerd.Snapshotter,
			Registry: ctr.RegistryConfig{Insecure: cfg.Containerd.InsecureRegistries, AuthFile: cfg.Containerd.AuthFile}}
		if ns != "" {
			t.Namespace = ns
		}
		if snap != "" {
			t.Snapshotter = snap
		}
		return nil
	}
	return c
}

func newConfigCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "config",
		Short: "Print tided's configuration",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(&cobra.Command{
		Use:   "default",
		Short: "Print the built-in default configuration",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := DefaultConfig()
			return cfg.WriteYAML(cmd.OutOrStdout())
		},
	}, &cobra.Command{
		Use:   "dump",
		Short: "Print the effective configuration (defaults, file, TIDED_* environment, flags)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := LoadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			return cfg.WriteYAML(cmd.OutOrStdout())
		},
	})
	return c
}

func newStepdCommand() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:    "stepd --job-dir DIR",
		Short:  "Supervise one job (started by tided)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("--job-dir is required")
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "tided", "role", "stepd")
			return stepd.RunSupervisor(dir, log)
		},
	}
	c.Flags().StringVar(&dir, "job-dir", "", "job directory")
	return c
}

func newStepdServeCommand() *cobra.Command {
	var sock string
	var idle time.Duration
	c := &cobra.Command{
		Use:    "stepd-serve --socket PATH",
		Short:  "Supervise the node's jobs (started by tided)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sock == "" {
				return errors.New("--socket is required")
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "tided", "role", "stepd")
			return stepd.Serve(sock, idle, log)
		},
	}
	c.Flags().StringVar(&sock, "socket", "", "socket to serve")
	c.Flags().DurationVar(&idle, "idle", stepd.DefaultIdle, "exit after this long without jobs")
	return c
}

func newStepdExecCommand() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:    "stepd-exec --job-dir DIR",
		Short:  "Exec a job's script as its user (started by stepd)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			// The plan arrives on stdin; the directory only names the job
			// in ps output.
			return stepd.RunExec()
		},
	}
	c.Flags().StringVar(&dir, "job-dir", "", "job directory")
	return c
}
