package steps

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestTakeRlimits(t *testing.T) {
	env := []string{"A=1", "SLURM_RLIMIT_CORE=0", "SLURM_RLIMIT_NOFILE=U1024", "SLURM_RLIMIT_BOGUS=5",
		"SLURM_RLIMIT_STACK=junk", "SLURM_UMASK=0022"}
	got, lims := takeRlimits(env)
	if want := []string{"A=1", "SLURM_UMASK=0022"}; !cmp.Equal(got, want) {
		t.Errorf("env = %v, want %v", got, want)
	}
	want := []taskRlimit{{name: "CORE", res: unix.RLIMIT_CORE, cur: 0}, {name: "NOFILE", res: unix.RLIMIT_NOFILE, cur: 1024}}
	if !cmp.Equal(lims, want, cmp.AllowUnexported(taskRlimit{})) {
		t.Errorf("limits = %+v, want %+v", lims, want)
	}
	if env[1] != "SLURM_RLIMIT_CORE=0" {
		t.Error("takeRlimits changed its argument")
	}
}

// TestApplyRlimits sets limits on a held child: lowered ones apply, one
// above the hard limit is bounded by it.
func TestApplyRlimits(t *testing.T) {
	var hard unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &hard); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `read _; ulimit -c; ulimit -n; ulimit -Hn`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = applyRlimits(cmd.Process.Pid, []taskRlimit{
		{name: "CORE", res: unix.RLIMIT_CORE, cur: 0},
		{name: "NOFILE", res: unix.RLIMIT_NOFILE, cur: ^uint64(0)},
	})
	stdin.Write([]byte("\n"))
	stdin.Close()
	if werr := cmd.Wait(); werr != nil {
		t.Fatal(werr)
	}
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(out.String())
	if len(f) != 3 || f[0] != "0" || f[1] != f[2] {
		t.Fatalf("ulimit -c, -n, -Hn = %q: want 0 and the soft NOFILE raised to the hard one", out.String())
	}
}
