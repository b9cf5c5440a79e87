package stepd

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte("0123456789"), 10_000)
	for name, data := range map[string][]byte{"empty": nil, "small": []byte("{}\n"), "big": big} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(p)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: read %d bytes, %v; want %d", name, len(got), err, len(data))
		}
	}
	// /proc files report size 0 and still have content.
	if got, err := ReadFile("/proc/self/stat"); err != nil || !strings.Contains(string(got), ") ") {
		t.Errorf("/proc/self/stat: %q, %v", got, err)
	}
	_, err := ReadFile(filepath.Join(dir, "missing"))
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != filepath.Join(dir, "missing") {
		t.Errorf("missing file: %v", err)
	}
}

// OpenFile's descriptors stay blocking and close-on-exec: they go to the
// job as its standard files.
func TestOpenFileBlocking(t *testing.T) {
	f, err := OpenFile(filepath.Join(t.TempDir(), "out"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fl, err := fcntl(f.Fd(), syscall.F_GETFL)
	if err != nil || fl&syscall.O_NONBLOCK != 0 {
		t.Errorf("flags %#x, %v: want blocking", fl, err)
	}
	fd, err := fcntl(f.Fd(), syscall.F_GETFD)
	if err != nil || fd&syscall.FD_CLOEXEC == 0 {
		t.Errorf("fd flags %#x, %v: want close-on-exec", fd, err)
	}
	if fi, err := f.Stat(); err != nil || fi.Mode().Perm() != 0o640&^fs.FileMode(umask()) {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
}

func fcntl(fd uintptr, cmd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, uintptr(cmd), 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

func umask() int {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return m
}

// Concurrent atomic writes of one file each use a temporary file of
// their own and leave none behind.
func TestWriteFileAtomicConcurrent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, FileStatus)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			if err := WriteFileAtomic(p, bytes.Repeat([]byte{byte('a' + i%26)}, 4096), 0o644); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 {
		t.Fatalf("directory holds %v (%v), want only %s", ents, err, FileStatus)
	}
	data, _ := os.ReadFile(p)
	if len(data) != 4096 || bytes.Count(data, data[:1]) != 4096 {
		t.Errorf("torn write: %d bytes", len(data))
	}
}
