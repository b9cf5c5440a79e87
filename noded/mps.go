package noded

// CUDA MPS per shared GPU (issue 3 item 4). CUDA holds a process to
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
// only when the process is a client of an MPS control daemon for its
// GPU. tided therefore runs one control daemon per GPU that slices
// share, from the first slice (a batch job or an srun step) that lands
// on the GPU until the last one leaves, and points the slices at it.
//
// Each GPU's daemon has a directory of its own in the state directory,
// <state_dir>/mps/gpu<index>, holding the pipe and log directories the
// daemon and its clients use (world-writable with the sticky bit once
// the daemon runs: the MPS server it starts runs as the job's user and
// creates its pipes and log there) and daemon.json, which records that tided started the
// daemon. The paths depend on the GPU index only, so that a tided that
// restarts finds the daemons its predecessor started, and the jobs that
// still run keep talking to the same daemon.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/noded/jobenv"
)

// MPS modes (Config.MPS).
const (
	// MPSAuto runs MPS control daemons for shared GPUs where
	// nvidia-cuda-mps-control is found (mps_control, else PATH).
	MPSAuto = "auto"
	// MPSOff never starts MPS; slice limits stay advisory.
	MPSOff = "off"
)

const (
	// mpsControlName is NVIDIA's control binary, looked up in PATH when
	// mps_control is empty.
	mpsControlName = "nvidia-cuda-mps-control"
	// mpsPIDFile is where the control daemon records its pid, in its
	// pipe directory.
	mpsPIDFile = "nvidia-cuda-mps-control.pid"
	// mpsRecordFile marks, in a GPU's MPS directory, a daemon tided
	// started.
	mpsRecordFile = "daemon.json"
	// mpsCommandTimeout bounds one nvidia-cuda-mps-control run (start
	// or quit).
	mpsCommandTimeout = 30 * time.Second
)

// mpsDirs are the directories of one GPU's MPS daemon (jobenv.MPSDirs).
type mpsDirs = jobenv.MPSDirs

// mpsRecord is daemon.json: what tided knows of a daemon it started.
type mpsRecord struct {
	GPU int `json:"gpu"`
	// Device is the daemon's CUDA_VISIBLE_DEVICES (the GPU's UUID, or
	// its index when the inventory has no UUID).
	Device string `json:"device"`
	mpsDirs
	// Daemon identifies the control daemon from its pid file; zero when
	// it wrote none (the control socket then stands for it).
	Daemon  procIdentity `json:"daemon"`
	Started time.Time    `json:"started"`
}

// mpsManager runs the node's MPS control daemons. A GPU's daemon runs
// while it has holders: the slice jobs and slice steps on the GPU, named
// by mpsJobHolder and mpsStepHolder. Its methods are safe for concurrent
// use; nvidia-cuda-mps-control runs under the manager's lock, so that a
// start and a quit of one GPU never overlap.
type mpsManager struct {
	// control is the nvidia-cuda-mps-control binary; "" disables MPS.
	control string
	dir     string
	// devices maps a GPU index to its CUDA_VISIBLE_DEVICES value.
	devices map[int]string
	log     *slog.Logger

	mu   sync.Mutex
	gpus map[int]*mpsGPU
}

// mpsGPU is one GPU's daemon state.
type mpsGPU struct {
	running bool
	holders map[string]bool
}

// newMPSManager finds the control binary (mps: auto) and returns the
// node's manager; a manager without a binary does nothing.
func newMPSManager(cfg Config, gpus []gres.Device, log *slog.Logger) *mpsManager {
	m := &mpsManager{
		dir:     filepath.Join(cfg.StateDir, "mps"),
		devices: map[int]string{},
		log:     log.With("component", "mps"),
		gpus:    map[int]*mpsGPU{},
	}
	for _, g := range gpus {
		m.devices[g.Index] = g.UUID
	}
	if cfg.MPS == MPSOff {
		return m
	}
	path := cfg.MPSControl
	if path == "" {
		p, err := exec.LookPath(mpsControlName)
		if err != nil {
			if len(gpus) > 0 {
				m.log.Info("no " + mpsControlName + " in PATH: GPU slices run without MPS, their limits are advisory")
			}
			return m
		}
		path = p
	}
	if !isExecutable(path) {
		m.log.Warn("mps_control is not an executable file: GPU slices run without MPS", "mps_control", path)
		return m
	}
	m.control = path
	return m
}

