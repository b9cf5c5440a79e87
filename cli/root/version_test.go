package root

import (
	"slices"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/cli/clitest"
)

// TestSlurmCommandsVersion checks that every Slurm-named command answers
// -V and --version with exactly Slurm's line, which job libraries and
// Slurm's test suite parse, whether run through its link or as a tide
// subcommand, and before any mistake later on the line.
func TestSlurmCommandsVersion(t *testing.T) {
	names := SlurmNames()
	for _, want := range []string{"sacct", "salloc", "sbatch", "scancel", "scontrol", "sinfo", "sprio", "squeue", "srun", "sstat"} {
		if !slices.Contains(names, want) {
			t.Errorf("SlurmNames() = %v lacks %s", names, want)
		}
	}
	for _, name := range names {
		for _, args := range [][]string{
			{"/usr/bin/" + name, "-V"},
			{name, "--version"},
			{name, "--vers"},
			{"tide", name, "-V"},
			{name, "-V", "--no-such-option"},
		} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				f, bufs := clitest.Factory(clitest.SharingCluster(), nil)
				if code := Main(args, f); code != 0 {
					t.Errorf("exit %d (stderr %q)", code, bufs.Err.String())
				}
				if got := bufs.Out.String(); got != "slurm 22.05.8\n" {
					t.Errorf("stdout = %q, want %q", got, "slurm 22.05.8\n")
				}
				if bufs.Err.Len() != 0 {
					t.Errorf("stderr = %q", bufs.Err.String())
				}
			})
		}
	}
}

// TestTideVersion checks that Tide's own version comes from `tide
// version` and `tide --version`.
func TestTideVersion(t *testing.T) {
	for _, args := range [][]string{{"tide", "version"}, {"tide", "--version"}} {
		f, bufs := clitest.Factory(clitest.SharingCluster(), nil)
		if code := Main(args, f); code != 0 {
			t.Errorf("%v: exit %d (stderr %q)", args, code, bufs.Err.String())
		}
		if got, want := bufs.Out.String(), "tide "+Version+"\n"; got != want {
			t.Errorf("%v: stdout = %q, want %q", args, got, want)
		}
	}
}

// TestSlurmCommandsHelpAndUsage checks that every Slurm-named command
// answers --help and --usage on stdout with exit 0 (cobra's help, with
// exit 2 for a bad flag, is for tide's own commands only).
func TestSlurmCommandsHelpAndUsage(t *testing.T) {
	for _, name := range SlurmNames() {
		for _, arg := range []string{"--help", "--usage"} {
			t.Run(name+" "+arg, func(t *testing.T) {
				f, bufs := clitest.Factory(clitest.SharingCluster(), nil)
				if code := Main([]string{name, arg}, f); code != 0 {
					t.Errorf("exit %d (stderr %q)", code, bufs.Err.String())
				}
				out := bufs.Out.String()
				if !strings.Contains(out, name) || strings.Contains(out, "Flags:") || bufs.Err.Len() != 0 {
					t.Errorf("stdout %q, stderr %q", out, bufs.Err.String())
				}
			})
		}
	}
}
