package stepd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/cgroup"
)

// errPipeFD is the descriptor on which the exec child reports a failure
// that happened before the script started. It is close-on-exec in the
// child, so the supervisor reads EOF without data once exec succeeded.
const errPipeFD = 3

// RunSupervisor is "tided stepd --job-dir DIR": the supervisor of one job. It
// outlives tided (it runs in its own session), starts the job through
// the exec child, waits for it, kills what is left of its process group
// and writes status.json.
func RunSupervisor(dir string, log *slog.Logger) error {
	self, err := SelfIdentity()
	if err != nil {
		return err
	}
	if err := WriteJSONAtomic(filepath.Join(dir, FileStepdPID), self, 0o644); err != nil {
		return err
	}
	st := runPlan(dir, log, -1)
	return WriteJSONAtomic(filepath.Join(dir, FileStatus), st, 0o644)
}

// runPlan reads a job directory's exec.json, runs the job and returns
// its status. baseUmask >= 0 means a shared supervisor: its own umask is
// 0 (umask is per process and its jobs start concurrently), so the job's
// umask (the plan's, else baseUmask) is applied to each file it creates
// for the job and set in the job itself; -1 means a supervisor of this
// job alone, which simply sets the process umask.
func runPlan(dir string, log *slog.Logger, baseUmask int) Status {
	var plan Plan
	if err := readPlan(filepath.Join(dir, FileExec), &plan); err != nil {
		return Status{Exit: api.ExitStatus{Code: 1}, EndTime: time.Now(), Error: "read launch plan: " + err.Error()}
	}
	shared := baseUmask >= 0
	if shared && plan.Umask < 0 {
		plan.Umask = baseUmask
	}
	log = log.With("job_id", plan.JobID, "node", plan.Node)
	st := supervise(dir, &plan, shared, log)
	log.Info("job finished", "exit", st.Exit.String(), "error", st.Error)
	return st
}

