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
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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

	mu       sync.Mutex
	left     int
	allDone  chan struct{}
	teardown sync.Once
}

// serve runs one step connection from hello to the last exit.
func (s *stepServer) serve(c net.Conn) {
	defer c.Close()
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
	go r.readControl()
	<-r.allDone
	// Whatever the tasks left behind in their groups goes with them.
	r.signalAll(syscall.SIGKILL)
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
	for k, rank := range sn.Ranks {
		t := &stepTask{rank: rank, local: k}
		env := r.taskEnv(k)
		exe, err := resolveExe(g.Argv[0], g.Cwd, envValue(env, "PATH"))
		if err != nil {
			return err
		}
		cmd := &exec.Cmd{Path: exe, Args: g.Argv, Env: env, Dir: g.Cwd}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
		reads := hello.StdinMode == stepio.StdinAll || hello.StdinMode == stepio.StdinTask && hello.StdinTask == rank
		var closeAfter []*os.File
		// gate holds the task until it is in its cgroup (cgroupplan.go).
		var gate *os.File
		if r.fence != nil {
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
		if err == nil && gate != nil {
			if err = r.fence.admit(cmd.Process.Pid, gate); err != nil {
				go func() { _ = cmd.Wait() }() // it exits 126 at the closed gate
			}
		} else if gate != nil {
			gate.Close()
		}
		if err != nil {
			if t.stdin != nil {
				t.stdin.close()
			}
			r.closePumps()
			return fmt.Errorf("execve %s: %w", g.Argv[0], err)
		}
		t.cmd = cmd
		r.mu.Lock() // stopSteps may signal the tasks started so far
		r.tasks = append(r.tasks, t)
		r.mu.Unlock()
	}
	return nil
}

// prepareFences sets up what the step's tasks run inside on this node:
// the job's or the step's cgroup, and for slices of shared GPUs the
// slice limits and MPS daemons (issue 3 item 4).
func (r *stepRun) prepareFences() error {
	g, d := r.g, r.s.d
	spec, jobPID := d.jobHere(g.JobID)
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
	return stepSliceEnv(stepEnv(r.g, r.node, k), r.slice, gpus, r.mps)
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
// batch script, and the script's pid (0 when unknown); nil and 0 when
// the job's batch script runs elsewhere or there is none (an
// allocation).
func (d *Daemon) jobHere(id uint64) (*api.LaunchSpec, int) {
	d.mu.Lock()
	var found *job
	for _, j := range d.jobs {
		if j.ref.JobID == id && j.hasSpec && !j.finished() && (found == nil || j.ref.Restart > found.ref.Restart) {
			found = j
		}
	}
	if found == nil {
		d.mu.Unlock()
		return nil, 0
	}
	spec, pid, dir := found.spec, found.pid, found.dir
	d.mu.Unlock()
	if pid.PID == 0 {
		pid, _ = readIdentity(filepath.Join(dir, filePID))
	}
	if !pid.Alive() {
		return &spec, 0
	}
	return &spec, pid.PID
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
