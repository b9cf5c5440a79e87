package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/noded/cdi"
	"github.com/tide-hpc/tide/noded/cgroup"
	"github.com/tide-hpc/tide/noded/ctr"
	"github.com/tide-hpc/tide/noded/stepd"
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

// ContainerdConfig configures the containerd runtime.
type ContainerdConfig struct {
	// Node is the node's name, for labels and messages.
	Node string
	// StateDir is tided's state directory: with Node it tells this
	// tided's containers from those of other tideds on the same
	// containerd.
	StateDir string
	// Pull is containerd.pull: ctr.PullNever fails a job whose image the
	// node lacks; anything else pulls it, each pull bounded by
	// PullTimeout, with Registry's settings.
	Pull        string
	PullTimeout time.Duration
	Registry    ctr.RegistryConfig
	// CDISpecDirs are where CDI specs are read at each launch
	// (containerd.cdi_spec_dirs).
	CDISpecDirs []string
	// NvidiaHook is the NVIDIA container hook GPU jobs get where CDI
	// does not bring their GPUs ("" for none).
	NvidiaHook string
	// GPUs are the node's GPUs, which name a job's GPUs by UUID.
	GPUs []gres.Device
	// Logger receives the runtime's log (nil: discarded).
	Logger *slog.Logger
}

// Containerd runs jobs that ask for an image as containerd tasks. The
// tasks belong to containerd's shims, not to tided, so they outlive
// tided's restarts like supervised processes do; their output goes to
// the job's files straight from the shim.
type Containerd struct {
	cfg ContainerdConfig
	log *slog.Logger
	c   *ctr.Client
	// owner tells this tided's containers from those of other tideds on
	// the same containerd: a hash of the node name and state directory.
	owner string
	// devDir is where GPU device nodes are looked up (tests change it).
	devDir string
	// puller pulls the images jobs want and the node lacks, one pull per
	// image however many jobs wait; nil when containerd.pull is never.
	puller *ctr.Puller
	// closed is set by Close: tided is stopping, and what runs is left to
	// its successor.
	closed atomic.Bool

	mu    sync.Mutex
	tasks map[api.JobRef]containerd.Task
	// cdiWarned holds the CDI spec problems already logged.
	cdiWarned map[string]bool
}

var (
	_ Runtime       = (*Containerd)(nil)
	_ OrphanRemover = (*Containerd)(nil)
	_ cio.IO        = (*fileIO)(nil)
)

// OrphanRemover is a Runtime that keeps things of its own outside the
// job directories (containers), and can find and remove those of jobs
// the daemon no longer runs.
type OrphanRemover interface {
	// RemoveOrphans kills and removes what the runtime keeps for jobs
	// that keep does not report as still running here.
	RemoveOrphans(ctx context.Context, keep func(api.JobRef) bool) error
}

// NewContainerd returns the containerd runtime over the connection c.
func NewContainerd(c *ctr.Client, cfg ContainerdConfig) *Containerd {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := sha256.Sum256([]byte(cfg.Node + "\x00" + cfg.StateDir))
	r := &Containerd{cfg: cfg, log: log, c: c, owner: hex.EncodeToString(h[:6]), devDir: "/dev",
		tasks: map[api.JobRef]containerd.Task{}, cdiWarned: map[string]bool{}}
	if cfg.Pull != ctr.PullNever {
		rc := cfg.Registry
		r.puller = ctr.NewPuller(func(ctx context.Context, ref string) (containerd.Image, error) {
			return c.PullJobImage(ctx, ref, rc)
		}, cfg.PullTimeout)
	}
	return r
}

// Name is "container".
func (*Containerd) Name() string { return "container" }

// containerID names a job incarnation's container (and its snapshot).
func (r *Containerd) containerID(ref api.JobRef) string {
	return fmt.Sprintf("tide-%s-%d-%d", r.owner, ref.JobID, ref.Restart)
}

// cgroupsPath is the task's cgroup below each controller's root.
func (r *Containerd) cgroupsPath(ref api.JobRef) string {
	return "/" + r.c.Namespace + "/" + r.containerID(ref)
}

