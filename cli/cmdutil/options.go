package cmdutil

import (
	"errors"
	"fmt"
	"io"

	"github.com/tide-hpc/tide/cli/getopt"
)

// SlurmVersion is the Slurm release the Slurm-named commands behave as.
// Their -V/--version prints "slurm " and it, nothing more: job
// libraries and Slurm's test suite parse that line. Tide's own version
// is `tide version`.
const SlurmVersion = "22.05.8"

// WriteSlurmVersion writes the -V/--version line.
func WriteSlurmVersion(w io.Writer) {
	io.WriteString(w, "slurm "+SlurmVersion+"\n")
}

// ParseOptions reads a Slurm-named command's arguments into o with the
// command's table (getopt.Command.Parse) and does what Slurm's getopt
// loops do besides setting values: --help, --usage and --version print
// their text on ios.Out and end the command (done, with a nil error);
// a syntax error prints "NAME: <getopt's message>" (escaped, as every
// error is) and, for the commands that say it, `Try "NAME --help" for
// more information`, and ends the command with exit code 1 (a
// SilentError). An option's own error comes back as it is, for the
// caller to report. getenv reads POSIXLY_CORRECT; nil reads nothing.
func ParseOptions[T any](ios *IOStreams, c *getopt.Command[T], o *T, args []string, getenv func(string) string) (operands []string, done bool, err error) {
	posix := getenv != nil && getenv("POSIXLY_CORRECT") != ""
	act, operands, err := c.Parse(o, args, posix)
	var ge *getopt.Error
	switch {
	case errors.As(err, &ge):
		printLine(ios.ErrOut, c.Name, ": ", ge.Msg)
		if c.TryHelp {
			fmt.Fprintf(ios.ErrOut, "Try \"%s --help\" for more information\n", c.Name)
		}
		return nil, true, &SilentError{Code: ExitError}
	case err != nil:
		return nil, true, err
	}
	switch act {
	case getopt.Help:
		c.WriteHelp(ios.Out)
		return nil, true, nil
	case getopt.Usage:
		c.WriteUsage(ios.Out)
		return nil, true, nil
	case getopt.Version:
		WriteSlurmVersion(ios.Out)
		return nil, true, nil
	}
	return operands, false, nil
}

// Atoi reads a number as C's atoi does, which is how Slurm's commands
// read counts such as --iterate: leading blanks and a sign, then the
// digits up to the first other byte ("5s" is 5); no digits is 0.
func Atoi(s string) int {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	n := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if n > (1<<31-1)/10 {
			break // C's atoi is undefined past int; stop growing
		}
		n = n*10 + int(s[i]-'0')
	}
	if neg {
		return -n
	}
	return n
}
