package noded

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// removeJobDir deletes a job directory. A node running many short jobs
// removes one per job, so it costs one open, one read of the directory
// and an unlink per entry there, all relative to the directory: naming
// every file a job directory may hold cost an absolute path walk per
// name (most of them absent, each leaving a negative dentry behind), and
// os.RemoveAll reads the directory twice and stats every entry. Anything
// this cannot remove in one pass (more entries than one read returns, a
// checkpoint directory the job left files in) goes to os.RemoveAll.
func removeJobDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err == nil {
		emptied := unlinkEntries(fd)
		unix.Close(fd)
		if emptied {
			if err := unix.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
				return nil
			}
		}
	}
	return os.RemoveAll(dir)
}

// unlinkEntries unlinks the entries one read of directory fd returns,
// empty subdirectories included, and reports whether all went.
func unlinkEntries(fd int) bool {
	var buf [4096]byte
	n, err := unix.Getdents(fd, buf[:])
	if err != nil {
		return false
	}
	_, _, names := unix.ParseDirent(buf[:n], -1, nil)
	for _, name := range names {
		err := unix.Unlinkat(fd, name, 0)
		if errors.Is(err, syscall.EISDIR) {
			err = unix.Unlinkat(fd, name, unix.AT_REMOVEDIR)
		}
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return false
		}
	}
	return true
}