// enabled reports whether the manager runs daemons.
func (m *mpsManager) enabled() bool { return m != nil && m.control != "" }

// mpsJobHolder names a batch job as a holder of its GPUs' daemons.
func mpsJobHolder(r api.JobRef) string { return fmt.Sprintf("job %d.%d", r.JobID, r.Restart) }

// mpsStepHolder names an srun step as a holder.
func mpsStepHolder(jobID uint64, stepID uint32) string {
	return fmt.Sprintf("step %d.%d", jobID, stepID)
}

// dirsOf is GPU gpu's MPS directories.
func (m *mpsManager) dirsOf(gpu int) mpsDirs {
	base := filepath.Join(m.dir, "gpu"+strconv.Itoa(gpu))
	return mpsDirs{Pipe: filepath.Join(base, "pipe"), Log: filepath.Join(base, "log")}
}

// acquire adds holder to the daemons of gpus, starting those that do not
// run, and returns the directories of the GPUs whose daemon runs. A GPU
// whose daemon cannot start is left out (its slices run without MPS)
// and logged; acquire never fails a job.
func (m *mpsManager) acquire(holder string, gpus []int) map[int]mpsDirs {
	if !m.enabled() || len(gpus) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int]mpsDirs{}
	for _, gpu := range gpus {
		g := m.gpuLocked(gpu)
		g.holders[holder] = true
		if !g.running {
			if err := m.startLocked(gpu); err != nil {
				m.log.Error("cannot start MPS control daemon: slices on this GPU run without MPS", "gpu", gpu, "holder", holder, "err", err)
				continue
			}
			g.running = true
		}
		out[gpu] = m.dirsOf(gpu)
	}
	return out
}

// release drops holder from every daemon and stops the daemons left
// without holders. It is idempotent.
func (m *mpsManager) release(holder string) {
	if !m.enabled() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, gpu := range m.sortedLocked() {
		g := m.gpus[gpu]
		if !g.holders[holder] {
			continue
		}
		delete(g.holders, holder)
		if len(g.holders) == 0 && g.running {
			m.stopLocked(gpu)
			g.running = false
		}
	}
}

// recoverDaemons rebuilds the table after a tided restart: the daemons
// daemon.json records are found again, each gets the holders that
// still run on its GPU (holders maps a holder to its GPUs), a daemon
// left without holders is stopped, and one that died while tided was
// down is started again for the holders that need it.
func (m *mpsManager) recoverDaemons(holders map[string][]int) {
	if !m.enabled() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ents, _ := os.ReadDir(m.dir)
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), "gpu")
		gpu, err := strconv.Atoi(n)
		if !ok || err != nil || !exists(filepath.Join(m.dir, e.Name(), mpsRecordFile)) {
			continue
		}
		g := m.gpuLocked(gpu)
		g.running = m.aliveLocked(gpu)
		if !g.running {
			m.log.Warn("MPS control daemon gone while tided was down", "gpu", gpu)
			_ = os.Remove(filepath.Join(m.dir, e.Name(), mpsRecordFile))
		}
	}
	for h, gpus := range holders {
		for _, gpu := range gpus {
			m.gpuLocked(gpu).holders[h] = true
		}
	}
	for _, gpu := range m.sortedLocked() {
		g := m.gpus[gpu]
		switch {
		case len(g.holders) == 0 && g.running:
			m.log.Info("stopping MPS control daemon: no slices left on the GPU", "gpu", gpu)
			m.stopLocked(gpu)
			g.running = false
		case len(g.holders) > 0 && !g.running:
			if err := m.startLocked(gpu); err != nil {
				m.log.Error("cannot restart MPS control daemon", "gpu", gpu, "err", err)
				continue
			}
			g.running = true
		case g.running:
			m.log.Info("found MPS control daemon", "gpu", gpu, "holders", len(g.holders))
		}
	}
}

