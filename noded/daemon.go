package noded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sync"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/gres"
	gresnvml "github.com/tide-hpc/tide/gres/nvml"
	"github.com/tide-hpc/tide/noded/ctr"
	"github.com/tide-hpc/tide/noded/runtime"
	"github.com/tide-hpc/tide/noded/steps"
)

// Version is tided's version, reported at registration; set with
// -ldflags "-X github.com/tide-hpc/tide/noded.Version=…".
var Version = "dev"

// NodeAPI is the controller's node protocol as tided uses it;
// *client.Client implements it.
type NodeAPI interface {
	Register(ctx context.Context, r api.NodeRegistration) (api.NodeSyncResponse, error)
	Sync(ctx context.Context, req api.NodeSyncRequest) (api.NodeSyncResponse, error)
}

var _ NodeAPI = (*client.Client)(nil)

// failoverNotifier is a NodeAPI that tells when it moves to another
// controller (*client.Client with several).
type failoverNotifier interface {
	OnFailover(func(from, to string))
}

var _ failoverNotifier = (*client.Client)(nil)

// Options are a Daemon's collaborators; the zero value is usable.
type Options struct {
	// Logger receives the daemon's log; callers add component=tided.
	Logger *slog.Logger
	// Executable is the tided binary re-executed as "stepd" for every
	// job (default os.Executable()). It must be runnable by job users.
	Executable string
	// API talks to the controller (default: client.NewTCP with the
	// cluster key).
	API NodeAPI
	// StepdIdle is how long the shared supervisor lingers without jobs
	// (default stepd.DefaultIdle; tests shorten it).
	StepdIdle time.Duration
	// Runtime runs the jobs without a container image (default: the
	// supervisor, runtime.Process). Tests give a runtime.Fake.
	Runtime runtime.Runtime
	// ContainerRuntime runs the jobs with a container image (default:
	// containerd at containerd.socket, none without one). A node with
	// one registers the containerd feature.
	ContainerRuntime runtime.Runtime
}

// Backoff bounds while the controller cannot be reached.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 2 * time.Second
)

// Daemon is a running tided: the job table and the sync loop.
type Daemon struct {
	cfg      Config
	log      *slog.Logger
	api      NodeAPI
	closeAPI func()
	exe      string
	jobsDir  string
	memMB    int64
	gpus     []gres.Device
	groups   groupCache
	gpuSrc   gres.Source
	// nvml is set for the NVML source: it is closed at stop and its XID
	// events wake the sync loop.
	nvml *gresnvml.Source
	// gpuStatus caches the last GPU status for heartbeats (NVML queries
	// are not free and syncs come with every job end).
	gpuStatus   []gres.Status
	gpuStatusAt time.Time
	// gpuSentAt is gpuStatusAt of the reading the controller has: a sync
	// carries the status only when a newer one was read.
	gpuSentAt time.Time
	asRoot    bool
	hostname  string
	// proc runs the jobs without an image (runtime.go); ctr runs those
	// with one, nil without containerd.socket.
	proc runtime.Runtime
	ctr  runtime.Runtime
	// features are the configured features plus the runtime's
	// (containerd), as registered.
	features []string
	// cgroups describes the job cgroups this node makes ("off", "v1
	// (cpu,memory,…)"), for the start line.
	cgroups string
	// mps runs the MPS control daemons of shared GPUs (mps.go; made
	// on first use through mpsOf).
	mps     *mpsManager
	mpsOnce sync.Once

	mu   sync.Mutex
	jobs map[api.JobRef]*job
	// dropped remembers acknowledged and forgotten incarnations for a
	// while, so that a launch the controller repeats (its answer crossed
	// our report) does not run a job twice.
	dropped dropLog
	stopped bool
	// syncWake is closed by wake when a local change should reach the
	// controller while a sync is in flight (nil when none is).
	syncWake chan struct{}
	wakeCh   chan struct{}
	// seq numbers the snapshots of the job table sent to the controller
	// (api.NodeSyncRequest.Seq), counting on from the daemon's start time
	// in nanoseconds so that a successor's numbers are higher.
	seq uint64

	statsAt  time.Time
	load     float64
	freeMemM int64

	// steps is the srun step listener (issue 7); nil when step_addr is
	// empty or it could not listen.
	steps *steps.Server
	// hosted is the controller's list of the jobs this node runs steps
	// of without having launched them (stepauth.go, issue 21).
	hosted hostedJobs
	// tls is the node's certificate when it joined the cluster CA
	// (tls.go); nil otherwise.
	tls *nodeTLS

	// launchSlots holds a token per launch running (launch.go), at most
	// launchConcurrency; launches counts those not decided yet, which
	// a stopping tided waits for.
	launchSlots chan struct{}
	launches    sync.WaitGroup
	// launchHook is a test seam called at each launch step (nil
	// outside tests).
	launchHook launchHook
	// usage measures the steps' usage (usage.go, issue 22).
	usage usageState
}

