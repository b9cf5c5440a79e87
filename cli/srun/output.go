package srun

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/tide-hpc/tide/internal/stepio"
)

// sink writes the tasks' output: to srun's own stdout and stderr, or to
// files named by -o/-e patterns. Unless unbuffered, output is cut into
// whole lines so that lines of different tasks never interleave
// mid-line; with label every line starts with its task id ("3: "),
// padded to the width of the highest id as Slurm pads it.
type sink struct {
	mu         sync.Mutex
	label      bool
	unbuffered bool
	width      int
	// out and errw return where a task's stdout and stderr go (nil
	// discards).
	out, errw func(task int) io.Writer
	partial   map[streamKey][]byte
	files     map[string]*os.File
	// appendFiles opens output files for appending
	// (--open-mode=append), not truncating them.
	appendFiles bool
}

type streamKey struct {
	task   int
	stderr bool
}

func newSink(ntasks int, label, unbuffered bool) *sink {
	return &sink{label: label, unbuffered: unbuffered, width: len(strconv.Itoa(max(ntasks-1, 0))),
		partial: map[streamKey][]byte{}, files: map[string]*os.File{}}
}

func (s *sink) prefix(task int) string {
	if !s.label {
		return ""
	}
	return fmt.Sprintf("%*d: ", s.width, task)
}

// write takes a chunk of a task's output.
func (s *sink) write(task int, stderr bool, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.dest(task, stderr)
	if w == nil {
		return
	}
	if s.unbuffered && !s.label {
		_, _ = w.Write(data)
		return
	}
	k := streamKey{task, stderr}
	buf := append(s.partial[k], data...)
	cut := bytes.LastIndexByte(buf, '\n')
	if cut < 0 {
		s.partial[k] = buf
		return
	}
	whole, rest := buf[:cut+1], buf[cut+1:]
	_, _ = w.Write(s.labelLines(task, whole))
	s.partial[k] = append([]byte(nil), rest...)
}

// say writes one of srun's own messages to w, between the tasks' lines.
func (s *sink) say(w io.Writer, msg string) {
	if msg == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = io.WriteString(w, msg)
}

// flush writes what is left of a task's last line (a task's exit).
func (s *sink) flush(task int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, stderr := range []bool{false, true} {
		k := streamKey{task, stderr}
		buf := s.partial[k]
		delete(s.partial, k)
		if len(buf) == 0 {
			continue
		}
		if w := s.dest(task, stderr); w != nil {
			if s.label {
				buf = append(buf, '\n')
			}
			_, _ = w.Write(s.labelLines(task, buf))
		}
	}
}

// labelLines prefixes every line of whole (which ends in a newline,
// except for a flushed partial line) with the task's label.
func (s *sink) labelLines(task int, whole []byte) []byte {
	if !s.label {
		return whole
	}
	p := []byte(s.prefix(task))
	var b bytes.Buffer
	for len(whole) > 0 {
		i := bytes.IndexByte(whole, '\n')
		line := whole
		if i >= 0 {
			line, whole = whole[:i+1], whole[i+1:]
		} else {
			whole = nil
		}
		b.Write(p)
		b.Write(line)
	}
	return b.Bytes()
}

func (s *sink) dest(task int, stderr bool) io.Writer {
	if stderr {
		return s.errw(task)
	}
	return s.out(task)
}

// close closes the output files.
func (s *sink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		f.Close()
	}
}

// file opens (once) the output file at path, truncating it.
func (s *sink) file(path string) io.Writer {
	if f, ok := s.files[path]; ok {
		if f == nil {
			return nil
		}
		return f
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if s.appendFiles {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "srun: error: Could not open output file %s: %v\n", path, err)
		s.files[path] = nil
		return nil
	}
	s.files[path] = f
	return f
}

// patternVars are what -o/-e/-i patterns may name.
type patternVars struct {
	jobID    uint64
	stepID   uint32
	task     int
	node     int
	nodeName string
	user     string
	name     string
}

// expandPattern expands srun's filename patterns: %t task id, %n node
// id within the step, %N node name, %j job id, %J job.step, %s step id,
// %u user, %x job name, %% a percent sign. A number after % zero-pads.
// Unknown letters are kept as written.
func expandPattern(p string, v patternVars) string {
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' || i+1 >= len(p) {
			b.WriteByte(p[i])
			continue
		}
		j := i + 1
		for j < len(p) && p[j] >= '0' && p[j] <= '9' {
			j++
		}
		if j >= len(p) {
			b.WriteString(p[i:])
			break
		}
		width, _ := strconv.Atoi(p[i+1 : j])
		num := func(n uint64) string { return fmt.Sprintf("%0*d", width, n) }
		switch p[j] {
		case 't':
			b.WriteString(num(uint64(v.task)))
		case 'n':
			b.WriteString(num(uint64(v.node)))
		case 'N':
			b.WriteString(v.nodeName)
		case 'j':
			b.WriteString(num(v.jobID))
		case 'J':
			b.WriteString(num(v.jobID) + "." + strconv.FormatUint(uint64(v.stepID), 10))
		case 's':
			b.WriteString(num(uint64(v.stepID)))
		case 'u':
			b.WriteString(v.user)
		case 'x':
			b.WriteString(v.name)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteString(p[i : j+1])
		}
		i = j
	}
	return b.String()
}

// routeOutput points the sink's streams at the terminal or files, after
// -o and -e: "" is srun's own stream, "none" discards, a task number
// keeps that task's output only, anything else is a file pattern
// (relative to cwd). Without -e, stderr follows -o.
func (s *sink) routeOutput(stdout, stderr, cwd string, vars func(task int) patternVars, out, errw io.Writer) {
	mk := func(spec string, own io.Writer) func(int) io.Writer {
		switch {
		case spec == "" || strings.EqualFold(spec, "all"):
			return func(int) io.Writer { return own }
		case strings.EqualFold(spec, "none"):
			return func(int) io.Writer { return nil }
		}
		if n, err := strconv.Atoi(spec); err == nil {
			return func(task int) io.Writer {
				if task == n {
					return own
				}
				return nil
			}
		}
		return func(task int) io.Writer {
			p := expandPattern(spec, vars(task))
			if !filepath.IsAbs(p) {
				p = filepath.Join(cwd, p)
			}
			return s.file(p)
		}
	}
	s.out = mk(stdout, out)
	if stderr == "" {
		stderr = stdout
	}
	s.errw = mk(stderr, errw)
}

// stdinRoute turns -i into the hello's stdin mode: all tasks by default
// (Slurm's), none, one task, or a file sent to all tasks.
func stdinRoute(spec string) (mode string, task int, file string) {
	switch {
	case spec == "" || strings.EqualFold(spec, "all"):
		return stepio.StdinAll, 0, ""
	case strings.EqualFold(spec, "none"):
		return stepio.StdinNone, 0, ""
	}
	if n, err := strconv.Atoi(spec); err == nil && n >= 0 {
		return stepio.StdinTask, n, ""
	}
	return stepio.StdinAll, 0, spec
}
