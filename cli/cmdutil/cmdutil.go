// Package cmdutil holds what Tide's commands share: the Factory that
// builds their dependencies lazily, IO streams, the controller API seam
// that tests fake, and the one mapping from errors to exit codes.
package cmdutil

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/internal/termsafe"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// API is the part of the controller's API the commands use;
// *client.Client implements it and tests use a fake.
type API interface {
	Submit(ctx context.Context, req api.SubmitRequest) (api.SubmitResponse, error)
	Jobs(ctx context.Context, f api.JobFilter) (api.JobList, error)
	Job(ctx context.Context, id uint64) (api.Job, error)
	Accounting(ctx context.Context, f api.JobFilter) (api.JobList, error)
	Cancel(ctx context.Context, req api.CancelRequest) (api.CancelResponse, error)
	UpdateJobs(ctx context.Context, u api.JobUpdate) (api.CancelResponse, error)
	Events(ctx context.Context, id uint64) ([]api.Event, error)
	Audit(ctx context.Context, limit int) ([]api.AuditRecord, error)
	Nodes(ctx context.Context) (api.NodeList, error)
	UpdateNodes(ctx context.Context, u api.NodeUpdate) error
	Cluster(ctx context.Context) (api.ClusterInfo, error)
	// Queues is every queue's share and use and every job class (tide
	// queues, sprio).
	Queues(ctx context.Context) (api.QueueList, error)
	// Checkpoint acknowledges a finished checkpoint of a job (tide
	// checkpoint-done).
	Checkpoint(ctx context.Context, id uint64) error
}

var _ API = (*client.Client)(nil)

// Throttler is implemented by APIs whose Submit waits out a full
// submission buffer (HTTP 429) by itself; sbatch sets the hook to say,
// once, that it is waiting. It is separate from API so that fakes need
// not implement it.
type Throttler interface {
	OnThrottle(func(client.Throttle))
}

var _ Throttler = (*client.Client)(nil)

// IOStreams are a command's standard streams.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// System returns the process's streams.
func System() *IOStreams { return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr} }

// Test returns streams backed by buffers: in, out, err.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errb := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errb}, in, out, errb
}

// Factory builds what commands need, lazily, so that `--help` never
// touches the controller.
type Factory struct {
	IO *IOStreams
	// API returns the controller client.
	API func() (API, error)
	// Now is the clock commands print relative times with.
	Now func() time.Time
	// Getenv reads the environment (sbatch captures it).
	Getenv  func(string) string
	Environ func() []string
	// Getwd is the submit directory.
	Getwd func() (string, error)
	// Hostname is the submit host.
	Hostname func() (string, error)
	// UID is the caller's uid (for --me and defaults).
	UID func() int
}

// New returns the production factory. The client is the unix socket's,
// or with TIDE_CONTROLLER set the TCP API's (client.FromEnv).
func New() *Factory {
	var c *client.Client
	getAPI := func() (API, error) {
		if c == nil {
			cc, err := client.FromEnv()
			if err != nil {
				return nil, err
			}
			c = cc
		}
		return c, nil
	}
	return &Factory{
		IO:       System(),
		API:      getAPI,
		Now:      time.Now,
		Getenv:   os.Getenv,
		Environ:  os.Environ,
		Getwd:    os.Getwd,
		Hostname: os.Hostname,
		UID:      callerUID(os.Getenv, os.Getuid, getAPI),
	}
}

// callerUID returns the UID function of the factory: the process's uid,
// which is who the socket (SO_PEERCRED) and a MUNGE credential say the
// caller is. With a token (TIDE_CONTROLLER and TIDE_JWT set) the caller
// is the token's user, whom only the controller knows: it is asked once
// (GET /api/v1/cluster), and the process's uid stands in if it cannot
// answer (the command's own request then fails with the reason).
func callerUID(getenv func(string) string, getuid func() int, getAPI func() (API, error)) func() int {
	if getenv(client.ControllerEnv) == "" || getenv(client.JWTEnv) == "" {
		return getuid
	}
	uid := -1
	return func() int {
		if uid >= 0 {
			return uid
		}
		uid = getuid()
		if a, err := getAPI(); err == nil {
			if info, err := a.Cluster(context.Background()); err == nil {
				uid = int(info.CallerUID)
			}
		}
		return uid
	}
}

// Exit codes: 0 ok (also "no jobs"), 1 error, 2 usage.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// UsageError is bad command-line input: the message is printed and the
// exit code is 2 (Slurm's commands exit 1 for some of these; scripts only
// test for non-zero).
type UsageError struct {
	Msg string
	// Hint, when set, is printed as is on its own line after the
	// message (which is escaped, as every error message is): "Try
	// \"squeue --help\" for more information".
	Hint string
}

func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// SilentError ends a command with a code and no further message (the
// command already printed what it had to say).
type SilentError struct{ Code int }

func (e *SilentError) Error() string { return fmt.Sprintf("exit %d", e.Code) }

// ExitCode maps an error to the process exit code, in one place.
func ExitCode(err error) int {
	var u *UsageError
	var s *SilentError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &s):
		return s.Code
	case errors.As(err, &u):
		return ExitUsage
	}
	return ExitError
}

