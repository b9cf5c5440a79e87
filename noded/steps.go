package noded

// The daemon's side of the srun step server (noded/steps): it starts the
// server with the node's configuration, answers what the server asks of
// it (stepHost: which jobs run here and as whom, a job's batch script,
// the user's groups, the MPS daemons, where a step's usage goes), and
// hands it the controller's key, hosted jobs and step signals from the
// sync loop.

import (
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/pki"
	"github.com/tide-hpc/tide/noded/cgroup"
	"github.com/tide-hpc/tide/noded/jobenv"
	"github.com/tide-hpc/tide/noded/steps"
)

// DefaultStepAddr is where tided listens for steps unless step_addr says
// otherwise (Slurm's slurmd port).
const DefaultStepAddr = steps.DefaultAddr

// defaultStepAddr is DefaultConfig's step_addr; the package's tests put
// it on loopback, where test servers belong.
var defaultStepAddr = DefaultStepAddr

// PinnedStepKeyFile is the controller's public step key as this node
// pinned it, in state_dir.
const PinnedStepKeyFile = steps.PinnedKeyFile

// startSteps opens the step listener on cfg.StepAddr. An empty address
// disables steps.
func (d *Daemon) startSteps() error {
	if d.cfg.StepAddr == "" {
		return nil
	}
	cfg := steps.Config{
		Node: d.cfg.Name, Addr: d.cfg.StepAddr, Hostname: d.hostname, StateDir: d.cfg.StateDir,
		KillWait: d.cfg.KillWait, AsRoot: d.asRoot, AllowRootJobs: d.cfg.AllowRootJobs, LogLevel: d.cfg.LogLevel,
		Cgroups: d.stepCgroupsUsable(), CgroupsRequired: d.cfg.Cgroups == CgroupsRequired,
		CgroupRoot: cgroupRoot, CgroupParent: d.cfg.CgroupParent,
		DeviceFence: func(gpus []int) *cgroup.DeviceFence { return gpuFence(cgroupDevDir, gpus) },
		Logger:      d.log.With("component", "steps"),
	}
	if d.tls != nil {
		cfg.TLS = pki.ServerConfig(&d.tls.cert, nil)
	}
	s, err := steps.Start(cfg, stepHost{d})
	if err != nil {
		return err
	}
	d.steps = s
	return nil
}

// stepAddr is the registered step address ("" without a listener).
func (d *Daemon) stepAddr() string {
	if d.steps == nil {
		return ""
	}
	return d.steps.Advertised()
}

// StepAddr is the bound step listener address, for tests ("" when
// steps are disabled).
func (d *Daemon) StepAddr() string {
	if d.steps == nil {
		return ""
	}
	return d.steps.Addr()
}

// stopSteps closes the step listener and kills every running step.
func (d *Daemon) stopSteps() {
	if d.steps != nil {
		d.steps.Close()
	}
}

// applySteps takes a sync or registration answer's step key and hosted
// jobs, and reports whether the list changed.
func (d *Daemon) applySteps(r api.NodeSyncResponse) bool {
	if r.StepKey != "" && d.steps != nil {
		d.steps.LearnKey(r.StepKey)
	}
	if r.HostedGen == 0 {
		return false
	}
	return d.hosted.set(r.Hosted, r.HostedGen)
}

// hostedJobs is the controller's list of the jobs this node hosts
// without having launched them (api.NodeSyncResponse.Hosted).
type hostedJobs struct {
	mu   sync.Mutex
	jobs map[uint64]api.HostedJob
	gen  uint64
	// changed is closed (and replaced) when the list changes.
	changed chan struct{}
}

// set replaces the list and reports whether it changed.
func (h *hostedJobs) set(list []api.HostedJob, gen uint64) bool {
	m := make(map[uint64]api.HostedJob, len(list))
	for _, x := range list {
		m[x.JobID] = x
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	same := h.gen == gen && len(m) == len(h.jobs)
	for id, x := range m {
		same = same && h.jobs[id] == x
	}
	h.jobs, h.gen = m, gen
	if same {
		return false
	}
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
	return true
}

// get returns job id's entry, and a channel closed at the list's next
// change.
func (h *hostedJobs) get(id uint64) (api.HostedJob, bool, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.changed == nil {
		h.changed = make(chan struct{})
	}
	x, ok := h.jobs[id]
	return x, ok, h.changed
}

// held is the hash of the list the node holds, for its syncs.
func (h *hostedJobs) held() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen
}

