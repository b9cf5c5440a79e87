package stepd

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The shared supervisor. A node that starts a job per second would pay
// a process start per job for a supervisor of its own (a Go runtime
// start is most of a trivial job's cost on the node), so by default one
// long-lived supervisor serves all of a node's jobs: tided connects to
// its socket, names a prepared job directory, and the connection stays
// open until the job's status.json is written. Everything else is what a
// per-job supervisor does, in the same files: the supervisor runs in a
// session of its own and outlives tided, stepd.pid names it (so a
// restarted tided reattaches exactly as before), and it exits after an
// idle period so that an upgraded binary takes over.
//
// Protocol, one line each way: "start 1 DIR\n" → "ok\n" once stepd.pid
// is written, or "err MESSAGE\n"; then "done\n" once status.json is.

// ServeProto is the protocol version tided sends.
const ServeProto = "1"

// ErrServing means another supervisor already serves the socket.
var ErrServing = errors.New("a supervisor already serves this socket")

// ServeSocket is the shared supervisor's socket in a state directory.
func ServeSocket(stateDir string) string { return filepath.Join(stateDir, "stepd.sock") }

// ServePIDFile names the running shared supervisor (its ProcIdentity),
// next to its socket, for operators and for whoever stops it.
func ServePIDFile(sock string) string { return filepath.Join(filepath.Dir(sock), "stepd-serve.pid") }

// server is the shared supervisor's state.
type server struct {
	log  *slog.Logger
	self ProcIdentity
	// pidFile holds self (ServePIDFile); no other supervisor replaces
	// it while this one answers on the socket.
	pidFile string
	// baseUmask is the umask the supervisor was started with: jobs that
	// do not set one get it. The process's own umask is 0, because
	// umask is per process and jobs start concurrently.
	baseUmask int

	mu     sync.Mutex
	active int       // connections being served
	last   time.Time // when active last dropped to zero
	wg     sync.WaitGroup
}

// Serve runs the shared supervisor on sock until it has been idle (no
// job running and no connection) for idle. It refuses to start when a
// live supervisor already answers on sock.
func Serve(sock string, idle time.Duration, log *slog.Logger) error {
	self, err := SelfIdentity()
	if err != nil {
		return err
	}
	if c, err := net.Dial("unix", sock); err == nil {
		c.Close()
		return ErrServing
	}
	// Nobody answers: a leftover socket file of a dead supervisor.
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	old := syscall.Umask(0o077) // the socket is created 0600
	ln, err := net.Listen("unix", sock)
	syscall.Umask(0)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", sock, err)
	}
	pidFile := ServePIDFile(sock)
	if err := WriteJSONAtomic(pidFile, self, 0o644); err != nil {
		ln.Close()
		return err
	}
	s := &server{log: log, self: self, pidFile: pidFile, baseUmask: old, last: time.Now()}
	log.Info("shared supervisor started", "socket", sock, "pid", self.PID)
	done := make(chan struct{})
	go s.idleWatch(ln.(*net.UnixListener), idle, done)
	for {
		c, err := ln.Accept()
		if err != nil {
			break // closed by idleWatch
		}
		s.mu.Lock()
		s.active++
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(c.(*net.UnixConn))
	}
	close(done)
	// Connections accepted before the close are served to the end.
	s.wg.Wait()
	if id, err := ReadIdentity(pidFile); err == nil && id == self {
		_ = os.Remove(pidFile)
	}
	log.Info("shared supervisor idle, exiting")
	return nil
}

// idleWatch closes the listener (and removes the socket, so the next
// tided starts a new supervisor) once nothing ran for idle.
func (s *server) idleWatch(ln *net.UnixListener, idle time.Duration, done <-chan struct{}) {
	t := time.NewTicker(min(idle/4+time.Millisecond, time.Second))
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		s.mu.Lock()
		quiet := s.active == 0 && time.Since(s.last) >= idle
		if quiet {
			// Unlink first: a tided that finds no socket starts a new
			// supervisor instead of connecting to one on its way out.
			ln.SetUnlinkOnClose(false)
			_ = os.Remove(ln.Addr().String())
			ln.Close()
		}
		s.mu.Unlock()
		if quiet {
			return
		}
	}
}

func (s *server) serveConn(c *net.UnixConn) {
	defer func() {
		c.Close()
		s.mu.Lock()
		if s.active--; s.active == 0 {
			s.last = time.Now()
		}
		s.mu.Unlock()
		s.wg.Done()
	}()
	// Only tided's user may hand jobs to the supervisor (which may run
	// them as anyone): the socket is 0600, and the peer is checked.
	if err := checkPeer(c); err != nil {
		s.log.Warn("refused connection", "err", err)
		fmt.Fprintf(c, "err %v\n", err)
		return
	}
	line, err := bufio.NewReaderSize(c, 4096).ReadString('\n')
	if err != nil {
		return
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "start" || f[1] != ServeProto || !filepath.IsAbs(f[2]) {
		fmt.Fprintf(c, "err bad request %q (this supervisor speaks start %s DIR)\n", strings.TrimSpace(line), ServeProto)
		return
	}
	dir := f[2]
	if err := s.nameSelf(dir); err != nil {
		fmt.Fprintf(c, "err %v\n", err)
		return
	}
	if _, err := c.Write([]byte("ok\n")); err != nil {
		// tided went away between its request and our answer; the job
		// runs all the same (stepd.pid names us, so it reattaches).
		s.log.Warn("could not answer tided", "err", err)
	}
	st := runPlan(dir, s.log, s.baseUmask)
	if err := WriteJSONAtomic(filepath.Join(dir, FileStatus), st, 0o644); err != nil {
		s.log.Error("record job status", "dir", dir, "err", err)
		return // no "done": tided finds the status missing and says so
	}
	// tided may have restarted meanwhile; then it polls for status.json.
	_, _ = c.Write([]byte("done\n"))
}

// nameSelf records in job directory dir that this supervisor runs the
// job (stepd.pid). The record is the same for every job, so it is a
// hard link to the supervisor's own pid file where one can be made (one
// system call instead of writing a file); a link is atomic like the
// rename it saves.
func (s *server) nameSelf(dir string) error {
	p := filepath.Join(dir, FileStepdPID)
	if s.pidFile != "" && os.Link(s.pidFile, p) == nil {
		return nil
	}
	return WriteJSONAtomic(p, s.self, 0o644)
}

// checkPeer accepts only connections from the supervisor's own user.
func checkPeer(c *net.UnixConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("peer credentials: %w", cerr)
	}
	if cred.Uid != uint32(os.Geteuid()) {
		return fmt.Errorf("uid %d may not start jobs", cred.Uid)
	}
	return nil
}