// supervise makes the job's cgroup, starts the exec child and waits for
// the job.
func supervise(dir string, plan *Plan, shared bool, log *slog.Logger) Status {
	fail := func(start time.Time, msg string) Status {
		return Status{Exit: api.ExitStatus{Code: 1}, StartTime: start, EndTime: time.Now(), Error: msg}
	}
	// A kill that came before the start (a cancel during the launch, or
	// tided giving up on a launch past its launch_timeout) ends the job
	// before anything of it runs. One that comes later is honoured by
	// waitJob, which looks again once the job's pid is recorded.
	if k := ReadKillMarker(dir, MarkKilled); k != nil {
		sig := syscall.SIGTERM
		if k.Signal > 0 {
			sig = syscall.Signal(k.Signal)
		}
		log.Info("job killed before it started")
		return Status{Exit: api.ExitStatus{Signal: int(sig)}, EndTime: time.Now()}
	}
	cg, err := setupCgroup(plan, log)
	if err != nil {
		return fail(time.Time{}, err.Error())
	}
	if !plan.SetUser || (plan.UID == uint32(os.Geteuid()) && plan.GID == uint32(os.Getegid())) {
		return superviseDirect(dir, plan, shared, cg, log)
	}
	failCg := func(start time.Time, msg string) Status {
		if cg != nil {
			cleanupCgroup(cg, log)
		}
		return fail(start, msg)
	}
	exe, err := os.Executable()
	if err != nil {
		return failCg(time.Time{}, "find tided executable: "+err.Error())
	}
	data, err := json.Marshal(plan)
	if err != nil {
		return failCg(time.Time{}, "encode launch plan: "+err.Error())
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return failCg(time.Time{}, "create pipe: "+err.Error())
	}
	defer errR.Close()
	// The plan reaches the exec child through a pipe written only once
	// the child is in the job's cgroup: until then it waits.
	inR, inW, err := os.Pipe()
	if err != nil {
		errW.Close()
		return failCg(time.Time{}, "create pipe: "+err.Error())
	}
	cmd := exec.Command(exe, "stepd-exec", "--job-dir", dir)
	cmd.Stdin = inR
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{errW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if plan.SetUser {
		cmd.SysProcAttr.Credential = &syscall.Credential{
			Uid: plan.UID, Gid: plan.GID, Groups: plan.groups(),
		}
	}
	start := time.Now()
	err = cmd.Start()
	errW.Close()
	inR.Close()
	if err != nil {
		inW.Close()
		return failCg(start, "start job: "+err.Error())
	}
	if cg != nil {
		if err := cg.AddProc(cmd.Process.Pid); err != nil {
			if plan.Cgroup.Required {
				inW.Close()
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				return failCg(start, "job cgroup (cgroups: required): "+err.Error())
			}
			log.Warn("job runs outside its cgroup", "err", err)
		}
	}
	_, _ = inW.Write(data) // a child that died early says so on the error pipe
	inW.Close()
	msg, _ := io.ReadAll(errR)
	// cmd.Wait, not the process's: it also releases what exec.Cmd holds
	// for the child, which a shared supervisor would otherwise leak once
	// per job.
	return waitJob(dir, cmd.Process.Pid, cmd.Wait, func() *os.ProcessState { return cmd.ProcessState }, start, string(msg), cg, log)
}

// superviseDirect starts a job that runs as the supervisor's own user
// without the exec child: the supervisor opens the files itself (with
// the same rights the child would have) and execs the script, which
// saves a process start per job. The job joins cg (when not nil) before
// it execs.
func superviseDirect(dir string, plan *Plan, shared bool, cg *cgroup.Cgroup, log *slog.Logger) Status {
	start := time.Now()
	fail := func(msg string) Status {
		if cg != nil {
			cleanupCgroup(cg, log)
		}
		return Status{Exit: api.ExitStatus{Code: 1}, StartTime: start, EndTime: time.Now(), Error: msg}
	}
	files, err := openJobFiles(plan, shared)
	if err != nil {
		return fail(err.Error())
	}
	// The trampoline's exec would fail inside the job (its message lost
	// in the output file), so check here what execve would refuse.
	if err := checkExecutable(plan.Script); err != nil {
		files.close()
		return fail(fmt.Sprintf("execve %s: %v", plan.Script, err))
	}
	umask := -1 // per-job: the process umask, set in openJobFiles, is inherited
	if shared {
		umask = plan.Umask
	}
	join := cgroupJoin{strict: plan.Cgroup != nil && plan.Cgroup.Required}
	if join.procs, err = openProcsFiles(cg); err != nil {
		if join.strict {
			files.close()
			return fail("job cgroup (cgroups: required): " + err.Error())
		}
		log.Warn("job runs outside its cgroup", "err", err)
	}
	proc, err := spawnTask(plan, files, umask, join)
	files.close()
	closeAll(join.procs)
	if errors.Is(err, errJoinCgroup) {
		return fail(fmt.Sprintf("job cgroup (cgroups: required): %v", err))
	}
	if err != nil {
		return fail(fmt.Sprintf("execve %s: %v", plan.Script, unwrapPath(err)))
	}
	var ps *os.ProcessState
	wait := func() (err error) { ps, err = proc.Wait(); return err }
	return waitJob(dir, proc.Pid, wait, func() *os.ProcessState { return ps }, start, "", cg, log)
}

// cgroupJoin is how a spawned job enters its cgroup before it execs:
// it writes its pid to each of procs (cgroup.procs files opened by the
// supervisor); strict fails the start when that fails, otherwise the job
// runs outside the cgroup.
type cgroupJoin struct {
	procs  []*os.File
	strict bool
}

// errJoinCgroup is a strict cgroupJoin that failed.
var errJoinCgroup = errors.New("join job cgroup")

// checkExecutable reports what execve would say about path: not
// executable by us, or not a script with an interpreter line.
func checkExecutable(path string) error {
	if err := syscall.Access(path, 0x1 /* X_OK */); err != nil {
		return err
	}
	f, err := OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return unwrapPath(err)
	}
	defer f.Close()
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	if n >= 2 && string(head[:2]) == "#!" || n == 4 && string(head) == "\x7fELF" {
		return nil
	}
	return syscall.ENOEXEC
}

