package stepd

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestStrerror(t *testing.T) {
	tests := []struct {
		name string
		in   error
		want string
	}{
		{name: "errno", in: syscall.ENOENT, want: "No such file or directory"},
		{name: "already capital", in: errors.New("EOF"), want: "EOF"},
		{name: "empty", in: errors.New(""), want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strerror(tt.in); got != tt.want {
				t.Errorf("strerror = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestNameSelf checks the stepd.pid a shared supervisor leaves in a job
// directory: a hard link to its own pid file, or a written copy when no
// link can be made; either way it reads back as the supervisor.
func TestNameSelf(t *testing.T) {
	self, err := SelfIdentity()
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	pidFile := filepath.Join(base, "stepd-serve.pid")
	if err := WriteJSONAtomic(pidFile, self, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		pidFile  string
		wantLink bool
	}{
		{name: "linked", pidFile: pidFile, wantLink: true},
		{name: "no pid file: written", pidFile: filepath.Join(base, "missing"), wantLink: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := &server{self: self, pidFile: tt.pidFile}
			if err := s.nameSelf(dir); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, FileStepdPID)
			if id, err := ReadIdentity(p); err != nil || id != self {
				t.Errorf("stepd.pid reads %+v, %v; want %+v", id, err, self)
			}
			a, _ := os.Stat(p)
			b, _ := os.Stat(pidFile)
			if got := os.SameFile(a, b); got != tt.wantLink {
				t.Errorf("linked to the pid file: %v, want %v", got, tt.wantLink)
			}
		})
	}
}