// signalSteps carries out a SignalCommand addressed to a job's steps
// (Slurm's default target of scancel --signal and --signal=SIG@TIME):
// the tasks of every step of the job's incarnation running on this
// node get the signal, the batch shell and its other children do not.
// A node may run steps of a job it did not launch, so the job need not
// be in the job table. It reports whether any step got the signal.
func (d *Daemon) signalSteps(c api.SignalCommand) bool {
	if c.Signal <= 0 || c.Signal > api.MaxSignal {
		return false
	}
	sig := syscall.Signal(c.Signal)
	d.mu.Lock()
	if j := d.jobs[c.JobRef]; j != nil && !j.finished() && sig != syscall.SIGSTOP && sig != syscall.SIGCONT {
		// A checkpoint signal: an acknowledgement counts from now, as
		// for one sent to the batch shell.
		j.signalledAt, j.ackWatch = time.Now(), true
	}
	d.mu.Unlock()
	n := 0
	if d.steps != nil {
		n = d.steps.Signal(c.JobRef, c.StepIDs, sig)
	}
	if n == 0 {
		d.log.Debug("signal for the job's steps: none runs here", "job_id", c.JobID, "restart", c.Restart, "signal", c.Signal)
		return false
	}
	d.log.Info("signalled the job's steps", "job_id", c.JobID, "restart", c.Restart, "signal", c.Signal, "steps", n)
	return true
}

// stepHost is the daemon as the step server sees it (steps.Host).
type stepHost struct{ d *Daemon }

var _ steps.Host = stepHost{}

// JobUser returns the uid and gid job ref runs as on this node, if it
// runs here: a batch job tided launched, or one the controller says the
// node hosts. changed is closed at the hosted list's next change.
func (h stepHost) JobUser(ref api.JobRef) (uid, gid uint32, ok bool, changed <-chan struct{}) {
	d := h.d
	x, ok, changed := d.hosted.get(ref.JobID)
	if ok && x.JobRef == ref {
		return x.UserID, x.GroupID, true, changed
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if j := d.jobs[ref]; j != nil && j.hasSpec && !j.finished() {
		return j.spec.UserID, j.spec.GroupID, true, changed
	}
	return 0, 0, false, changed
}

// Wake has the sync loop ask the controller now.
func (h stepHost) Wake() { h.d.wake() }

// BatchJob is jobHere.
func (h stepHost) BatchJob(id uint64) (*api.LaunchSpec, int, bool) { return h.d.jobHere(id) }

// Groups are the user's groups as tided's cache has them.
func (h stepHost) Groups(uid, gid uint32) []uint32 { return h.d.groups.get(uid, gid, h.d.log) }

// AcquireMPS holds the MPS daemons of gpus for the step.
func (h stepHost) AcquireMPS(job uint64, step uint32, gpus []int) (map[int]jobenv.MPSDirs, bool) {
	m := h.d.mpsOf()
	if !m.enabled() {
		return nil, false
	}
	return m.acquire(mpsStepHolder(job, step), gpus), true
}

// ReleaseMPS lets the step's MPS daemons go.
func (h stepHost) ReleaseMPS(job uint64, step uint32) { h.d.mpsOf().release(mpsStepHolder(job, step)) }

// StepEnded records the final usage of a step's part on this node
// (usage.go).
func (h stepHost) StepEnded(u steps.StepUsage) { h.d.stepUsageEnd(u) }

// jobHere returns a copy of job id's launch when this node runs its
// batch script, the script's pid (0 when unknown or no longer running)
// and whether the supervisor has recorded that pid yet; nil, 0 and
// false when the job's batch script runs elsewhere or there is none (an
// allocation).
func (d *Daemon) jobHere(id uint64) (spec *api.LaunchSpec, pid int, recorded bool) {
	d.mu.Lock()
	var found *job
	for _, j := range d.jobs {
		if j.ref.JobID == id && j.hasSpec && !j.finished() && (found == nil || j.ref.Restart > found.ref.Restart) {
			found = j
		}
	}
	if found == nil {
		d.mu.Unlock()
		return nil, 0, false
	}
	launch, ident, dir := found.spec, found.pid, found.dir
	d.mu.Unlock()
	if ident.PID == 0 {
		ident, _ = readIdentity(filepath.Join(dir, filePID))
	}
	if !ident.Alive() {
		return &launch, 0, ident.PID != 0
	}
	return &launch, ident.PID, true
}