// running lists the GPUs whose daemon runs (for tests and logs).
func (m *mpsManager) running() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for _, gpu := range m.sortedLocked() {
		if m.gpus[gpu].running {
			out = append(out, gpu)
		}
	}
	return out
}

func (m *mpsManager) gpuLocked(gpu int) *mpsGPU {
	g := m.gpus[gpu]
	if g == nil {
		g = &mpsGPU{holders: map[string]bool{}}
		m.gpus[gpu] = g
	}
	return g
}

func (m *mpsManager) sortedLocked() []int {
	out := make([]int, 0, len(m.gpus))
	for gpu := range m.gpus {
		out = append(out, gpu)
	}
	sort.Ints(out)
	return out
}

// device is GPU gpu's CUDA_VISIBLE_DEVICES value for its daemon.
func (m *mpsManager) device(gpu int) string {
	if u := m.devices[gpu]; u != "" {
		return u
	}
	return strconv.Itoa(gpu)
}

// env is the environment nvidia-cuda-mps-control runs with for gpu:
// tided's own without CUDA_* variables, plus the GPU and directories.
func (m *mpsManager) env(gpu int) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CUDA_") {
			out = append(out, kv)
		}
	}
	d := m.dirsOf(gpu)
	return append(out, "CUDA_VISIBLE_DEVICES="+m.device(gpu), "CUDA_MPS_PIPE_DIRECTORY="+d.Pipe, "CUDA_MPS_LOG_DIRECTORY="+d.Log)
}

// startLocked makes gpu's directories and starts its daemon
// (nvidia-cuda-mps-control -d, which forks the daemon and returns). The
// pipe directory is made anew, tided's alone, and opened to job users
// only once the daemon has made its sockets there: nothing a user left
// in it can pose as the daemon.
func (m *mpsManager) startLocked(gpu int) error {
	d := m.dirsOf(gpu)
	base := filepath.Dir(d.Pipe)
	if err := os.RemoveAll(d.Pipe); err != nil {
		return fmt.Errorf("mps directory: %w", err)
	}
	for _, p := range []struct {
		dir  string
		mode os.FileMode
	}{{m.dir, 0o755}, {base, 0o755}, {d.Pipe, 0o755}, {d.Log, 0o777 | os.ModeSticky}} {
		if err := os.Mkdir(p.dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("mps directory: %w", err)
		}
		// Chmod, not Mkdir's mode: the umask must not take the bits
		// job users need.
		if err := os.Chmod(p.dir, p.mode); err != nil {
			return fmt.Errorf("mps directory: %w", err)
		}
	}
	if err := m.run(gpu, "", "-d"); err != nil {
		return err
	}
	// The MPS server runs as the job's user and makes its pipes here.
	if err := os.Chmod(d.Pipe, 0o777|os.ModeSticky); err != nil {
		m.stopLocked(gpu)
		return fmt.Errorf("mps directory: %w", err)
	}
	rec := mpsRecord{GPU: gpu, Device: m.device(gpu), mpsDirs: d, Started: time.Now()}
	if b, err := os.ReadFile(filepath.Join(d.Pipe, mpsPIDFile)); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			rec.Daemon, _ = identityOf(pid)
		}
	}
	if err := writeJSONAtomic(filepath.Join(base, mpsRecordFile), &rec, 0o644); err != nil {
		m.log.Warn("cannot record MPS control daemon: a restarted tided will not find it", "gpu", gpu, "err", err)
	}
	m.log.Info("MPS control daemon started", "gpu", gpu, "device", rec.Device, "pid", rec.Daemon.PID, "pipe_dir", d.Pipe)
	return nil
}

