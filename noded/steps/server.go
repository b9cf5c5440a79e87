package steps

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepcred"
	"github.com/tide-hpc/tide/internal/stepio"
	"github.com/tide-hpc/tide/noded/cgroup"
	"github.com/tide-hpc/tide/noded/jobenv"
)

// DefaultAddr is where tided listens for steps unless step_addr says
// otherwise (Slurm's slurmd port).
const DefaultAddr = "0.0.0.0:6818"

// helloTimeout bounds how long a new connection may take to say which
// step it is.
const helloTimeout = 10 * time.Second

// outputGrace is how long a task's exit waits for its output pipes to
// drain: a background child may hold them open, and its output still
// flows after the exit is reported.
const outputGrace = 2 * time.Second

// stepLinger bounds how long a node, once it has sent all of a step
// connection, waits for srun to close its end (endConn); srun closes as
// soon as it has read the end, so only a stopped or broken srun waits
// this long. stepDrainMax bounds what is read and dropped meanwhile.
const (
	stepLinger   = 10 * time.Second
	stepDrainMax = 4 << 20
)

// Config is what the step server takes of the node's configuration.
type Config struct {
	// Node is the node's name: grants name it, and refusals and notices
	// say it.
	Node string
	// Addr is where to listen (step_addr).
	Addr string
	// Hostname replaces an unspecified host in the advertised address.
	Hostname string
	// TLS, when set, makes the listener speak TLS with the node's
	// certificate (the node joined the cluster CA); nil is plain TCP.
	TLS *tls.Config
	// StateDir holds the pinned controller step key (PinnedKeyFile).
	StateDir string
	// KillWait is the grace between a step's SIGTERM and its SIGKILL.
	KillWait time.Duration
	// AsRoot: tided runs as root, so tasks run as the grant's user; and
	// a grant for uid 0 is refused unless AllowRootJobs.
	AsRoot, AllowRootJobs bool
	// LogLevel is tided's log level, which srun --slurmd-debug reports.
	LogLevel string
	// Cgroups: steps get cgroups (cgroups not off, and usable when tided
	// started); CgroupsRequired refuses a step whose cgroup cannot be
	// made. CgroupRoot and CgroupParent locate the job cgroups
	// (<root>/<parent>/job_<id>).
	Cgroups, CgroupsRequired bool
	CgroupRoot, CgroupParent string
	// DeviceFence returns the device fence of a step whose tasks see
	// gpus: the node's other GPUs denied (nil: no fence).
	DeviceFence func(gpus []int) *cgroup.DeviceFence
	// Logger receives the server's log; callers add component=steps.
	Logger *slog.Logger
}

// Host is what the step server needs of the node daemon, which
// implements it: which jobs run here and as whom, the batch script of a
// job, the user's groups, the GPUs' MPS daemons, and where a step's
// usage goes. Its methods may be called from any goroutine.
type Host interface {
	// JobUser returns the uid and gid job ref runs as on this node, if
	// it runs here (a batch job tided launched, or one the controller
	// says the node hosts); changed is closed at the next change of what
	// the controller says the node hosts.
	JobUser(ref api.JobRef) (uid, gid uint32, ok bool, changed <-chan struct{})
	// Wake has the daemon sync with the controller now, so that it hears
	// of a job it does not know yet.
	Wake()
	// BatchJob returns a copy of job id's launch when this node runs its
	// batch script, the script's pid (0 when unknown or no longer
	// running) and whether the supervisor has recorded that pid yet;
	// nil, 0 and false when the batch script runs elsewhere or there is
	// none (an allocation).
	BatchJob(id uint64) (spec *api.LaunchSpec, pid int, recorded bool)
	// Groups returns the supplementary groups of uid (gid its primary).
	Groups(uid, gid uint32) []uint32
	// AcquireMPS makes step (job, step) a holder of the MPS control
	// daemons of gpus, starting those that do not run, and returns the
	// directories of those that run; held is false where the node runs
	// no MPS daemons (then there is nothing to release).
	AcquireMPS(job uint64, step uint32, gpus []int) (dirs map[int]jobenv.MPSDirs, held bool)
	// ReleaseMPS drops the step's hold on MPS daemons.
	ReleaseMPS(job uint64, step uint32)
	// StepEnded takes the final usage of a step's part on this node,
	// once its tasks are reaped and before its cgroup goes.
	StepEnded(u StepUsage)
}

