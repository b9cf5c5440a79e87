package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunCLI(t *testing.T) {
	tests := []struct {
		name       string
		script     string // run by sh -c; $1 is a file each run appends a line to
		n, clients int
		wantOK     int64
		wantFailed int64
		wantErr    string // part of the first failure's text
	}{
		{name: "all succeed, n not a multiple of clients", script: `echo run >>"$1"`, n: 7, clients: 3, wantOK: 7},
		{name: "more clients than runs", script: `echo run >>"$1"`, n: 2, clients: 8, wantOK: 2},
		{name: "one client", script: `echo run >>"$1"`, n: 5, clients: 1, wantOK: 5},
		{name: "every run fails, stderr kept", script: `echo run >>"$1"; echo refused >&2; exit 3`, n: 4, clients: 2,
			wantFailed: 4, wantErr: "refused"},
		{name: "every other run fails", script: `echo run >>"$1"; [ $(($(wc -l <"$1") % 2)) = 0 ] || exit 1`, n: 6, clients: 1,
			wantOK: 3, wantFailed: 3, wantErr: "exit status 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs := filepath.Join(t.TempDir(), "runs")
			r, err := runCLI(context.Background(), []string{"sh", "-c", tt.script, "sh", runs}, tt.n, tt.clients)
			if err != nil {
				t.Fatalf("runCLI: %v", err)
			}
			if r.ok != tt.wantOK || r.failed != tt.wantFailed {
				t.Errorf("ok %d, failed %d; want %d, %d", r.ok, r.failed, tt.wantOK, tt.wantFailed)
			}
			b, err := os.ReadFile(runs)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(string(b), "run\n"); got != tt.n {
				t.Errorf("the command ran %d times, want exactly %d", got, tt.n)
			}
			if !strings.Contains(r.firstErr, tt.wantErr) {
				t.Errorf("first failure %q does not mention %q", r.firstErr, tt.wantErr)
			}
			if r.seconds <= 0 {
				t.Errorf("seconds %v, want > 0", r.seconds)
			}
		})
	}
}

func TestRunCLIBadArguments(t *testing.T) {
	tests := []struct {
		name       string
		argv       []string
		n, clients int
		want       string
	}{
		{name: "no command", n: 1, clients: 1, want: "no command"},
		{name: "no runs", argv: []string{"true"}, n: 0, clients: 1, want: "-n and -clients must be positive"},
		{name: "no clients", argv: []string{"true"}, n: 1, clients: 0, want: "-n and -clients must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runCLI(context.Background(), tt.argv, tt.n, tt.clients)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// A cancelled context stops the workers: fewer runs than asked, and the
// context's error.
func TestRunCLICancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := runCLI(ctx, []string{"true"}, 1000, 4)
	if err == nil {
		t.Fatal("runCLI with a cancelled context: no error")
	}
	if r.ok+r.failed >= 1000 {
		t.Errorf("%d runs done after cancellation, want fewer than 1000", r.ok+r.failed)
	}
}
