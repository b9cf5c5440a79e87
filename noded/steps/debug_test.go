package steps

import (
	"encoding/json"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepio"
)

// dialStepHello is dialStep with a hello of the caller's.
func dialStepHello(t *testing.T, s *Server, hello stepio.HelloMsg) (net.Conn, stepio.Frame) {
	t.Helper()
	c, err := net.Dial("tcp", s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	hf, _ := stepio.JSON(stepio.Hello, 0, hello)
	if err := stepio.WriteFrame(c, hf); err != nil {
		t.Fatal(err)
	}
	f, err := stepio.ReadFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	return c, f
}

// stepFrames reads c's frames until it closes: the tasks' stderr by
// rank, the notices and the exits.
func stepFrames(t *testing.T, c net.Conn) (stderr map[uint32]string, notices string, exits map[uint32]api.ExitStatus) {
	t.Helper()
	stderr, exits = map[uint32]string{}, map[uint32]api.ExitStatus{}
	_ = c.SetReadDeadline(time.Now().Add(waitLimit))
	for {
		f, err := stepio.ReadFrame(c)
		if err != nil {
			return
		}
		switch f.Type {
		case stepio.Stderr:
			stderr[f.Task] += string(f.Payload)
		case stepio.Notice:
			notices += string(f.Payload)
		case stepio.Exit:
			exits[f.Task], _ = stepio.ParseExit(f.Payload)
		}
	}
}

// TestStepTimeLimitNotice: at the job's end the node tells srun, as
// slurmstepd does, that the step was cancelled for its time limit, and
// the tasks get SIGTERM.
func TestStepTimeLimitNotice(t *testing.T) {
	s := testStepServer(t)
	sg := stepGrant(t, s.advertised, func(g *api.StepGrant) { g.JobEnd = time.Now().Add(1500 * time.Millisecond) },
		"/bin/sh", "-c", "exec sleep 60")
	c, f := dialStep(t, s, sg, stepio.StdinNone)
	if f.Type != stepio.Ready {
		t.Fatalf("first frame %s %q", f.Type, f.Payload)
	}
	_, notices, exits := stepFrames(t, c)
	if !strings.HasPrefix(notices, "slurmstepd: error: *** STEP 42.3 ON n1 CANCELLED AT ") || !strings.HasSuffix(notices, " DUE TO TIME LIMIT ***\n") {
		t.Errorf("notice %q", notices)
	}
	if exits[0].Signal != int(syscall.SIGTERM) || exits[1].Signal != int(syscall.SIGTERM) {
		t.Errorf("exits %v, want SIGTERM", exits)
	}
}

// TestSlurmdDebugLines: --slurmd-debug's level decides which of
// slurmstepd's lines the node's first task gets on its stderr.
func TestSlurmdDebugLines(t *testing.T) {
	tests := []struct {
		level      string
		want, none []string
	}{
		{level: "", none: []string{"slurmstepd:"}},
		{level: "info", none: []string{"slurmstepd:"}},
		{level: "verbose", want: []string{"slurmstepd: debug levels are stderr='verbose', logfile='info', syslog='quiet'\n", "slurmstepd: starting 2 tasks\n"},
			none: []string{"debug:"}},
		{level: "debug", want: []string{"debug levels are stderr='debug'", "slurmstepd: debug:  task 0 (local 0) started as pid ", "slurmstepd: debug:  task 1 (local 1) started as pid "}},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			s := testStepServer(t)
			sg := stepGrant(t, s.advertised, nil, "/bin/true")
			c, f := dialStepHello(t, s, stepio.HelloMsg{Grant: sg, StdinMode: stepio.StdinNone, Debug: tt.level})
			if f.Type != stepio.Ready {
				t.Fatalf("first frame %s %q", f.Type, f.Payload)
			}
			stderr, _, _ := stepFrames(t, c)
			for _, w := range tt.want {
				if !strings.Contains(stderr[0], w) {
					t.Errorf("task 0's stderr lacks %q:\n%s", w, stderr[0])
				}
			}
			for _, n := range tt.none {
				if strings.Contains(stderr[0], n) {
					t.Errorf("task 0's stderr has %q:\n%s", n, stderr[0])
				}
			}
			if stderr[1] != "" {
				t.Errorf("task 1's stderr %q: the lines go to the node's first task only", stderr[1])
			}
		})
	}
}

// TestStepHold: tasks started held (--debugger-test) do not run their
// program until the step ends; their pids are in the Ready frame.
func TestStepHold(t *testing.T) {
	s := testStepServer(t)
	dir := t.TempDir()
	sg := stepGrant(t, s.advertised, func(g *api.StepGrant) { g.Cwd = dir }, "/bin/sh", "-c", "touch ran.$SLURM_PROCID")
	c, f := dialStepHello(t, s, stepio.HelloMsg{Grant: sg, StdinMode: stepio.StdinNone, Hold: true})
	if f.Type != stepio.Ready {
		t.Fatalf("first frame %s %q", f.Type, f.Payload)
	}
	var ready stepio.ReadyMsg
	if err := json.Unmarshal(f.Payload, &ready); err != nil || len(ready.Pids) != 2 {
		t.Fatalf("ready %q: %v", f.Payload, err)
	}
	time.Sleep(300 * time.Millisecond)
	for _, pid := range ready.Pids {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("held task %d: %v", pid, err)
		}
	}
	if m, _ := os.ReadDir(dir); len(m) != 0 {
		t.Fatalf("a held task ran: %v", m)
	}
	if s.Signal(api.JobRef{JobID: 42}, []uint32{3}, syscall.SIGKILL) == 0 {
		t.Fatal("the cancel reached no step")
	}
	_, _, exits := stepFrames(t, c)
	if len(exits) != 2 {
		t.Fatalf("exits %v", exits)
	}
	if m, _ := os.ReadDir(dir); len(m) != 0 {
		t.Fatalf("a held task ran: %v", m)
	}
}
