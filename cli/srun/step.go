package srun

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/pki"
	"github.com/tide-hpc/tide/internal/stepio"
)

// dialTimeout bounds connecting to one node daemon.
const dialTimeout = 10 * time.Second

// killBadExitWait is how long tasks get to end after SIGTERM when
// --kill-on-bad-exit tears a step down, before SIGKILL.
const killBadExitWait = 3 * time.Second

// stepOptions is what running one step needs besides the grant.
type stepOptions struct {
	label, unbuffered, killBadExit bool
	stdout, stderr, stdin          string
	cwd                            string
	in                             io.Reader
	out, errOut                    io.Writer
	// term is srun's terminal for --pty (nil otherwise).
	term *os.File
	// signals delivers the signals srun caught (nil: none are); policy
	// decides what each does (signals.go).
	signals <-chan os.Signal
	policy  signalPolicy
	// jobEnding asks the controller whether the step's job is ending
	// (cancelled or requeued); nil for never.
	jobEnding func() bool
	// now times Ctrl-C sequences (nil: time.Now).
	now func() time.Time
	// ca verifies the nodes' step listeners, reached over TLS (nil:
	// plain TCP, for a controller without TLS).
	ca *x509.CertPool
	// appendOut opens -o/-e files for appending (--open-mode=append).
	appendOut bool
	// wait is -W: seconds after the first task's end at which the
	// others are killed (-1 or 0: never).
	wait int
	// verbose prints -v's lines (nil: none).
	verbose *verbose
	// slurmdDebug is --slurmd-debug's level name ("": not given).
	slurmdDebug string
	// debuggerTest holds the tasks before exec and prints the process
	// table; exeOf names task t's program in it.
	debuggerTest bool
	exeOf        func(task int) string
}

// stepResult is how a step ended.
type stepResult struct {
	exit      api.ExitStatus
	code      int
	cancelled bool
}

// nodeConn is srun's connection to one node of the step.
type nodeConn struct {
	idx  int
	node api.StepNode
	conn net.Conn
	w    *stepio.Writer
	// pids are the node's task pids, in the order of node.Ranks.
	pids []int
}

