package noded

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/ctr"
)

// Labels on Tide's containers: whose they are and which job incarnation
// they run, so that a restarted tided finds its own among those of other
// nodes sharing the daemon (a local cluster, CI).
const (
	labelOwner   = "tide.owner"
	labelJob     = "tide.job"
	labelRestart = "tide.restart"
	labelNode    = "tide.node"
)

// ctrRPCTimeout bounds one containerd call made for a signal or cleanup.
const ctrRPCTimeout = 30 * time.Second

// ctrRuntime runs jobs that ask for an image as containerd tasks. The
// tasks belong to containerd's shims, not to tided, so they outlive
// tided's restarts like supervised processes do; their output goes to the
// job's files straight from the shim.
type ctrRuntime struct {
	d *Daemon
	c *ctr.Client
	// owner tells this tided's containers from those of other tideds on
	// the same containerd: a hash of the node name and state directory.
	owner string
	// devDir is where GPU device nodes are looked up (tests change it).
	devDir string

	mu    sync.Mutex
	tasks map[api.JobRef]containerd.Task
}

func newCtrRuntime(d *Daemon, c *ctr.Client) *ctrRuntime {
	h := sha256.Sum256([]byte(d.cfg.Name + "\x00" + d.cfg.StateDir))
	return &ctrRuntime{d: d, c: c, owner: hex.EncodeToString(h[:6]), devDir: "/dev", tasks: map[api.JobRef]containerd.Task{}}
}

func (*ctrRuntime) name() string { return "container" }

// containerID names a job incarnation's container (and its snapshot).
func (r *ctrRuntime) containerID(ref api.JobRef) string {
	return fmt.Sprintf("tide-%s-%d-%d", r.owner, ref.JobID, ref.Restart)
}

// cgroupsPath is the task's cgroup below each controller's root.
func (r *ctrRuntime) cgroupsPath(ref api.JobRef) string {
	return "/" + r.c.Namespace + "/" + r.containerID(ref)
}

func (r *ctrRuntime) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.c.Ctx(context.Background()), ctrRPCTimeout)
}

// fileIO hands the shim the paths of the job's output files: for a
// path that is not a FIFO the shim opens the existing file for appending
// and copies the task's output there itself, so that nothing in tided
// stands between the job and its files.
type fileIO struct{ cfg cio.Config }

func (f *fileIO) Config() cio.Config { return f.cfg }
func (f *fileIO) Cancel()            {}
func (f *fileIO) Wait()              {}
func (f *fileIO) Close() error       { return nil }

// start creates the job's output files as its user, creates the
// container from the image and starts the task.
func (r *ctrRuntime) start(j *job) (func(), error) {
	d := r.d
	spec := &j.spec
	files := ResolveFiles(spec, d.cfg.Name)
	if files.Stdin != "/dev/null" {
		return nil, fmt.Errorf("--input is not supported for container jobs (input file %s)", files.Stdin)
	}
	for _, m := range spec.ContainerMounts {
		if _, err := os.Stat(m.Source); err != nil {
			return nil, fmt.Errorf("container mount %s: %w", m, unwrapPathErr(err))
		}
	}
	cred := userCred{UID: spec.UserID, GID: spec.GroupID, Umask: umaskFromEnv(spec.Env)}
	cred.Switch = d.asRoot && (cred.UID != uint32(os.Geteuid()) || cred.GID != uint32(os.Getegid()))
	cred.Groups = []uint32{cred.GID}
	if d.asRoot {
		cred.Groups = d.groups.get(cred.UID, cred.GID, d.log)
	}
	wd := workDir(spec)
	prep, err := prepareOutputs(cred, files, wd, spec.OpenMode == "append")
	if err != nil {
		return nil, err
	}
	ctx, cancel := r.ctx()
	defer cancel()
	img, err := r.c.JobImage(ctx, spec.ContainerImage)
	if err != nil {
		if errors.Is(err, ctr.ErrImageNotFound) {
			return nil, fmt.Errorf("container image %s is not on node %s (import it there: tided image import FILE.tar)", spec.ContainerImage, d.cfg.Name)
		}
		return nil, err
	}
	alloc := nodeAlloc(spec, d.cfg.Name)
	in := &ctrJobSpec{
		Script: filepath.Join(j.dir, fileScript), Args: spec.Args, Env: BuildEnv(spec, d.cfg.Name),
		Cwd: prep.Cwd, Files: files, WorkDir: wd, Mounts: spec.ContainerMounts, Cred: cred,
		MemoryMB: alloc.MemoryMB, CPUs: alloc.CPUs, CgroupsPath: r.cgroupsPath(j.ref),
		// A slice's GPUs are shared with other jobs: it gets their device
		// nodes too; its limits are the job's environment to honour.
		GPUDevices: gpuDevices(r.devDir, alloc.GPUs),
	}
	var nofile syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile) == nil {
		in.NoFile = &nofile
	}
	id := r.containerID(j.ref)
	// A container of this incarnation left by a tided that crashed
	// between creating and starting it never ran: replace it.
	r.remove(ctx, id)
	labels := map[string]string{labelOwner: r.owner, labelNode: d.cfg.Name,
		labelJob: strconv.FormatUint(j.ref.JobID, 10), labelRestart: strconv.Itoa(j.ref.Restart)}
	opts := append([]oci.SpecOpts{oci.WithImageConfig(img)}, ctrSpecOpts(in)...)
	c, err := r.c.NewContainer(ctx, id, containerd.WithImage(img), containerd.WithSnapshotter(r.c.Snapshotter),
		containerd.WithNewSnapshot(id, img), containerd.WithContainerLabels(labels), containerd.WithNewSpec(opts...))
	if err != nil {
		return nil, fmt.Errorf("create container: %w", err)
	}
	errPath := files.Stderr
	if errPath == "" {
		errPath = files.Stdout
	}
	io := &fileIO{cio.Config{Stdout: files.Stdout, Stderr: errPath}}
	task, err := c.NewTask(ctx, func(string) (cio.IO, error) { return io, nil })
	if err != nil {
		r.remove(ctx, id)
		return nil, fmt.Errorf("create task: %w", err)
	}
	exit, err := task.Wait(r.c.Ctx(context.Background()))
	if err != nil {
		r.remove(ctx, id)
		return nil, fmt.Errorf("wait for task: %w", err)
	}
	started := time.Now()
	if err := task.Start(ctx); err != nil {
		r.remove(ctx, id)
		return nil, fmt.Errorf("start task: %w", err)
	}
	r.mu.Lock()
	r.tasks[j.ref] = task
	r.mu.Unlock()
	// A kill that raced the start found no task; its marker is here.
	m := readMarkers(j.dir)
	for _, k := range []*killMarker{m.Killed, m.TimedOut} {
		if k != nil {
			sig := syscall.SIGTERM
			if k.Signal > 0 {
				sig = syscall.Signal(k.Signal)
			}
			r.kill(j.ref, task, sig, true)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.finish(j, task, exit, started)
	}()
	return func() { <-done }, nil
}

