package stepio

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

const key = "test-cluster-key-0123456789"

func grant(now time.Time) *api.StepGrant {
	return &api.StepGrant{JobID: 7, StepID: 1, UserID: 1000, GroupID: 1000, User: "alice",
		Expires: now.Add(time.Hour), JobNodes: []string{"gpu01", "gpu02"}, NTasks: 2,
		Nodes: []api.StepNode{{Name: "gpu01", Addr: "127.0.0.1:1", Ranks: []int{0}}, {Name: "gpu02", Addr: "127.0.0.1:2", Ranks: []int{1}}},
		Argv:  []string{"hostname"}, Cwd: "/tmp"}
}

func TestVerify(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	good, err := Sign(key, grant(now))
	if err != nil {
		t.Fatal(err)
	}
	tampered := good
	tampered.Body = bytes.Replace(good.Body, []byte(`"user_id":1000`), []byte(`"user_id":0`), 1)
	if bytes.Equal(tampered.Body, good.Body) {
		t.Fatal("test grant does not contain the uid to tamper with")
	}
	badHex := good
	badHex.Cred = "zz" + good.Cred[2:]
	tests := []struct {
		name     string
		sg       api.SignedGrant
		key      string
		node     string
		now      time.Time
		wantErr  error
		wantNode int
	}{
		{name: "valid first node", sg: good, key: key, node: "gpu01", now: now, wantNode: 0},
		{name: "valid second node", sg: good, key: key, node: "gpu02", now: now, wantNode: 1},
		{name: "tampered body refused", sg: tampered, key: key, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "other key refused", sg: good, key: "another-key-0123456789", node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "garbage credential refused", sg: badHex, key: key, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "expired refused", sg: good, key: key, node: "gpu01", now: now.Add(time.Hour), wantErr: ErrExpired},
		{name: "other node refused", sg: good, key: key, node: "gpu03", now: now, wantErr: ErrWrongNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, i, err := Verify(tt.key, tt.sg, tt.node, tt.now)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if i != tt.wantNode || g.JobID != 7 || g.User != "alice" {
				t.Fatalf("got node %d grant %+v", i, g)
			}
		})
	}
}

func TestFrameRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		f    Frame
	}{
		{name: "stdout chunk", f: Frame{Type: Stdout, Task: 3, Payload: []byte("hello\nwor")}},
		{name: "empty payload", f: Frame{Type: StdinEOF, Task: AllTasks}},
		{name: "exit", f: Frame{Type: Exit, Task: 15, Payload: ExitPayload(api.ExitStatus{Code: 0, Signal: 9})}},
		{name: "large", f: Frame{Type: Stderr, Task: 0, Payload: bytes.Repeat([]byte("x"), MaxPayload)}},
	}
	var buf bytes.Buffer
	for _, tt := range tests {
		if err := WriteFrame(&buf, tt.f); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadFrame(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.f, got, cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
		})
	}
	if _, err := ReadFrame(&buf); err != io.EOF {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
}

func TestFrameErrors(t *testing.T) {
	var buf bytes.Buffer
	WriteFrame(&buf, Frame{Type: Stdout, Payload: []byte("abcdef")})
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{name: "truncated header", in: buf.Bytes()[:4], want: io.ErrUnexpectedEOF},
		{name: "truncated payload", in: buf.Bytes()[:12], want: io.ErrUnexpectedEOF},
		{name: "oversized", in: []byte{3, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, want: ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ReadFrame(bytes.NewReader(tt.in)); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if err := WriteFrame(io.Discard, Frame{Payload: make([]byte, MaxPayload+1)}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("write oversized: %v", err)
	}
}

func TestPayloads(t *testing.T) {
	tests := []struct {
		name string
		exit api.ExitStatus
		code int
	}{
		{name: "ok", exit: api.ExitStatus{}, code: 0},
		{name: "code 3", exit: api.ExitStatus{Code: 3}, code: 3},
		{name: "killed", exit: api.ExitStatus{Signal: 9}, code: 137},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseExit(ExitPayload(tt.exit))
			if err != nil || got != tt.exit {
				t.Fatalf("ParseExit = %v, %v", got, err)
			}
			if c := ExitCode(got); c != tt.code {
				t.Fatalf("ExitCode = %d, want %d", c, tt.code)
			}
		})
	}
	if s, err := ParseSignal(SignalPayload(10)); s != 10 || err != nil {
		t.Fatalf("ParseSignal = %d, %v", s, err)
	}
	if r, c, err := ParseWinsize(WinsizePayload(40, 120)); r != 40 || c != 120 || err != nil {
		t.Fatalf("ParseWinsize = %d %d %v", r, c, err)
	}
}