// runStep runs a granted step to its end: it connects to every node,
// forwards stdin and signals, prints the tasks' output and collects
// their exits.
func runStep(ctx context.Context, sg api.SignedGrant, o stepOptions) (stepResult, error) {
	g, err := stepio.Decode(sg)
	if err != nil {
		return stepResult{}, err
	}
	mode, stdinTask, stdinFile := stdinRoute(o.stdin)
	if g.Pty {
		mode = stepio.StdinAll
	}
	hello := stepio.HelloMsg{Grant: sg, StdinMode: mode, StdinTask: stdinTask, Debug: o.slurmdDebug, Hold: o.debuggerTest}
	if o.term != nil {
		hello.Rows, hello.Cols = termSize(o.term)
	}
	o.verbose.launching(g)
	conns, err := connectAll(ctx, g, hello, o.ca)
	if err != nil {
		return stepResult{}, err
	}
	for _, n := range g.Nodes {
		o.verbose.say(1, fmt.Sprintf("launch/slurm: _task_start: Node %s, %d tasks started", n.Name, len(n.Ranks)))
	}
	if o.debuggerTest {
		writeProcTable(o.errOut, conns, g.NTasks, o.exeOf)
	}
	defer func() {
		for _, c := range conns {
			c.conn.Close()
		}
	}()

	s := newSink(g.NTasks, o.label && !g.Pty, o.unbuffered || g.Pty)
	s.appendFiles = o.appendOut
	nodeOf := map[int]int{}
	for i, n := range g.Nodes {
		for _, r := range n.Ranks {
			nodeOf[r] = i
		}
	}
	varsOf := func(task int) patternVars {
		n := nodeOf[task]
		return patternVars{jobID: g.JobID, stepID: g.StepID, task: task, node: n, nodeName: g.Nodes[n].Name,
			user: g.User, name: g.JobName}
	}
	s.routeOutput(o.stdout, o.stderr, o.cwd, varsOf, o.out, o.errOut)
	defer s.close()
	// Output files exist from the start, as Slurm's srun creates them,
	// whether or not the tasks write.
	for task := range nodeOf {
		s.mu.Lock()
		s.dest(task, false)
		s.dest(task, true)
		s.mu.Unlock()
	}

	var (
		mu        sync.Mutex
		exits     = map[int]api.ExitStatus{}
		tornDown  bool
		badExit   *api.ExitStatus
		cancelled bool
		aborted   bool
		// firstExit starts -W's timer; stepAborted says the node
		// reported the step cancelled (scancel J.S).
		firstExit   = true
		stepAborted bool
	)
	abort := make(chan struct{})
	broadcast := func(f stepio.Frame) {
		for _, c := range conns {
			_ = c.w.Write(f)
		}
	}
	teardown := func() {
		mu.Lock()
		first := !tornDown
		tornDown = true
		mu.Unlock()
		if !first {
			return
		}
		broadcast(stepio.Frame{Type: stepio.Signal, Task: stepio.AllTasks, Payload: stepio.SignalPayload(int(syscall.SIGTERM))})
		time.AfterFunc(killBadExitWait, func() {
			broadcast(stepio.Frame{Type: stepio.Signal, Task: stepio.AllTasks, Payload: stepio.SignalPayload(int(syscall.SIGKILL))})
		})
	}

	// Standard input.
	open := func(p string) (*os.File, error) {
		if !filepath.IsAbs(p) {
			p = filepath.Join(o.cwd, p)
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("Could not open stdin file %s: %v", p, err)
		}
		return f, nil
	}
	switch {
	case mode == stepio.StdinNone:
	case stdinFile != "" && perTask(stdinFile):
		// -i in-%t: each task reads its own file.
		for task := range nodeOf {
			f, err := open(expandPattern(stdinFile, varsOf(task)))
			if err != nil {
				return stepResult{}, err
			}
			defer f.Close()
			go forwardStdin(f, uint32(task), conns, false)
		}
	default:
		src := o.in
		if stdinFile != "" {
			f, err := open(expandPattern(stdinFile, varsOf(0)))
			if err != nil {
				return stepResult{}, err
			}
			defer f.Close()
			src = f
		}
		target := stepio.AllTasks
		if mode == stepio.StdinTask {
			target = uint32(stdinTask)
		}
		if src != nil {
			go forwardStdin(src, target, conns, g.Pty)
		}
	}
	// Signals and, for a terminal, its size.
	stopSig := make(chan struct{})
	defer close(stopSig)
	var winch chan os.Signal
	if o.term != nil {
		winch = make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
	}
	policy := o.policy
	policy.step = "StepId=" + g.ID()
	policy.ending = func() bool {
		return !g.JobEnd.IsZero() && !time.Now().Before(g.JobEnd) || o.jobEnding != nil && o.jobEnding()
	}
	var ranks []int
	for _, n := range g.Nodes {
		ranks = append(ranks, n.Ranks...)
	}
	sort.Ints(ranks)
	go func() {
		for {
			select {
			case <-stopSig:
				return
			case sig := <-o.signals:
				ss, ok := sig.(syscall.Signal)
				if !ok {
					continue
				}
				now := time.Now
				if o.now != nil {
					now = o.now
				}
				p := policy.plan(ss, now())
				for _, line := range p.say {
					s.say(o.errOut, "srun: "+line+"\n")
				}
				if p.status {
					mu.Lock()
					ended := make(map[int]bool, len(exits))
					for r, e := range exits {
						ended[r] = e.Code == 0 && e.Signal == 0
					}
					mu.Unlock()
					for _, line := range taskStatus(policy.step, ranks, ended) {
						s.say(o.errOut, "srun: "+line+"\n")
					}
				}
				if p.forward != 0 {
					broadcast(stepio.Frame{Type: stepio.Signal, Task: stepio.AllTasks, Payload: stepio.SignalPayload(int(p.forward))})
				}
				if p.kill {
					// The step ends by srun's hand: sacct shows it
					// CANCELLED.
					mu.Lock()
					cancelled = true
					if p.cancel {
						tornDown = true
					}
					mu.Unlock()
					broadcast(stepio.Frame{Type: stepio.Signal, Task: stepio.AllTasks, Payload: stepio.SignalPayload(int(syscall.SIGKILL))})
				}
				if p.abort {
					mu.Lock()
					first := !aborted
					aborted = true
					mu.Unlock()
					if first {
						close(abort)
					}
				}
			case <-winch:
				r, c := termSize(o.term)
				broadcast(stepio.Frame{Type: stepio.Winsize, Payload: stepio.WinsizePayload(r, c)})
			}
		}
	}()

	waitTimer := time.AfterFunc(time.Hour, func() {
		mu.Lock()
		left := len(exits) < len(ranks)
		ended := make(map[int]bool, len(exits))
		for r, e := range exits {
			ended[r] = e.Code == 0 && e.Signal == 0
		}
		mu.Unlock()
		if !left {
			return
		}
		s.say(o.errOut, fmt.Sprintf("srun: First task exited %ds ago\n", o.wait))
		for _, line := range taskStatus("StepId="+g.ID(), ranks, ended) {
			s.say(o.errOut, "srun: "+line+"\n")
		}
		broadcast(stepio.Frame{Type: stepio.Signal, Task: stepio.AllTasks, Payload: stepio.SignalPayload(int(syscall.SIGKILL))})
	})
	waitTimer.Stop()
	defer waitTimer.Stop()

	// Output and exits, one reader per node.
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				f, err := stepio.ReadFrame(c.conn)
				if err != nil {
					// The node half-closes once its tasks have ended
					// and waits for srun's end before it closes its
					// own (noded's endConn): close at once, not when
					// every node is done.
					c.conn.Close()
					return
				}
				switch f.Type {
				case stepio.Stdout, stepio.Stderr:
					s.write(int(f.Task), f.Type == stepio.Stderr, f.Payload)
				case stepio.Error:
					s.say(o.errOut, fmt.Sprintf("srun: error: %s\n", f.Payload))
				case stepio.Notice:
					s.say(o.errOut, string(f.Payload))
					if f.Task == stepio.NoticeCancelled {
						mu.Lock()
						first := !stepAborted
						stepAborted, cancelled = true, true
						mu.Unlock()
						if first {
							s.say(o.errOut, fmt.Sprintf("srun: Job step aborted: Waiting up to %d seconds for job step to finish.\n", abortWait))
						}
					}
				case stepio.Exit:
					e, err := stepio.ParseExit(f.Payload)
					if err != nil {
						continue
					}
					s.flush(int(f.Task))
					mu.Lock()
					exits[int(f.Task)] = e
					down := tornDown
					bad := (e.Code != 0 || e.Signal != 0) && !down
					if bad && o.killBadExit && badExit == nil {
						cp := e
						badExit = &cp
					}
					startWait := firstExit && o.wait > 0
					firstExit = false
					mu.Unlock()
					if o.verbose.on(1) {
						o.verbose.say(1, fmt.Sprintf("launch/slurm: _task_finish: Received task exit notification for 1 task of StepId=%s (status=0x%04x).",
							g.ID(), waitStatus(e)))
						switch {
						case e.Code == 0 && e.Signal == 0:
							o.verbose.say(1, fmt.Sprintf("%s: task %d: Completed", c.node.Name, f.Task))
						case e.Signal != 0 && down:
							// Slurm reports a task of a cancelled step
							// killed by a signal only under -v.
							o.verbose.say(1, fmt.Sprintf("%s: task %d: %s", c.node.Name, f.Task, signalWord(e.Signal)))
						}
					}
					if startWait {
						// -W: the others get that long after the first
						// task's end, then srun kills them.
						waitTimer.Reset(time.Duration(o.wait) * time.Second)
					}
					s.say(o.errOut, exitMessage(c.node.Name, int(f.Task), e, down))
					if bad && o.killBadExit {
						s.say(o.errOut, fmt.Sprintf("srun: error: task %d exited with %s: terminating step %s (--kill-on-bad-exit)\n",
							f.Task, e, g.ID()))
						teardown()
					}
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		teardown()
		select {
		case <-done:
		case <-abort:
		}
	case <-abort:
	}
	mu.Lock()
	gaveUp := aborted
	mu.Unlock()
	if gaveUp {
		// Not waiting for the tasks: closing the connections has the
		// node daemons kill what is left, and ends the readers.
		for _, c := range conns {
			c.conn.Close()
		}
		<-done
	}

	res := stepResult{}
	mu.Lock()
	defer mu.Unlock()
	var lost []int
	for _, n := range g.Nodes {
		for _, r := range n.Ranks {
			e, ok := exits[r]
			switch {
			case !ok && aborted:
				// srun gave up on it after asking for its SIGKILL.
				e = api.ExitStatus{Signal: int(syscall.SIGKILL)}
			case !ok:
				lost = append(lost, r)
				e = api.ExitStatus{Code: 1}
			}
			if c := stepio.ExitCode(e); c > res.code {
				res.code, res.exit = c, e
			}
		}
	}
	if len(lost) > 0 {
		sort.Ints(lost)
		fmt.Fprintf(o.errOut, "srun: error: step %s: lost contact with tasks %s before they exited\n", g.ID(), intList(lost))
	}
	if badExit != nil {
		// The step failed because of this task; the others were
		// killed for it.
		res.exit, res.code = *badExit, stepio.ExitCode(*badExit)
	}
	res.cancelled = cancelled || badExit != nil
	return res, nil
}

