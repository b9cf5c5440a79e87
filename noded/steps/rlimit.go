package steps

// Resource limits a job's script and a step's tasks get from sbatch and
// srun (Slurm's PropagateResourceLimits=ALL, its default): they put
// their own soft limits in SLURM_RLIMIT_<NAME> and slurmstepd sets them
// before it execs the script or a task, so `ulimit -c 0; srun ...`
// reaches the tasks.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tide-hpc/tide/noded/stepd"
)

// rlimitNames are the limits Slurm propagates, by the name that
// follows SLURM_RLIMIT_.
var rlimitNames = []struct {
	name string
	res  int
}{
	{"CPU", unix.RLIMIT_CPU}, {"FSIZE", unix.RLIMIT_FSIZE}, {"DATA", unix.RLIMIT_DATA},
	{"STACK", unix.RLIMIT_STACK}, {"CORE", unix.RLIMIT_CORE}, {"RSS", unix.RLIMIT_RSS},
	{"NPROC", unix.RLIMIT_NPROC}, {"NOFILE", unix.RLIMIT_NOFILE}, {"MEMLOCK", unix.RLIMIT_MEMLOCK},
	{"AS", unix.RLIMIT_AS},
}

// taskRlimit is one propagated limit: the soft value srun had.
type taskRlimit struct {
	name string
	res  int
	cur  uint64
}

// takeRlimits removes every SLURM_RLIMIT_* from env, as slurmstepd
// does (the task does not see them), and returns the limits the known
// ones ask for. srun writes each as a decimal, with a 'U' before it
// when --propagate named it; a value that does not parse is dropped.
// It is pure.
func takeRlimits(env []string) ([]string, []taskRlimit) {
	var lims []taskRlimit
	out := env[:0:0]
	for _, kv := range env {
		rest, ok := strings.CutPrefix(kv, "SLURM_RLIMIT_")
		if !ok {
			out = append(out, kv)
			continue
		}
		name, v, _ := strings.Cut(rest, "=")
		n, err := strconv.ParseUint(strings.TrimPrefix(v, "U"), 10, 64)
		if err != nil {
			continue
		}
		for _, r := range rlimitNames {
			if r.name == name {
				lims = append(lims, taskRlimit{name: name, res: r.res, cur: n})
			}
		}
	}
	return out, lims
}

// applyRlimits sets the soft limits lims on process pid (a task still
// held at its gate, so before it execs anything of the user's). Each is
// bounded by the hard limit the process already has, the node's: a
// user's srun can lower a task's limits or raise them up to what the
// node allows, never past it, as slurmstepd reduces a request to
// rlim_max. It returns every failure, joined.
func applyRlimits(pid int, lims []taskRlimit) error {
	var errs []error
	for _, l := range lims {
		var old unix.Rlimit
		if err := unix.Prlimit(pid, l.res, nil, &old); err != nil {
			errs = append(errs, fmt.Errorf("RLIMIT_%s: %w", l.name, err))
			continue
		}
		want := unix.Rlimit{Cur: min(l.cur, old.Max), Max: old.Max}
		if want.Cur == old.Cur {
			continue
		}
		if err := unix.Prlimit(pid, l.res, &want, nil); err != nil {
			errs = append(errs, fmt.Errorf("RLIMIT_%s=%d: %w", l.name, want.Cur, err))
		}
	}
	return errors.Join(errs...)
}

// PlanRlimits are the limits sbatch propagated in a batch job's
// environment, for the supervisor to set on the script before it execs
// (tided's BuildEnv leaves the variables out of the script's
// environment).
func PlanRlimits(env []string) []stepd.Rlimit {
	_, lims := takeRlimits(env)
	out := make([]stepd.Rlimit, 0, len(lims))
	for _, l := range lims {
		out = append(out, stepd.Rlimit{Resource: l.res, Cur: l.cur})
	}
	return out
}