// rpcCtx is ctx in the runtime's namespace, bounded by ctrRPCTimeout.
func (r *Containerd) rpcCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.c.Ctx(ctx), ctrRPCTimeout)
}

// ctx is rpcCtx for work of the runtime's own, which no caller bounds.
func (r *Containerd) ctx() (context.Context, context.CancelFunc) {
	return r.rpcCtx(context.Background())
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

// Start creates the job's output files as its user, resolves its GPUs
// and, when the image is on the node, creates the container and starts
// the task. An image the node lacks is pulled in the background
// (pullAndRun): Start returns at once, and its exit channel covers the
// pull and the run.
func (r *Containerd) Start(ctx context.Context, j Job) (<-chan struct{}, error) {
	spec := j.Spec
	l := j.Resolve()
	files := l.Files
	// Errors of the job's own request are its fault (JobFault): another
	// node would fail it alike. The rest is the node's.
	if files.Stdin != "/dev/null" {
		return nil, JobFault(fmt.Errorf("--input is not supported for container jobs (input file %s)", files.Stdin))
	}
	for _, m := range spec.ContainerMounts {
		if _, err := os.Stat(m.Source); err != nil {
			return nil, JobFault(fmt.Errorf("container mount %s: %w", m, unwrapPathErr(err)))
		}
	}
	prep, err := prepareOutputs(l.User, files, l.WorkDir, l.Append)
	if err != nil {
		return nil, JobFault(err)
	}
	in := &ctrJobSpec{
		Script: filepath.Join(j.Dir, stepd.FileScript), Args: spec.Args, Env: l.Env,
		Cwd: prep.Cwd, Files: files, WorkDir: l.WorkDir, Mounts: spec.ContainerMounts, Cred: l.User,
		MemoryMB: l.MemoryMB, CPUs: l.CPUs, GPUs: l.GPUs, CgroupsPath: r.cgroupsPath(j.Ref),
	}
	// A slice's GPUs are shared with other jobs: it gets their devices
	// too; its limits are the job's environment to honour. CDI specs,
	// where the node has them for its GPUs, say what a GPU needs (before
	// a pull: a node whose specs do not match fails at once).
	if in.CDI, err = r.cdiEdits(l.GPUs); err != nil {
		return nil, err
	}
	if in.CDI == nil {
		in.GPUDevices = gpuDevices(r.devDir, l.GPUs)
	}
	lctx, lcancel := r.rpcCtx(ctx)
	img, err := r.c.JobImage(lctx, spec.ContainerImage)
	lcancel()
	switch {
	case err == nil:
		return r.run(ctx, j, img, in)
	case !errors.Is(err, ctr.ErrImageNotFound):
		return nil, err
	case r.puller == nil:
		return nil, JobFault(fmt.Errorf("container image %s is not on node %s (import it there: tided image import FILE.tar; containerd.pull is %s)",
			spec.ContainerImage, r.cfg.Node, ctr.PullNever))
	}
	// The pull runs apart from the sync loop, which launches the node's
	// other jobs meanwhile; this job's exit channel covers the pull. The
	// marker tells a tided restarted meanwhile to pull again (Reattach).
	if err := stepd.WriteFileAtomic(filepath.Join(j.Dir, filePulling), []byte(spec.ContainerImage+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("record the pull: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.pullAndRun(j, in)
	}()
	return done, nil
}

// run creates the job's container from img and starts its task.
func (r *Containerd) run(ctx context.Context, j Job, img containerd.Image, in *ctrJobSpec) (<-chan struct{}, error) {
	files := in.Files
	ctx, cancel := r.rpcCtx(ctx)
	defer cancel()
	var nofile syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile) == nil {
		in.NoFile = &nofile
	}
	id := r.containerID(j.Ref)
	// A container of this incarnation left by a tided that crashed
	// between creating and starting it never ran: replace it.
	r.removeLogged(ctx, id)
	labels := map[string]string{labelOwner: r.owner, labelNode: r.cfg.Node,
		labelJob: strconv.FormatUint(j.Ref.JobID, 10), labelRestart: strconv.Itoa(j.Ref.Restart)}
	opts := append([]oci.SpecOpts{oci.WithImageConfig(img)}, ctrSpecOpts(in)...)
	if in.CDI == nil {
		// CDI specs bring the driver's libraries themselves.
		opts = append(opts, WithNvidiaHook(r.cfg.NvidiaHook, gpuUUIDs(r.cfg.GPUs, in.GPUs)))
	}
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
		r.removeLogged(ctx, id)
		return nil, fmt.Errorf("create task: %w", err)
	}
	exit, err := task.Wait(r.c.Ctx(context.Background()))
	if err != nil {
		r.removeLogged(ctx, id)
		return nil, fmt.Errorf("wait for task: %w", err)
	}
	started := time.Now()
	if err := task.Start(ctx); err != nil {
		r.removeLogged(ctx, id)
		return nil, fmt.Errorf("start task: %w", err)
	}
	r.mu.Lock()
	r.tasks[j.Ref] = task
	r.mu.Unlock()
	// A kill that raced the start found no task; its marker is here.
	m := stepd.ReadMarkers(j.Dir)
	for _, k := range []*stepd.KillMarker{m.Killed, m.TimedOut} {
		if k != nil {
			sig := syscall.SIGTERM
			if k.Signal > 0 {
				sig = syscall.Signal(k.Signal)
			}
			r.kill(ctx, j, task, sig, true)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.finish(j, task, exit, started)
	}()
	return done, nil
}

// filePulling marks a job directory whose job waits for its image: a
// restarted tided that finds no container for it pulls again.
const filePulling = "pulling"

// pullPoll is how often a job waiting for its image checks whether it
// was cancelled (or timed out) meanwhile, or tided is stopping.
const pullPoll = 250 * time.Millisecond

// pullAndRun pulls the job's image (joining a pull of it under way)
// and then runs the job. Its end is in status.json: a failed pull fails
// the launch with the registry's reason, a job killed while it waits
// ends without running. A tided that stops meanwhile leaves it (its
// successor finds no container and pulls again).
func (r *Containerd) pullAndRun(j Job, in *ctrJobSpec) {
	ref := j.Spec.ContainerImage
	log := r.log.With("job_id", j.Ref.JobID, "restart", j.Ref.Restart, "image", ref)
	log.Info("container image not on the node: pulling it")
	began := time.Now()
	marker := filepath.Join(j.Dir, filePulling)
	defer func() {
		if !r.closed.Load() {
			os.Remove(marker)
		}
	}()
	pulled, result := r.puller.Start(ref)
	tick := time.NewTicker(pullPoll)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case <-pulled:
			waiting = false
		case <-tick.C:
			if r.closed.Load() {
				return
			}
			if k := killedMarker(j.Dir); k != nil {
				log.Info("job killed while its image was being pulled")
				r.writeStatus(j, KilledStatus(k, began))
				return
			}
		}
	}
	img, err := result()
	if err != nil {
		log.Warn("image pull failed", "err", err)
		r.failLaunch(j, fmt.Errorf("container image %s is not on node %s and cannot be pulled: %w", ref, r.cfg.Node, err))
		return
	}
	log.Info("image pulled", "took", time.Since(began).Round(time.Millisecond))
	if r.closed.Load() {
		return
	}
	if k := killedMarker(j.Dir); k != nil {
		r.writeStatus(j, KilledStatus(k, began))
		return
	}
	exited, err := r.run(context.Background(), j, img, in)
	if err != nil {
		log.Error("cannot start container", "err", err)
		r.failLaunch(j, err)
		return
	}
	<-exited
}

