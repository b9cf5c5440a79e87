package root

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
)

// Some tide subcommands live in other binaries and tide hands over to
// them: the containerd client ("tide image" → "tided image") and the
// simulator ("tide sim" → "tide-sim") are each larger than the rest of
// the CLI together, and every sbatch and squeue would pay for loading
// and initialising them (about a millisecond per command).

// handoff returns a subcommand that execs binary with prefix and its
// own arguments.
func handoff(use, short, binary string, prefix ...string) *cobra.Command {
	return &cobra.Command{
		Use:                use,
		Short:              short,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			path, err := findCompanion(binary)
			if err != nil {
				return err
			}
			argv := append(append([]string{path}, prefix...), args...)
			// exec keeps the terminal, the exit status and signals simple.
			return syscall.Exec(path, argv, os.Environ())
		},
	}
}

// The handoff commands' constructors are plain functions so that the
// commands table needs no code at initialisation (see commands).

func newSimHandoff(*cmdutil.Factory) *cobra.Command {
	return handoff("sim --trace FILE [options]", "Replay a job trace through the scheduler and compare policies (runs tide-sim)", "tide-sim")
}

func newImageHandoff(*cmdutil.Factory) *cobra.Command {
	return handoff("image <import|ls|rm|pull|push> [options]", "Manage container images in this node's containerd (runs tided image; node-side, root)", "tided", "image")
}

// findCompanion looks for binary next to tide (bin/ of a build), in
// ../sbin and ../libexec/tide (an installed PREFIX), then on PATH.
func findCompanion(binary string) (string, error) {
	if self, err := os.Executable(); err == nil {
		dir := filepath.Dir(self)
		for _, p := range []string{
			filepath.Join(dir, binary),
			filepath.Join(dir, "..", "sbin", binary),
			filepath.Join(dir, "..", "libexec", "tide", binary),
		} {
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	if p, err := exec.LookPath(binary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("this command runs %s, which was not found next to tide, in ../sbin, ../libexec/tide or on PATH", binary)
}
