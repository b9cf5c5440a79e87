package stepd

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
)

// The job-directory files, /proc files and the job's standard files are
// opened here rather than with os.OpenFile. On Linux os.OpenFile offers
// every file to Go's poller; for a regular file the kernel refuses
// (EPERM) and os undoes its non-blocking set-up: five system calls more
// per open. A node running short jobs opens a dozen such files per job,
// all read or written in one go, for which the poller is no use.
// os.NewFile registers only descriptors that are non-blocking already.

// OpenFile is os.OpenFile for files the poller cannot serve (regular
// files, /dev/null, /proc files). The descriptor is close-on-exec.
func OpenFile(path string, flag int, perm fs.FileMode) (*os.File, error) {
	for {
		fd, err := syscall.Open(path, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == nil {
			return os.NewFile(uintptr(fd), path), nil
		}
		if err != syscall.EINTR {
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
	}
}

// ReadFile is os.ReadFile through OpenFile.
func ReadFile(path string) ([]byte, error) {
	f, err := OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := 512
	var st syscall.Stat_t
	if syscall.Fstat(int(f.Fd()), &st) == nil && st.Size > 0 && st.Size < 1<<30 {
		size = int(st.Size) + 1 // +1: see EOF in the first read round
	}
	data := make([]byte, 0, size)
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
}

// tmpSeq numbers this process's temporary files.
var tmpSeq atomic.Uint64

// createTemp creates a new file next to path for WriteFileAtomic:
// ".<base>.tmp<pid>.<n>", which the directory's other writers (tided,
// the supervisor) never pick too.
func createTemp(dir, base string) (*os.File, error) {
	prefix := dir + "/." + base + ".tmp" + strconv.Itoa(os.Getpid()) + "."
	for {
		f, err := OpenFile(prefix+strconv.FormatUint(tmpSeq.Add(1), 10), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
}