// resumePull starts again the launch of a job whose image was being
// pulled when tided stopped: the pull starts over (or finds the image
// there), then the job runs.
func (r *Containerd) resumePull(ctx context.Context, j Job) (<-chan struct{}, *stepd.Status, error) {
	r.log.Info("job was waiting for its image: pulling again", "job_id", j.Ref.JobID, "image", j.Spec.ContainerImage)
	exited, err := r.Start(ctx, j)
	if err != nil {
		st := stepd.Status{Exit: api.ExitStatus{Code: 1}, EndTime: time.Now(), Error: "start " + r.Name() + ": " + err.Error()}
		r.writeStatus(j, st)
		return nil, &st, nil
	}
	return exited, nil, nil
}

// failLaunch records a launch that failed after Start returned, as the
// daemon records one that failed before: exit 1 with the reason.
func (r *Containerd) failLaunch(j Job, err error) {
	r.writeStatus(j, stepd.Status{Exit: api.ExitStatus{Code: 1}, EndTime: time.Now(), Error: "start " + r.Name() + ": " + err.Error()})
}

func (r *Containerd) writeStatus(j Job, st stepd.Status) {
	if err := stepd.WriteJSONAtomic(filepath.Join(j.Dir, stepd.FileStatus), &st, 0o644); err != nil {
		r.log.Error("cannot record job status", "job_id", j.Ref.JobID, "err", err)
	}
}

