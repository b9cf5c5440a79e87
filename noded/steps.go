package noded

// Job steps (issue 7): tided accepts srun's connections on its step
// listener, checks the controller's signed grant and that the grant's job
// runs here under its user (stepauth.go, issue 21), starts this node's
// tasks of the step as the job's user and streams their standard
// streams, signals and exits over the connection (internal/stepio).
// The connection is the step's lifeline: when it closes before the
// tasks end (srun died, or the job ended and took srun with it) the
// tasks are killed, SIGTERM first and SIGKILL after the kill wait, so
// that no task outlives its srun.

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/pki"
	"github.com/tide-hpc/tide/internal/stepcred"
	"github.com/tide-hpc/tide/internal/stepio"
)

// DefaultStepAddr is where tided listens for steps unless step_addr says
// otherwise (Slurm's slurmd port).
const DefaultStepAddr = "0.0.0.0:6818"

// defaultStepAddr is DefaultConfig's step_addr; the package's tests put
// it on loopback, where test servers belong.
var defaultStepAddr = DefaultStepAddr

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

// stepServer is tided's step listener and the steps it runs.
type stepServer struct {
	d   *Daemon
	ln  net.Listener
	log *slog.Logger
	// advertised is the address registered with the controller.
	advertised string
	// keys holds the controller's pinned step key (stepauth.go); since
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

	// cgMu guards jobCgroups, the job cgroups tided made for steps of
	// jobs whose batch script runs elsewhere (cgroupplan.go).
	cgMu       sync.Mutex
	jobCgroups map[uint64]*stepJobCgroup
}

