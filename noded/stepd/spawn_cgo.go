//go:build cgo

package stepd

/*
#include <errno.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

// tide_spawn vforks and, in the child, makes a new session, applies the
// umask (when >= 0), enters dir, installs fd0-fd2 as the standard files,
// writes its own pid after the '=' of each pid slot of envp and execs
// path. vfork, as posix_spawn and Go's own fork-exec use, spares copying
// the page tables of the parent: the child borrows its memory (the
// parent thread waits until the exec) but has its own file table, umask,
// directory and signal dispositions, so everything it changes is its
// own except the pid slots, which are meant for it. Between vfork and
// exec it calls only async-signal-safe functions.
// It sets the nrl soft limits rcur on the resources rres, each bounded
// by the hard limit it has (getrlimit/setrlimit are plain system calls).
// Before anything else the child joins the job's cgroup: it writes its
// pid to each of the ncg cgroup.procs descriptors in cgfds (opened
// close-on-exec by the parent); with cgstrict a failed write fails the
// start, otherwise the job runs where the supervisor does.
// A failure before or in execve is written as an int errno to errfd
// (close-on-exec, so the parent reads EOF once exec succeeded), negated
// when joining the cgroup failed.
// It returns the child's pid or -errno of fork.
static int tide_spawn(const char *path, char *const argv[], char *const envp[],
                      char *const slots[], int nslots, const char *dir,
                      int fd0, int fd1, int fd2, int mask, int errfd,
                      const int *cgfds, int ncg, int cgstrict,
                      const int *rres, const unsigned long long *rcur, int nrl) {
	sigset_t all, old;
	sigfillset(&all);
	// Go's signal handlers must never run in the child: block
	// everything across the fork, reset the dispositions in the child.
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = vfork();
	if (pid != 0) {
		int e = errno;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return pid < 0 ? -e : (int)pid;
	}
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++) {
		sigaction(s, &dfl, NULL); // fails harmlessly for SIGKILL, SIGSTOP and reserved ones
	}
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	char pidstr[24];
	int n = 0;
	{
		long me = (long)getpid();
		char digits[24];
		do {
			digits[n++] = (char)('0' + me % 10);
			me /= 10;
		} while (me > 0);
		for (int i = 0; i < n; i++) pidstr[i] = digits[n - 1 - i];
		pidstr[n] = 0;
	}
	int sign = 1;
	for (int k = 0; k < ncg; k++) {
		if (write(cgfds[k], pidstr, (size_t)n) != (ssize_t)n && cgstrict) {
			sign = -1;
			goto fail;
		}
	}
	if (setsid() < 0) goto fail;
	if (mask >= 0) umask((mode_t)mask);
	for (int k = 0; k < nrl; k++) {
		struct rlimit rl;
		if (getrlimit(rres[k], &rl) == 0) {
			rlim_t c = (rlim_t)rcur[k];
			rl.rlim_cur = c < rl.rlim_max ? c : rl.rlim_max;
			setrlimit(rres[k], &rl); // a limit that cannot be set is left as it is
		}
	}
	if (chdir(dir) < 0) goto fail;
	if (dup2(fd0, 0) < 0 || dup2(fd1, 1) < 0 || dup2(fd2, 2) < 0) goto fail;
	for (int k = 0; k < nslots; k++) {
		char *p = strchr(slots[k], '=') + 1;
		memcpy(p, pidstr, (size_t)n + 1);
	}
	execve(path, argv, envp);
fail:
	{
		int e = sign * errno;
		ssize_t w = write(errfd, &e, sizeof e);
		(void)w;
	}
	_exit(127);
}
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// spawnTask starts the job's script in a session of its own with the
// job's files, directory, (umask >= 0) umask and resource limits, in
// the job's cgroup (join). SLURM_TASK_PID is the
// script's own pid, known only after the fork, which Go's fork-exec
// cannot put into the environment: the fork happens in C (as
// posix_spawn would), and the child writes its pid into the variable
// before execve. Without cgo a /bin/sh trampoline does it (spawn_sh.go)
// at the price of one more exec per job.
func spawnTask(plan *Plan, files *jobFiles, umask int, join cgroupJoin) (*os.Process, error) {
	var toFree []unsafe.Pointer
	cstr := func(s string) *C.char {
		p := C.CString(s)
		toFree = append(toFree, unsafe.Pointer(p))
		return p
	}
	defer func() {
		for _, p := range toFree {
			C.free(p)
		}
	}()
	cArray := func(strs []*C.char) **C.char {
		n := len(strs) + 1
		arr := (*[1 << 28]*C.char)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))[:n:n]
		toFree = append(toFree, unsafe.Pointer(&arr[0]))
		copy(arr, strs)
		arr[n-1] = nil
		return &arr[0]
	}
	argv := []*C.char{cstr(plan.Script)}
	for _, a := range plan.Args {
		argv = append(argv, cstr(a))
	}
	// Room for any pid after the '='.
	const pidRoom = "                    "
	slots := []*C.char{cstr("SLURM_TASK_PID=" + pidRoom), cstr("TIDE_TASK_PID=" + pidRoom)}
	env := make([]*C.char, 0, len(plan.Env)+len(slots))
	for _, e := range plan.Env {
		env = append(env, cstr(e))
	}
	env = append(env, slots...)

	// One slot more than needed, so the array is never empty.
	cgfds := (*[1 << 20]C.int)(C.malloc(C.size_t(len(join.procs)+1) * C.size_t(unsafe.Sizeof(C.int(0)))))[: len(join.procs)+1 : len(join.procs)+1]
	toFree = append(toFree, unsafe.Pointer(&cgfds[0]))
	for i, f := range join.procs {
		cgfds[i] = C.int(f.Fd())
	}
	strict := C.int(0)
	if join.strict {
		strict = 1
	}
	nrl := len(plan.Rlimits)
	rres := (*[1 << 10]C.int)(C.malloc(C.size_t(nrl+1) * C.size_t(unsafe.Sizeof(C.int(0)))))[: nrl+1 : nrl+1]
	rcur := (*[1 << 10]C.ulonglong)(C.malloc(C.size_t(nrl+1) * C.size_t(unsafe.Sizeof(C.ulonglong(0)))))[: nrl+1 : nrl+1]
	toFree = append(toFree, unsafe.Pointer(&rres[0]), unsafe.Pointer(&rcur[0]))
	for i, r := range plan.Rlimits {
		rres[i], rcur[i] = C.int(r.Resource), C.ulonglong(r.Cur)
	}

	// A plain pipe, not os.Pipe: the read below finds its answer at
	// once (vfork resumes this thread only once the child has exec'd,
	// closing its end, or written its errno and exited; at most another
	// job's child forked meanwhile holds a copy until its own exec, a
	// moment), so offering both ends to Go's poller would only cost
	// system calls.
	var pfd [2]int
	if err := syscall.Pipe2(pfd[:], syscall.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("create pipe: %w", err)
	}
	errR, errW := pfd[0], pfd[1]
	defer syscall.Close(errR)
	pid := C.tide_spawn(cstr(plan.Script), cArray(argv), cArray(env), cArray(slots), C.int(len(slots)),
		cstr(files.dir), C.int(files.std[0].Fd()), C.int(files.std[1].Fd()), C.int(files.std[2].Fd()),
		C.int(umask), C.int(errW), &cgfds[0], C.int(len(join.procs)), strict,
		&rres[0], &rcur[0], C.int(nrl))
	syscall.Close(errW)
	if pid < 0 {
		return nil, fmt.Errorf("fork: %w", syscall.Errno(-pid))
	}
	var buf [4]byte
	if n := readFull(errR, buf[:]); n == len(buf) {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(int(pid), &ws, 0, nil)
		if e := int32(binary.NativeEndian.Uint32(buf[:])); e < 0 {
			return nil, fmt.Errorf("%w: %w", errJoinCgroup, syscall.Errno(-e))
		}
		return nil, syscall.Errno(binary.NativeEndian.Uint32(buf[:]))
	}
	return os.FindProcess(int(pid))
}

// readFull reads fd until buf is full or the writers are gone, and
// returns how much it read.
func readFull(fd int, buf []byte) int {
	got := 0
	for got < len(buf) {
		n, err := syscall.Read(fd, buf[got:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		got += n
	}
	return got
}
