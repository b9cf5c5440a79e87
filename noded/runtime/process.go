package runtime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/noded/cgroup"
	"github.com/tide-hpc/tide/noded/stepd"
)

// ProcessConfig configures the process runtime.
type ProcessConfig struct {
	// Executable is the supervisor binary: it is run as "stepd --job-dir
	// DIR" (one per job) or "stepd-serve --socket PATH" (the shared
	// one): tide-stepd, or tided itself.
	Executable string
	// StateDir holds the shared supervisor's socket and log.
	StateDir string
	// PerJob starts a supervisor per job instead of handing every job
	// to the node's shared one.
	PerJob bool
	// Idle is how long the shared supervisors this runtime starts linger
	// without jobs (0: stepd.DefaultIdle).
	Idle time.Duration
	// CgroupRoot and CgroupParent locate the job cgroups
	// (<root>/<parent>/job_<id>) that Delete empties and removes;
	// CgroupParent "" means that jobs get none (cgroups: off). An empty
	// CgroupRoot is cgroup.DefaultRoot.
	CgroupRoot, CgroupParent string
	// Logger receives the runtime's log (nil: discarded).
	Logger *slog.Logger
}

// Process runs jobs as processes under the shared or per-job supervisor
// (tide-stepd, noded/stepd). The supervisor runs in a session of its
// own, so that neither a signal to tided's process group nor tided's
// exit reaches it; it records the job's pid in the job directory, which
// is how this runtime finds the job's processes.
type Process struct {
	cfg ProcessConfig
	log *slog.Logger
	// startMu makes one shared supervisor start at a time.
	startMu sync.Mutex
	// closed is closed by Close: reattached jobs are no longer watched.
	closed    chan struct{}
	closeOnce sync.Once
}

var _ Runtime = (*Process)(nil)

// NewProcess returns the process runtime.
func NewProcess(cfg ProcessConfig) *Process {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = cgroup.DefaultRoot
	}
	return &Process{cfg: cfg, log: log, closed: make(chan struct{})}
}

// Name is "supervisor".
func (*Process) Name() string { return "supervisor" }

// Start hands the prepared job directory to a supervisor. The exit
// channel is closed when the supervisor has written status.json (or went
// away without).
func (p *Process) Start(ctx context.Context, j Job) (<-chan struct{}, error) {
	var wait func()
	var err error
	if p.cfg.PerJob {
		wait, err = p.startSupervisor(j.Dir)
	} else {
		wait, err = p.superviseShared(ctx, j.Dir)
	}
	if err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		wait()
	}()
	return exited, nil
}

// reattachPoll is how often a reattached job's supervisor is looked at:
// it is not tided's child, so nothing tells when it ends.
const reattachPoll = 200 * time.Millisecond

// Reattach watches the job of a supervisor that still runs (pid and
// start time as recorded), by polling, until the supervisor is gone or
// has written status.json (a shared supervisor outlives its jobs). A
// job whose supervisor is gone is lost.
func (p *Process) Reattach(_ context.Context, j Job) (<-chan struct{}, *stepd.Status, error) {
	id, err := stepd.ReadIdentity(filepath.Join(j.Dir, stepd.FileStepdPID))
	if err != nil {
		return nil, nil, fmt.Errorf("supervisor: %w", err)
	}
	if !id.Alive() {
		return nil, nil, fmt.Errorf("supervisor %d is gone", id.PID)
	}
	status := filepath.Join(j.Dir, stepd.FileStatus)
	exited := make(chan struct{})
	go func() {
		t := time.NewTicker(reattachPoll)
		defer t.Stop()
		for {
			select {
			case <-p.closed:
				return // the next tided watches it
			case <-t.C:
			}
			if !id.Alive() || stepd.Exists(status) {
				close(exited)
				return
			}
		}
	}()
	return exited, nil, nil
}