// startSteps opens the step listener on cfg.StepAddr. An empty address
// disables steps.
func (d *Daemon) startSteps() error {
	if d.cfg.StepAddr == "" {
		return nil
	}
	s := &stepServer{d: d, log: d.log.With("component", "steps"), running: map[*stepRun]struct{}{},
		started: map[stepID]time.Time{}, since: time.Now(), hostedWait: hostedWait}
	if err := s.loadPin(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", d.cfg.StepAddr)
	if err != nil {
		return fmt.Errorf("step listener (step_addr %s): %w", d.cfg.StepAddr, err)
	}
	if d.tls != nil {
		// srun checks the node's certificate against the cluster CA
		// (the controller hands it the CA with the grant), and the
		// step's frames, the grant included, travel encrypted. The
		// handshake happens in the hello's read, under its deadline.
		ln = tls.NewListener(ln, pki.ServerConfig(&d.tls.cert, nil))
	}
	s.ln = ln
	s.advertised = advertiseAddr(ln.Addr().String(), d.hostname)
	d.steps = s
	s.wg.Add(1)
	go s.accept()
	d.log.Info("step listener ready", "addr", ln.Addr().String(), "advertised", s.advertised, "tls", d.tls != nil)
	return nil
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

// stepAddr is the registered step address ("" without a listener).
func (d *Daemon) stepAddr() string {
	if d.steps == nil {
		return ""
	}
	return d.steps.advertised
}

// StepAddr is the bound step listener address, for tests ("" when
// steps are disabled).
func (d *Daemon) StepAddr() string {
	if d.steps == nil {
		return ""
	}
	return d.steps.ln.Addr().String()
}

// stopSteps closes the listener and kills every running step: tided's
// end is the end of the connections the steps depend on.
func (d *Daemon) stopSteps() {
	s := d.steps
	if s == nil {
		return
	}
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

func (s *stepServer) accept() {
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
	s     *stepServer
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
	// fence is the cgroup the tasks join (nil: none); mpsHolder names
	// the step as a holder of MPS daemons ("" when it holds none).
	fence     *stepFence
	mpsHolder string
	// slice is the job's slice size on this node, nil when the job's
	// GPUs here are not slices or tided does not know (stepSlice).
	slice *api.NodeAlloc
	// mps holds the directories of the step's GPUs whose MPS daemon runs.
	mps map[int]mpsDirs
	// cred is what the tasks run as (nil: tided's own user).
	cred *syscall.Credential
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
func (s *stepServer) serve(c net.Conn) {
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
	g, idx, err := stepcred.Verify(pub, hello.Grant, s.d.cfg.Name, time.Now())
	if err != nil {
		if errors.Is(err, stepcred.ErrBadCredential) {
			err = fmt.Errorf("%w%s", err, hint)
		}
		s.log.Warn("step refused", "remote", c.RemoteAddr().String(), "err", err)
		fail(fmt.Sprintf("%s: %v", s.d.cfg.Name, err))
		return
	}
	log := s.log.With("job_id", g.JobID, "step", g.StepID)
	if s.d.asRoot && g.UserID == 0 && !s.d.cfg.AllowRootJobs {
		fail(fmt.Sprintf("root jobs are not allowed on node %s", s.d.cfg.Name))
		return
	}
	if err := s.admit(g); err != nil {
		log.Warn("step refused", "remote", c.RemoteAddr().String(), "user_id", g.UserID, "err", err)
		fail(fmt.Sprintf("%s: %v", s.d.cfg.Name, err))
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
		fail(fmt.Sprintf("%s: step %s was cancelled", s.d.cfg.Name, g.ID()))
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
		fail(fmt.Sprintf("%s: %v", s.d.cfg.Name, err))
		return
	}
	log.Info("step started", "user", g.User, "tasks", len(r.tasks), "pty", g.Pty)
	pids := make([]int, len(r.tasks))
	for i, t := range r.tasks {
		pids[i] = t.cmd.Process.Pid
	}
	if rf, err := stepio.JSON(stepio.Ready, 0, stepio.ReadyMsg{Node: s.d.cfg.Name, Pids: pids}); err == nil {
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
	expiry := time.AfterFunc(time.Until(g.JobEnd), func() {
		log.Info("step reached its job's end, killing its tasks")
		r.kill()
	})
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
	cred, err := r.s.d.stepCred(g)
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
	for k, rank := range sn.Ranks {
		t := &stepTask{rank: rank, local: k}
		env := r.taskEnv(k)
		t.env = env
		argv := taskArgv(g, rank)
		exe, err := resolveExe(argv[0], g.Cwd, envValue(env, "PATH"))
		if err != nil {
			return err
		}
		base := &exec.Cmd{Path: exe, Args: argv, Env: env, Dir: g.Cwd}
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
		// gate holds the task until it is in its cgroup (cgroupplan.go)
		// and bound to its CPUs.
		var gate *os.File
		if r.fence != nil || cpus != nil {
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
	g, d := r.g, r.s.d
	spec, jobPID := d.jobHereAwait(g.JobID, scriptPIDWait, time.Sleep)
	r.slice = stepSlice(spec, &g.Nodes[r.node], d.cfg.Name)
	if r.slice != nil && r.slice.Sliced() {
		if gpus := stepGPUs(g.Nodes[r.node]); len(gpus) > 0 && d.mpsOf().enabled() {
			r.mpsHolder = mpsStepHolder(g.JobID, g.StepID)
			r.mps = d.mpsOf().acquire(r.mpsHolder, gpus)
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
	r.s.closeStepFence(r.fence)
	r.fence = nil
	if r.mpsHolder != "" {
		r.s.d.mpsOf().release(r.mpsHolder)
		r.mpsHolder = ""
	}
}

// jobHere returns a copy of job id's launch when this node runs its
// batch script, the script's pid (0 when unknown or no longer running)
// and whether the supervisor has recorded that pid yet; nil, 0 and
// false when the job's batch script runs elsewhere or there is none (an
// allocation).
func (d *Daemon) jobHere(id uint64) (spec *api.LaunchSpec, pid int, recorded bool) {
	d.mu.Lock()
	var found *job
	for _, j := range d.jobs {
		if j.ref.JobID == id && j.hasSpec && !j.finished() && (found == nil || j.ref.Restart > found.ref.Restart) {
			found = j
		}
	}
	if found == nil {
		d.mu.Unlock()
		return nil, 0, false
	}
	launch, ident, dir := found.spec, found.pid, found.dir
	d.mu.Unlock()
	if ident.PID == 0 {
		ident, _ = readIdentity(filepath.Join(dir, filePID))
	}
	if !ident.Alive() {
		return &launch, 0, ident.PID != 0
	}
	return &launch, ident.PID, true
}

// scriptPIDWait bounds how long a step on the node of its job's batch
// script waits for the supervisor to record the script's pid.
const scriptPIDWait = 5 * time.Second

// jobHereAwait is jobHere for a step about to choose its cgroup, which
// is the job's own where the batch script is seen in it (openStepFence;
// a job cgroup of that name without the script may be another
// cluster's). The supervisor records the script's pid only once the
// script runs (a spawn gives the pid after the exec), and an srun the
// script starts at once can get here first: the step would then take
// the job's own cgroup for a foreign one and run outside it, or be
// refused with cgroups: required. So where the script's pid matters
// (a process job, step cgroups in use) and is not recorded yet, this
// waits for the record, looking again after a growing pause (sleep),
// up to wait; a launch that fails meanwhile finishes the job and ends
// the wait.
func (d *Daemon) jobHereAwait(id uint64, wait time.Duration, sleep func(time.Duration)) (*api.LaunchSpec, int) {
	spec, pid, recorded := d.jobHere(id)
	if spec == nil || recorded || spec.ContainerImage != "" || !d.stepCgroupsUsable() {
		return spec, pid
	}
	deadline := time.Now().Add(wait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		left := time.Until(deadline)
		if left <= 0 {
			d.log.Warn("batch script's pid still not recorded: the step cannot join the job's cgroup", "job_id", id, "waited", wait)
			return spec, pid
		}
		sleep(min(pause, left))
		if spec, pid, recorded = d.jobHere(id); spec == nil || recorded {
			return spec, pid
		}
	}
}

// closePumps runs the output pumps of a start that failed, so that their
// pipes are drained and closed.
func (r *stepRun) closePumps() {
	for _, p := range r.pumps {
		go p()
	}
	r.pumps = nil
}

// stepCred is the credential a step's processes run with: the job's
// user when tided is root and the user differs, else tided's own.
func (d *Daemon) stepCred(g *api.StepGrant) (*syscall.Credential, error) {
	if !d.asRoot || (g.UserID == uint32(os.Geteuid()) && g.GroupID == uint32(os.Getegid())) {
		return nil, nil
	}
	return &syscall.Credential{Uid: g.UserID, Gid: g.GroupID, Groups: d.groups.get(g.UserID, g.GroupID, d.log)}, nil
}

// stdinQueue carries srun's input to one task's feeder. push and close
// may race (input arriving as the task exits); the lock keeps a push
// from sending on a closed channel. A push blocks while the task does
// not read its input, which in turn holds up the connection: flow
// control, as TCP's.
type stdinQueue struct {
	mu     sync.Mutex
	ch     chan []byte
	closed bool
}

func newStdinQueue() *stdinQueue { return &stdinQueue{ch: make(chan []byte, 64)} }

func (q *stdinQueue) push(b []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.ch <- b
	}
}

func (q *stdinQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
}

// feedStdin writes what srun sends to a task's stdin; a closed channel
// is the end of input.
func feedStdin(w *os.File, in <-chan []byte) {
	defer w.Close()
	broken := false
	for b := range in {
		if broken {
			continue // keep draining so the connection reader never blocks
		}
		if _, err := w.Write(b); err != nil {
			broken = true
		}
	}
}

// pump forwards one output stream of a task as frames.
func (r *stepRun) pump(f *os.File, typ stepio.Type, task uint32, wg *sync.WaitGroup) {
	defer wg.Done()
	defer f.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			_ = r.w.Write(stepio.Frame{Type: typ, Task: task, Payload: append([]byte(nil), buf[:n]...)})
		}
		if err != nil {
			return
		}
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

// readControl applies srun's frames until the connection ends; an end
// before the tasks ended kills them.
func (r *stepRun) readControl() {
	for {
		f, err := stepio.ReadFrame(r.conn)
		if err != nil {
			select {
			case <-r.allDone:
			default:
				r.log.Info("srun went away, killing the step's tasks", "err", err)
				r.kill()
			}
			for _, t := range r.tasks {
				if t.stdin != nil {
					t.stdin.close()
				}
			}
			return
		}
		select {
		case <-r.allDone:
			// The tasks are gone: what srun still sends (the end of its
			// stdin, a signal it forwarded as they ended) is read and
			// dropped until it closes its end (endConn).
			continue
		default:
		}
		switch f.Type {
		case stepio.Stdin, stepio.StdinEOF:
			if r.pty != nil {
				if f.Type == stepio.Stdin {
					_, _ = r.pty.Write(f.Payload)
				}
				continue
			}
			// r.tasks does not change once the step started.
			for _, t := range r.tasks {
				if t.stdin == nil || (f.Task != stepio.AllTasks && uint32(t.rank) != f.Task) {
					continue
				}
				if f.Type == stepio.StdinEOF {
					t.stdin.close()
				} else {
					t.stdin.push(f.Payload)
				}
			}
		case stepio.Signal:
			sig, err := stepio.ParseSignal(f.Payload)
			if err == nil && sig > 0 && sig < 65 {
				r.signalAll(syscall.Signal(sig))
			}
		case stepio.Winsize:
			if rows, cols, err := stepio.ParseWinsize(f.Payload); err == nil && r.pty != nil {
				setWinsize(r.pty, rows, cols)
			}
		}
	}
}

// endConn ends a step connection without losing what was written to
// it. Closing a socket whose receive queue holds bytes nobody read
// (srun's end of stdin or a signal it forwarded, arriving as the last
// task ends) makes the kernel abort the connection with a reset rather
// than end it with a FIN, and the reset can overtake the last frames
// still on their way to srun (on loopback under load another CPU may
// deliver them later): srun then reads a reset where the last tasks'
// output and exits should be, and reports it lost contact with them.
// So the node only half-closes (TCP's FIN, TLS's close_notify), which
// srun reads as the end of the stream after every frame, and reads
// what srun still sends until srun closes its end, which it does once
// it has read the end, or linger passes; then it closes. reading, when
// not nil, is closed once readControl, which then does the reading, has
// returned.
func endConn(c net.Conn, reading <-chan struct{}, linger time.Duration) {
	defer c.Close()
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(linger))
	if reading != nil {
		<-reading
		return
	}
	_, _ = io.CopyN(io.Discard, c, stepDrainMax)
}

// signalAll signals every task's process group.
func (r *stepRun) signalAll(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.tasks {
		if t.cmd == nil || t.cmd.Process == nil {
			continue
		}
		pid := t.cmd.Process.Pid
		if t.done {
			// The leader is reaped; what is left of its group (if
			// anything) still gets the signal.
			_ = syscall.Kill(-pid, sig)
			continue
		}
		if err := syscall.Kill(-pid, sig); err != nil {
			_ = syscall.Kill(pid, sig)
		}
	}
}

// kill ends the step's tasks: SIGTERM, then SIGKILL after the kill wait
// unless they are gone by then.
func (r *stepRun) kill() {
	r.teardown.Do(func() {
		r.signalAll(syscall.SIGTERM)
		go func() {
			t := time.NewTimer(r.s.d.cfg.KillWait)
			defer t.Stop()
			select {
			case <-r.allDone:
			case <-t.C:
				r.signalAll(syscall.SIGKILL)
			}
		}()
	})
}

// taskStream writes what is written to it as one task's output frames.
type taskStream struct {
	w    *stepio.Writer
	typ  stepio.Type
	task uint32
}

func (s taskStream) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += stepio.MaxPayload {
		end := min(off+stepio.MaxPayload, len(p))
		if err := s.w.Write(stepio.Frame{Type: s.typ, Task: s.task, Payload: append([]byte(nil), p[off:end]...)}); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

// stream is a writer onto task rank's stdout or stderr at srun.
func (r *stepRun) stream(typ stepio.Type, rank int) io.Writer {
	return taskStream{w: r.w, typ: typ, task: uint32(rank)}
}

// cancelMemory is how long a node remembers a cancelled step, longer
// than any grant is good for.
const cancelMemory = 10 * time.Minute

// signalJobSteps sends sig to the tasks of job incarnation ref's steps
// ids running on this node (every step of the job when ids is empty)
// and returns how many steps it reached. SIGKILL to named steps is
// scancel J.S: srun hears that the step was cancelled, as from Slurm's
// slurmstepd, and the tasks are killed at once.
func (s *stepServer) signalJobSteps(ref api.JobRef, ids []uint32, sig syscall.Signal) int {
	if len(ids) == 0 {
		return s.signalJob(ref, sig)
	}
	now := time.Now()
	s.mu.Lock()
	if sig == syscall.SIGKILL {
		if s.cancelled == nil {
			s.cancelled = map[stepID]time.Time{}
		}
		for k, exp := range s.cancelled {
			if !now.Before(exp) {
				delete(s.cancelled, k)
			}
		}
		for _, id := range ids {
			s.cancelled[stepID{ref, id}] = now.Add(cancelMemory)
		}
	}
	var runs []*stepRun
	for r := range s.running {
		if r.g.JobID == ref.JobID && r.g.Restart == ref.Restart && slices.Contains(ids, r.g.StepID) {
			runs = append(runs, r)
		}
	}
	s.mu.Unlock()
	for _, r := range runs {
		if sig == syscall.SIGKILL {
			r.cancel(time.Now())
			continue
		}
		r.log.Info("signalling the step's tasks", "signal", int(sig))
		r.signalAll(sig)
	}
	return len(runs)
}

// cancel ends the step on scancel J.S: srun gets Slurm's notice, the
// tasks SIGKILL. It is idempotent.
func (r *stepRun) cancel(now time.Time) {
	r.cancelOnce.Do(func() {
		r.log.Info("step cancelled, killing its tasks")
		msg := fmt.Sprintf("slurmstepd: error: *** STEP %s ON %s CANCELLED AT %s ***\n", r.g.ID(), r.s.d.cfg.Name, now.Format("2006-01-02T15:04:05"))
		f := stepio.Frame{Type: stepio.Notice, Task: stepio.NoticeCancelled, Payload: []byte(msg)}
		r.mu.Lock()
		r.killed = true
		ready := r.readySent
		if !ready {
			r.notice = &f // srun hears of it after the Ready frame
		}
		r.mu.Unlock()
		if ready {
			_ = r.w.Write(f)
		}
		r.signalAll(syscall.SIGKILL)
	})
}
