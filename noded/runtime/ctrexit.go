package runtime

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/stepd"
)

// Exit status of container jobs. containerd's shim waits for the
// task's init process and flattens the wait status into one number, as
// a shell does: exit code N is N, death by signal N is 128+N. The task
// exit event and the task's status carry nothing more, so a script's own
// "exit 130" and a death by SIGINT look the same there. tided tells them
// apart by what it knows: a code 128+N is a death by signal N only when
// tided sent signal N to the task (recorded in the job directory's
// signals file, so that a restarted tided knows too) or, for SIGKILL,
// when the kernel's OOM killer struck the task's cgroup. What cannot be
// told apart, and is reported as documented in docs/operations.md:
//
//   - a script that exits 128+N by itself after tided sent it signal N
//     (trap 'exit 143' TERM) is reported as killed by signal N, which is
//     what the signal caused anyway;
//   - a death by a signal tided did not send (a segfault, an
//     administrator's kill on the node) is reported as exit code 128+N.
//
// Process jobs do not have this problem: their supervisor is the job's
// parent and reads the real wait status.

// fileSignals lists, one number a line, the signals tided sent to a
// container job's task.
const fileSignals = "signals"

// sigSet is a set of signal numbers 1-64.
type sigSet uint64

func (s sigSet) has(sig int) bool { return sig >= 1 && sig <= 64 && s&(1<<(sig-1)) != 0 }

func (s *sigSet) add(sig int) {
	if sig >= 1 && sig <= 64 {
		*s |= 1 << (sig - 1)
	}
}

// recordSignal notes in the job directory dir that sig goes to the job's
// task. It is written before the signal is sent: a signal recorded but
// lost only matters if the script then exits with 128+sig by itself.
func recordSignal(dir string, sig syscall.Signal, log *slog.Logger) {
	f, err := os.OpenFile(filepath.Join(dir, fileSignals), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err == nil {
		_, err = f.WriteString(strconv.Itoa(int(sig)) + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		log.Warn("cannot record signal sent to container job", "dir", dir, "signal", int(sig), "err", err)
	}
}

// signalsSent reads what recordSignal wrote in dir, and the signals of
// the kill markers (sent by the job's first start when a kill raced it).
func signalsSent(dir string) sigSet {
	var s sigSet
	if data, err := os.ReadFile(filepath.Join(dir, fileSignals)); err == nil {
		for _, f := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(f); err == nil {
				s.add(n)
			}
		}
	}
	m := stepd.ReadMarkers(dir)
	for _, k := range []*stepd.KillMarker{m.Killed, m.TimedOut} {
		if k == nil {
			continue
		}
		if k.Signal > 0 {
			s.add(k.Signal)
		} else {
			s.add(int(syscall.SIGTERM))
		}
	}
	return s
}

// exitFromCode turns a task's exit code into Slurm's code:signal: 128+N
// is death by signal N only when tided sent N (sent) or, for SIGKILL,
// when the OOM killer struck (oom); otherwise it is the script's own exit
// code (see the comment at the top of this file).
func exitFromCode(code uint32, sent sigSet, oom bool) api.ExitStatus {
	if code > 128 && code <= 128+64 {
		sig := int(code - 128)
		if sent.has(sig) || oom && sig == int(syscall.SIGKILL) {
			return api.ExitStatus{Signal: sig}
		}
	}
	return api.ExitStatus{Code: int(code)}
}