// finish waits for the task's exit, writes status.json and removes the
// task, container and snapshot. A broken wait (tided stopping and
// closing its connection, or containerd restarting) is not an exit:
// a stopping tided leaves the task to its successor, otherwise the wait
// is renewed, since the task lives on in its shim.
func (r *ctrRuntime) finish(j *job, task containerd.Task, exit <-chan containerd.ExitStatus, started time.Time) {
	delay := 100 * time.Millisecond
	for {
		es := <-exit
		code, at, err := es.Result()
		if err == nil {
			st := jobStatus{StartTime: started, EndTime: at, Exit: exitFromCode(code), OOM: oomKilled(r.cgroupsPath(j.ref))}
			if at.IsZero() {
				st.EndTime = time.Now()
			}
			r.record(j, st)
			return
		}
		for {
			if r.stopping() {
				return
			}
			r.d.log.Warn("lost the wait on a container task, waiting again", "job_id", j.ref.JobID, "err", err, "retry_in", delay)
			time.Sleep(delay)
			delay = min(2*delay, 5*time.Second)
			if exit, err = task.Wait(r.c.Ctx(context.Background())); err == nil {
				break
			}
			if errdefs.IsNotFound(err) {
				// containerd no longer knows the task: its end is lost.
				r.record(j, lostStatus(time.Now()))
				return
			}
		}
	}
}

// stopping reports whether the daemon is shutting down.
func (r *ctrRuntime) stopping() bool {
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	return r.d.stopped
}

// record writes a finished task's status and cleans up after it. Until
// status.json is written the container stays, so that a tided that dies
// in between finds the exit status in containerd again.
func (r *ctrRuntime) record(j *job, st jobStatus) {
	if err := writeJSONAtomic(filepath.Join(j.dir, fileStatus), &st, 0o644); err != nil {
		r.d.log.Error("cannot record job status", "job_id", j.ref.JobID, "err", err)
		return
	}
	r.mu.Lock()
	delete(r.tasks, j.ref)
	r.mu.Unlock()
	ctx, cancel := r.ctx()
	defer cancel()
	r.remove(ctx, r.containerID(j.ref))
}

// exitFromCode turns a task's exit code into Slurm's code:signal. The
// shim reports death by signal N as 128+N, which a script's own
// "exit 137" cannot be told from.
func exitFromCode(code uint32) api.ExitStatus {
	if code > 128 && code <= 128+64 {
		return api.ExitStatus{Signal: int(code - 128)}
	}
	return api.ExitStatus{Code: int(code)}
}

// oomKilled reports whether the kernel's OOM killer ended a process in
// the task's memory cgroup (v1 memory.oom_control, v2 memory.events). It
// must be read before the task is deleted, which removes the cgroup.
func oomKilled(cgroupsPath string) bool {
	return oomKilledIn("/sys/fs/cgroup", cgroupsPath)
}