// Server is tided's step listener and the steps it runs.
type Server struct {
	cfg  Config
	host Host
	ln   net.Listener
	log  *slog.Logger
	// advertised is the address registered with the controller.
	advertised string
	// keys holds the controller's pinned step key (auth.go); since
	// is when the listener started: older grants are refused.
	keys  stepKeys
	since time.Time
	// hostedWait bounds a grant's wait for its job to be listed here
	// (the constant hostedWait; tests shorten it). Guarded by mu.
	hostedWait time.Duration

	mu      sync.Mutex
	running map[*stepRun]struct{}
	closed  bool
	wg      sync.WaitGroup
	// started holds the steps started here whose grants have not expired
	// yet, with their expiry: a grant starts its step once.
	started map[stepID]time.Time
	// cancelled holds the steps scancel J.S ended while their srun may
	// not have reached this node yet, until they can no longer start
	// (their grants expire well before): a cancel that comes first is
	// not lost.
	cancelled map[stepID]time.Time

	// cgMu guards jobCgroups, the job cgroups made for steps of jobs
	// whose batch script runs elsewhere (fence.go).
	cgMu       sync.Mutex
	jobCgroups map[uint64]*stepJobCgroup
}

// Start reads the pinned controller key and opens the step listener on
// cfg.Addr.
func Start(cfg Config, host Host) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, host: host, log: log, running: map[*stepRun]struct{}{},
		started: map[stepID]time.Time{}, since: time.Now(), hostedWait: hostedWait}
	if err := s.loadPin(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("step listener (step_addr %s): %w", cfg.Addr, err)
	}
	if cfg.TLS != nil {
		// srun checks the node's certificate against the cluster CA
		// (the controller hands it the CA with the grant), and the
		// step's frames, the grant included, travel encrypted. The
		// handshake happens in the hello's read, under its deadline.
		ln = tls.NewListener(ln, cfg.TLS)
	}
	s.ln = ln
	s.advertised = advertiseAddr(ln.Addr().String(), cfg.Hostname)
	s.wg.Add(1)
	go s.accept()
	log.Info("step listener ready", "addr", ln.Addr().String(), "advertised", s.advertised, "tls", cfg.TLS != nil)
	return s, nil
}

// advertiseAddr is the address srun should dial for a listener bound to
// bound: an unspecified host becomes the hostname (the controller
// prefers the node's registered address when it has one).
func advertiseAddr(bound, hostname string) string {
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip := net.ParseIP(host); (host == "" || ip != nil && ip.IsUnspecified()) && hostname != "" {
		return net.JoinHostPort(hostname, port)
	}
	return bound
}

// Advertised is the address to register with the controller.
func (s *Server) Advertised() string { return s.advertised }

// Addr is the address the listener is bound to.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// SetHostedWait changes how long a grant for a job the node does not
// know waits for the controller to list it (hostedWait; tests shorten
// it).
func (s *Server) SetHostedWait(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hostedWait = d
}