// connectAll dials every node of the step at once and waits for each to
// start its tasks. With ca, each connection is TLS and the node must
// present a certificate of ca naming it: the grant goes to that node
// only, encrypted.
func connectAll(ctx context.Context, g *api.StepGrant, hello stepio.HelloMsg, ca *x509.CertPool) ([]*nodeConn, error) {
	hf, err := stepio.JSON(stepio.Hello, 0, hello)
	if err != nil {
		return nil, err
	}
	conns := make([]*nodeConn, len(g.Nodes))
	errs := make([]error, len(g.Nodes))
	var wg sync.WaitGroup
	for i, n := range g.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
			c, err := d.DialContext(ctx, "tcp", n.Addr)
			if err != nil {
				errs[i] = fmt.Errorf("connect to %s (%s): %w", n.Name, n.Addr, err)
				return
			}
			if c, err = quietWrites(c); err != nil {
				errs[i] = fmt.Errorf("connect to %s (%s): %w", n.Name, n.Addr, err)
				return
			}
			if ca != nil {
				tc := tls.Client(c, pki.NodeClient(ca, n.Name))
				hctx, cancel := context.WithTimeout(ctx, dialTimeout)
				err := tc.HandshakeContext(hctx)
				cancel()
				if err != nil {
					c.Close()
					errs[i] = fmt.Errorf("connect to %s (%s): TLS: %w", n.Name, n.Addr, err)
					return
				}
				c = tc
			}
			nc := &nodeConn{idx: i, node: n, conn: c, w: stepio.NewWriter(c)}
			conns[i] = nc
			if err := nc.w.Write(hf); err != nil {
				errs[i] = fmt.Errorf("%s: %w", n.Name, err)
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			f, err := stepio.ReadFrame(c)
			_ = c.SetReadDeadline(time.Time{})
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("%s: no answer to the step's start: %w", n.Name, err)
			case f.Type == stepio.Error:
				errs[i] = errors.New(string(f.Payload))
			case f.Type != stepio.Ready:
				errs[i] = fmt.Errorf("%s: unexpected %s frame", n.Name, f.Type)
			default:
				var r stepio.ReadyMsg
				_ = json.Unmarshal(f.Payload, &r)
				nc.pids = r.Pids
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range conns {
			if c != nil {
				c.conn.Close()
			}
		}
		return nil, err
	}
	return conns, nil
}