func oomKilledIn(root, cgroupsPath string) bool {
	for _, f := range []string{
		filepath.Join(root, cgroupsPath, "memory.events"),                // v2
		filepath.Join(root, "memory", cgroupsPath, "memory.oom_control"), // v1
	} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(line, " ")
			if ok && k == "oom_kill" {
				n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				return n > 0
			}
		}
	}
	return false
}

// remove deletes a container with its task and snapshot, whatever state
// they are in.
func (r *ctrRuntime) remove(ctx context.Context, id string) {
	c, err := r.c.LoadContainer(ctx, id)
	if err != nil {
		if !errdefs.IsNotFound(err) {
			r.d.log.Warn("cannot load container", "container", id, "err", err)
		}
		return
	}
	if t, err := c.Task(ctx, nil); err == nil {
		if _, err := t.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			r.d.log.Warn("cannot delete task", "container", id, "err", err)
		}
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		r.d.log.Warn("cannot delete container", "container", id, "err", err)
	}
}

// signalLocked sends sig to every process of the task (WithKillAll: a
// PID 1 without a handler ignores SIGTERM, its children do not), or to
// the batch script alone. The RPC runs in the background: d.mu is held.
func (r *ctrRuntime) signalLocked(j *job, sig syscall.Signal, batchOnly bool) {
	r.mu.Lock()
	task := r.tasks[j.ref]
	r.mu.Unlock()
	if task == nil {
		r.d.log.Debug("container task not running, signal not sent", "job_id", j.ref.JobID, "signal", int(sig))
		return
	}
	go r.kill(j.ref, task, sig, !batchOnly)
}

func (r *ctrRuntime) kill(ref api.JobRef, task containerd.Task, sig syscall.Signal, all bool) {
	ctx, cancel := r.ctx()
	defer cancel()
	var opts []containerd.KillOpts
	if all {
		opts = append(opts, containerd.WithKillAll)
	}
	if err := task.Kill(ctx, sig, opts...); err != nil && !errdefs.IsNotFound(err) {
		r.d.log.Warn("cannot signal container task", "job_id", ref.JobID, "signal", int(sig), "err", err)
	}
}

// reattach finds the task of a job that was running when tided stopped.
// A task that ended meanwhile is recorded and cleaned up (st is set); a
// running one is watched (wait returns once its status.json is
// written). A job whose container or task is gone is lost (err).
func (r *ctrRuntime) reattach(j *job) (st *jobStatus, wait func(), err error) {
	ctx, cancel := r.ctx()
	defer cancel()
	id := r.containerID(j.ref)
	c, err := r.c.LoadContainer(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("container %s: %w", id, err)
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		r.remove(ctx, id)
		return nil, nil, fmt.Errorf("task of container %s: %w", id, err)
	}
	s, err := task.Status(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("status of task %s: %w", id, err)
	}
	if s.Status == containerd.Stopped {
		fin := jobStatus{EndTime: s.ExitTime, Exit: exitFromCode(s.ExitStatus), OOM: oomKilled(r.cgroupsPath(j.ref))}
		if fin.EndTime.IsZero() {
			fin.EndTime = time.Now()
		}
		r.record(j, fin)
		return &fin, nil, nil
	}
	exit, err := task.Wait(r.c.Ctx(context.Background()))
	if err != nil {
		return nil, nil, fmt.Errorf("wait for task %s: %w", id, err)
	}
	r.mu.Lock()
	r.tasks[j.ref] = task
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.finish(j, task, exit, time.Time{})
	}()
	return nil, func() { <-done }, nil
}

// removeOrphans kills and deletes this tided's containers that belong
// to no job it still runs: left behind when a job directory vanished or
// cleanup failed.
func (r *ctrRuntime) removeOrphans(jobs map[api.JobRef]*job) {
	ctx, cancel := r.ctx()
	defer cancel()
	list, err := r.c.Containers(ctx, fmt.Sprintf("labels.%q==%s", labelOwner, r.owner))
	if err != nil {
		r.d.log.Warn("cannot list containers", "err", err)
		return
	}
	for _, c := range list {
		labels, err := c.Labels(ctx)
		if err != nil {
			continue
		}
		id, _ := strconv.ParseUint(labels[labelJob], 10, 64)
		restart, _ := strconv.Atoi(labels[labelRestart])
		if j := jobs[api.JobRef{JobID: id, Restart: restart}]; j != nil && !j.finished() {
			continue
		}
		r.d.log.Warn("removing orphaned container", "container", c.ID())
		r.remove(ctx, c.ID())
	}
}

// reattachContainer is recover's hook for container jobs.
func (d *Daemon) reattachContainer(j *job) (*jobStatus, func(), error) {
	if d.ctr == nil {
		return nil, nil, errNoContainers
	}
	return d.ctr.reattach(j)
}