// cdiEdits resolves the job's GPUs to the edits of the node's CDI
// specs: nil when the job has no GPUs or the specs do not define
// nvidia.com/gpu devices (the GPUs then come as bare device nodes), an
// error when they do but not for one of these GPUs. The specs are read
// at each launch: they are small, and nvidia-ctk rewrites them when the
// driver changes.
func (r *Containerd) cdiEdits(gpus []int) (*cdi.ContainerEdits, error) {
	dirs := r.cfg.CDISpecDirs
	if len(gpus) == 0 || len(dirs) == 0 {
		return nil, nil
	}
	reg := cdi.Load(dirs)
	r.mu.Lock()
	for _, p := range reg.Problems {
		if !r.cdiWarned[p.Error()] {
			r.cdiWarned[p.Error()] = true
			r.log.Warn("CDI spec ignored", "err", p)
		}
	}
	r.mu.Unlock()
	if !reg.HasKind(cdi.GPUKind) {
		return nil, nil
	}
	names, err := reg.GPUNames(gpus, func(i int) string {
		for _, g := range r.cfg.GPUs {
			if g.Index == i {
				return g.UUID
			}
		}
		return ""
	})
	if err != nil {
		return nil, err
	}
	return reg.Resolve(names)
}

// finish waits for the task's exit, writes status.json and removes the
// task, container and snapshot. A broken wait (tided stopping and
// closing its connection, or containerd restarting) is not an exit:
// a stopping tided leaves the task to its successor, otherwise the wait
// is renewed, since the task lives on in its shim.
func (r *Containerd) finish(j Job, task containerd.Task, exit <-chan containerd.ExitStatus, started time.Time) {
	delay := 100 * time.Millisecond
	for {
		es := <-exit
		code, at, err := es.Result()
		if err == nil {
			oom := oomKilled(r.cgroupsPath(j.Ref))
			st := stepd.Status{StartTime: started, EndTime: at, Exit: exitFromCode(code, signalsSent(j.Dir), oom), OOM: oom}
			if at.IsZero() {
				st.EndTime = time.Now()
			}
			r.record(j, st)
			return
		}
		for {
			if r.closed.Load() {
				return
			}
			r.log.Warn("lost the wait on a container task, waiting again", "job_id", j.Ref.JobID, "err", err, "retry_in", delay)
			time.Sleep(delay)
			delay = min(2*delay, 5*time.Second)
			if exit, err = task.Wait(r.c.Ctx(context.Background())); err == nil {
				break
			}
			if errdefs.IsNotFound(err) {
				// containerd no longer knows the task: its end is lost.
				r.record(j, LostStatus(time.Now()))
				return
			}
		}
	}
}

// record writes a finished task's status and cleans up after it. Until
// status.json is written the container stays, so that a tided that dies
// in between finds the exit status in containerd again.
func (r *Containerd) record(j Job, st stepd.Status) {
	if err := stepd.WriteJSONAtomic(filepath.Join(j.Dir, stepd.FileStatus), &st, 0o644); err != nil {
		r.log.Error("cannot record job status", "job_id", j.Ref.JobID, "err", err)
		return
	}
	r.mu.Lock()
	delete(r.tasks, j.Ref)
	r.mu.Unlock()
	ctx, cancel := r.ctx()
	defer cancel()
	r.removeLogged(ctx, r.containerID(j.Ref))
}

