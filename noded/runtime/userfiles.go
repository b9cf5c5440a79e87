package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	goruntime "runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// outputPrep is what prepareOutputs found.
type outputPrep struct {
	// Cwd is where the job starts: its work directory, or /tmp when the
	// user cannot enter it (Slurm's fallback, said in the error file).
	Cwd string
}

// prepareOutputs creates (or truncates) a container job's output files
// with the user's rights, the way stepd's exec child does for process
// jobs: containerd's shim then appends to the existing files, so they
// stay owned by the user and survive restarts of tided. It runs on a
// thread of its own whose file-system identity (fsuid, fsgid, groups,
// umask) is the user's; the thread is thrown away afterwards, so no
// other goroutine ever runs with it.
func prepareOutputs(cred User, files Files, workDir string, appendMode bool) (outputPrep, error) {
	type result struct {
		p   outputPrep
		err error
	}
	ch := make(chan result, 1)
	go func() {
		goruntime.LockOSThread()
		// No UnlockOSThread: the thread exits with the goroutine.
		if cred.Switch {
			if err := becomeUser(cred); err != nil {
				ch <- result{err: err}
				return
			}
		} else if cred.Umask >= 0 {
			if err := syscall.Unshare(syscall.CLONE_FS); err != nil {
				ch <- result{err: fmt.Errorf("unshare file system attributes: %w", err)}
				return
			}
			syscall.Umask(cred.Umask)
		}
		p, err := openOutputs(files, workDir, appendMode)
		ch <- result{p, err}
	}()
	r := <-ch
	return r.p, r.err
}

// becomeUser switches the calling thread's file-system identity to cred.
// Raw syscalls, because Go's wrappers apply setgroups to every thread.
func becomeUser(cred User) error {
	if err := syscall.Unshare(syscall.CLONE_FS); err != nil {
		return fmt.Errorf("unshare file system attributes: %w", err)
	}
	if cred.Umask >= 0 {
		syscall.Umask(cred.Umask)
	}
	groups := cred.Groups
	if len(groups) == 0 {
		groups = []uint32{cred.GID}
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, uintptr(len(groups)), uintptr(unsafe.Pointer(&groups[0])), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(cred.GID), 0, 0)
	syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(cred.UID), 0, 0)
	// setfs[ug]id report no errors; asking again returns the current id.
	g, _, _ := syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(cred.GID), 0, 0)
	u, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(cred.UID), 0, 0)
	if uint32(u) != cred.UID || uint32(g) != cred.GID {
		return fmt.Errorf("could not switch to uid %d gid %d", cred.UID, cred.GID)
	}
	return nil
}

// openOutputs creates the output files and checks the work directory
// with the calling thread's identity.
func openOutputs(files Files, workDir string, appendMode bool) (outputPrep, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appendMode {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	out, err := os.OpenFile(files.Stdout, flags, 0o666)
	if err != nil {
		return outputPrep{}, fmt.Errorf("could not open stdout file %s: %w", files.Stdout, unwrapPathErr(err))
	}
	defer out.Close()
	errf := out
	if files.Stderr != "" {
		if errf, err = os.OpenFile(files.Stderr, flags, 0o666); err != nil {
			return outputPrep{}, fmt.Errorf("could not open stderr file %s: %w", files.Stderr, unwrapPathErr(err))
		}
		defer errf.Close()
	}
	p := outputPrep{Cwd: workDir}
	// Resolving DIR/. needs search permission on DIR, as chdir does.
	d, err := os.OpenFile(workDir+"/.", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintf(errf, "slurmstepd: error: couldn't chdir to `%s': %s: going to /tmp instead\n", workDir, capitalize(unwrapPathErr(err).Error()))
		p.Cwd = "/tmp"
	} else {
		d.Close()
	}
	return p, nil
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// capitalize spells an errno as C's strerror does ("No such file…").
func capitalize(s string) string {
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		return string(s[0]-'a'+'A') + s[1:]
	}
	return s
}
