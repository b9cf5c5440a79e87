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
	"github.com/tide-hpc/tide/noded/cdi"
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
	// nvidiaHook is the NVIDIA container hook GPU jobs get, "" for none
	// (nvidiahook.go).
	nvidiaHook string
	// puller pulls the images jobs want and the node lacks, one pull per
	// image however many jobs wait; nil when containerd.pull is never.
	puller *ctr.Puller

	mu    sync.Mutex
	tasks map[api.JobRef]containerd.Task
	// cdiWarned holds the CDI spec problems already logged.
	cdiWarned map[string]bool
}

func newCtrRuntime(d *Daemon, c *ctr.Client) *ctrRuntime {
	h := sha256.Sum256([]byte(d.cfg.Name + "\x00" + d.cfg.StateDir))
	r := &ctrRuntime{d: d, c: c, owner: hex.EncodeToString(h[:6]), devDir: "/dev", tasks: map[api.JobRef]containerd.Task{},
		nvidiaHook: d.newNvidiaHook()}
	r.cdiWarned = map[string]bool{}
	if cc := d.cfg.Containerd; cc.Pull != ctr.PullNever {
		rc := ctr.RegistryConfig{Insecure: cc.InsecureRegistries, AuthFile: cc.AuthFile}
		r.puller = ctr.NewPuller(func(ctx context.Context, ref string) (containerd.Image, error) {
			return c.PullJobImage(ctx, ref, rc)
		}, cc.PullTimeout)
	}
	return r
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

// start creates the job's output files as its user, resolves its GPUs
// and, when the image is on the node, creates the container and starts
// the task. An image the node lacks is pulled in the background
// (pullAndRun): start returns at once, and the wait it returns covers
// the pull and the run.
func (r *ctrRuntime) start(j *job) (func(), error) {
	d := r.d
	spec := &j.spec
	files := ResolveFiles(spec, d.cfg.Name)
	// Errors of the job's own request are its fault (jobFault): another
	// node would fail it alike. The rest is the node's.
	if files.Stdin != "/dev/null" {
		return nil, jobFault(fmt.Errorf("--input is not supported for container jobs (input file %s)", files.Stdin))
	}
	for _, m := range spec.ContainerMounts {
		if _, err := os.Stat(m.Source); err != nil {
			return nil, jobFault(fmt.Errorf("container mount %s: %w", m, unwrapPathErr(err)))
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
		return nil, jobFault(err)
	}
	alloc := nodeAlloc(spec, d.cfg.Name)
	in := &ctrJobSpec{
		Script: filepath.Join(j.dir, fileScript), Args: spec.Args, Env: BuildEnv(spec, d.cfg.Name),
		Cwd: prep.Cwd, Files: files, WorkDir: wd, Mounts: spec.ContainerMounts, Cred: cred,
		MemoryMB: alloc.MemoryMB, CPUs: alloc.CPUs, CgroupsPath: r.cgroupsPath(j.ref),
	}
	// A slice's GPUs are shared with other jobs: it gets their devices
	// too; its limits are the job's environment to honour. CDI specs,
	// where the node has them for its GPUs, say what a GPU needs (before
	// a pull: a node whose specs do not match fails at once).
	if in.CDI, err = r.cdiEdits(alloc.GPUs); err != nil {
		return nil, err
	}
	if in.CDI == nil {
		in.GPUDevices = gpuDevices(r.devDir, alloc.GPUs)
	}
	lctx, lcancel := r.ctx()
	img, err := r.c.JobImage(lctx, spec.ContainerImage)
	lcancel()
	switch {
	case err == nil:
		return r.run(j, img, in)
	case !errors.Is(err, ctr.ErrImageNotFound):
		return nil, err
	case r.puller == nil:
		return nil, jobFault(fmt.Errorf("container image %s is not on node %s (import it there: tided image import FILE.tar; containerd.pull is %s)",
			spec.ContainerImage, d.cfg.Name, ctr.PullNever))
	}
	// The pull runs apart from the sync loop, which launches the node's
	// other jobs meanwhile; this job's wait covers the pull. The marker
	// tells a tided restarted meanwhile to pull again (reattach).
	if err := writeFileAtomic(filepath.Join(j.dir, filePulling), []byte(spec.ContainerImage+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("record the pull: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.pullAndRun(j, in)
	}()
	return func() { <-done }, nil
}

// run creates the job's container from img and starts its task.
func (r *ctrRuntime) run(j *job, img containerd.Image, in *ctrJobSpec) (func(), error) {
	d := r.d
	files := in.Files
	alloc := nodeAlloc(&j.spec, d.cfg.Name)
	ctx, cancel := r.ctx()
	defer cancel()
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
	if in.CDI == nil {
		// CDI specs bring the driver's libraries themselves.
		opts = append(opts, nvidiaHookOpts(r.nvidiaHook, gpuUUIDs(d.gpus, alloc.GPUs))...)
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
// successor finds no container and reports the job lost).
func (r *ctrRuntime) pullAndRun(j *job, in *ctrJobSpec) {
	ref := j.spec.ContainerImage
	log := r.d.log.With("job_id", j.ref.JobID, "restart", j.ref.Restart, "image", ref)
	log.Info("container image not on the node: pulling it")
	began := time.Now()
	marker := filepath.Join(j.dir, filePulling)
	defer func() {
		if !r.stopping() {
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
			if r.stopping() {
				return
			}
			if k := killedMarker(j.dir); k != nil {
				log.Info("job killed while its image was being pulled")
				r.writeStatus(j, killedStatus(k, began))
				return
			}
		}
	}
	img, err := result()
	if err != nil {
		log.Warn("image pull failed", "err", err)
		r.failLaunch(j, fmt.Errorf("container image %s is not on node %s and cannot be pulled: %w", ref, r.d.cfg.Name, err))
		return
	}
	log.Info("image pulled", "took", time.Since(began).Round(time.Millisecond))
	if r.stopping() {
		return
	}
	if k := killedMarker(j.dir); k != nil {
		r.writeStatus(j, killedStatus(k, began))
		return
	}
	wait, err := r.run(j, img, in)
	if err != nil {
		log.Error("cannot start container", "err", err)
		r.failLaunch(j, err)
		return
	}
	wait()
}

// resumePull starts again the launch of a job whose image was being
// pulled when tided stopped: the pull starts over (or finds the image
// there), then the job runs.
func (r *ctrRuntime) resumePull(j *job) (*jobStatus, func(), error) {
	r.d.log.Info("job was waiting for its image: pulling again", "job_id", j.ref.JobID, "image", j.spec.ContainerImage)
	wait, err := r.start(j)
	if err != nil {
		st := jobStatus{Exit: api.ExitStatus{Code: 1}, EndTime: time.Now(), Error: "start " + r.name() + ": " + err.Error()}
		r.writeStatus(j, st)
		return &st, nil, nil
	}
	return nil, wait, nil
}

// killedMarker returns the marker of a kill (scancel, time limit)
// written for the job, or nil.
func killedMarker(dir string) *killMarker {
	m := readMarkers(dir)
	if m.Killed != nil {
		return m.Killed
	}
	return m.TimedOut
}

// killedStatus is the end of a job killed before its task started: as
// if its signal had ended it (the controller reports it cancelled or
// timed out from the marker).
func killedStatus(k *killMarker, began time.Time) jobStatus {
	sig := syscall.SIGTERM
	if k.Signal > 0 {
		sig = syscall.Signal(k.Signal)
	}
	return jobStatus{StartTime: began, EndTime: time.Now(), Exit: api.ExitStatus{Signal: int(sig)}}
}

// failLaunch records a launch that failed after start returned, as
// launch records one that failed before: exit 1 with the reason.
func (r *ctrRuntime) failLaunch(j *job, err error) {
	r.writeStatus(j, jobStatus{Exit: api.ExitStatus{Code: 1}, EndTime: time.Now(), Error: "start " + r.name() + ": " + err.Error()})
}

func (r *ctrRuntime) writeStatus(j *job, st jobStatus) {
	if err := writeJSONAtomic(filepath.Join(j.dir, fileStatus), &st, 0o644); err != nil {
		r.d.log.Error("cannot record job status", "job_id", j.ref.JobID, "err", err)
	}
}

// cdiEdits resolves the job's GPUs to the edits of the node's CDI
// specs: nil when the job has no GPUs or the specs do not define
// nvidia.com/gpu devices (the GPUs then come as bare device nodes), an
// error when they do but not for one of these GPUs. The specs are read
// at each launch: they are small, and nvidia-ctk rewrites them when the
// driver changes.
func (r *ctrRuntime) cdiEdits(gpus []int) (*cdi.ContainerEdits, error) {
	dirs := r.d.cfg.Containerd.CDISpecDirs
	if len(gpus) == 0 || len(dirs) == 0 {
		return nil, nil
	}
	reg := cdi.Load(dirs)
	r.mu.Lock()
	for _, p := range reg.Problems {
		if !r.cdiWarned[p.Error()] {
			r.cdiWarned[p.Error()] = true
			r.d.log.Warn("CDI spec ignored", "err", p)
		}
	}
	r.mu.Unlock()
	if !reg.HasKind(cdi.GPUKind) {
		return nil, nil
	}
	names, err := reg.GPUNames(gpus, func(i int) string {
		for _, g := range r.d.gpus {
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
func (r *ctrRuntime) finish(j *job, task containerd.Task, exit <-chan containerd.ExitStatus, started time.Time) {
	delay := 100 * time.Millisecond
	for {
		es := <-exit
		code, at, err := es.Result()
		if err == nil {
			oom := oomKilled(r.cgroupsPath(j.ref))
			st := jobStatus{StartTime: started, EndTime: at, Exit: exitFromCode(code, signalsSent(j.dir), oom), OOM: oom}
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
	task := r.task(j)
	if task == nil {
		r.d.log.Debug("container task not running, signal not sent", "job_id", j.ref.JobID, "signal", int(sig))
		return
	}
	// In order with the job's other task calls: a resume queued before
	// a kill reaches the shim first.
	j.ops.do(func() { r.kill(j.ref, task, sig, !batchOnly) })
}

// task returns the job's running task, or nil.
func (r *ctrRuntime) task(j *job) containerd.Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tasks[j.ref]
}

// kill signals the task and records the signal for reading its exit
// status (ctrexit.go).
func (r *ctrRuntime) kill(ref api.JobRef, task containerd.Task, sig syscall.Signal, all bool) {
	recordSignal(filepath.Join(r.d.jobsDir, dirName(ref)), sig, r.d.log)
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
		if errdefs.IsNotFound(err) && exists(filepath.Join(j.dir, filePulling)) {
			return r.resumePull(j)
		}
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
		oom := oomKilled(r.cgroupsPath(j.ref))
		fin := jobStatus{EndTime: s.ExitTime, Exit: exitFromCode(s.ExitStatus, signalsSent(j.dir), oom), OOM: oom}
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
