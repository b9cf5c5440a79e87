package opts

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tide-hpc/tide/internal/envlist"
)

// Submitter is what the submitting process hands on to its job, as
// Slurm's sbatch and srun do through SLURM_UMASK, SLURM_PRIO_PROCESS and
// SLURM_RLIMIT_*: its umask (negative when unknown), its nice value and
// its soft resource limits.
type Submitter struct {
	Umask   int
	Nice    int
	Rlimits []Rlimit
}

// Rlimit is one soft resource limit of the submitter, by Slurm's name
// (CORE, NOFILE, ...). User marks one that --propagate named: srun
// writes it with a 'U' before the value, as Slurm's srun does.
type Rlimit struct {
	Name string
	Cur  uint64
	User bool
}

// rlimitResources are the limits Slurm propagates (man srun,
// --propagate), in its order.
var rlimitResources = []struct {
	name string
	res  int
}{
	{"CPU", unix.RLIMIT_CPU}, {"FSIZE", unix.RLIMIT_FSIZE}, {"DATA", unix.RLIMIT_DATA},
	{"STACK", unix.RLIMIT_STACK}, {"CORE", unix.RLIMIT_CORE}, {"RSS", unix.RLIMIT_RSS},
	{"NPROC", unix.RLIMIT_NPROC}, {"NOFILE", unix.RLIMIT_NOFILE}, {"MEMLOCK", unix.RLIMIT_MEMLOCK},
	{"AS", unix.RLIMIT_AS},
}

// currentRlimits reads this process's soft limits. NOFILE, when Go's
// runtime raised it (soft = hard - 1), is the original read from a
// child with exactNofile, else left out.
func currentRlimits(exactNofile bool) []Rlimit {
	var out []Rlimit
	for _, r := range rlimitResources {
		var l unix.Rlimit
		if unix.Getrlimit(r.res, &l) != nil {
			continue
		}
		if r.res == unix.RLIMIT_NOFILE && l.Max != unix.RLIM_INFINITY && l.Cur == l.Max-1 {
			if !exactNofile {
				continue
			}
			l.Cur = startedNofile(l.Cur)
		}
		out = append(out, Rlimit{Name: r.name, Cur: l.Cur})
	}
	return out
}

// startedNofile is the soft RLIMIT_NOFILE this process was started
// with. Go's runtime raises its own soft limit to the hard one minus one
// at start (so seen is that) and gives children the original back, so a
// child shell tells it; seen when that fails.
func startedNofile(seen uint64) uint64 {
	out, err := exec.Command("/bin/sh", "-c", "ulimit -S -n").Output()
	if err != nil {
		return seen
	}
	v := strings.TrimSpace(string(out))
	if v == "unlimited" {
		return unix.RLIM_INFINITY
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return seen
	}
	return n
}

// Propagating is s with the limits --propagate selects: all of them
// when the option was not given (PropagateResourceLimits=ALL, Slurm's
// default); given, ALL (or no value) keeps all and NONE drops all,
// and a list keeps only the limits it names; the ones kept by an
// explicit --propagate are marked User. The value was checked by the
// option parser (checkPropagate). It is pure.
func (s Submitter) Propagating(v string, given bool) Submitter {
	if !given {
		return s
	}
	keep := map[string]bool{}
	// "set" is how the parser records the option given without a value.
	all := strings.TrimSpace(v) == "" || v == "set"
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(item)), "RLIMIT_")
		switch item {
		case "ALL":
			all = true
		case "NONE":
			keep = map[string]bool{}
			all = false
		case "":
		default:
			keep[item] = true
		}
	}
	out := s
	out.Rlimits = nil
	for _, r := range s.Rlimits {
		if all || keep[r.Name] {
			r.User = true
			out.Rlimits = append(out.Rlimits, r)
		}
	}
	return out
}

// CurrentSubmitter reads this process's umask (from /proc, which leaves
// it alone; else by setting and restoring it), nice value and soft
// resource limits, as sbatch hands them on. The NOFILE limit Go's
// runtime raised at start is left out rather than guessed: asking a
// child for the original costs a fork and exec (about 1.7 ms, a third
// of an sbatch), so the script gets the node's default for it.
func CurrentSubmitter() Submitter {
	return currentSubmitter(false)
}

// CurrentStepSubmitter is CurrentSubmitter for srun, whose tasks get
// the NOFILE limit srun was started with too (read from a child shell
// when Go's runtime raised it).
func CurrentStepSubmitter() Submitter {
	return currentSubmitter(true)
}

func currentSubmitter(exactNofile bool) Submitter {
	s := Submitter{Umask: procUmask(), Rlimits: currentRlimits(exactNofile)}
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
// as Slurm keeps the caller's), SLURM_PRIO_PROCESS and SLURM_RLIMIT_*
// (this process's own, replacing inherited ones as Slurm's srun
// does; the node applies and removes them). It is pure.
func WithSubmitterEnv(env []string, s Submitter) []string {
	e := envlist.FromEntries(env)
	if s.Umask >= 0 && !e.Has("SLURM_UMASK") {
		e.Set("SLURM_UMASK", formatUmask(s.Umask))
	}
	e.Set("SLURM_PRIO_PROCESS", strconv.Itoa(s.Nice))
	for _, r := range s.Rlimits {
		v := strconv.FormatUint(r.Cur, 10)
		if r.User {
			v = "U" + v
		}
		e.Set("SLURM_RLIMIT_"+r.Name, v)
	}
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
		sub := *s
		for _, d := range r.Defined {
			if d[0] == "propagate" {
				sub = sub.Propagating(d[1], true)
			}
		}
		env = WithSubmitterEnv(env, sub)
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
