package ctld

// The idle-GPU flag (issue 25): GPUs a job reserved and does not use
// are the most expensive waste of a GPU cluster. At each sample
// (jobseries.go) a running job whose GPUs were read and whose mean
// utilisation is under job_usage.idle_gpu_threshold is idle; when it
// has been idle for job_usage.idle_gpu_after it is flagged, once per
// idle stretch:
//
//   - an idle_gpu event in its trail (tide events, the dashboard),
//     naming its GPUs, their utilisation and since when;
//   - tide_jobs_idle_gpu, tide_gpus_idle_reserved (now) and
//     tide_idle_gpu_flags_total (ever) count it;
//   - job_usage.idle_gpu_hook, when set, runs for it.
//
// When its GPUs are used again another idle_gpu event says so, and a
// later stretch flags it again. A job whose GPUs are not read (a node
// that does not respond, a static GPU list) is never judged. The flag
// comes at the first sample at or after idle_gpu_after from the first
// idle sample: within idle_gpu_after plus one interval plus the age of
// the node's reading (a heartbeat) of the GPUs going idle.
//
// The hook is an operator's executable, run as the controller's user
// (root on most installations), so what a user controls never reaches
// a shell or an argument: the job's facts are in its environment
// (TIDE_JOB_ID, TIDE_JOB_USER, TIDE_JOB_NAME…; see docs/operations.md),
// its argument list is its path alone, its working directory /, its
// standard input empty. It must be a regular executable file that
// neither group nor others may write, owned by root or the controller's
// user, in a directory neither group nor others may write; otherwise it
// is refused (logged, counted) rather than run. At most
// maxHookRunning run at once, maxHookWaiting more wait; past that a
// flag's hook is dropped (logged, counted). Each is killed, with its
// process group, after job_usage.idle_gpu_hook_timeout; its output
// (the first 4 KiB) is logged.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// Bounds of the hooks in flight.
const (
	maxHookRunning = 4
	maxHookWaiting = 256
	// hookOutputMax bounds the output of a hook kept for the log.
	hookOutputMax = 4096
)

// Results of a hook run (tide_idle_gpu_hook_runs_total{result}).
const (
	hookOK      = "ok"
	hookFailed  = "failed"
	hookTimeout = "timeout"
	hookRefused = "refused"
	hookDropped = "dropped"
)

var hookResults = []string{hookOK, hookFailed, hookTimeout, hookRefused, hookDropped}

// judgeIdle updates job j's idle state with its sample smp and flags
// it when its GPUs have been idle for job_usage.idle_gpu_after. Called
// with mu held.
func (s *Server) judgeIdle(j *api.Job, ser *jobSeries, smp api.UsageSample, now time.Time) {
	cfg := s.cl.JobUsage
	if cfg.IdleGPUAfter <= 0 || !smp.GPU || j.AllocGPUs() == 0 {
		return
	}
	if smp.GPUUtil >= cfg.IdleGPUThreshold {
		if !ser.flagged.IsZero() {
			s.event(j, api.EventIdleGPU, "", fmt.Sprintf("GPUs in use again: %.1f%% utilisation, after being idle since %s",
				smp.GPUUtil, ser.idleSince.UTC().Format(time.RFC3339)), "tidectld")
			s.log.Info("job uses its GPUs again", "job_id", j.ID, "gpu_util", smp.GPUUtil)
		}
		ser.idleSince, ser.flagged = time.Time{}, time.Time{}
		return
	}
	if ser.idleSince.IsZero() {
		ser.idleSince = now
	}
	if !ser.flagged.IsZero() || now.Sub(ser.idleSince) < cfg.IdleGPUAfter {
		return
	}
	ser.flagged = now
	s.series.flags++
	idle := now.Sub(ser.idleSince).Round(time.Second)
	s.event(j, api.EventIdleGPU, "", fmt.Sprintf("GPUs idle: %d GPU(s) on %s at %.1f%% utilisation, under %g%% for %s (since %s)",
		j.AllocGPUs(), gpuPlaces(j), smp.GPUUtil, cfg.IdleGPUThreshold, idle, ser.idleSince.UTC().Format(time.RFC3339)), "tidectld")
	s.log.Info("job flagged: GPUs idle", "job_id", j.ID, "user", j.User, "gpus", j.AllocGPUs(), "gpu_util", smp.GPUUtil, "idle", idle)
	if cfg.IdleGPUHook != "" {
		s.series.hooks.start(s.log, cfg.IdleGPUHook, cfg.IdleGPUHookTimeout, j.ID, s.idleHookEnv(j, ser, smp, now))
	}
}

// gpuPlaces names a job's GPUs by node: "gpu01 GPUs 0-1, gpu02 GPU 3".
func gpuPlaces(j *api.Job) string {
	var parts []string
	for _, a := range j.Alloc {
		if len(a.GPUs) == 0 {
			continue
		}
		word := "GPU"
		if len(a.GPUs) > 1 {
			word = "GPUs"
		}
		parts = append(parts, fmt.Sprintf("%s %s %s", a.Node, word, gpuRanges(a.GPUs)))
	}
	return strings.Join(parts, ", ")
}

// gpuRanges writes GPU indices as ranges: "0-1,3".
func gpuRanges(idx []int) string {
	var b strings.Builder
	for i := 0; i < len(idx); {
		k := i
		for k+1 < len(idx) && idx[k+1] == idx[k]+1 {
			k++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(idx[i]))
		if k > i {
			b.WriteString("-" + strconv.Itoa(idx[k]))
		}
		i = k + 1
	}
	return b.String()
}