// forwardStdin sends src to the tasks until it ends. A pty step gets the
// bytes raw and no end-of-file (the terminal's ^D is a byte like others).
func forwardStdin(src io.Reader, target uint32, conns []*nodeConn, pty bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			f := stepio.Frame{Type: stepio.Stdin, Task: target, Payload: append([]byte(nil), buf[:n]...)}
			for _, c := range conns {
				_ = c.w.Write(f)
			}
		}
		if err != nil {
			if !pty {
				for _, c := range conns {
					_ = c.w.Write(stepio.Frame{Type: stepio.StdinEOF, Task: target})
				}
			}
			return
		}
	}
}

// perTaskRE finds the pattern letters that differ between tasks.
var perTaskRE = regexp.MustCompile(`%[0-9]*[tnN]`)

// perTask reports whether file pattern p names a file per task (or per
// node).
func perTask(p string) bool { return perTaskRE.MatchString(strings.ReplaceAll(p, "%%", "")) }

// waitStatus is a task's exit as a wait(2) status, as Slurm's -v
// prints it.
func waitStatus(e api.ExitStatus) int {
	if e.Signal != 0 {
		return e.Signal & 0x7f
	}
	return (e.Code & 0xff) << 8
}

// exitMessage is Slurm's line for a task that failed ("" for none).
func exitMessage(node string, task int, e api.ExitStatus, tornDown bool) string {
	switch {
	case e.Signal != 0 && !tornDown:
		return fmt.Sprintf("srun: error: %s: task %d: %s\n", node, task, signalWord(e.Signal))
	case e.Code != 0:
		return fmt.Sprintf("srun: error: %s: task %d: Exited with exit code %d\n", node, task, e.Code)
	}
	return ""
}