// Failf prints "prog: error: message" (Errorf) and returns exit code 1
// without a further message, for commands that report an error mid-way
// (after other output) the way Slurm's do.
func Failf(w io.Writer, prog, format string, args ...any) error {
	Errorf(w, prog, format, args...)
	return &SilentError{Code: ExitError}
}

// Errorf prints "prog: error: message" and a newline. The message is
// escaped (termsafe): error messages echo values (a job name, a
// partition, a path) that may come from another user through the
// controller, and must not drive the terminal or forge further lines,
// so a newline inside the message prints as \n.
func Errorf(w io.Writer, prog, format string, args ...any) {
	printLine(w, prog, ": error: ", fmt.Sprintf(format, args...))
}

// Warnf prints "prog: warning: message", escaped as Errorf's is.
func Warnf(w io.Writer, prog, format string, args ...any) {
	printLine(w, prog, ": warning: ", fmt.Sprintf(format, args...))
}

func printLine(w io.Writer, prog, kind, msg string) {
	b := make([]byte, 0, len(prog)+len(kind)+len(msg)+1)
	b = termsafe.Append(b, prog)
	b = append(b, kind...)
	b = termsafe.Append(b, msg)
	w.Write(append(b, '\n'))
}

// PrintError writes err as Slurm commands do: "prog: error: message",
// escaped as Errorf's is, then a UsageError's hint on its own line.
func PrintError(w io.Writer, prog string, err error) {
	var s *SilentError
	if err == nil || errors.As(err, &s) {
		return
	}
	printLine(w, prog, ": error: ", err.Error())
	var u *UsageError
	if errors.As(err, &u) && u.Hint != "" {
		io.WriteString(w, u.Hint+"\n")
	}
}

// WriteJSON writes v as indented JSON and a newline, as
// json.Encoder with SetIndent("", "  ") does, with the characters that
// encoding/json leaves raw but a terminal acts on (C1 controls, DEL,
// bidi overrides) written as \u escapes (termsafe.EscapeJSON): the
// values decode exactly as they are, and the document is safe to print.
func WriteJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	b = termsafe.EscapeJSON(append(b, '\n'))
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// RawCommand is a cobra command that hands its words to run unparsed,
// for commands that parse their options as Slurm's getopt does (sbatch,
// srun, salloc); errors are reported by the caller, Slurm-style.
func RawCommand(use, short string, run func(ctx context.Context, args []string) error) *cobra.Command {
	return &cobra.Command{
		Use:                use,
		Short:              short,
		Args:               cobra.ArbitraryArgs,
		DisableFlagParsing: true,
		SilenceErrors:      true,
		SilenceUsage:       true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return run(ctx, args)
		},
	}
}

// Execute runs cmd with args, the words after the program name, as
// cmd.Execute does. A command that takes its words unparsed and has no
// subcommands (a RawCommand such as sbatch, or a tide handoff) has its
// RunE called directly: cobra's Execute would only search the words for
// subcommands and flags the command does not have, after building a help
// flag and its hidden __complete command, which costs sbatch, run in
// loops by scripts, a few percent of its time. It also means that
// "sbatch __complete" submits ./__complete, as Slurm's sbatch would,
// rather than answering a shell's completion request.
func Execute(cmd *cobra.Command, args []string) error {
	if !runsDirectly(cmd) {
		cmd.SetArgs(args)
		return cmd.Execute()
	}
	if cmd.Context() == nil {
		cmd.SetContext(context.Background())
	}
	if err := cmd.ValidateArgs(args); err != nil {
		return err
	}
	err := cmd.RunE(cmd, args)
	if errors.Is(err, pflag.ErrHelp) {
		// As cobra does: a command may ask for its help this way.
		cmd.InitDefaultHelpFlag()
		cmd.HelpFunc()(cmd, args)
		return nil
	}
	return err
}

// runsDirectly reports whether cobra's Execute would do nothing for cmd
// but call its RunE: flag parsing is off, and it has no subcommands,
// parent, hooks or deprecation notice. (Tide registers no
// cobra.OnInitialize functions, which Execute would also run.)
func runsDirectly(cmd *cobra.Command) bool {
	return cmd.DisableFlagParsing && cmd.RunE != nil && !cmd.HasSubCommands() && !cmd.HasParent() &&
		cmd.Deprecated == "" &&
		cmd.PersistentPreRun == nil && cmd.PersistentPreRunE == nil &&
		cmd.PreRun == nil && cmd.PreRunE == nil &&
		cmd.PostRun == nil && cmd.PostRunE == nil &&
		cmd.PersistentPostRun == nil && cmd.PersistentPostRunE == nil
}

// Lazy is a value that Build makes on first use, for tables only one
// command needs. Every CLI command is this one binary and runs each
// package's initialisation, used or not; unlike a sync.OnceValue, which
// allocates when it is set up, a Lazy declared as a package variable is
// laid out by the compiler and costs nothing until it is used.
type Lazy[T any] struct {
	Build func() T
	once  sync.Once
	val   T
}

// Get returns the value, building it on the first call.
func (l *Lazy[T]) Get() T {
	l.once.Do(func() { l.val = l.Build() })
	return l.val
}
