package stepio

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

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
