package noded

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"

	"github.com/tide-hpc/tide/noded/stepd"
)

// jobDirFiles are the files a job directory may hold, checkpoint
// directory last (see the package comment and noded/stepd).
var jobDirFiles = []string{
	fileLaunch, fileExec, fileScript, filePID, fileStatus, fileStepdPID, fileStepdLog,
	markKilled, markTimedOut, markSignalled, markForgotten, stepd.MarkFrozen,
	filepath.Join(dirCheckpoint, fileCheckpoint),
}

// removeJobDir deletes a job directory. It unlinks the files a job
// directory holds by name and removes the directory: a node running
// many short jobs removes one per job, and os.RemoveAll's opening and
// listing of the directory and its checkpoint directory took twice the
// system calls. Anything else left in it (a temporary file of a write
// cut short, a file a newer version writes) makes the directory not
// empty, and os.RemoveAll takes over.
func removeJobDir(dir string) error {
	for _, name := range jobDirFiles {
		if err := syscall.Unlink(filepath.Join(dir, name)); err != nil && err != syscall.ENOENT {
			return os.RemoveAll(dir)
		}
	}
	if err := syscall.Rmdir(filepath.Join(dir, dirCheckpoint)); err != nil && err != syscall.ENOENT {
		return os.RemoveAll(dir)
	}
	err := syscall.Rmdir(dir)
	switch {
	case err == nil || errors.Is(err, syscall.ENOENT):
		return nil
	default:
		return os.RemoveAll(dir)
	}
}