// waitJob records the job's pid, honours kill Markers that raced the
// start, waits for the job (wait, then state gives its exit), kills what
// is left of its process group and of its cgroup (cg, nil without one),
// and turns the wait status and the OOM count into the job's status.
// failMsg is an error the exec child reported before the script ran.
func waitJob(dir string, pid int, wait func() error, state func() *os.ProcessState, start time.Time, failMsg string, cg *cgroup.Cgroup, log *slog.Logger) Status {
	if id, err := IdentityOf(pid); err != nil {
		log.Error("record job pid", "pid", pid, "err", err)
	} else if err := WriteJSONAtomic(filepath.Join(dir, FilePID), id, 0o644); err != nil {
		log.Error("record job pid", "pid", pid, "err", err)
	}
	// tided writes a kill marker before it looks for the pid file, and
	// we look for Markers after writing it: whichever of the two comes
	// second sends the signal, so a kill racing the start is not lost.
	m := ReadMarkers(dir)
	for _, k := range []*KillMarker{m.Killed, m.TimedOut} {
		if k != nil {
			sig := syscall.SIGTERM
			if k.Signal > 0 {
				sig = syscall.Signal(k.Signal)
			}
			if err := SignalGroup(pid, sig); err != nil {
				log.Error("signal job", "err", err)
			}
		}
	}
	_ = wait() // a non-zero exit is an error here; the state tells
	ps := state()
	end := time.Now()
	if err := SignalGroup(pid, syscall.SIGKILL); err != nil {
		log.Error("kill leftover processes", "err", err)
	}
	if cg != nil {
		if at := lingerUntil(ReadMarkers(dir), end); !at.IsZero() {
			// A cancel, requeue or time limit ended the job. The tasks
			// of its steps on this node are in its cgroup, in process
			// groups of their own: like those on the job's other nodes
			// they get SIGTERM from tided when their srun (just killed
			// with the batch shell's group) goes away, then the kill
			// wait, then SIGKILL. Wait for them until the job's kill
			// wait is over before the cgroup's SIGKILL below.
			if !waitCgroupEmpty(cg, at) {
				log.Info("kill wait over: killing what is left of the job's steps")
			}
		}
	}
	usage := jobUsage(ps, cg) // usage.go: read before the cgroup goes
	// Processes that left the group are still in the cgroup.
	st := Status{StartTime: start, EndTime: end, OOM: finishCgroup(cg, log), Usage: usage}
	if failMsg != "" {
		st.Exit = api.ExitStatus{Code: 1}
		st.Error = failMsg
		return st
	}
	if ps == nil {
		st.Exit = api.ExitStatus{Code: 1}
		st.Error = "lost the job's exit status"
		return st
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Exited():
			st.Exit.Code = ws.ExitStatus()
		case ws.Signaled():
			st.Exit.Signal = int(ws.Signal())
		}
	}
	return st
}

// maxLinger bounds how long a killed job's leftovers are waited for,
// whatever its kill marker says (a marker from a clock far off).
const maxLinger = 10 * time.Minute

// lingerUntil is when the cgroup of a job that ended at end may be
// killed: the kill wait's end of the kill or time-limit marker m holds
// (the later of the two), or zero when the job was not killed.
func lingerUntil(m Markers, end time.Time) time.Time {
	var at time.Time
	for _, k := range []*KillMarker{m.Killed, m.TimedOut} {
		if k != nil && k.KillAt.After(at) {
			at = k.KillAt
		}
	}
	if at.IsZero() || !at.After(end) {
		return time.Time{}
	}
	if limit := end.Add(maxLinger); at.After(limit) {
		return limit
	}
	return at
}

// waitCgroupEmpty polls cg until it has no processes or deadline
// passes, and reports whether it emptied.
func waitCgroupEmpty(cg *cgroup.Cgroup, deadline time.Time) bool {
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		if pids, err := cg.Procs(); err != nil || len(pids) == 0 {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(min(delay, time.Until(deadline)))
	}
}

