package noded

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
	gresnvml "github.com/tide-hpc/tide/gres/nvml"
)

// gpuStatusEvery bounds how often the GPU status is read for heartbeats.
const gpuStatusEvery = 5 * time.Second

// openGPUs picks the configured inventory source and reads the inventory
// reported at registration. An NVML source that cannot initialise is a
// start-up error naming the cause (no driver, no library).
func (d *Daemon) openGPUs() error {
	switch d.cfg.GPUs.Source {
	case GPUSourceFake:
		// The local cluster and tests drive fake memory use through a
		// file in the state directory (see gres.FakeUsage).
		fake := gres.NewFake(d.cfg.GPUs.Fake)
		fake.SetUsageFile(filepath.Join(d.cfg.StateDir, gres.FakeUsageFile))
		d.gpuSrc = fake
	case GPUSourceStatic:
		src, err := gres.NewStatic(d.cfg.GPUs.Static)
		if err != nil {
			return fmt.Errorf("gpus.static: %w", err)
		}
		d.gpuSrc = src
	case GPUSourceNVML:
		src := gresnvml.NewSystem()
		if err := src.Open(); err != nil {
			return fmt.Errorf("gpus.source nvml: %w", err)
		}
		d.gpuSrc, d.nvml = src, src
	default:
		return nil
	}
	gpus, err := d.gpuSrc.Inventory(d.cfg.Name)
	if err != nil {
		d.closeGPUs()
		return fmt.Errorf("gpu inventory: %w", err)
	}
	d.gpus = gpus
	return nil
}

func (d *Daemon) closeGPUs() {
	if d.nvml != nil {
		d.nvml.Close()
	}
}

// gpuHeartbeat returns the GPU status to send with a sync, read at most
// every gpuStatusEvery unless force is set (an XID event).
func (d *Daemon) gpuHeartbeat(force bool) []gres.Status {
	if d.gpuSrc == nil {
		return nil
	}
	d.mu.Lock()
	fresh := !force && time.Since(d.gpuStatusAt) < gpuStatusEvery
	cached := d.gpuStatus
	d.mu.Unlock()
	if fresh {
		return cached
	}
	if fake, ok := d.gpuSrc.(*gres.FakeSource); ok {
		// The fake simulates the load of the jobs holding its GPUs.
		fake.SetHolders(time.Now(), d.fakeHolders())
	}
	st, err := d.gpuSrc.Status()
	if err != nil {
		d.log.Warn("read GPU status", "err", err)
		return cached
	}
	d.mu.Lock()
	d.gpuStatus, d.gpuStatusAt = st, time.Now()
	d.mu.Unlock()
	return st
}

// addGPUStatus puts the GPU status in req when the controller has not had
// this reading yet, and returns the reading's time (zero when none was
// added). A node running many short jobs syncs for each start and end;
// the GPU status, most of a sync's bytes, goes only with a new reading:
// at most every gpuStatusEvery, or at once after an XID event.
func (d *Daemon) addGPUStatus(req *api.NodeSyncRequest) time.Time {
	gst := d.gpuHeartbeat(false)
	d.mu.Lock()
	at := d.gpuStatusAt
	fresh := at.After(d.gpuSentAt)
	d.mu.Unlock()
	if gst == nil || !fresh {
		return time.Time{}
	}
	req.GPUStatus, req.GPUProcJobs = gst, d.gpuProcJobs(gst)
	return at
}

// gpuStatusSent records that the controller took the reading of time at
// (from addGPUStatus; zero: none was sent).
func (d *Daemon) gpuStatusSent(at time.Time) {
	d.mu.Lock()
	if at.After(d.gpuSentAt) {
		d.gpuSentAt = at
	}
	d.mu.Unlock()
}

