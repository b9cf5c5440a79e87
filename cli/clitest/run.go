package clitest

import (
	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
)

// Run executes cmd with args on the test streams as the tide binary does
// (errors printed as "prog: error: …"), and returns stdout, stderr and
// the exit code.
func Run(cmd *cobra.Command, buf *Buffers, prog string, args []string) (string, string, int) {
	if args == nil {
		args = []string{} // nil would make cobra read os.Args
	}
	cmd.SetOut(buf.Out)
	cmd.SetErr(buf.Err)
	err := cmdutil.Execute(cmd, args)
	cmdutil.PrintError(buf.Err, prog, err)
	return buf.Out.String(), buf.Err.String(), cmdutil.ExitCode(err)
}
