package opts

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/tide-hpc/tide/internal/envlist"
)

// Submitter is what the submitting process hands on to its job, as
// Slurm's sbatch and srun do through SLURM_UMASK and SLURM_PRIO_PROCESS:
// its umask (negative when unknown) and its nice value.
type Submitter struct {
	Umask int
	Nice  int
}

// CurrentSubmitter reads this process's umask (from /proc, which leaves
// it alone; else by setting and restoring it) and nice value.
func CurrentSubmitter() Submitter {
	s := Submitter{Umask: procUmask()}
	if s.Umask < 0 {
		old := syscall.Umask(0o022)
		syscall.Umask(old)
		s.Umask = old
	}
	// The raw system call returns 20 - nice.
	if p, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0); err == nil {
		s.Nice = 20 - p
	}
	return s
}

// procUmask is the Umask line of /proc/self/status, -1 when absent.
func procUmask() int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Umask:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				return -1
			}
			return int(n)
		}
	}
	return -1
}

// WithSubmitterEnv returns env with what srun and sbatch set for every
// job or step they start: SLURM_UMASK (kept when env has one already,
// as Slurm keeps the caller's) and SLURM_PRIO_PROCESS. It is pure.
func WithSubmitterEnv(env []string, s Submitter) []string {
	e := envlist.FromEntries(env)
	if s.Umask >= 0 && !e.Has("SLURM_UMASK") {
		e.Set("SLURM_UMASK", formatUmask(s.Umask))
	}
	e.Set("SLURM_PRIO_PROCESS", strconv.Itoa(s.Nice))
	return e.Entries()
}

// formatUmask writes a umask as sbatch does: four octal digits.
func formatUmask(m int) string {
	return "0" + strconv.Itoa(m>>6&7) + strconv.Itoa(m>>3&7) + strconv.Itoa(m&7)
}

// SetSubmitEnv adds to the job's environment what sbatch itself puts
// there at submit (Slurm 22.05's sbatch): the submitter's
// (WithSubmitterEnv; none when s is nil), SLURM_JOB_DEPENDENCY when
// --dependency was given, and SLURM_EXPORT_ENV when --export was given
// and is not ALL (unless the caller's environment has one, which Slurm
// keeps), so that srun inside the job exports what the job did. It
// returns r.
func (r *Request) SetSubmitEnv(s *Submitter) *Request {
	env := r.Spec.Environment
	if s != nil {
		env = WithSubmitterEnv(env, *s)
	}
	e := envlist.FromEntries(env)
	for _, d := range r.Defined {
		switch d[0] {
		case "dependency":
			e.Set("SLURM_JOB_DEPENDENCY", d[1])
		case "export":
			if !strings.EqualFold(strings.TrimSpace(d[1]), "ALL") && !e.Has("SLURM_EXPORT_ENV") {
				e.Set("SLURM_EXPORT_ENV", d[1])
			}
		}
	}
	r.Spec.Environment = e.Entries()
	return r
}
