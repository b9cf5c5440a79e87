package steps

// srun --pty (issue 7): one task in a pseudo-terminal that tided
// allocates, its session leader with the terminal as its controlling
// tty, raw bytes both ways over the step connection.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tide-hpc/tide/internal/stepio"
)

// openPty allocates a pseudo-terminal: the master (kept by tided) and
// the slave's path.
func openPty() (*os.File, string, error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", fmt.Errorf("open /dev/ptmx: %w", err)
	}
	master := os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, "", fmt.Errorf("unlock pty: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, "", fmt.Errorf("pty number: %w", err)
	}
	return master, "/dev/pts/" + strconv.Itoa(n), nil
}

// setWinsize gives the terminal behind master a size (0 keeps it).
func setWinsize(master *os.File, rows, cols uint16) {
	if rows == 0 || cols == 0 {
		return
	}
	_ = unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
}

// startPty starts the step's one task in a new pseudo-terminal.
func (r *stepRun) startPty(hello *stepio.HelloMsg, cred *syscall.Credential) error {
	g := r.g
	sn := g.Nodes[r.node]
	if len(sn.Ranks) != 1 {
		return errors.New("--pty runs exactly one task")
	}
	master, slavePath, err := openPty()
	if err != nil {
		return err
	}
	setWinsize(master, hello.Rows, hello.Cols)
	slave, err := os.OpenFile(slavePath, os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return fmt.Errorf("open %s: %w", slavePath, err)
	}
	defer slave.Close()
	if cred != nil {
		if err := slave.Chown(int(cred.Uid), int(cred.Gid)); err != nil {
			master.Close()
			return fmt.Errorf("chown %s: %w", slavePath, err)
		}
	}
	env, lims := takeRlimits(r.taskEnv(0))
	base, err := taskCmd(g.Argv, env, g.Cwd)
	if err != nil {
		master.Close()
		return err
	}
	base.Stdin, base.Stdout, base.Stderr = slave, slave, slave
	cmd := viaTaskPIDShell(base)
	// Setsid makes the task a session (and process group) leader, so
	// signals to its group reach its job; fd 0 becomes its terminal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Credential: cred}
	// The gate holds the task until it is in its cgroup (cgroupplan.go).
	var gate *os.File
	if r.fence != nil || len(lims) > 0 {
		gr, gw, err := os.Pipe()
		if err != nil {
			master.Close()
			return err
		}
		defer gr.Close()
		gateCmd(cmd, gr)
		gate = gw
	}
	err = cmd.Start()
	if err == nil {
		if lerr := applyRlimits(cmd.Process.Pid, lims); lerr != nil {
			r.log.Warn("resource limits not propagated", "task", sn.Ranks[0], "err", lerr)
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
		master.Close()
		return fmt.Errorf("execve %s: %w", g.Argv[0], err)
	}
	t := &stepTask{rank: sn.Ranks[0], cmd: cmd}
	r.mu.Lock()
	r.pty = master
	r.tasks = []*stepTask{t}
	r.left = 1
	r.mu.Unlock()
	t.outputs.Add(1)
	r.pumps = append(r.pumps, func() { r.pumpPty(master, uint32(t.rank), &t.outputs) })
	return nil
}

// pumpPty forwards the terminal's output; reading the master fails with
// EIO once no process holds the slave open any more.
func (r *stepRun) pumpPty(master *os.File, task uint32, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := master.Read(buf)
		if n > 0 {
			_ = r.w.Write(stepio.Frame{Type: stepio.Stdout, Task: task, Payload: append([]byte(nil), buf[:n]...)})
		}
		if err != nil {
			return
		}
	}
}
