package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPrepareOutputs creates a container job's output files the way
// stepd's exec child would: with the user's rights and umask, truncated
// or appended, and falls back to /tmp with Slurm's message when the work
// directory cannot be entered.
func TestPrepareOutputs(t *testing.T) {
	self := User{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Umask: 0o077}
	nobody := User{UID: 65534, GID: 65534, Umask: 0o022, Switch: true}
	tests := []struct {
		name       string
		cred       User
		root       bool // needs root (to switch users)
		appendMode bool
		closedWD   bool
		wantUID    uint32
		wantMode   os.FileMode
		wantOut    string
	}{
		{name: "own user, umask applied", cred: self, wantUID: self.UID, wantMode: 0o600},
		{name: "append keeps content", cred: self, appendMode: true, wantUID: self.UID, wantMode: 0o644, wantOut: "old\n"},
		{name: "as nobody", cred: nobody, root: true, wantUID: 65534, wantMode: 0o644},
		{name: "work dir closed to the user", cred: nobody, root: true, closedWD: true, wantUID: 65534, wantMode: 0o644,
			wantOut: "slurmstepd: error: couldn't chdir to `WD': Permission denied: going to /tmp instead\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Getuid() != 0 {
				t.Skip("switching users needs root")
			}
			dir := t.TempDir()
			// The test's temporary directories are root's, 0700.
			os.Chmod(filepath.Dir(dir), 0o755)
			os.Chmod(dir, 0o777)
			wd := filepath.Join(dir, "wd")
			os.Mkdir(wd, 0o700)
			if !tt.closedWD {
				os.Chmod(wd, 0o777)
			}
			out := filepath.Join(dir, "out")
			if tt.appendMode {
				os.WriteFile(out, []byte("old\n"), 0o644)
			}
			p, err := prepareOutputs(tt.cred, Files{Stdin: "/dev/null", Stdout: out}, wd, tt.appendMode)
			if err != nil {
				t.Fatal(err)
			}
			wantCwd := wd
			if tt.closedWD {
				wantCwd = "/tmp"
			}
			if p.Cwd != wantCwd {
				t.Errorf("cwd %q, want %q", p.Cwd, wantCwd)
			}
			fi, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != tt.wantUID || fi.Mode().Perm() != tt.wantMode {
				t.Errorf("owner %d mode %o, want %d %o", st.Uid, fi.Mode().Perm(), tt.wantUID, tt.wantMode)
			}
			b, _ := os.ReadFile(out)
			if want := strings.ReplaceAll(tt.wantOut, "WD", wd); string(b) != want {
				t.Errorf("content %q, want %q", b, want)
			}
		})
	}
	// The identity switch stays on its thread: this goroutine's files
	// are still created as tided's own user.
	f := filepath.Join(t.TempDir(), "after")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(f)
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uint32(os.Geteuid()) {
		t.Fatalf("file created as uid %d after prepareOutputs, want %d", st.Uid, os.Geteuid())
	}
}

func TestPrepareOutputsRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switching users needs root")
	}
	dir := t.TempDir() // 0700, root's: nobody may not create files there
	_, err := prepareOutputs(User{UID: 65534, GID: 65534, Umask: -1, Switch: true},
		Files{Stdout: filepath.Join(dir, "out")}, dir, false)
	if err == nil || !strings.Contains(err.Error(), "could not open stdout file") || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("err = %v", err)
	}
}