// Close closes the listener and kills every running step: tided's end
// is the end of the connections the steps depend on.
func (s *Server) Close() {
	s.ln.Close()
	s.mu.Lock()
	s.closed = true
	runs := make([]*stepRun, 0, len(s.running))
	for r := range s.running {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	for _, r := range runs {
		r.signalAll(syscall.SIGKILL)
		r.conn.Close()
	}
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("accept step connection", "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go s.serve(c)
	}
}

// stepTask is one task of a step on this node.
type stepTask struct {
	rank, local int
	cmd         *exec.Cmd
	stdin       *stdinQueue // nil when the task reads /dev/null
	outputs     sync.WaitGroup
	done        bool
	// env is the task's environment, for its epilog.
	env []string
}

// stepRun is one step's part on this node, bound to one connection.
type stepRun struct {
	s     *Server
	g     *api.StepGrant
	node  int
	conn  net.Conn
	w     *stepio.Writer
	log   *slog.Logger
	tasks []*stepTask
	// pty is the master side of a --pty step's terminal.
	pty *os.File
	// pumps start forwarding the tasks' output; they run once the Ready
	// frame is out, so that srun hears of the start first.
	pumps []func()
	// fence is the cgroup the tasks join (nil: none); mpsHeld: the step
	// holds MPS daemons (Host.AcquireMPS).
	fence   *stepFence
	mpsHeld bool
	// slice is the job's slice size on this node, nil when the job's
	// GPUs here are not slices or tided does not know (stepSlice).
	slice *api.NodeAlloc
	// mps holds the directories of the step's GPUs whose MPS daemon runs.
	mps map[int]jobenv.MPSDirs
	// cred is what the tasks run as (nil: tided's own user).
	cred *syscall.Credential
	// held are the gates of tasks started held (--debugger-test): they
	// stay shut until the step ends.
	held []*os.File
	// notes are frames for srun that start() made before the Ready
	// frame could go out (binding reports); serve sends them after it.
	notes []stepio.Frame
	// cancelOnce: scancel J.S ends the step here once; killed (under
	// mu) tells start() to start no more tasks and kill any it starts.
	cancelOnce sync.Once
	killed     bool
	// readySent (under mu): the Ready frame is out, so other frames may
	// follow; a cancel notice from before waits in notice.
	readySent bool
	notice    *stepio.Frame

	mu       sync.Mutex
	left     int
	allDone  chan struct{}
	teardown sync.Once
}

// serve runs one step connection from hello to the last exit.
func (s *Server) serve(c net.Conn) {
	// reading is closed when readControl, srun's reader, has returned
	// (nil while none runs): endConn leaves the draining to it.
	var reading chan struct{}
	defer func() { endConn(c, reading, stepLinger) }()
	w := stepio.NewWriter(c)
	fail := func(msg string) {
		_ = w.Write(stepio.Frame{Type: stepio.Error, Payload: []byte(msg)})
	}
	_ = c.SetReadDeadline(time.Now().Add(helloTimeout))
	f, err := stepio.ReadFrame(c)
	if err != nil || f.Type != stepio.Hello {
		s.log.Warn("step connection without hello", "remote", c.RemoteAddr().String(), "err", err)
		fail("expected a hello frame")
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	var hello stepio.HelloMsg
	if err := json.Unmarshal(f.Payload, &hello); err != nil {
		fail("bad hello: " + err.Error())
		return
	}
	pub, hint := s.pinnedKey()
	g, idx, err := stepcred.Verify(pub, hello.Grant, s.cfg.Node, time.Now())
	if err != nil {
		if errors.Is(err, stepcred.ErrBadCredential) {
			err = fmt.Errorf("%w%s", err, hint)
		}
		s.log.Warn("step refused", "remote", c.RemoteAddr().String(), "err", err)
		fail(fmt.Sprintf("%s: %v", s.cfg.Node, err))
		return
	}
	log := s.log.With("job_id", g.JobID, "step", g.StepID)
	if s.cfg.AsRoot && g.UserID == 0 && !s.cfg.AllowRootJobs {
		fail(fmt.Sprintf("root jobs are not allowed on node %s", s.cfg.Node))
		return
	}
	if err := s.admit(g); err != nil {
		log.Warn("step refused", "remote", c.RemoteAddr().String(), "user_id", g.UserID, "err", err)
		fail(fmt.Sprintf("%s: %v", s.cfg.Node, err))
		return
	}
	r := &stepRun{s: s, g: g, node: idx, conn: c, w: w, log: log, allDone: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		fail("tided is stopping")
		return
	}
	if _, ok := s.cancelled[stepID{api.JobRef{JobID: g.JobID, Restart: g.Restart}, g.StepID}]; ok {
		s.mu.Unlock()
		log.Info("step refused: it was cancelled")
		fail(fmt.Sprintf("%s: step %s was cancelled", s.cfg.Node, g.ID()))
		return
	}
	s.running[r] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, r)
		s.mu.Unlock()
	}()
	// Runs first of the deferred calls: the tasks are dead by then.
	defer r.release()
	if err := r.start(&hello); err != nil {
		log.Warn("step start failed", "err", err)
		r.signalAll(syscall.SIGKILL)
		r.closePumps()
		fail(fmt.Sprintf("%s: %v", s.cfg.Node, err))
		return
	}
	log.Info("step started", "user", g.User, "tasks", len(r.tasks), "pty", g.Pty)
	pids := make([]int, len(r.tasks))
	for i, t := range r.tasks {
		pids[i] = t.cmd.Process.Pid
	}
	if rf, err := stepio.JSON(stepio.Ready, 0, stepio.ReadyMsg{Node: s.cfg.Node, Pids: pids}); err == nil {
		_ = w.Write(rf)
	}
	for _, f := range r.notes {
		_ = w.Write(f)
	}
	r.mu.Lock()
	r.readySent = true
	notice := r.notice
	r.mu.Unlock()
	if notice != nil {
		_ = w.Write(*notice)
	}
	for _, p := range r.pumps {
		go p()
	}
	expiry := time.AfterFunc(time.Until(g.JobEnd), func() { r.expire(time.Now()) })
	defer expiry.Stop()
	for _, t := range r.tasks {
		go r.wait(t)
	}
	reading = make(chan struct{})
	go func() {
		defer close(reading)
		r.readControl()
	}()
	<-r.allDone
	// Whatever the tasks left behind in their groups goes with them.
	r.signalAll(syscall.SIGKILL)
	s.stepUsageEnd(r) // usage.go: before release removes the step's cgroup
	if r.pty != nil {
		r.pty.Close()
	}
	log.Info("step ended on node")
}