// pid returns the job's process (the process group leader) from the pid
// file its supervisor writes once the script runs; the zero identity
// before that.
func (p *Process) pid(j Job) stepd.ProcIdentity {
	id, err := stepd.ReadIdentity(filepath.Join(j.Dir, stepd.FilePID))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		p.log.Error("cannot read job pid", "job_id", j.Ref.JobID, "err", err)
	}
	return id
}

// State is Starting until the supervisor has recorded the script's pid,
// then Running while that process lives.
func (p *Process) State(j Job) State {
	id := p.pid(j)
	switch {
	case id.PID == 0:
		return Starting
	case id.Alive():
		return Running
	}
	return Stopped
}

// Signal signals the job's process group, or the batch shell alone.
func (p *Process) Signal(_ context.Context, j Job, sig syscall.Signal, batchOnly bool) error {
	id := p.pid(j)
	if !id.Alive() {
		return ErrNotRunning
	}
	if batchOnly {
		return stepd.SignalProcess(id.PID, sig)
	}
	return stepd.SignalGroup(id.PID, sig)
}

// Freeze freezes the job's cgroup when the job runs in one, else stops
// its process group (processes that left the group keep running).
func (p *Process) Freeze(_ context.Context, j Job, mark func(string)) (string, error) {
	pid := p.pid(j).PID
	if pid == 0 {
		return "", ErrNotRunning
	}
	log := p.log.With("job_id", j.Ref.JobID)
	cg, err := stepd.JobCgroup(j.Dir, pid)
	if err == nil {
		mark(stepd.FreezeCgroup)
		if err := cg.Freeze(stepd.FreezeWait); err != nil {
			return stepd.FreezeCgroup, fmt.Errorf("freeze job cgroup: %w", err)
		}
		return stepd.FreezeCgroup, nil
	}
	if !errors.Is(err, stepd.ErrNoJobCgroup) {
		log.Warn("cannot use the job cgroup's freezer, stopping the process group instead", "err", err)
	} else {
		log.Debug("no job cgroup, stopping the process group", "why", err)
	}
	mark(stepd.FreezeSignal)
	return stepd.FreezeSignal, stepd.SignalGroup(pid, syscall.SIGSTOP)
}

// Thaw undoes Freeze. A marker that does not say how (unreadable) thaws
// the cgroup where there is one, else continues the process group.
func (p *Process) Thaw(_ context.Context, j Job, how string) error {
	id := p.pid(j)
	if id.PID == 0 {
		return ErrNotRunning
	}
	if how == stepd.FreezeSignal {
		return stepd.SignalGroup(id.PID, syscall.SIGCONT)
	}
	cg, err := stepd.JobCgroup(j.Dir, id.PID)
	if err != nil {
		if how == stepd.FreezeCgroup {
			if errors.Is(err, stepd.ErrNoJobCgroup) && !id.Alive() {
				// The job ended meanwhile (a kill thawed by another
				// path, or its cgroup removed): its supervisor's end
				// kills and removes what is left, nothing to thaw.
				return nil
			}
			return err
		}
		return stepd.SignalGroup(id.PID, syscall.SIGCONT)
	}
	if err := cg.Thaw(stepd.FreezeWait); err != nil {
		return fmt.Errorf("thaw job cgroup: %w", err)
	}
	return nil
}

// Stats reads the job's cgroup when the job runs in one (every process
// in it; CPU time of ended ones included; memory charged), else the
// leader's /proc entry (its CPU time with its reaped children's, and its
// resident set: what escaped the leader is not counted).
func (p *Process) Stats(_ context.Context, j Job) (Stats, error) {
	id := p.pid(j)
	if !id.Alive() {
		return Stats{}, ErrNotRunning
	}
	if cg, err := stepd.JobCgroup(j.Dir, id.PID); err == nil {
		return cgroupStats(cg)
	} else if !errors.Is(err, stepd.ErrNoJobCgroup) {
		return Stats{}, err
	}
	return procStats(procRoot, id.PID)
}