// oomKilled reports whether the kernel's OOM killer ended a process in
// the task's memory cgroup (v1 memory.oom_control, v2 memory.events). It
// must be read before the task is deleted, which removes the cgroup.
func oomKilled(cgroupsPath string) bool {
	return oomKilledIn(cgroup.DefaultRoot, cgroupsPath)
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
// they are in. A container that does not exist is not an error.
func (r *Containerd) remove(ctx context.Context, id string) error {
	c, err := r.c.LoadContainer(ctx, id)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("load container %s: %w", id, err)
	}
	var errs []error
	if t, err := c.Task(ctx, nil); err == nil {
		if _, err := t.Delete(ctx, containerd.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete task of container %s: %w", id, err))
		}
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete container %s: %w", id, err))
	}
	return errors.Join(errs...)
}

// removeLogged is remove for the runtime's own cleanups: a failure is
// logged (the orphan sweep of the next tided tries again).
func (r *Containerd) removeLogged(ctx context.Context, id string) {
	if err := r.remove(ctx, id); err != nil {
		r.log.Warn("cannot remove container", "container", id, "err", err)
	}
}

// State is Running while the runtime holds the job's task (from its
// start, or reattached, until its exit is recorded); a job waiting for
// its image is Stopped: nothing of it runs to signal.
func (r *Containerd) State(j Job) State {
	if r.task(j.Ref) != nil {
		return Running
	}
	return Stopped
}

// Signal sends sig to every process of the task (WithKillAll: a PID 1
// without a handler ignores SIGTERM, its children do not), or to the
// batch script alone.
func (r *Containerd) Signal(ctx context.Context, j Job, sig syscall.Signal, batchOnly bool) error {
	task := r.task(j.Ref)
	if task == nil {
		return ErrNotRunning
	}
	return r.kill(ctx, j, task, sig, !batchOnly)
}

// task returns the job's running task, or nil.
func (r *Containerd) task(ref api.JobRef) containerd.Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tasks[ref]
}

// kill signals the task and records the signal for reading its exit
// status (ctrexit.go).
func (r *Containerd) kill(ctx context.Context, j Job, task containerd.Task, sig syscall.Signal, all bool) error {
	recordSignal(j.Dir, sig, r.log)
	ctx, cancel := r.rpcCtx(ctx)
	defer cancel()
	var opts []containerd.KillOpts
	if all {
		opts = append(opts, containerd.WithKillAll)
	}
	if err := task.Kill(ctx, sig, opts...); err != nil && !errdefs.IsNotFound(err) {
		r.log.Warn("cannot signal container task", "job_id", j.Ref.JobID, "signal", int(sig), "err", err)
		return fmt.Errorf("signal container task: %w", err)
	}
	return nil
}

// Freeze pauses the job's task (runc's freezer).
func (r *Containerd) Freeze(ctx context.Context, j Job, mark func(string)) (string, error) {
	task := r.task(j.Ref)
	if task == nil {
		return "", ErrNotRunning
	}
	mark(stepd.FreezeContainer)
	ctx, cancel := r.rpcCtx(ctx)
	defer cancel()
	return stepd.FreezeContainer, ctr.Pause(ctx, task)
}

// Thaw resumes the job's paused task.
func (r *Containerd) Thaw(ctx context.Context, j Job, _ string) error {
	task := r.task(j.Ref)
	if task == nil {
		return ErrNotRunning
	}
	ctx, cancel := r.rpcCtx(ctx)
	defer cancel()
	return ctr.Resume(ctx, task)
}

