package srun

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepcred"
	"github.com/tide-hpc/tide/internal/stepio"
)

// fakeNode plays a node daemon for one connection: it answers the
// hello, then runs script with the connection.
type fakeNode struct {
	ln     net.Listener
	script func(n *fakeNode, c net.Conn, w *stepio.Writer, hello stepio.HelloMsg)
	mu     sync.Mutex
	got    []stepio.Frame
}

// newFakeNode starts a fake node on a free port. Its script gets the
// node itself: a closure over the caller's variable
// would read it while the caller assigns it (a data race).
func newFakeNode(t *testing.T, script func(n *fakeNode, c net.Conn, w *stepio.Writer, hello stepio.HelloMsg)) *fakeNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &fakeNode{ln: ln, script: script}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		f, err := stepio.ReadFrame(c)
		if err != nil || f.Type != stepio.Hello {
			return
		}
		var hello stepio.HelloMsg
		_ = jsonUnmarshal(f.Payload, &hello)
		w := stepio.NewWriter(c)
		rf, _ := stepio.JSON(stepio.Ready, 0, stepio.ReadyMsg{})
		_ = w.Write(rf)
		n.script(n, c, w, hello)
	}()
	return n
}

// record reads srun's frames until want returns true or the connection ends.
func (n *fakeNode) record(c net.Conn, want func(stepio.Frame) bool) {
	for {
		f, err := stepio.ReadFrame(c)
		if err != nil {
			return
		}
		n.mu.Lock()
		n.got = append(n.got, f)
		n.mu.Unlock()
		if want(f) {
			return
		}
	}
}

func exitFrame(task uint32, e api.ExitStatus) stepio.Frame {
	return stepio.Frame{Type: stepio.Exit, Task: task, Payload: stepio.ExitPayload(e)}
}

func out(task uint32, s string) stepio.Frame {
	return stepio.Frame{Type: stepio.Stdout, Task: task, Payload: []byte(s)}
}

func grantFor(t *testing.T, nodes ...*fakeNode) api.SignedGrant {
	t.Helper()
	g := &api.StepGrant{JobID: 5, StepID: 0, JobName: "j", NTasks: len(nodes)}
	for i, n := range nodes {
		g.Nodes = append(g.Nodes, api.StepNode{Name: "n" + string(rune('1'+i)), Addr: n.ln.Addr().String(), Ranks: []int{i}})
	}
	// srun never checks the credential; any controller key will do.
	sg, err := stepcred.NewSigner(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))).Sign(g)
	if err != nil {
		t.Fatal(err)
	}
	return sg
}

func TestRunStep(t *testing.T) {
	tests := []struct {
		name          string
		kill          bool
		scripts       []func(n *fakeNode, c net.Conn, w *stepio.Writer)
		wantCode      int
		wantCancelled bool
		wantOut       string
		wantErr       string
	}{
		{name: "highest exit code wins, output labelled", scripts: []func(*fakeNode, net.Conn, *stepio.Writer){
			func(_ *fakeNode, _ net.Conn, w *stepio.Writer) {
				w.Write(out(0, "a\n"))
				w.Write(exitFrame(0, api.ExitStatus{}))
			},
			func(_ *fakeNode, _ net.Conn, w *stepio.Writer) {
				w.Write(out(1, "b\n"))
				w.Write(exitFrame(1, api.ExitStatus{Code: 3}))
			},
		}, wantCode: 3, wantOut: "0: a\n1: b\n", wantErr: "n2: task 1: Exited with exit code 3"},
		{name: "a signal is 128+n", scripts: []func(*fakeNode, net.Conn, *stepio.Writer){
			func(_ *fakeNode, _ net.Conn, w *stepio.Writer) { w.Write(exitFrame(0, api.ExitStatus{Signal: 9})) },
		}, wantCode: 137, wantErr: "n1: task 0: Killed"},
		{name: "a node that goes away loses its tasks", scripts: []func(*fakeNode, net.Conn, *stepio.Writer){
			func(_ *fakeNode, _ net.Conn, w *stepio.Writer) { w.Write(exitFrame(0, api.ExitStatus{})) },
			func(_ *fakeNode, _ net.Conn, _ *stepio.Writer) {},
		}, wantCode: 1, wantErr: "lost contact with tasks 1"},
		{name: "kill-on-bad-exit terminates the others", kill: true, scripts: []func(*fakeNode, net.Conn, *stepio.Writer){
			func(_ *fakeNode, _ net.Conn, w *stepio.Writer) { w.Write(exitFrame(0, api.ExitStatus{Code: 5})) },
			func(n *fakeNode, c net.Conn, w *stepio.Writer) {
				n.record(c, func(f stepio.Frame) bool { return f.Type == stepio.Signal })
				w.Write(exitFrame(1, api.ExitStatus{Signal: 15}))
			},
		}, wantCode: 5, wantCancelled: true, wantErr: "--kill-on-bad-exit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var nodes []*fakeNode
			for _, s := range tt.scripts {
				var n *fakeNode
				n = newFakeNode(t, func(n *fakeNode, c net.Conn, w *stepio.Writer, _ stepio.HelloMsg) { s(n, c, w) })
				nodes = append(nodes, n)
			}
			var stdout, stderr bytes.Buffer
			res, err := runStep(context.Background(), grantFor(t, nodes...), stepOptions{label: true, killBadExit: tt.kill,
				stdin: "none", out: &stdout, errOut: &stderr})
			if err != nil {
				t.Fatal(err)
			}
			if res.code != tt.wantCode || res.cancelled != tt.wantCancelled {
				t.Fatalf("code %d cancelled %v, want %d %v (stderr %q)", res.code, res.cancelled, tt.wantCode, tt.wantCancelled, stderr.String())
			}
			lines := strings.SplitAfter(stdout.String(), "\n")
			sort.Strings(lines)
			if tt.wantOut != "" && strings.Join(lines, "") != tt.wantOut {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.wantOut)
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr %q, want it to mention %q", stderr.String(), tt.wantErr)
			}
			if tt.kill {
				n := nodes[1]
				n.mu.Lock()
				defer n.mu.Unlock()
				last := n.got[len(n.got)-1]
				if sig, _ := stepio.ParseSignal(last.Payload); last.Type != stepio.Signal || sig != int(syscall.SIGTERM) {
					t.Errorf("second node got %v, want SIGTERM", n.got)
				}
			}
		})
	}
}

