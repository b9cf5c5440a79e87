package nvml

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// IgnoredXIDs are the XIDs WatchXID does not report unless asked to: they
// are caused by the application (illegal address, page fault, a killed
// context) and leave the GPU usable for the next job. The list is the
// Kubernetes device plugin's default.
var IgnoredXIDs = []uint64{13, 31, 43, 45, 68, 109}

// waitMillis bounds each blocking wait for an event, and so how long a
// cancelled WatchXID takes to return.
const waitMillis = 2000

// XIDEvent is a critical XID error on a GPU: the node should stop placing
// jobs on it and drain with Reason.
type XIDEvent struct {
	// Index is the GPU's NVML index, or -1 when the event could not be
	// tied to a GPU (treat every GPU as affected).
	Index int
	// UUID of the GPU, "" when Index is -1.
	UUID string
	// XID is the error number; 0 when the GPU failed without one (lost
	// while registering, or the event wait itself failed).
	XID uint64
	// Reason is for humans and the node's drain reason:
	// "XID 79: GPU has fallen off the bus".
	Reason string
}

// xidText describes the XIDs operators meet most often.
var xidText = map[uint64]string{
	13: "graphics engine exception", 31: "GPU memory page fault", 43: "GPU stopped processing",
	45: "preemptive cleanup", 48: "double-bit ECC error", 61: "internal micro-controller breakpoint",
	62: "internal micro-controller halt", 63: "ECC page retirement or row remap event",
	64: "ECC page retirement or row remap failure", 68: "video processor exception",
	74: "NVLink error", 79: "GPU has fallen off the bus", 92: "high single-bit ECC error rate",
	94: "contained ECC error", 95: "uncontained ECC error", 109: "context switch timeout",
	119: "GSP RPC timeout", 120: "GSP error",
}

// xidReason is the Reason of an event for xid.
func xidReason(xid uint64) string {
	if t, ok := xidText[xid]; ok {
		return fmt.Sprintf("XID %d: %s", xid, t)
	}
	return fmt.Sprintf("XID %d", xid)
}

// WatchXID reports critical XID errors of every GPU on out until ctx is
// done, then returns nil. Every XID is reported except those in
// IgnoredXIDs; an XID listed in critical is reported even if IgnoredXIDs
// has it (a site that drains on 43, say). GPUs that cannot deliver XID
// events are not watched; one found lost while registering is reported
// at once with XID 0. It returns an error wrapping ErrUnavailable when
// NVML does not initialise, and an error when no GPU can be watched or
// waiting for events fails, after reporting every GPU as affected
// (Index -1) in the latter case. Sends on out block, so the reader must
// keep up or cancel ctx.
func WatchXID(ctx context.Context, lib nvml.Interface, critical []uint64, out chan<- XIDEvent) error {
	return watchXID(ctx, lib, critical, func(ev XIDEvent) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	})
}

// WatchHealth runs WatchXID on the source's library and remembers each
// reported GPU as unhealthy (for good: a critical XID needs a GPU reset,
// and a node daemon restart clears it), so that Status and Inventory
// report it. Events are also sent on out when it is not nil.
func (s *Source) WatchHealth(ctx context.Context, critical []uint64, out chan<- XIDEvent) error {
	return watchXID(ctx, s.lib, critical, func(ev XIDEvent) bool {
		s.mu.Lock()
		if ev.Index < 0 {
			for _, u := range s.uuids {
				s.marks[u] = ev.Reason
			}
		} else if ev.UUID != "" {
			s.marks[ev.UUID] = ev.Reason
		}
		s.mu.Unlock()
		if out == nil {
			return ctx.Err() == nil
		}
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	})
}

// watchXID is WatchXID with a callback; emit returns false to stop.
func watchXID(ctx context.Context, lib nvml.Interface, critical []uint64, emit func(XIDEvent) bool) error {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("%w: init: %w", ErrUnavailable, ret)
	}
	defer lib.Shutdown()

	n, ret := lib.DeviceGetCount()
	if err := retErr("nvml: device count", ret); err != nil {
		return err
	}
	set, ret := lib.EventSetCreate()
	if err := retErr("nvml: event set", ret); err != nil {
		return err
	}
	defer set.Free()

	byUUID := map[string]int{}
	watched := 0
	for i := range n {
		uuid, err := registerXID(lib, i, set)
		if uuid != "" {
			byUUID[uuid] = i
		}
		switch {
		case err == nil:
			watched++
		case isLost(err):
			if !emit(XIDEvent{Index: i, UUID: uuid, Reason: fmt.Sprintf("GPU is lost (%v)", err)}) {
				return nil
			}
		case errors.Is(err, nvml.ERROR_NOT_SUPPORTED):
			// Too old or virtualised to deliver XID events: unwatched.
		default:
			return fmt.Errorf("nvml: gpu %d: %w", i, err)
		}
	}
	if watched == 0 {
		return errors.New("nvml: no GPU delivers XID events")
	}

	for ctx.Err() == nil {
		e, ret := set.Wait(waitMillis)
		if ret == nvml.ERROR_TIMEOUT {
			continue
		}
		if ret != nvml.SUCCESS {
			err := fmt.Errorf("nvml: waiting for events: %w", ret)
			emit(XIDEvent{Index: -1, Reason: fmt.Sprintf("GPU health unknown (%v)", err)})
			return err
		}
		if e.EventType&nvml.EventTypeXidCriticalError == 0 {
			continue
		}
		xid := e.EventData
		if slices.Contains(IgnoredXIDs, xid) && !slices.Contains(critical, xid) {
			continue
		}
		ev := XIDEvent{Index: -1, XID: xid, Reason: xidReason(xid)}
		if e.Device != nil {
			if uuid, ret := e.Device.GetUUID(); ret == nvml.SUCCESS {
				if i, ok := byUUID[uuid]; ok {
					ev.Index, ev.UUID = i, uuid
				}
			}
		}
		if !emit(ev) {
			return nil
		}
	}
	return nil
}

// registerXID adds GPU i to set for XID events and returns its UUID
// ("" if unreadable). It fails with ERROR_NOT_SUPPORTED when the GPU
// cannot deliver them.
func registerXID(lib nvml.Interface, i int, set nvml.EventSet) (string, error) {
	h, ret := lib.DeviceGetHandleByIndex(i)
	if err := retErr("handle", ret); err != nil {
		return "", err
	}
	uuid, ret := h.GetUUID()
	if err := retErr("uuid", ret); err != nil {
		return "", err
	}
	supported, ret := h.GetSupportedEventTypes()
	if err := retErr("supported events", ret); err != nil {
		return uuid, err
	}
	if supported&nvml.EventTypeXidCriticalError == 0 {
		return uuid, fmt.Errorf("supported events: %w", nvml.ERROR_NOT_SUPPORTED)
	}
	return uuid, retErr("register events", h.RegisterEvents(nvml.EventTypeXidCriticalError, set))
}