// Stats lists the task's processes and reads its cgroup (where
// containerd's runc put it, cgroupsPath): CPU time and memory charged.
// A cgroup this tided cannot read leaves Source empty with the pids
// alone.
func (r *Containerd) Stats(ctx context.Context, j Job) (Stats, error) {
	task := r.task(j.Ref)
	if task == nil {
		return Stats{}, ErrNotRunning
	}
	ctx, cancel := r.rpcCtx(ctx)
	defer cancel()
	procs, err := task.Pids(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("processes of container task: %w", err)
	}
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = int(p.Pid)
	}
	st := Stats{Pids: pids}
	cgp := r.cgroupsPath(j.Ref)
	h, err := cgroup.Detect(cgroup.DefaultRoot)
	if err != nil {
		return st, nil
	}
	cg := h.Open(strings.TrimPrefix(path.Dir(cgp), "/"), path.Base(cgp))
	if len(cg.Dirs()) == 0 {
		return st, nil
	}
	cs, err := cgroupStats(cg)
	if err != nil {
		return st, nil
	}
	cs.Pids = pids
	return cs, nil
}

// Delete removes the job's container with its task and snapshot.
func (r *Containerd) Delete(ctx context.Context, j Job) error {
	r.mu.Lock()
	delete(r.tasks, j.Ref)
	r.mu.Unlock()
	ctx, cancel := r.rpcCtx(ctx)
	defer cancel()
	return r.remove(ctx, r.containerID(j.Ref))
}

// Reattach finds the task of a job that was running when tided stopped.
// A task that ended meanwhile is recorded and cleaned up (st is set); a
// running one is watched (its exit channel is closed once its
// status.json is written). A job whose container or task is gone is lost
// (err), unless it was waiting for its image: then the pull starts over.
func (r *Containerd) Reattach(ctx context.Context, j Job) (<-chan struct{}, *stepd.Status, error) {
	rctx, cancel := r.rpcCtx(ctx)
	defer cancel()
	id := r.containerID(j.Ref)
	c, err := r.c.LoadContainer(rctx, id)
	if err != nil {
		if errdefs.IsNotFound(err) && stepd.Exists(filepath.Join(j.Dir, filePulling)) {
			return r.resumePull(ctx, j)
		}
		return nil, nil, fmt.Errorf("container %s: %w", id, err)
	}
	task, err := c.Task(rctx, nil)
	if err != nil {
		r.removeLogged(rctx, id)
		return nil, nil, fmt.Errorf("task of container %s: %w", id, err)
	}
	s, err := task.Status(rctx)
	if err != nil {
		return nil, nil, fmt.Errorf("status of task %s: %w", id, err)
	}
	if s.Status == containerd.Stopped {
		oom := oomKilled(r.cgroupsPath(j.Ref))
		fin := stepd.Status{EndTime: s.ExitTime, Exit: exitFromCode(s.ExitStatus, signalsSent(j.Dir), oom), OOM: oom}
		if fin.EndTime.IsZero() {
			fin.EndTime = time.Now()
		}
		r.record(j, fin)
		return nil, &fin, nil
	}
	exit, err := task.Wait(r.c.Ctx(context.Background()))
	if err != nil {
		return nil, nil, fmt.Errorf("wait for task %s: %w", id, err)
	}
	r.mu.Lock()
	r.tasks[j.Ref] = task
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.finish(j, task, exit, time.Time{})
	}()
	return done, nil, nil
}

// RemoveOrphans kills and deletes this tided's containers that belong
// to no job it still runs: left behind when a job directory vanished or
// cleanup failed.
func (r *Containerd) RemoveOrphans(ctx context.Context, keep func(api.JobRef) bool) error {
	ctx, cancel := r.rpcCtx(ctx)
	defer cancel()
	list, err := r.c.Containers(ctx, fmt.Sprintf("labels.%q==%s", labelOwner, r.owner))
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, c := range list {
		labels, err := c.Labels(ctx)
		if err != nil {
			continue
		}
		id, _ := strconv.ParseUint(labels[labelJob], 10, 64)
		restart, _ := strconv.Atoi(labels[labelRestart])
		if keep(api.JobRef{JobID: id, Restart: restart}) {
			continue
		}
		r.log.Warn("removing orphaned container", "container", c.ID())
		errs = append(errs, r.remove(ctx, c.ID()))
	}
	return errors.Join(errs...)
}

// Close marks the runtime stopping (waits in flight end without
// recording anything, pulls are left) and closes the connection to
// containerd; tasks keep running in their shims.
func (r *Containerd) Close() error {
	r.closed.Store(true)
	return r.c.Close()
}
