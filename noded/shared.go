package noded

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/noded/stepd"
)

// sharedStepd is tided's side of the shared supervisor (see
// noded/stepd/serve.go): it connects to the supervisor's socket in the
// state directory, starting the supervisor when nobody answers there.
type sharedStepd struct {
	idle time.Duration // --idle of the supervisors tided starts (0 = default)
	mu   sync.Mutex    // one start at a time
}

// superviseShared hands a prepared job directory to the shared
// supervisor. The returned wait blocks until the supervisor has written
// the job's status.json (or went away).
func (d *Daemon) superviseShared(dir string) (wait func(), err error) {
	for attempt := 0; ; attempt++ {
		c, err := d.dialStepd()
		if err != nil {
			return nil, err
		}
		wait, err := startShared(c, dir)
		if err == nil {
			return wait, nil
		}
		// A supervisor that closes without an answer was exiting (idle)
		// as we connected; unless it recorded the job, start another.
		if errors.Is(err, errNoAnswer) && attempt < 2 && !exists(filepath.Join(dir, fileStepdPID)) {
			d.log.Debug("shared supervisor went away, retrying", "err", err)
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
func (d *Daemon) dialStepd() (net.Conn, error) {
	sock := stepd.ServeSocket(d.cfg.StateDir)
	if c, err := net.Dial("unix", sock); err == nil {
		return c, nil
	}
	d.stepd.mu.Lock()
	defer d.stepd.mu.Unlock()
	if c, err := net.Dial("unix", sock); err == nil {
		return c, nil // another launch started it meanwhile
	}
	exited, err := d.spawnStepd(sock)
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
			return nil, fmt.Errorf("shared supervisor exited at start (%v); see %s", werr, filepath.Join(d.cfg.StateDir, fileSharedLog))
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("shared supervisor did not come up on %s: %w", sock, err)
		}
		time.Sleep(delay)
	}
}

// fileSharedLog is the shared supervisor's log in the state directory.
const fileSharedLog = "stepd.log"

// spawnStepd starts a shared supervisor in a session of its own (so it
// outlives tided) and reaps it when it exits.
func (d *Daemon) spawnStepd(sock string) (<-chan error, error) {
	logf, err := os.OpenFile(filepath.Join(d.cfg.StateDir, fileSharedLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := []string{"stepd-serve", "--socket", sock}
	if d.stepd.idle > 0 {
		args = append(args, "--idle", d.stepd.idle.String())
	}
	cmd := exec.Command(d.exe, args...)
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
	d.log.Info("started shared supervisor", "pid", cmd.Process.Pid, "socket", sock)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return exited, nil
}