// RunExec is "tided stepd-exec": it already runs as the job's user.
// It reads the plan from stdin, opens the job's files (so they are
// created with the user's rights), changes to the work directory and
// execs the script. It returns only on failure, after reporting it on the
// error pipe.
func RunExec() error {
	syscall.CloseOnExec(errPipeFD)
	errPipe := os.NewFile(errPipeFD, "error pipe")
	fail := func(err error) error {
		if errPipe != nil {
			fmt.Fprint(errPipe, err.Error())
		}
		return err
	}
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		return fail(fmt.Errorf("read launch plan: %w", err))
	}
	var plan Plan
	if err := decodePlan(data, &plan); err != nil {
		return fail(fmt.Errorf("decode launch plan: %w", err))
	}
	files, err := openJobFiles(&plan, false)
	if err != nil {
		return fail(err)
	}
	if err := syscall.Chdir(files.dir); err != nil {
		return fail(fmt.Errorf("couldn't chdir to %s: %w", files.dir, err))
	}
	for fd, f := range files.std {
		if err := syscall.Dup3(int(f.Fd()), fd, 0); err != nil {
			return fail(fmt.Errorf("set up standard file %d: %w", fd, err))
		}
	}
	env := WithTaskPID(plan.Env, os.Getpid())
	argv := append([]string{plan.Script}, plan.Args...)
	err = syscall.Exec(plan.Script, argv, env)
	return fail(fmt.Errorf("execve %s: %w", plan.Script, err))
}

// jobFiles are a job's standard files, opened with the rights of the
// process that will run the job, and the directory it starts in.
type jobFiles struct {
	std [3]*os.File
	dir string
}

// close closes the files (after they were handed to the job).
func (f *jobFiles) close() {
	for _, x := range f.std {
		if x != nil {
			x.Close()
		}
	}
}

// openJobFiles applies the job's umask, opens stdin, stdout and stderr
// (creating the outputs with the caller's rights, so run it as the job's
// user) and picks the work directory, falling back to /tmp with Slurm's
// message in the output when the work directory cannot be entered. A
// shared supervisor (umask 0) applies the umask to the files' mode
// instead of to itself.
func openJobFiles(plan *Plan, shared bool) (*jobFiles, error) {
	perm := os.FileMode(0o666)
	switch {
	case shared:
		perm &^= os.FileMode(plan.Umask)
	case plan.Umask >= 0:
		syscall.Umask(plan.Umask)
	}
	in, err := OpenFile(plan.Stdin, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("could not open stdin file %s: %w", plan.Stdin, unwrapPath(err))
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if plan.Append {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	out, err := OpenFile(plan.Stdout, flags, perm)
	if err != nil {
		in.Close()
		return nil, fmt.Errorf("could not open stdout file %s: %w", plan.Stdout, unwrapPath(err))
	}
	errf := out
	if plan.Stderr != "" {
		if errf, err = OpenFile(plan.Stderr, flags, perm); err != nil {
			in.Close()
			out.Close()
			return nil, fmt.Errorf("could not open stderr file %s: %w", plan.Stderr, unwrapPath(err))
		}
	}
	f := &jobFiles{std: [3]*os.File{in, out, errf}, dir: plan.WorkDir}
	if err := syscall.Access(plan.WorkDir, 0x1 /* X_OK */); err != nil {
		fmt.Fprintf(errf, "slurmstepd: error: couldn't chdir to `%s': %s: going to /tmp instead\n", plan.WorkDir, strerror(err))
		f.dir = "/tmp"
	}
	return f, nil
}

// unwrapPath drops the *PathError wrapper whose text repeats the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// strerror spells an errno the way C's strerror does ("No such file or
// directory"), as Slurm's messages do.
func strerror(err error) string {
	s := err.Error()
	if s == "" {
		return s
	}
	if c := s[0]; c >= 'a' && c <= 'z' {
		return string(c-'a'+'A') + s[1:]
	}
	return s
}

// WithTaskPID adds SLURM_TASK_PID and its twin, which only the exec child
// can know (its pid becomes the script's).
func WithTaskPID(env []string, pid int) []string {
	p := strconv.Itoa(pid)
	return append(env, "SLURM_TASK_PID="+p, "TIDE_TASK_PID="+p)
}
