// Package mungetest starts private munged daemons for tests: each with
// its own key, socket, pid, log and seed files in a directory of its own,
// run as the current user in the foreground, and stopped by its pid when
// the test ends. It never touches the system's munged.
package mungetest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// KeyLen is the length of the keys Start makes (mungekey's default,
// 1024 bits).
const KeyLen = 128

// Munged is a private munged started by Start.
type Munged struct {
	// Socket is the unix socket to pass to munge.Encode and
	// munge.Decode (and to the munge and unmunge tools as -S).
	Socket string
	// Dir holds the key, socket, pid, seed and log files.
	Dir string
	// KeyFile is the daemon's key (mode 0600); Key is its content.
	KeyFile string
	Key     []byte
	// PID is the daemon's process id.
	PID int

	cmd     *exec.Cmd
	logFile string
	exited  chan struct{} // closed once the daemon was waited for
	waitErr error

	stopOnce sync.Once
	stopErr  error
}

// Binary returns the path of munged, or "" when it is not installed
// (Debian package munge).
func Binary() string {
	if p, err := exec.LookPath("munged"); err == nil {
		return p
	}
	// /usr/sbin is not in every user's PATH.
	for _, p := range []string{"/usr/sbin/munged", "/usr/local/sbin/munged", "/sbin/munged"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// Tool returns the path of a MUNGE command-line tool ("munge",
// "unmunge"), or "" when it is not installed.
func Tool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

// Start starts a private munged with a fresh random key and stops it when
// the test ends. It skips the test, saying why, when munged is not
// installed.
func Start(tb testing.TB) *Munged {
	tb.Helper()
	key := make([]byte, KeyLen)
	if _, err := rand.Read(key); err != nil {
		tb.Fatalf("munge key: %v", err)
	}
	return StartWithKey(tb, key)
}

// StartWithKey is Start with the given key (32 to 1024 bytes), so that
// several daemons act as hosts that share one munge.key: a credential
// encoded by one decodes on the others.
func StartWithKey(tb testing.TB, key []byte) *Munged {
	tb.Helper()
	bin := Binary()
	if bin == "" {
		tb.Skip("munged is not installed (Debian/Ubuntu package munge): skipping the tests that need a private munged")
	}
	// A short directory of our own rather than tb.TempDir(): a unix
	// socket path must fit in 108 bytes, and test names make long paths.
	dir, err := os.MkdirTemp("", "munged-")
	if err != nil {
		tb.Fatalf("munged dir: %v", err)
	}
	// munged refuses directories that others may write to; 0755 (not
	// 0700) lets clients of other uids reach the socket.
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatalf("munged dir: %v", err)
	}
	m := &Munged{
		Dir:     dir,
		Socket:  filepath.Join(dir, "munge.socket"),
		KeyFile: filepath.Join(dir, "munge.key"),
		Key:     bytes.Clone(key),
		logFile: filepath.Join(dir, "munged.log"),
		exited:  make(chan struct{}),
	}
	if len(m.Socket) >= 108 {
		os.RemoveAll(dir)
		tb.Fatalf("munged socket path %q is too long for a unix socket; set TMPDIR to a shorter directory", m.Socket)
	}
	// Registered first, so that it runs last: after the daemon stopped.
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(m.KeyFile, key, 0o600); err != nil {
		tb.Fatalf("munge key: %v", err)
	}
	logf, err := os.OpenFile(m.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatalf("munged log: %v", err)
	}
	defer logf.Close()

	args := []string{
		"--foreground", // our child: its pid is ours to stop, and it logs to stderr
		"--socket=" + m.Socket,
		"--key-file=" + m.KeyFile,
		"--pid-file=" + filepath.Join(dir, "munged.pid"),
		"--seed-file=" + filepath.Join(dir, "munged.seed"),
		// No --force: munged runs as root without it, and it would turn
		// munged's checks of the files' permissions into warnings.
	}
	m.cmd = exec.Command(bin, args...)
	m.cmd.Dir = dir
	m.cmd.Stdout = logf
	m.cmd.Stderr = logf
	// Should the test binary die without its cleanups (a timeout panic,
	// a kill), the kernel stops the daemon.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := m.cmd.Start(); err != nil {
		tb.Fatalf("start munged: %v", err)
	}
	m.PID = m.cmd.Process.Pid
	go func() {
		m.waitErr = m.cmd.Wait()
		close(m.exited)
	}()
	tb.Cleanup(func() {
		if err := m.Stop(); err != nil {
			tb.Errorf("%v\n%s", err, m.Log())
		}
	})
	if err := m.waitReady(10 * time.Second); err != nil {
		tb.Fatalf("munged did not start: %v\nmunged log:\n%s", err, m.Log())
	}
	return m
}

// waitReady waits until the daemon accepts connections on its socket
// and has written its pid file (munged writes it just after it starts
// listening), which must name the process we started.
func (m *Munged) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-m.exited:
			return fmt.Errorf("munged exited: %v", m.waitErr)
		default:
		}
		err := m.probe()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", limit, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (m *Munged) probe() error {
	c, err := net.DialTimeout("unix", m.Socket, time.Second)
	if err != nil {
		return err
	}
	c.Close()
	b, err := os.ReadFile(filepath.Join(m.Dir, "munged.pid"))
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid != m.PID {
		return fmt.Errorf("pid file says %q, we started pid %d", strings.TrimSpace(string(b)), m.PID)
	}
	return nil
}

// Stop stops the daemon by its pid: SIGTERM, then SIGKILL after 5
// seconds. It is idempotent (the test's cleanup calls it too), and
// reports a daemon that died before it was told to stop.
func (m *Munged) Stop() error {
	m.stopOnce.Do(func() { m.stopErr = m.stop() })
	return m.stopErr
}

func (m *Munged) stop() error {
	select {
	case <-m.exited:
		return fmt.Errorf("munged (pid %d) exited before it was stopped: %v", m.PID, m.waitErr)
	default:
	}
	// Process.Signal, not kill(2) on the number: it never signals
	// another process that got the pid after ours was reaped.
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop munged (pid %d): %w", m.PID, err)
	}
	select {
	case <-m.exited:
		return nil
	case <-time.After(5 * time.Second):
		m.cmd.Process.Kill()
		<-m.exited
		return fmt.Errorf("munged (pid %d) ignored SIGTERM for 5s; killed", m.PID)
	}
}

// Log returns what the daemon logged so far.
func (m *Munged) Log() string {
	b, err := os.ReadFile(m.logFile)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(b)
}