// cgroupStats reads what a cgroup says of its processes.
func cgroupStats(cg *cgroup.Cgroup) (Stats, error) {
	st := Stats{Source: StatsCgroup}
	pids, err := cg.Procs()
	if err != nil {
		return Stats{}, err
	}
	st.Pids = pids
	c, err := cg.Stats()
	if err != nil {
		return Stats{}, err
	}
	st.HasCPU, st.UserUsec, st.SystemUsec = c.HasCPU, c.UserUsec, c.SystemUsec
	if m, err := cg.MemoryCurrent(); err == nil {
		st.HasMemory, st.MemoryBytes = true, m
	}
	return st, nil
}

// procRoot is where /proc is read (tests change it).
var procRoot = "/proc"

// userHZ is the unit of /proc's CPU times: USER_HZ, 100 on every Linux
// architecture as user space sees it.
const userHZ = 100

// procStats reads pid's /proc/<pid>/stat: utime, stime, cutime and
// cstime (fields 14-17) and rss (field 24, in pages).
func procStats(root string, pid int) (Stats, error) {
	data, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return Stats{}, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return Stats{}, fmt.Errorf("malformed stat of pid %d", pid)
	}
	// After ") " come field 3 (state) onwards.
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 22 {
		return Stats{}, fmt.Errorf("malformed stat of pid %d: %d fields", pid, len(f))
	}
	n := func(field int) (uint64, error) { return strconv.ParseUint(f[field-3], 10, 64) }
	var ticks [4]uint64
	for k := range ticks {
		if ticks[k], err = n(14 + k); err != nil {
			return Stats{}, fmt.Errorf("malformed stat of pid %d: %w", pid, err)
		}
	}
	rss, err := n(24)
	if err != nil {
		return Stats{}, fmt.Errorf("malformed stat of pid %d: %w", pid, err)
	}
	const usecPerTick = 1e6 / userHZ
	return Stats{Source: StatsProc, Pids: []int{pid}, HasCPU: true,
		UserUsec: (ticks[0] + ticks[2]) * usecPerTick, SystemUsec: (ticks[1] + ticks[3]) * usecPerTick,
		HasMemory: true, MemoryBytes: rss * uint64(os.Getpagesize())}, nil
}

// Delete kills what is left of a job whose supervisor is gone (a lost
// job) and removes its job cgroup, so that neither its processes nor the
// cgroup outlive it. A job without a cgroup is not an error.
func (p *Process) Delete(_ context.Context, j Job) error {
	var errs []error
	if id := p.pid(j); id.Alive() {
		errs = append(errs, stepd.SignalGroup(id.PID, syscall.SIGKILL))
	}
	if p.cfg.CgroupParent == "" {
		return errors.Join(errs...)
	}
	h, err := cgroup.Detect(p.cfg.CgroupRoot)
	if err != nil {
		return errors.Join(errs...)
	}
	c := h.Open(p.cfg.CgroupParent, cgroup.JobName(j.Ref.JobID))
	if len(c.Dirs()) == 0 {
		return errors.Join(errs...)
	}
	if err := c.KillAll(10 * time.Second); err != nil {
		errs = append(errs, fmt.Errorf("kill processes of the job cgroup: %w", err))
	}
	if err := c.Remove(10 * time.Second); err != nil {
		errs = append(errs, fmt.Errorf("remove the job cgroup: %w", err))
	}
	return errors.Join(errs...)
}

// Close stops watching reattached jobs; supervisors and jobs run on.
func (p *Process) Close() error {
	p.closeOnce.Do(func() { close(p.closed) })
	return nil
}