// start launches the node's tasks.
func (r *stepRun) start(hello *stepio.HelloMsg) error {
	g := r.g
	sn := g.Nodes[r.node]
	if len(sn.Ranks) == 0 {
		return errors.New("no tasks for this node")
	}
	cred, err := r.s.stepCred(g)
	if err != nil {
		return err
	}
	if err := r.prepareFences(); err != nil {
		return err
	}
	if g.Pty {
		return r.startPty(hello, cred)
	}
	r.mu.Lock()
	r.left = len(sn.Ranks)
	r.mu.Unlock()
	r.cred = cred
	// --cpu-bind (validated by srun; one that does not parse binds
	// nothing): the CPUs each task gets among those tided may use.
	bind, _ := api.ParseCPUBind(g.CPUBind)
	var avail []int
	var topo cpuTopology
	binding := g.CPUBind != "" && (bind.Kind != "" && bind.Kind != "none" || bind.Unit != "")
	if binding {
		avail, topo = usableCPUs(), readCPUTopology("/sys")
	}
	cpt := 1
	if sn.StepCPUs > 0 {
		cpt = max(sn.StepCPUs/len(sn.Ranks), 1)
	}
	gpuVerbose := strings.HasPrefix(strings.ToLower(g.GPUBind), "verbose")
	dbg := newStepDebug(hello.Debug, sn.Ranks[0])
	dbg.verbose(r, "debug levels are stderr='%s', logfile='%s', syslog='quiet'", hello.Debug, strings.ToLower(r.s.cfg.LogLevel))
	dbg.verbose(r, "starting %d tasks", len(sn.Ranks))
	if r.fence != nil {
		dbg.debug(r, "step %d.%d confined to its cgroup on %s", g.JobID, g.StepID, sn.Name)
	}
	for k, rank := range sn.Ranks {
		t := &stepTask{rank: rank, local: k}
		env, lims := takeRlimits(r.taskEnv(k))
		t.env = env
		argv := taskArgv(g, rank)
		base, err := taskCmd(argv, env, g.Cwd)
		if err != nil {
			return err
		}
		if g.TaskProlog != "" {
			withTaskProlog(base, g.TaskProlog)
		}
		cmd := viaTaskPIDShell(base)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
		var cpus []int
		if binding {
			cpus = taskCPUs(bind, k, len(sn.Ranks), cpt, avail, topo)
		}
		reads := hello.StdinMode == stepio.StdinAll || hello.StdinMode == stepio.StdinTask && hello.StdinTask == rank
		var closeAfter []*os.File
		// gate holds the task until it is in its cgroup (cgroupplan.go),
		// bound to its CPUs and under srun's limits.
		var gate *os.File
		if r.fence != nil || cpus != nil || len(lims) > 0 || hello.Hold {
			gr, gw, err := os.Pipe()
			if err != nil {
				return err
			}
			gateCmd(cmd, gr)
			closeAfter, gate = append(closeAfter, gr), gw
		}
		if reads {
			pr, pw, err := os.Pipe()
			if err != nil {
				return err
			}
			cmd.Stdin = pr
			closeAfter = append(closeAfter, pr)
			t.stdin = newStdinQueue()
			go feedStdin(pw, t.stdin.ch)
		} else {
			null, err := os.Open(os.DevNull)
			if err != nil {
				return err
			}
			cmd.Stdin = null
			closeAfter = append(closeAfter, null)
		}
		for _, typ := range []stepio.Type{stepio.Stdout, stepio.Stderr} {
			pr, pw, err := os.Pipe()
			if err != nil {
				return err
			}
			if typ == stepio.Stdout {
				cmd.Stdout = pw
			} else {
				cmd.Stderr = pw
			}
			closeAfter = append(closeAfter, pw)
			t.outputs.Add(1)
			r.pumps = append(r.pumps, func() { r.pump(pr, typ, uint32(rank), &t.outputs) })
		}
		err = cmd.Start()
		for _, f := range closeAfter {
			f.Close()
		}
		if err == nil {
			pid := cmd.Process.Pid
			if lerr := applyRlimits(pid, lims); lerr != nil {
				r.log.Warn("resource limits not propagated", "task", rank, "err", lerr)
				dbg.verbose(r, "task %d: %v", rank, lerr)
			}
			dbg.debug(r, "task %d (local %d) started as pid %d: %s", rank, k, pid, argv[0])
			for _, l := range lims {
				dbg.debug2(r, "task %d: RLIMIT_%s from srun: %d", rank, l.name, l.cur)
			}
			if bind.Verbose {
				shown, failed := cpus, false
				if cpus != nil {
					if berr := bindTask(pid, cpus); berr != nil {
						r.log.Warn("cpu binding failed", "task", rank, "cpus", cpus, "err", berr)
						failed = true
					}
				} else {
					shown = usableCPUs()
				}
				r.note(rank, cpuBindLine(bind, sn.Name, rank, k, pid, shown, failed))
			} else if cpus != nil {
				if berr := bindTask(pid, cpus); berr != nil {
					r.log.Warn("cpu binding failed", "task", rank, "cpus", cpus, "err", berr)
				}
			}
			if gpuVerbose && k < len(sn.GPUs) {
				r.note(rank, gpuBindLine(stepGPUs(sn), sn.GPUs[k], k))
			}
		}
		switch {
		case err == nil && gate != nil && hello.Hold:
			if r.fence != nil {
				err = r.fence.enter(cmd.Process.Pid)
			}
			if err != nil {
				gate.Close()
				go func() { _ = cmd.Wait() }() // it exits 126 at the closed gate
			} else {
				r.held = append(r.held, gate)
			}
		case err == nil && gate != nil && r.fence != nil:
			if err = r.fence.admit(cmd.Process.Pid, gate); err != nil {
				go func() { _ = cmd.Wait() }() // it exits 126 at the closed gate
			}
		case err == nil && gate != nil:
			_, err = gate.Write([]byte("\n"))
			gate.Close()
		case gate != nil:
			gate.Close()
		}
		if err != nil {
			if t.stdin != nil {
				t.stdin.close()
			}
			r.closePumps()
			return fmt.Errorf("execve %s: %w", argv[0], err)
		}
		t.cmd = cmd
		r.mu.Lock() // stopSteps may signal the tasks started so far
		r.tasks = append(r.tasks, t)
		killed := r.killed
		r.mu.Unlock()
		if killed {
			// scancel J.S came while the tasks started.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	return nil
}

// note queues a line of the node's for task rank's standard error,
// sent once srun has the Ready frame.
func (r *stepRun) note(rank int, line string) {
	r.notes = append(r.notes, stepio.Frame{Type: stepio.Stderr, Task: uint32(rank), Payload: []byte(line)})
}

// prepareFences sets up what the step's tasks run inside on this node:
// the job's or the step's cgroup, and for slices of shared GPUs the
// slice limits and MPS daemons (issue 3 item 4).
func (r *stepRun) prepareFences() error {
	g, s := r.g, r.s
	spec, jobPID := s.batchJobAwait(g.JobID, scriptPIDWait, time.Sleep)
	r.slice = stepSlice(spec, &g.Nodes[r.node], s.cfg.Node)
	if r.slice != nil && r.slice.Sliced() {
		if gpus := stepGPUs(g.Nodes[r.node]); len(gpus) > 0 {
			r.mps, r.mpsHeld = s.host.AcquireMPS(g.JobID, g.StepID, gpus)
		}
	}
	f, err := r.s.openStepFence(g, r.node, spec, jobPID)
	if err != nil {
		return err
	}
	r.fence = f
	return nil
}

// taskEnv is local task k's environment: stepEnv, then its slice
// limits and MPS daemon.
func (r *stepRun) taskEnv(k int) []string {
	sn := r.g.Nodes[r.node]
	var gpus []int
	if k < len(sn.GPUs) {
		gpus = sn.GPUs[k]
	}
	env := stepSliceEnv(withLaunchNode(stepEnv(r.g, r.node, k), r.conn.RemoteAddr()), r.slice, gpus, r.mps)
	return withTaskExtras(r.g, r.node, k, env)
}

// release undoes prepareFences once the tasks are gone: the step's
// cgroups go, and its hold on MPS daemons. It is idempotent.
func (r *stepRun) release() {
	for _, g := range r.held {
		g.Close()
	}
	r.held = nil
	r.s.closeStepFence(r.fence)
	r.fence = nil
	if r.mpsHeld {
		r.s.host.ReleaseMPS(r.g.JobID, r.g.StepID)
		r.mpsHeld = false
	}
}

// wait reaps task t and reports its exit.
func (r *stepRun) wait(t *stepTask) {
	err := t.cmd.Wait()
	exit := exitOf(t.cmd.ProcessState, err)
	drained := make(chan struct{})
	go func() { t.outputs.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(outputGrace):
	}
	if r.g.TaskEpilog != "" {
		runTaskEpilog(r.g.TaskEpilog, r.g.Cwd, t.env, r.cred, r.stream(stepio.Stdout, t.rank), r.stream(stepio.Stderr, t.rank))
	}
	_ = r.w.Write(stepio.Frame{Type: stepio.Exit, Task: uint32(t.rank), Payload: stepio.ExitPayload(exit)})
	if t.stdin != nil {
		t.stdin.close()
	}
	r.mu.Lock()
	t.done = true
	r.left--
	last := r.left == 0
	r.mu.Unlock()
	if last {
		close(r.allDone)
	}
}

// exitOf turns a reaped process into an exit status.
func exitOf(ps *os.ProcessState, err error) api.ExitStatus {
	if ps == nil {
		return api.ExitStatus{Code: 1}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return api.ExitStatus{Signal: int(ws.Signal())}
	}
	return api.ExitStatus{Code: ps.ExitCode()}
}
