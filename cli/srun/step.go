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

// forwarded are the signals srun passes on to every task. Slurm's srun
// prints the step's status on a first Ctrl-C and kills it on a second
// within a second; Tide's forwards SIGINT like the others, which ends
// tasks that do not catch it.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP,
	syscall.SIGUSR1, syscall.SIGUSR2}

// stepOptions is what running one step needs besides the grant.
type stepOptions struct {
	label, unbuffered, killBadExit bool
	stdout, stderr, stdin          string
	cwd                            string
	in                             io.Reader
	out, errOut                    io.Writer
	// term is srun's terminal for --pty (nil otherwise).
	term *os.File
	// signals delivers the signals to forward (nil: none are caught).
	signals <-chan os.Signal
	// ca verifies the nodes' step listeners, reached over TLS (nil:
	// plain TCP, for a controller without TLS).
	ca *x509.CertPool
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
	hello := stepio.HelloMsg{Grant: sg, StdinMode: mode, StdinTask: stdinTask}
	if o.term != nil {
		hello.Rows, hello.Cols = termSize(o.term)
	}
	conns, err := connectAll(ctx, g, hello, o.ca)
	if err != nil {
		return stepResult{}, err
	}
	defer func() {
		for _, c := range conns {
			c.conn.Close()
		}
	}()

	s := newSink(g.NTasks, o.label && !g.Pty, o.unbuffered || g.Pty)
	nodeOf := map[int]int{}
	for i, n := range g.Nodes {
		for _, r := range n.Ranks {
			nodeOf[r] = i
		}
	}
	s.routeOutput(o.stdout, o.stderr, o.cwd, func(task int) patternVars {
		n := nodeOf[task]
		return patternVars{jobID: g.JobID, stepID: g.StepID, task: task, node: n, nodeName: g.Nodes[n].Name,
			user: g.User, name: g.JobName}
	}, o.out, o.errOut)
	defer s.close()

	var (
		mu        sync.Mutex
		exits     = map[int]api.ExitStatus{}
		tornDown  bool
		badExit   *api.ExitStatus
		cancelled bool
	)
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
	if mode != stepio.StdinNone {
		src := o.in
		if stdinFile != "" {
			f, err := os.Open(stdinFile)
			if err != nil {
				return stepResult{}, fmt.Errorf("Could not open stdin file %s: %v", stdinFile, err)
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
	go func() {
		for {
			select {
			case <-stopSig:
				return
			case sig := <-o.signals:
				if ss, ok := sig.(syscall.Signal); ok {
					mu.Lock()
					cancelled = true
					mu.Unlock()
					broadcast(stepio.Frame{Type: stepio.Signal, Task: stepio.AllTasks, Payload: stepio.SignalPayload(int(ss))})
				}
			case <-winch:
				r, c := termSize(o.term)
				broadcast(stepio.Frame{Type: stepio.Winsize, Payload: stepio.WinsizePayload(r, c)})
			}
		}
	}()

	// Output and exits, one reader per node.
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				f, err := stepio.ReadFrame(c.conn)
				if err != nil {
					return
				}
				switch f.Type {
				case stepio.Stdout, stepio.Stderr:
					s.write(int(f.Task), f.Type == stepio.Stderr, f.Payload)
				case stepio.Error:
					s.say(o.errOut, fmt.Sprintf("srun: error: %s\n", f.Payload))
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
					mu.Unlock()
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
		<-done
	}

	res := stepResult{}
	mu.Lock()
	defer mu.Unlock()
	var lost []int
	for _, n := range g.Nodes {
		for _, r := range n.Ranks {
			e, ok := exits[r]
			if !ok {
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