// hookPath is the PATH of the hook's environment.
const hookPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// idleHookEnv is the hook's whole environment: the job's facts (the
// name and user are the user's words: data, never code) and a PATH.
// Called with mu held.
func (s *Server) idleHookEnv(j *api.Job, ser *jobSeries, smp api.UsageSample, now time.Time) []string {
	cfg := s.cl.JobUsage
	return []string{
		"PATH=" + hookPath,
		"TIDE_HOOK=idle_gpu",
		"TIDE_CLUSTER=" + s.cl.ClusterName,
		"TIDE_JOB_ID=" + strconv.FormatUint(j.ID, 10),
		"TIDE_JOB_RESTART=" + strconv.Itoa(j.Restarts),
		"TIDE_JOB_NAME=" + j.Name,
		"TIDE_JOB_USER=" + j.User,
		"TIDE_JOB_UID=" + strconv.FormatUint(uint64(j.UserID), 10),
		"TIDE_JOB_QUEUE=" + j.Account,
		"TIDE_JOB_PARTITION=" + j.Partition,
		"TIDE_JOB_NODES=" + hostlist.Compress(j.NodeNames()),
		"TIDE_JOB_GPUS=" + strconv.Itoa(j.AllocGPUs()),
		"TIDE_JOB_GPU_PLACES=" + gpuPlaces(j),
		"TIDE_GPU_UTIL=" + strconv.FormatFloat(smp.GPUUtil, 'f', 1, 64),
		"TIDE_GPU_MEM_BYTES=" + strconv.FormatUint(smp.GPUMem, 10),
		"TIDE_IDLE_SINCE=" + ser.idleSince.UTC().Format(time.RFC3339),
		"TIDE_IDLE_SECONDS=" + strconv.FormatInt(int64(now.Sub(ser.idleSince)/time.Second), 10),
		"TIDE_IDLE_THRESHOLD=" + strconv.FormatFloat(cfg.IdleGPUThreshold, 'g', -1, 64),
		"SLURM_JOB_ID=" + strconv.FormatUint(j.ID, 10),
		"SLURM_JOB_USER=" + j.User,
		"SLURM_JOB_UID=" + strconv.FormatUint(uint64(j.UserID), 10),
		"SLURM_JOB_ACCOUNT=" + j.Account,
		"SLURM_JOB_PARTITION=" + j.Partition,
	}
}

// hookRunner runs hooks in the background, a few at a time.
type hookRunner struct {
	mu      sync.Mutex
	sem     chan struct{}
	waiting int
	counts  map[string]uint64
	// done is called after each run with its result (tests).
	done func(result string)
}

// start runs path for job jobID with env, in the background.
func (h *hookRunner) start(log *slog.Logger, path string, timeout time.Duration, jobID uint64, env []string) {
	h.mu.Lock()
	if h.sem == nil {
		h.sem = make(chan struct{}, maxHookRunning)
	}
	if h.waiting >= maxHookWaiting {
		h.mu.Unlock()
		h.finish(hookDropped)
		log.Warn("idle GPU hook dropped: too many hooks waiting", "job_id", jobID, "hook", path, "waiting", maxHookWaiting)
		return
	}
	h.waiting++
	sem := h.sem
	h.mu.Unlock()
	go func() {
		sem <- struct{}{}
		h.mu.Lock()
		h.waiting--
		h.mu.Unlock()
		out, err := runHook(path, timeout, env)
		<-sem
		res := hookOK
		switch {
		case errors.Is(err, errHookRefused):
			res = hookRefused
		case errors.Is(err, context.DeadlineExceeded):
			res = hookTimeout
		case err != nil:
			res = hookFailed
		}
		if err != nil {
			log.Warn("idle GPU hook failed", "job_id", jobID, "hook", path, "result", res, "err", err, "output", string(out))
		} else {
			log.Info("idle GPU hook ran", "job_id", jobID, "hook", path, "output", string(out))
		}
		h.finish(res)
	}()
}

func (h *hookRunner) finish(res string) {
	h.mu.Lock()
	if h.counts == nil {
		h.counts = map[string]uint64{}
	}
	h.counts[res]++
	done := h.done
	h.mu.Unlock()
	if done != nil {
		done(res)
	}
}

// count is how many runs ended with res.
func (h *hookRunner) count(res string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[res]
}

// errHookRefused: the hook's file is not safe to run.
var errHookRefused = errors.New("hook refused")

// runHook runs path with env alone, no arguments, in /, killing its
// process group after timeout; it returns the first hookOutputMax bytes
// of its output.
func runHook(path string, timeout time.Duration, env []string) ([]byte, error) {
	if err := checkHook(path); err != nil {
		return nil, fmt.Errorf("%w: %w", errHookRefused, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.Env, cmd.Dir = env, "/"
	out := &cappedBuffer{max: hookOutputMax}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.Bytes(), fmt.Errorf("killed after %s: %w", timeout, context.DeadlineExceeded)
	}
	return out.Bytes(), err
}

// checkHook refuses a hook that others could have changed: it must be a
// regular executable file owned by root or this process's user, that
// neither group nor others may write, in a directory that neither
// group nor others may write (or sticky, as /tmp is not: refused).
func checkHook(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	if err := safeOwner(path, fi); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	if err != nil {
		return err
	}
	return safeOwner(dir, di)
}

// safeOwner checks that fi (of path) is owned by root or this process's
// user and writable by neither group nor others.
func safeOwner(path string, fi os.FileInfo) error {
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (mode %v)", path, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s is owned by uid %d, neither root nor the controller's user", path, st.Uid)
	}
	return nil
}

// cappedBuffer keeps the first max bytes written to it.
type cappedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *cappedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.TrimSpace(b.buf.Bytes())
}
