package srun

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepio"
)

// TestSignalPolicy checks what srun does about each signal, and about
// Ctrl-C sequences, as Slurm's srun does.
func TestSignalPolicy(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	type recv struct {
		sig syscall.Signal
		at  time.Duration // after t0
	}
	status := sigPlan{say: []string{"interrupt (one more within 1 sec to abort)"}, status: true}
	ctrlC := sigPlan{say: []string{"sending Ctrl-C to StepId=5.0", "forcing job termination"}, forward: syscall.SIGINT, kill: true, cancel: true}
	abort := sigPlan{say: []string{"job abort in progress"}, abort: true}
	terminate := sigPlan{say: []string{"forcing job termination"}, kill: true}
	tests := []struct {
		name   string
		policy signalPolicy
		recv   []recv
		want   []sigPlan
	}{
		{name: "user signals are passed on", recv: []recv{{syscall.SIGUSR1, 0}, {syscall.SIGUSR2, 0}},
			want: []sigPlan{{forward: syscall.SIGUSR1}, {forward: syscall.SIGUSR2}}},
		{name: "SIGTERM and SIGHUP kill the tasks", recv: []recv{{syscall.SIGTERM, 0}, {syscall.SIGHUP, 0}},
			want: []sigPlan{terminate, terminate}},
		{name: "SIGQUIT says Quit and kills", recv: []recv{{syscall.SIGQUIT, 0}},
			want: []sigPlan{{say: []string{"Quit", "forcing job termination"}, kill: true}}},
		{name: "while the job ends SIGTERM is passed on", policy: signalPolicy{ending: func() bool { return true }},
			recv: []recv{{syscall.SIGTERM, 0}, {syscall.SIGHUP, 0}, {syscall.SIGQUIT, 0}},
			want: []sigPlan{{forward: syscall.SIGTERM}, {forward: syscall.SIGHUP}, {forward: syscall.SIGQUIT}}},
		{name: "SIGCONT is reported, SIGALRM ignored", recv: []recv{{syscall.SIGCONT, 0}, {syscall.SIGALRM, 0}},
			want: []sigPlan{{say: []string{"got SIGCONT"}}, {}}},
		{name: "SIGPIPE kills once, quietly", recv: []recv{{syscall.SIGPIPE, 0}, {syscall.SIGPIPE, 0}},
			want: []sigPlan{{kill: true}, {}}},
		{name: "one Ctrl-C shows the status", recv: []recv{{syscall.SIGINT, 0}}, want: []sigPlan{status}},
		{name: "two Ctrl-C within a second end the step, a third aborts",
			recv: []recv{{syscall.SIGINT, 0}, {syscall.SIGINT, 900 * time.Millisecond}, {syscall.SIGINT, 5 * time.Second}},
			want: []sigPlan{status, ctrlC, abort}},
		{name: "Ctrl-C a second apart only show the status",
			recv: []recv{{syscall.SIGINT, 0}, {syscall.SIGINT, time.Second}, {syscall.SIGINT, 2100 * time.Millisecond}},
			want: []sigPlan{status, status, status}},
		{name: "quit on interrupt ends the step at once", policy: signalPolicy{quitOnInterrupt: true},
			recv: []recv{{syscall.SIGINT, 0}, {syscall.SIGINT, 10 * time.Second}}, want: []sigPlan{ctrlC, abort}},
		{name: "disable status passes each Ctrl-C on", policy: signalPolicy{disableStatus: true},
			recv: []recv{{syscall.SIGINT, 0}, {syscall.SIGINT, 2 * time.Second}},
			want: []sigPlan{{say: []string{"sending Ctrl-C to StepId=5.0"}, forward: syscall.SIGINT},
				{say: []string{"sending Ctrl-C to StepId=5.0"}, forward: syscall.SIGINT}}},
		{name: "disable status still ends the step on a quick second Ctrl-C", policy: signalPolicy{disableStatus: true},
			recv: []recv{{syscall.SIGINT, 0}, {syscall.SIGINT, 100 * time.Millisecond}},
			want: []sigPlan{{say: []string{"sending Ctrl-C to StepId=5.0"}, forward: syscall.SIGINT}, ctrlC}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.policy
			p.step = "StepId=5.0"
			var got []sigPlan
			for _, r := range tt.recv {
				got = append(got, p.plan(r.sig, t0.Add(r.at)))
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(sigPlan{})); diff != "" {
				t.Errorf("plans (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTaskStatus(t *testing.T) {
	got := taskStatus("StepId=5.0", []int{4, 0, 1, 2, 3, 5}, map[int]bool{2: true, 3: false, 5: false})
	want := []string{
		"StepId=5.0 tasks 0-1,4: running",
		"StepId=5.0 tasks 3,5: exited abnormally",
		"StepId=5.0 task 2: exited",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestRevoking(t *testing.T) {
	in := make(chan os.Signal, 4)
	stop := make(chan struct{})
	out := revoking(in, stop)
	in <- syscall.SIGCONT
	in <- syscall.SIGUSR1
	select {
	case s := <-out:
		if s != syscall.SIGUSR1 {
			t.Fatalf("passed on %v, want SIGUSR1 (SIGCONT does not revoke)", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SIGUSR1 did not revoke the request")
	}

	// Once stopped, it leaves later signals to the step.
	in2 := make(chan os.Signal, 1)
	stop2 := make(chan struct{})
	revoking(in2, stop2)
	close(stop2)
	time.Sleep(10 * time.Millisecond)
	in2 <- syscall.SIGUSR2
	select {
	case s := <-in2:
		if s != syscall.SIGUSR2 {
			t.Fatalf("read %v", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stopped revoker took the step's signal")
	}
	close(stop)
}

// syncBuffer is a bytes.Buffer safe for the step's writers and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// signalsGot lists the signals a fake node received.
func signalsGot(n *fakeNode) []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []int
	for _, f := range n.got {
		if f.Type == stepio.Signal {
			s, _ := stepio.ParseSignal(f.Payload)
			out = append(out, s)
		}
	}
	return out
}

// dyingNodes are two fake nodes whose task dies of the first signal in
// until (SIGKILL or SIGTERM).
func dyingNodes(t *testing.T, until ...int) []*fakeNode {
	var nodes []*fakeNode
	for i := range 2 {
		var n *fakeNode
		n = newFakeNode(t, func(n *fakeNode, c net.Conn, w *stepio.Writer, _ stepio.HelloMsg) {
			var sig int
			n.record(c, func(f stepio.Frame) bool {
				if f.Type != stepio.Signal {
					return false
				}
				s, _ := stepio.ParseSignal(f.Payload)
				for _, u := range until {
					if s == u {
						sig = s
						return true
					}
				}
				return false
			})
			w.Write(exitFrame(uint32(i), api.ExitStatus{Signal: sig}))
		})
		nodes = append(nodes, n)
	}
	return nodes
}

// TestRunStepSignals runs a step and sends srun signals: what the nodes
// get, what srun prints and how the step ends.
func TestRunStepSignals(t *testing.T) {
	kill, term := int(syscall.SIGKILL), int(syscall.SIGTERM)
	tests := []struct {
		name string
		// send is called with srun's signal channel and its stderr.
		send          func(t *testing.T, sigs chan<- os.Signal, errOut *syncBuffer)
		ending        bool
		until         []int
		wantSigs      []int
		wantCode      int
		wantCancelled bool
		wantErr       string
		notErr        string
	}{
		{
			name:     "SIGTERM forces termination",
			send:     func(_ *testing.T, sigs chan<- os.Signal, _ *syncBuffer) { sigs <- syscall.SIGTERM },
			until:    []int{kill},
			wantSigs: []int{kill}, wantCode: 137, wantCancelled: true,
			wantErr: "srun: forcing job termination\n", notErr: "",
		},
		{
			name:     "SIGTERM while the job ends reaches the tasks",
			send:     func(_ *testing.T, sigs chan<- os.Signal, _ *syncBuffer) { sigs <- syscall.SIGTERM },
			ending:   true,
			until:    []int{term},
			wantSigs: []int{term}, wantCode: 143,
			notErr: "forcing job termination",
		},
		{
			name: "Ctrl-C twice",
			send: func(t *testing.T, sigs chan<- os.Signal, errOut *syncBuffer) {
				sigs <- syscall.SIGINT
				waitFor(t, errOut, "srun: StepId=5.0 tasks 0-1: running\n")
				sigs <- syscall.SIGINT
			},
			until:    []int{kill},
			wantSigs: []int{int(syscall.SIGINT), kill}, wantCode: 137, wantCancelled: true,
			wantErr: "srun: interrupt (one more within 1 sec to abort)\nsrun: StepId=5.0 tasks 0-1: running\n" +
				"srun: sending Ctrl-C to StepId=5.0\nsrun: forcing job termination\n",
			// The tasks' deaths are srun's doing: no error for them.
			notErr: "Killed",
		},
		{
			name: "a third Ctrl-C leaves without the tasks",
			send: func(t *testing.T, sigs chan<- os.Signal, errOut *syncBuffer) {
				sigs <- syscall.SIGINT
				sigs <- syscall.SIGINT
				waitFor(t, errOut, "forcing job termination")
				sigs <- syscall.SIGINT
			},
			until:    []int{-1}, // the tasks never end
			wantSigs: []int{int(syscall.SIGINT), kill}, wantCode: 137, wantCancelled: true,
			wantErr: "srun: job abort in progress\n", notErr: "lost contact",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := dyingNodes(t, tt.until...)
			sigs := make(chan os.Signal, 4)
			errOut := &syncBuffer{}
			go tt.send(t, sigs, errOut)
			res, err := runStep(context.Background(), grantFor(t, nodes...), stepOptions{stdin: "none",
				out: &bytes.Buffer{}, errOut: errOut, signals: sigs, jobEnding: func() bool { return tt.ending },
				// Ctrl-C sequences are timed by a clock that stands
				// still: the second is always "within a second".
				now: func() time.Time { return time.Unix(1e9, 0) }})
			if err != nil {
				t.Fatal(err)
			}
			if res.code != tt.wantCode || res.cancelled != tt.wantCancelled {
				t.Errorf("code %d cancelled %v, want %d %v (stderr %q)", res.code, res.cancelled, tt.wantCode, tt.wantCancelled, errOut)
			}
			for i, n := range nodes {
				if diff := cmp.Diff(tt.wantSigs, signalsGot(n)); diff != "" {
					t.Errorf("node %d signals (-want +got):\n%s", i, diff)
				}
			}
			if !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("stderr %q, want it to contain %q", errOut, tt.wantErr)
			}
			if tt.notErr != "" && strings.Contains(errOut.String(), tt.notErr) {
				t.Errorf("stderr %q mentions %q", errOut, tt.notErr)
			}
		})
	}
}

// waitFor waits until errOut holds want.
func waitFor(t *testing.T, errOut *syncBuffer, want string) {
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(errOut.String(), want) {
		if time.Now().After(deadline) {
			t.Errorf("srun never printed %q (stderr %q)", want, errOut)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
