package noded

import (
	"context"
	"fmt"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

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
		d.gpuSrc = gres.NewFake(d.cfg.GPUs.Fake)
	case GPUSourceStatic:
		src, err := gres.NewStatic(d.cfg.GPUs.Static)
		if err != nil {
			return fmt.Errorf("gpus.static: %w", err)
		}
		d.gpuSrc = src
	case GPUSourceNVML:
		src := gresnvml.New(gonvml.New())
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