// stopLocked asks gpu's daemon to quit (echo quit |
// nvidia-cuda-mps-control) and forgets it. The log directory stays,
// with the daemon's logs.
func (m *mpsManager) stopLocked(gpu int) {
	base := filepath.Dir(m.dirsOf(gpu).Pipe)
	if err := m.run(gpu, "quit\n"); err != nil {
		m.log.Error("MPS control daemon did not quit", "gpu", gpu, "err", err)
	} else {
		m.log.Info("MPS control daemon stopped", "gpu", gpu)
		_ = os.RemoveAll(m.dirsOf(gpu).Pipe)
	}
	if err := os.Remove(filepath.Join(base, mpsRecordFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.Warn("cannot remove MPS daemon record", "gpu", gpu, "err", err)
	}
}

// aliveLocked reports whether the daemon daemon.json names still runs.
func (m *mpsManager) aliveLocked(gpu int) bool {
	d := m.dirsOf(gpu)
	var rec mpsRecord
	if err := readJSON(filepath.Join(filepath.Dir(d.Pipe), mpsRecordFile), &rec); err != nil {
		return false
	}
	if rec.Daemon.PID > 0 {
		return rec.Daemon.Alive()
	}
	fi, err := os.Stat(filepath.Join(d.Pipe, "control"))
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// run runs nvidia-cuda-mps-control for gpu with args and stdin.
func (m *mpsManager) run(gpu int, stdin string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), mpsCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.control, args...)
	cmd.Env = m.env(gpu)
	cmd.Dir = "/"
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The daemon it forks must not keep tided waiting on the output, nor
	// share tided's process group (a signal to tided is not for it).
	cmd.WaitDelay = 2 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w (%s)", m.control, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// mpsOf is d's MPS manager, made on first use (after the GPU inventory
// is open) from d's configuration.
func (d *Daemon) mpsOf() *mpsManager {
	d.mpsOnce.Do(func() { d.mps = newMPSManager(d.cfg, d.gpus, d.log) })
	return d.mps
}

// jobSliceGPUs are the GPUs a process job holds slices of on this node
// (nil for whole GPUs, container jobs and jobs without GPUs here).
func (d *Daemon) jobSliceGPUs(spec *api.LaunchSpec) []int {
	if spec.ContainerImage != "" {
		return nil
	}
	a := nodeAlloc(spec, d.cfg.Name)
	if !a.Sliced() {
		return nil
	}
	return slices.Clone(a.GPUs)
}

// acquireJobMPS starts (or joins) the MPS daemons of the job's sliced
// GPUs and returns their directories.
func (d *Daemon) acquireJobMPS(j *job) map[int]mpsDirs {
	gpus := d.jobSliceGPUs(&j.spec)
	if len(gpus) == 0 {
		return nil
	}
	return d.mpsOf().acquire(mpsJobHolder(j.ref), gpus)
}

// releaseJobMPS lets the job's daemons go, in the background: it is
// called with Daemon.mu held, and a quit waits for the daemon.
func (d *Daemon) releaseJobMPS(j *job) {
	if !j.hasSpec || len(d.jobSliceGPUs(&j.spec)) == 0 {
		return
	}
	m := d.mpsOf()
	if !m.enabled() {
		return
	}
	go m.release(mpsJobHolder(j.ref))
}

// recoverMPS finds the daemons a previous tided started and keeps those
// the running slice jobs need (called at the end of recover).
func (d *Daemon) recoverMPS() {
	m := d.mpsOf()
	if !m.enabled() {
		return
	}
	holders := map[string][]int{}
	for _, j := range d.jobs {
		if j.finished() || !j.hasSpec {
			continue
		}
		if gpus := d.jobSliceGPUs(&j.spec); len(gpus) > 0 {
			holders[mpsJobHolder(j.ref)] = gpus
		}
	}
	m.recoverDaemons(holders)
}