// Setup validates cfg, prepares the state directory and rebuilds the job
// table from it: finished jobs are reported until acknowledged, running
// ones are reattached, and jobs whose supervisor vanished are recorded as
// lost. It starts nothing; Run does.
func Setup(ctx context.Context, cfg Config, opts Options) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{
		cfg:     cfg,
		log:     log.With("node", cfg.Name),
		api:     opts.API,
		exe:     opts.Executable,
		jobsDir: filepath.Join(cfg.StateDir, "jobs"),
		asRoot:  os.Geteuid() == 0,
		jobs:    make(map[api.JobRef]*job),
		dropped: newDropLog(),
		wakeCh:  make(chan struct{}, 1),
		seq:     uint64(time.Now().UnixNano()),

		launchSlots: make(chan struct{}, launchConcurrency),
	}
	d.memMB, _ = ParseMemory(cfg.Memory)
	d.hostname, _ = os.Hostname()
	if d.exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find tided executable: %w", err)
		}
		d.exe = exe
		// A tide-stepd installed next to tided supervises jobs: it starts
		// in a fraction of tided's time, and a node starts one per job.
		if small := filepath.Join(filepath.Dir(exe), StepdBinary); isExecutable(small) {
			d.exe = small
		}
	}
	// A node that joined the cluster CA talks mutual TLS and sends no
	// cluster key; one that did not uses the key (a controller without
	// TLS).
	nt, err := loadNodeTLS(cfg.TLSDir, cfg.Name, time.Now())
	if err != nil {
		return nil, err
	}
	if nt != nil {
		nt.log = d.log.With("component", "tls")
		d.tls = nt
	}
	if d.api == nil {
		if nt != nil {
			c := nt.controllerClient(cfg.Controllers())
			nt.client = c
			d.api, d.closeAPI = c, c.Close
		} else {
			key, err := LoadKey(cfg.KeyFile)
			if err != nil {
				return nil, err
			}
			c := client.NewTCPList(cfg.Controllers(), key)
			d.api, d.closeAPI = c, c.Close
		}
	}
	// With standby controllers the client moves to the one that took
	// over (which answers Unregistered: the sync loop registers again).
	if fo, ok := d.api.(failoverNotifier); ok {
		fo.OnFailover(func(from, to string) { d.log.Warn("controller failover", "from", from, "to", to) })
	}
	if err := d.openGPUs(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	if err := os.Mkdir(d.jobsDir, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	// Job users traverse jobs/ to reach their script.
	if err := os.Chmod(d.jobsDir, 0o711); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	d.features = slices.Clone(cfg.Features)
	cg, err := cgroupStatus(cfg, d.log)
	if err != nil {
		d.closeGPUs()
		return nil, err
	}
	d.cgroups = cg
	d.proc = opts.Runtime
	if d.proc == nil {
		pc := runtime.ProcessConfig{Executable: d.exe, StateDir: cfg.StateDir, PerJob: cfg.Supervisor == SupervisorPerJob,
			Idle: opts.StepdIdle, CgroupRoot: cgroupRoot, Logger: d.log}
		if cfg.Cgroups != CgroupsOff {
			pc.CgroupParent = cfg.CgroupParent
		}
		d.proc = runtime.NewProcess(pc)
	}
	d.ctr = opts.ContainerRuntime
	if d.ctr == nil && cfg.Containerd.Socket != "" {
		c, err := ctr.Connect(ctx, cfg.Containerd.Socket, cfg.Containerd.Namespace, cfg.Containerd.Snapshotter)
		if err != nil {
			d.closeGPUs()
			return nil, fmt.Errorf("containerd (containerd.socket): %w", err)
		}
		cc := cfg.Containerd
		d.ctr = runtime.NewContainerd(c, runtime.ContainerdConfig{Node: cfg.Name, StateDir: cfg.StateDir,
			Pull: cc.Pull, PullTimeout: cc.PullTimeout, Registry: ctr.RegistryConfig{Insecure: cc.InsecureRegistries, AuthFile: cc.AuthFile},
			CDISpecDirs: cc.CDISpecDirs, NvidiaHook: d.newNvidiaHook(), GPUs: d.gpus, Logger: d.log})
		d.log.Info("containerd connected", "socket", cfg.Containerd.Socket, "namespace", c.Namespace, "version", c.ServerVersion)
	}
	if d.ctr != nil && !slices.Contains(d.features, api.FeatureContainerd) {
		d.features = append(d.features, api.FeatureContainerd)
	}
	if err := d.recover(ctx); err != nil {
		d.closeRuntimes()
		return nil, err
	}
	// Issue 7: the step listener. A node that cannot listen still runs
	// batch jobs; the controller refuses steps on it with a clear error.
	if err := d.startSteps(); err != nil {
		d.log.Error("steps disabled: srun cannot run tasks on this node", "err", err)
	}
	return d, ctx.Err()
}

// Run registers the node and syncs with the controller until ctx ends.
// Ending leaves every job running: the next tided reattaches them.
func (d *Daemon) Run(ctx context.Context) error {
	d.mu.Lock()
	for _, j := range d.jobs {
		d.armLocked(j)
	}
	d.mu.Unlock()
	defer func() {
		// Launches run beside this loop: a job half launched when
		// tided stops would be lost to the next one.
		d.waitLaunches()
		d.stop()
	}()
	go d.watchAcks(ctx)
	go d.watchGPUs(ctx)
	go d.sampleUsage(ctx) // usage.go
	if d.tls != nil && d.tls.client != nil {
		go d.tls.renewLoop(ctx)
	}

	d.log.Info("tided started", "controller", d.cfg.Controller, "jobs", len(d.jobs), "cgroups", d.cgroups, "version", Version,
		"tls", d.tls != nil)
	if d.tls != nil {
		leaf := d.tls.cert.Get().Leaf
		d.log.Info("node certificate loaded: mutual TLS with the controller", "dir", d.cfg.TLSDir,
			"serial", leaf.SerialNumber.Text(16), "expires", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	delay := backoffMin
	backoff := func(what string, err error) {
		d.log.Warn("controller unreachable", "op", what, "err", err, "retry_in", delay)
		sleepCtx(ctx, delay)
		delay = min(delay*2, backoffMax)
	}
	registered := false
	var last []api.NodeJobReport
	quickEmpty := 0
	for ctx.Err() == nil {
		if !registered {
			resp, err := d.register(ctx)
			if err != nil {
				if ctx.Err() == nil {
					backoff("register", err)
				}
				continue
			}
			d.log.Info("registered with controller")
			registered, delay, last = true, backoffMin, nil
			d.mu.Lock()
			d.gpuSentAt = time.Time{} // a new controller has no GPU status yet
			d.mu.Unlock()
			d.apply(resp)
		}
		started := time.Now()
		resp, sent, woken, err := d.syncOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && woken:
			continue // a local job finished: sync again at once
		case err != nil:
			backoff("sync", err)
			continue
		}
		delay = backoffMin
		news := !slices.Equal(sent, last)
		last = sent
		if resp.Unregistered {
			d.log.Info("controller asks to register again")
			registered = false
		}
		acted := d.apply(resp)
		// A controller that answers an unchanged report at once with
		// nothing new to do would make this loop spin; back off gently
		// then (a local event still wakes the loop at once).
		if !acted && !news && time.Since(started) < 50*time.Millisecond {
			quickEmpty++
			if quickEmpty > 1 {
				d.waitWake(ctx, min(backoffMin<<(quickEmpty-2), backoffMax))
			}
		} else {
			quickEmpty = 0
		}
	}
	return nil
}

func (d *Daemon) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	for _, j := range d.jobs {
		j.stopTimers()
	}
	if d.closeAPI != nil {
		d.closeAPI()
	}
	d.closeGPUs()
	d.closeRuntimes()
	d.stopSteps() // issue 7: steps end with their connections
	d.log.Info("tided stopped; jobs keep running")
}

// apply carries out the controller's commands and reports whether any
// of them changed something (commands repeated by the controller do
// not). Launches come first, so that a kill, ack or forget in the same
// answer finds its job (and a repeated launch next to the ack of its
// finish is not run again). It does not wait for them: each launch
// runs beside the sync loop (launch.go), which goes on reporting
// whatever a launch does.
func (d *Daemon) apply(r api.NodeSyncResponse) bool {
	acted := r.Unregistered
	if len(r.Launch) > 0 && d.applyLaunches(r.Launch) {
		acted = true
	}
	acted = d.applySteps(r) || acted // issue 21: step key, hosted jobs
	for _, l := range r.Limits {
		acted = d.applyLimit(l) || acted
	}
	for _, s := range r.Signals {
		acted = d.applySignal(s) || acted
	}
	for _, ref := range r.Ack {
		acted = d.applyAck(ref) || acted
	}
	for _, ref := range r.Forget {
		acted = d.applyForget(ref) || acted
	}
	return acted
}

// register announces the node, with every job it knows, and returns the
// controller's commands.
func (d *Daemon) register(ctx context.Context) (api.NodeSyncResponse, error) {
	d.mu.Lock()
	jobs, seq := d.reportsLocked(), d.nextSeqLocked()
	d.mu.Unlock()
	reg := api.NodeRegistration{
		Seq:      seq,
		Name:     d.cfg.Name,
		Hostname: d.hostname,
		CPUs:     d.cfg.CPUs,
		MemoryMB: d.memMB,
		// Slurm's TmpDisk: what --tmp asks of the node.
		TmpDiskMB: d.cfg.TmpDiskMB,
		GPUs:      d.gpus,
		Features:  d.features,
		StepAddr:  d.stepAddr(),
		Version:   Version,
		OS:        goruntime.GOOS,
		Arch:      goruntime.GOARCH,
		BootTime:  bootTime(),
		Jobs:      d.withJobUsage(jobs), // usage.go
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return d.api.Register(rctx, reg)
}

// syncOnce sends one heartbeat, which the controller holds until it has
// commands (a long poll). The reports are taken under the same lock that
// publishes syncWake, so a job that starts or finishes after the
// snapshot always finds the sync to interrupt.
//
// A local change does not end the long poll: tided reports it at once
// in a second sync that the controller answers without holding
// (reportNow), and the held one stays to carry the controller's next
// command. Cutting the held poll to send a new one cost, per finished
// job, either a TCP reconnect or an extra answer. woken is true when
// the poll had to be cancelled after all (the report failed).
func (d *Daemon) syncOnce(ctx context.Context) (resp api.NodeSyncResponse, sent []api.NodeJobReport, woken bool, err error) {
	load, free := d.hostStats()
	hb := d.cfg.Heartbeat
	d.mu.Lock()
	sent = d.reportsLocked()
	seq := d.nextSeqLocked()
	sctx, cancel := context.WithTimeout(ctx, hb+15*time.Second)
	defer cancel()
	wake := make(chan struct{})
	d.syncWake = wake
	d.mu.Unlock()
	req := api.NodeSyncRequest{Name: d.cfg.Name, Jobs: sent, Seq: seq, WaitMS: int(hb / time.Millisecond), CPULoad: load, FreeMemMB: free}
	type result struct {
		resp api.NodeSyncResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		r, err := d.sendSync(sctx, req)
		done <- result{r, err}
	}()
	for {
		select {
		case res := <-done:
			d.mu.Lock()
			d.syncWake = nil
			d.mu.Unlock()
			return res.resp, sent, false, res.err
		case <-wake:
			var rep api.NodeSyncResponse
			var rerr error
			wake, rep, rerr = d.reportNow(ctx, load, free)
			if rerr == nil && !rep.Unregistered {
				d.apply(rep)
				continue
			}
			// The controller did not take the report (or asks to
			// register again): end the poll, the loop syncs or
			// registers anew.
			d.mu.Lock()
			d.syncWake = nil
			d.mu.Unlock()
			cancel()
			<-done
			if rerr != nil {
				return api.NodeSyncResponse{}, sent, true, rerr
			}
			return rep, sent, false, nil
		}
	}
}

// reportNow sends the node's current reports in a sync the controller
// answers at once, and returns the wake channel armed for the next
// local change with the controller's answer.
func (d *Daemon) reportNow(ctx context.Context, load float64, free int64) (chan struct{}, api.NodeSyncResponse, error) {
	d.mu.Lock()
	reps, seq := d.reportsLocked(), d.nextSeqLocked()
	wake := make(chan struct{})
	d.syncWake = wake
	d.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := d.sendSync(rctx, api.NodeSyncRequest{Name: d.cfg.Name, Jobs: reps, Seq: seq, CPULoad: load, FreeMemMB: free})
	return wake, resp, err
}

// nextSeqLocked numbers a snapshot of the job table taken under d.mu.
func (d *Daemon) nextSeqLocked() uint64 {
	d.seq++
	return d.seq
}

// sendSync sends req with a GPU reading the controller has not had yet
// (an XID event wakes the loop for one), and notes it delivered.
func (d *Daemon) sendSync(ctx context.Context, req api.NodeSyncRequest) (api.NodeSyncResponse, error) {
	at := d.addGPUStatus(&req)
	req.HostedGen = d.hosted.held()
	tok := d.addUsage(&req) // usage.go
	resp, err := d.api.Sync(ctx, req)
	if err == nil {
		d.gpuStatusSent(at)
		d.usageSent(tok)
	}
	return resp, err
}

// wake makes the controller hear about a local change now: it
// interrupts the sync in flight (the loop then syncs again at once).
func (d *Daemon) wake() {
	d.mu.Lock()
	if d.syncWake != nil {
		close(d.syncWake)
		d.syncWake = nil
	}
	d.mu.Unlock()
	select {
	case d.wakeCh <- struct{}{}:
	default:
	}
}

// waitWake sleeps up to dt or until wake is called.
func (d *Daemon) waitWake(ctx context.Context, dt time.Duration) {
	t := time.NewTimer(dt)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-d.wakeCh:
	}
}

// hostStats returns the load average and available memory, re-read at
// most once a second.
func (d *Daemon) hostStats() (float64, int64) {
	if time.Since(d.statsAt) < time.Second {
		return d.load, d.freeMemM
	}
	d.statsAt = time.Now()
	d.load = loadAvg()
	if mi, err := meminfo(); err == nil {
		d.freeMemM = mi["MemAvailable"]
	}
	return d.load, d.freeMemM
}

func sleepCtx(ctx context.Context, dt time.Duration) {
	t := time.NewTimer(dt)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Jobs returns the reports tided would send now (for tests and
// diagnostics).
func (d *Daemon) Jobs() []api.NodeJobReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reportsLocked()
}

// StepdBinary is the small supervisor binary tided prefers, looked up
// next to its own executable; without it tided runs `tided stepd`.
const StepdBinary = "tide-stepd"

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