// TestRunStepForwards checks that stdin and srun's signals reach every
// node.
func TestRunStepForwards(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	var nodes []*fakeNode
	for i := range 2 {
		var n *fakeNode
		n = newFakeNode(t, func(n *fakeNode, c net.Conn, w *stepio.Writer, hello stepio.HelloMsg) {
			if hello.StdinMode != stepio.StdinAll {
				w.Write(stepio.Frame{Type: stepio.Error, Payload: []byte("stdin mode " + hello.StdinMode)})
			}
			n.record(c, func(f stepio.Frame) bool { return f.Type == stepio.Signal })
			w.Write(exitFrame(uint32(i), api.ExitStatus{Signal: 10}))
		})
		nodes = append(nodes, n)
	}
	go func() { sigs <- syscall.SIGUSR1 }()
	var stderr bytes.Buffer
	res, err := runStep(context.Background(), grantFor(t, nodes...), stepOptions{in: strings.NewReader("line\n"),
		out: &bytes.Buffer{}, errOut: &stderr, signals: sigs})
	if err != nil {
		t.Fatal(err)
	}
	// A signal passed on is not srun ending the step: not cancelled.
	if res.cancelled || res.code != 138 {
		t.Fatalf("result %+v, stderr %q", res, stderr.String())
	}
	for i, n := range nodes {
		n.mu.Lock()
		var stdin string
		var sig int
		for _, f := range n.got {
			switch f.Type {
			case stepio.Stdin:
				stdin += string(f.Payload)
			case stepio.Signal:
				sig, _ = stepio.ParseSignal(f.Payload)
			}
		}
		n.mu.Unlock()
		if sig != int(syscall.SIGUSR1) {
			t.Errorf("node %d got signal %d, want SIGUSR1", i, sig)
		}
		// Stdin may still be in flight when the signal arrives; when it
		// arrived it is whole.
		if stdin != "" && stdin != "line\n" {
			t.Errorf("node %d got stdin %q", i, stdin)
		}
	}
}

// TestRunStepClosesEachNodeAtItsEnd: a node daemon ends its stream once
// its tasks have ended and keeps the connection until srun closes its
// end (noded's endConn), so srun closes each node's connection as soon
// as that node's stream ends, while other nodes' tasks still run.
func TestRunStepClosesEachNodeAtItsEnd(t *testing.T) {
	firstClosed := make(chan struct{})
	first := newFakeNode(t, func(n *fakeNode, c net.Conn, w *stepio.Writer, _ stepio.HelloMsg) {
		w.Write(out(0, "first\n"))
		w.Write(exitFrame(0, api.ExitStatus{}))
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Error(err)
			return
		}
		// srun's frames (the end of its stdin) until srun closes.
		for {
			if _, err := stepio.ReadFrame(c); err != nil {
				break
			}
		}
		close(firstClosed)
	})
	second := newFakeNode(t, func(n *fakeNode, c net.Conn, w *stepio.Writer, _ stepio.HelloMsg) {
		// This node's task ends only once srun has let the first node go.
		select {
		case <-firstClosed:
		case <-time.After(30 * time.Second):
			t.Error("srun kept the first node's connection while the second node's task ran")
		}
		w.Write(out(1, "second\n"))
		w.Write(exitFrame(1, api.ExitStatus{}))
	})
	var stdout, stderr bytes.Buffer
	res, err := runStep(context.Background(), grantFor(t, first, second), stepOptions{label: true, in: strings.NewReader(""),
		out: &stdout, errOut: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(stdout.String(), "\n")
	sort.Strings(lines)
	if res.code != 0 || strings.Join(lines, "") != "0: first\n1: second\n" {
		t.Fatalf("code %d, stdout %q, stderr %q", res.code, stdout.String(), stderr.String())
	}
}

func TestWriteProcTable(t *testing.T) {
	conns := []*nodeConn{
		{node: api.StepNode{Name: "gpu02", Ranks: []int{1, 3}}, pids: []int{201, 203}},
		{node: api.StepNode{Name: "gpu01", Ranks: []int{0, 2}}, pids: []int{100, 102}},
	}
	var b strings.Builder
	writeProcTable(&b, conns, 4, func(t int) string { return []string{"a", "b", "c", "d"}[t] })
	want := "srun: task:0, host:gpu01, pid:100, executable:a\n" +
		"srun: task:1, host:gpu02, pid:201, executable:b\n" +
		"srun: task:2, host:gpu01, pid:102, executable:c\n" +
		"srun: task:3, host:gpu02, pid:203, executable:d\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
