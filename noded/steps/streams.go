package steps

// The byte streams between srun and a step's tasks: stdin queued to the
// tasks, their output framed to srun, srun's control frames, and the
// connection's orderly end.

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/internal/stepio"
)

// closePumps runs the output pumps of a start that failed, so that their
// pipes are drained and closed.
func (r *stepRun) closePumps() {
	for _, p := range r.pumps {
		go p()
	}
	r.pumps = nil
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