// watchGPUs turns NVML's critical XID events into an immediate heartbeat,
// so the controller drains a failing GPU within moments.
func (d *Daemon) watchGPUs(ctx context.Context) {
	if d.nvml == nil {
		return
	}
	events := make(chan gresnvml.XIDEvent, 16)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-events:
				d.log.Warn("GPU error", "gpu", ev.Index, "gpu_uuid", ev.UUID, "xid", ev.XID, "reason", ev.Reason)
				d.mu.Lock()
				d.gpuStatusAt = time.Time{}
				d.mu.Unlock()
				d.wake()
			}
		}
	}()
	if err := d.nvml.WatchHealth(ctx, nil, events); err != nil && ctx.Err() == nil {
		d.log.Error("GPU health watch stopped", "err", err)
	}
}

// fakeHolders lists, by GPU index, the jobs running here on the node's
// fake GPUs, each with its batch script's pid (read from the job
// directory when tided has not needed it yet; 0 before the script
// started), for the fake's simulated load. Jobs whose batch script runs
// elsewhere are not listed: tided knows their GPUs only through their
// steps.
func (d *Daemon) fakeHolders() map[int][]gres.FakeHolder {
	out := map[int][]gres.FakeHolder{}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, j := range d.jobs {
		if j.finished() || !j.hasSpec || j.launching != nil {
			continue
		}
		if j.pid.PID == 0 {
			if id, err := readIdentity(filepath.Join(j.dir, filePID)); err == nil {
				j.pid = id
			}
		}
		for _, a := range j.spec.Alloc {
			if a.Node != d.cfg.Name {
				continue
			}
			for _, g := range a.GPUs {
				out[g] = append(out[g], gres.FakeHolder{JobID: j.ref.JobID, PID: j.pid.PID,
					SliceMemMB: a.GPUMemMB, SliceComputePct: a.GPUComputePct})
			}
		}
	}
	return out
}

// procJobSource is a GPU source that knows which job each of its
// processes belongs to (the fake, whose pids need not exist).
type procJobSource interface {
	ProcJobs() map[int]uint64
}

// gpuProcJobs maps the pids of st's GPU processes to the jobs they belong
// to, for the controller's reclaim: a process belongs to the job whose
// pid is its session id (every job runs in a session of its own; a
// process that starts its own session escapes and stays unattributed).
// It returns nil when nothing is attributed.
func (d *Daemon) gpuProcJobs(st []gres.Status) map[int]uint64 {
	var out map[int]uint64
	if src, ok := d.gpuSrc.(procJobSource); ok {
		out = src.ProcJobs()
	}
	var pids []int
	for _, g := range st {
		for _, p := range g.Processes {
			if _, done := out[p.PID]; !done {
				pids = append(pids, p.PID)
			}
		}
	}
	if len(pids) == 0 {
		return out
	}
	// Job pid (= session id) → job, read from the supervisors' pid files
	// for jobs whose pid tided has not needed yet.
	sessions := map[int]uint64{}
	d.mu.Lock()
	for _, j := range d.jobs {
		if j.finished() {
			continue
		}
		if j.pid.PID == 0 {
			if id, err := readIdentity(filepath.Join(j.dir, filePID)); err == nil {
				j.pid = id
			}
		}
		if j.pid.PID > 0 {
			sessions[j.pid.PID] = j.ref.JobID
		}
	}
	d.mu.Unlock()
	for _, pid := range pids {
		sid, err := procSession(pid)
		if err != nil {
			continue
		}
		if id, ok := sessions[sid]; ok {
			if out == nil {
				out = map[int]uint64{}
			}
			out[pid] = id
		}
	}
	return out
}

// procSession reads the session id of pid from /proc/<pid>/stat.
func procSession(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseSession(data)
}

// parseSession returns field 6 (session) of a /proc/<pid>/stat line. The
// command name may hold spaces and parentheses, so fields are counted
// from the last ')'.
func parseSession(data []byte) (int, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return 0, fmt.Errorf("malformed stat line %q", data)
	}
	// After ") " come state (3), ppid (4), pgrp (5), session (6).
	f := strings.Fields(string(data[i+2:]))
	if len(f) < 4 {
		return 0, fmt.Errorf("malformed stat line %q", data)
	}
	sid, err := strconv.Atoi(f[3])
	if err != nil {
		return 0, fmt.Errorf("malformed session in stat line: %w", err)
	}
	return sid, nil
}