// startSupervisor starts "stepd --job-dir DIR" in a session of its own.
func (p *Process) startSupervisor(dir string) (wait func(), err error) {
	logf, err := os.OpenFile(filepath.Join(dir, stepd.FileStepdLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(p.cfg.Executable, "stepd", "--job-dir", dir)
	cmd.Dir = "/"
	// The supervisor and its exec child only wait; one P spares them
	// starting threads, which is a tenth of a job start. The script gets
	// its own environment (exec.json), not this one.
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() { _ = cmd.Wait() }, nil
}

// The shared supervisor (noded/stepd/serve.go): the runtime connects to
// the supervisor's socket in the state directory, starting the
// supervisor when nobody answers there, and keeps the connection open
// until the supervisor has written the job's status.json.

// superviseShared hands a prepared job directory to the shared
// supervisor. The returned wait blocks until the supervisor has written
// the job's status.json (or went away).
func (p *Process) superviseShared(ctx context.Context, dir string) (wait func(), err error) {
	for attempt := 0; ; attempt++ {
		c, err := p.dialStepd(ctx)
		if err != nil {
			return nil, err
		}
		wait, err := startShared(c, dir)
		if err == nil {
			return wait, nil
		}
		// A supervisor that closes without an answer was exiting (idle)
		// as we connected; unless it recorded the job, start another.
		if errors.Is(err, errNoAnswer) && attempt < 2 && !stepd.Exists(filepath.Join(dir, stepd.FileStepdPID)) {
			p.log.Debug("shared supervisor went away, retrying", "err", err)
			continue
		}
		return nil, err
	}
}

var errNoAnswer = errors.New("shared supervisor closed the connection without an answer")

// startShared sends one start request on c and reads the answer.
func startShared(c net.Conn, dir string) (func(), error) {
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(c, "start %s %s\n", stepd.ServeProto, dir); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %v", errNoAnswer, err)
	}
	br := bufio.NewReaderSize(c, 256)
	line, err := br.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %v", errNoAnswer, err)
	}
	if line != "ok\n" {
		c.Close()
		return nil, fmt.Errorf("shared supervisor refused the job: %s", strings.TrimPrefix(strings.TrimSpace(line), "err "))
	}
	_ = c.SetDeadline(time.Time{})
	return func() {
		_, _ = br.ReadString('\n') // "done", or EOF if it died
		c.Close()
	}, nil
}

// dialStepd connects to the shared supervisor, starting one if needed.
func (p *Process) dialStepd(ctx context.Context) (net.Conn, error) {
	sock := stepd.ServeSocket(p.cfg.StateDir)
	if c, err := net.Dial("unix", sock); err == nil {
		return c, nil
	}
	p.startMu.Lock()
	defer p.startMu.Unlock()
	if c, err := net.Dial("unix", sock); err == nil {
		return c, nil // another launch started it meanwhile
	}
	exited, err := p.spawnStepd(sock)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		c, err := net.Dial("unix", sock)
		if err == nil {
			return c, nil
		}
		select {
		case werr := <-exited:
			// It exits at once when another supervisor serves the
			// socket; then that one answers the next dial.
			if c, err := net.Dial("unix", sock); err == nil {
				return c, nil
			}
			return nil, fmt.Errorf("shared supervisor exited at start (%v); see %s", werr, filepath.Join(p.cfg.StateDir, SharedLog))
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("shared supervisor did not come up on %s: %w", sock, err)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("shared supervisor did not come up on %s: %w", sock, ctx.Err())
		}
		time.Sleep(delay)
	}
}

// SharedLog is the shared supervisor's log in the state directory.
const SharedLog = "stepd.log"

// spawnStepd starts a shared supervisor in a session of its own (so it
// outlives tided) and reaps it when it exits.
func (p *Process) spawnStepd(sock string) (<-chan error, error) {
	logf, err := os.OpenFile(filepath.Join(p.cfg.StateDir, SharedLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := []string{"stepd-serve", "--socket", sock}
	if p.cfg.Idle > 0 {
		args = append(args, "--idle", p.cfg.Idle.String())
	}
	cmd := exec.Command(p.cfg.Executable, args...)
	cmd.Dir = "/"
	// It mostly waits; one P spares it threads. Jobs get their own
	// environment (exec.json), not this one.
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start shared supervisor: %w", err)
	}
	p.log.Info("started shared supervisor", "pid", cmd.Process.Pid, "socket", sock)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return exited, nil
}
