package runtime

import (
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/stepd"
)

func TestExitFromCode(t *testing.T) {
	var term, kill, usr1 sigSet
	term.add(int(syscall.SIGTERM))
	kill.add(int(syscall.SIGTERM))
	kill.add(int(syscall.SIGKILL))
	usr1.add(int(syscall.SIGUSR1))
	tests := []struct {
		name string
		code uint32
		sent sigSet
		oom  bool
		want api.ExitStatus
	}{
		{name: "success", code: 0, want: api.ExitStatus{}},
		{name: "exit 3", code: 3, want: api.ExitStatus{Code: 3}},
		{name: "exit 128", code: 128, want: api.ExitStatus{Code: 128}},
		{name: "exit 130 by itself", code: 130, want: api.ExitStatus{Code: 130}},
		{name: "exit 137 by itself", code: 137, sent: term, want: api.ExitStatus{Code: 137}},
		{name: "SIGTERM sent", code: 143, sent: term, want: api.ExitStatus{Signal: 15}},
		{name: "SIGKILL after SIGTERM", code: 137, sent: kill, want: api.ExitStatus{Signal: 9}},
		{name: "OOM kill", code: 137, oom: true, want: api.ExitStatus{Signal: 9}},
		{name: "OOM does not explain SIGTERM", code: 143, oom: true, want: api.ExitStatus{Code: 143}},
		{name: "checkpoint signal not trapped", code: 128 + 10, sent: usr1, want: api.ExitStatus{Signal: 10}},
		{name: "beyond signals", code: 255, sent: ^sigSet(0), want: api.ExitStatus{Code: 255}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exitFromCode(tt.code, tt.sent, tt.oom); got != tt.want {
				t.Fatalf("exitFromCode(%d, %b, %v) = %v, want %v", tt.code, tt.sent, tt.oom, got, tt.want)
			}
		})
	}
}

// TestSignalsSent: what recordSignal wrote and the kill markers'
// signals count as sent; nothing else does.
func TestSignalsSent(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	tests := []struct {
		name    string
		record  []syscall.Signal
		markers map[string]stepd.KillMarker
		want    []syscall.Signal
		notWant []syscall.Signal
	}{
		{name: "nothing", notWant: []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL, syscall.SIGINT}},
		{name: "recorded", record: []syscall.Signal{syscall.SIGUSR1, syscall.SIGKILL},
			want: []syscall.Signal{syscall.SIGUSR1, syscall.SIGKILL}, notWant: []syscall.Signal{syscall.SIGTERM}},
		{name: "kill marker", markers: map[string]stepd.KillMarker{stepd.MarkKilled: {Signal: int(syscall.SIGINT)}},
			want: []syscall.Signal{syscall.SIGINT}, notWant: []syscall.Signal{syscall.SIGTERM}},
		{name: "time limit marker without signal is SIGTERM", markers: map[string]stepd.KillMarker{stepd.MarkTimedOut: {}},
			want: []syscall.Signal{syscall.SIGTERM}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, s := range tt.record {
				recordSignal(dir, s, log)
			}
			for name, m := range tt.markers {
				m.Time = time.Now()
				if err := stepd.WriteJSONAtomic(filepath.Join(dir, name), m, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got := signalsSent(dir)
			for _, s := range tt.want {
				if !got.has(int(s)) {
					t.Errorf("signal %d not in %b", s, got)
				}
			}
			for _, s := range tt.notWant {
				if got.has(int(s)) {
					t.Errorf("signal %d in %b", s, got)
				}
			}
		})
	}
	// A directory that is gone (a job dropped meanwhile) is an empty set.
	if s := signalsSent(filepath.Join(t.TempDir(), "gone")); s != 0 {
		t.Fatalf("missing dir: %b", s)
	}
	if _, err := os.Stat(filepath.Join(t.TempDir(), fileSignals)); err == nil {
		t.Fatal("signals file where nothing was recorded")
	}
}
