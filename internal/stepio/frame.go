package stepio

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/tide-hpc/tide/ctld/api"
)

// Type is a frame's kind.
type Type byte

// Frame types. srun sends Hello, Stdin, StdinEOF, Signal and Winsize; the
// node sends Ready, Stdout, Stderr, Exit, Error and Notice.
const (
	Hello    Type = 1
	Ready    Type = 2
	Stdout   Type = 3
	Stderr   Type = 4
	Stdin    Type = 5
	StdinEOF Type = 6
	Signal   Type = 7
	Exit     Type = 8
	Error    Type = 9
	Winsize  Type = 10
	// Notice is a message of the node daemon's own for srun's standard
	// error, printed as it is (Slurm's "slurmstepd: ..." lines); its
	// Task says what it is about (NoticeText, NoticeCancelled).
	Notice Type = 11
)

// Notice kinds, in a Notice frame's Task.
const (
	// NoticeText is a plain message.
	NoticeText uint32 = 0
	// NoticeCancelled says that the step was cancelled (scancel J.S):
	// its tasks are being killed.
	NoticeCancelled uint32 = 1
)

func (t Type) String() string {
	names := map[Type]string{Hello: "hello", Ready: "ready", Stdout: "stdout", Stderr: "stderr", Stdin: "stdin",
		StdinEOF: "stdin-eof", Signal: "signal", Exit: "exit", Error: "error", Winsize: "winsize",
		Notice: "notice"}
	if n, ok := names[t]; ok {
		return n
	}
	return fmt.Sprintf("type(%d)", byte(t))
}

// AllTasks as a frame's task sends stdin or a signal to every task the
// node runs.
const AllTasks = ^uint32(0)

// MaxPayload bounds one frame's payload; output is sent in chunks below it.
const MaxPayload = 1 << 20

// ErrTooLarge: a frame announced a payload above MaxPayload.
var ErrTooLarge = errors.New("step frame too large")

// Frame is one message of the step protocol.
type Frame struct {
	Type    Type
	Task    uint32
	Payload []byte
}

const headerLen = 9

// WriteFrame writes f to w in one Write call, so that frames written by
// concurrent goroutines through a Writer never interleave.
func WriteFrame(w io.Writer, f Frame) error {
	if len(f.Payload) > MaxPayload {
		return ErrTooLarge
	}
	buf := make([]byte, headerLen+len(f.Payload))
	buf[0] = byte(f.Type)
	binary.BigEndian.PutUint32(buf[1:5], f.Task)
	binary.BigEndian.PutUint32(buf[5:9], uint32(len(f.Payload)))
	copy(buf[headerLen:], f.Payload)
	_, err := w.Write(buf)
	return err
}

// ReadFrame reads one frame. A clean end of stream before a frame is
// io.EOF; one inside a frame is io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader) (Frame, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(h[5:9])
	if n > MaxPayload {
		return Frame{}, fmt.Errorf("%w: %d bytes", ErrTooLarge, n)
	}
	f := Frame{Type: Type(h[0]), Task: binary.BigEndian.Uint32(h[1:5])}
	if n > 0 {
		f.Payload = make([]byte, n)
		if _, err := io.ReadFull(r, f.Payload); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, err
		}
	}
	return f, nil
}

// Writer serialises frames from several goroutines onto one stream.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write sends one frame.
func (w *Writer) Write(f Frame) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return WriteFrame(w.w, f)
}

// Stdin modes of a HelloMsg.
const (
	StdinAll  = "all"
	StdinNone = "none"
	StdinTask = "task"
)

// HelloMsg is the payload of the Hello frame.
type HelloMsg struct {
	Grant api.SignedGrant `json:"grant"`
	// StdinMode says which tasks read srun's stdin: all, none, or the
	// one task StdinTask (a global rank). The others get /dev/null.
	StdinMode string `json:"stdin_mode"`
	StdinTask int    `json:"stdin_task,omitempty"`
	// Rows and Cols are the terminal's size for a pty step.
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	// Debug is srun --slurmd-debug, a level name of DebugLevels: from
	// verbose up the node reports the step's launch on the standard
	// error of its first task, as slurmstepd does.
	Debug string `json:"debug,omitempty"`
	// Hold (srun --debugger-test) starts the tasks held before they
	// exec, as under a parallel debugger, and keeps them so until the
	// step ends: srun prints the process table (MPIR) and waits.
	Hold bool `json:"hold,omitempty"`
}

// DebugLevels are Slurm's log level names, in order; a level's number
// is its index.
var DebugLevels = []string{"quiet", "fatal", "error", "info", "verbose", "debug", "debug2", "debug3", "debug4", "debug5"}

// DebugLevelName reads a level as srun --slurmd-debug takes it: a name
// of DebugLevels (any case) or its number. ok is false for anything
// else.
func DebugLevelName(v string) (string, bool) {
	v = strings.ToLower(strings.TrimSpace(v))
	for i, l := range DebugLevels {
		if v == l || v == strconv.Itoa(i) {
			return l, true
		}
	}
	return "", false
}

// DebugLevel is level name's number, 0 (quiet) for an unknown one.
func DebugLevel(name string) int {
	for i, l := range DebugLevels {
		if l == name {
			return i
		}
	}
	return 0
}

// ReadyMsg is the payload of the Ready frame.
type ReadyMsg struct {
	Node string `json:"node"`
	Pids []int  `json:"pids"`
}

// JSON encodes v as a frame payload.
func JSON(t Type, task uint32, v any) (Frame, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Frame{}, err
	}
	return Frame{Type: t, Task: task, Payload: b}, nil
}

// ExitPayload encodes a task's exit: its code and the signal that killed
// it (0 if none).
func ExitPayload(e api.ExitStatus) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b[0:4], uint32(int32(e.Code)))
	binary.BigEndian.PutUint32(b[4:8], uint32(int32(e.Signal)))
	return b
}

// ParseExit decodes an Exit payload.
func ParseExit(p []byte) (api.ExitStatus, error) {
	if len(p) != 8 {
		return api.ExitStatus{}, fmt.Errorf("exit frame of %d bytes, want 8", len(p))
	}
	return api.ExitStatus{Code: int(int32(binary.BigEndian.Uint32(p[0:4]))),
		Signal: int(int32(binary.BigEndian.Uint32(p[4:8])))}, nil
}

// SignalPayload encodes a signal number.
func SignalPayload(sig int) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, uint32(sig))
	return b
}

// ParseSignal decodes a Signal payload.
func ParseSignal(p []byte) (int, error) {
	if len(p) != 4 {
		return 0, fmt.Errorf("signal frame of %d bytes, want 4", len(p))
	}
	return int(binary.BigEndian.Uint32(p)), nil
}

// WinsizePayload encodes a terminal size.
func WinsizePayload(rows, cols uint16) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint16(b[0:2], rows)
	binary.BigEndian.PutUint16(b[2:4], cols)
	return b
}

// ParseWinsize decodes a Winsize payload.
func ParseWinsize(p []byte) (rows, cols uint16, err error) {
	if len(p) != 4 {
		return 0, 0, fmt.Errorf("winsize frame of %d bytes, want 4", len(p))
	}
	return binary.BigEndian.Uint16(p[0:2]), binary.BigEndian.Uint16(p[2:4]), nil
}

// ExitCode is the code srun exits with for a task's exit: the code, or
// 128+signal for a task killed by a signal.
func ExitCode(e api.ExitStatus) int {
	if e.Signal != 0 {
		return 128 + e.Signal
	}
	return e.Code
}