// signalWord names a signal as Slurm's messages do ("Killed").
func signalWord(sig int) string {
	switch syscall.Signal(sig) {
	case syscall.SIGKILL:
		return "Killed"
	case syscall.SIGTERM:
		return "Terminated"
	case syscall.SIGSEGV:
		return "Segmentation fault"
	case syscall.SIGABRT:
		return "Aborted"
	case syscall.SIGINT:
		return "Interrupt"
	}
	return fmt.Sprintf("Killed by signal %d", sig)
}

// intList prints ranks compactly: "0-3,7".
func intList(xs []int) string {
	var parts []string
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", xs[i], xs[j]))
		} else {
			parts = append(parts, fmt.Sprint(xs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// writeProcTable prints the step's process table as Slurm's srun does
// for --debugger-test (the MPIR_proctable a parallel debugger reads):
// one line per task, in task order, with its node, pid and program.
func writeProcTable(w io.Writer, conns []*nodeConn, ntasks int, exeOf func(int) string) {
	type entry struct {
		host string
		pid  int
	}
	table := make([]entry, ntasks)
	for _, c := range conns {
		for k, rank := range c.node.Ranks {
			if rank >= 0 && rank < ntasks && k < len(c.pids) {
				table[rank] = entry{host: c.node.Name, pid: c.pids[k]}
			}
		}
	}
	for t, e := range table {
		exe := ""
		if exeOf != nil {
			exe = exeOf(t)
		}
		fmt.Fprintf(w, "%s: task:%d, host:%s, pid:%d, executable:%s\n", prog, t, e.host, e.pid, exe)
	}
}
