package nvml

import (
	"context"
	"errors"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/gres"
)

type wait struct {
	data nvml.EventData
	ret  nvml.Return
}

// xidServer is a DGX H100 whose event set replays waits and then cancels
// the watch: GPU 6 is lost before it can register and GPU 7 cannot
// deliver XID events.
func xidServer(t *testing.T, script func(srv *server.Server) []wait) (*server.Server, *mock.EventSet, context.Context) {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	srv := newDGXH100(true)
	idle(srv)
	var waits []wait
	if script != nil {
		waits = script(srv)
	}
	for i := range srv.Devices {
		d := device(srv, i)
		d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
			return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
		}
		d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	}
	device(srv, 6).GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	device(srv, 7).GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return nvml.EventTypeSingleBitEccError, nvml.SUCCESS }
	set := &mock.EventSet{FreeFunc: func() nvml.Return { return nvml.SUCCESS }}
	set.WaitFunc = func(uint32) (nvml.EventData, nvml.Return) {
		if len(waits) == 0 {
			cancel()
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
		w := waits[0]
		waits = waits[1:]
		return w.data, w.ret
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	return srv, set, ctx
}

func xid(srv *server.Server, gpu int, x uint64) wait {
	return wait{data: nvml.EventData{Device: srv.Devices[gpu], EventType: nvml.EventTypeXidCriticalError, EventData: x}, ret: nvml.SUCCESS}
}

func TestWatchXID(t *testing.T) {
	stranger := newDGXA100() // a device of no GPU this node enumerates
	stranger.Devices[0].(*server.Device).UUID = "GPU-stranger"
	srv, set, ctx := xidServer(t, func(srv *server.Server) []wait {
		return []wait{
			xid(srv, 2, 13), // application fault: ignored
			{ret: nvml.ERROR_TIMEOUT},
			xid(srv, 2, 79),
			{data: nvml.EventData{Device: srv.Devices[3], EventType: nvml.EventTypeSingleBitEccError}, ret: nvml.SUCCESS},
			xid(srv, 5, 43),  // ignored by default, critical here
			xid(srv, 5, 31),  // ignored
			xid(srv, 1, 119), // GSP
			{data: nvml.EventData{Device: stranger.Devices[0], EventType: nvml.EventTypeXidCriticalError, EventData: 48}, ret: nvml.SUCCESS},
			{data: nvml.EventData{EventType: nvml.EventTypeXidCriticalError, EventData: 999}, ret: nvml.SUCCESS},
		}
	})
	out := make(chan XIDEvent, 16)
	if err := WatchXID(ctx, srv, []uint64{43}, out); err != nil {
		t.Fatal(err)
	}
	close(out)
	var got []XIDEvent
	for ev := range out {
		got = append(got, ev)
	}
	want := []XIDEvent{
		{Index: 6, UUID: uuidOf(6), Reason: "GPU is lost (supported events: ERROR_GPU_IS_LOST)"},
		{Index: 2, UUID: uuidOf(2), XID: 79, Reason: "XID 79: GPU has fallen off the bus"},
		{Index: 5, UUID: uuidOf(5), XID: 43, Reason: "XID 43: GPU stopped processing"},
		{Index: 1, UUID: uuidOf(1), XID: 119, Reason: "XID 119: GSP RPC timeout"},
		{Index: -1, XID: 48, Reason: "XID 48: double-bit ECC error"},
		{Index: -1, XID: 999, Reason: "XID 999"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	balanced(t, srv)
	if n := len(set.FreeCalls()); n != 1 {
		t.Errorf("event set freed %d times, want 1", n)
	}
	for i := range srv.Devices {
		calls := device(srv, i).RegisterEventsCalls()
		wantN := 1
		if i >= 6 {
			wantN = 0
		}
		if len(calls) != wantN {
			t.Errorf("gpu %d registered %d times, want %d", i, len(calls), wantN)
			continue
		}
		if wantN == 1 && calls[0].V != nvml.EventTypeXidCriticalError {
			t.Errorf("gpu %d registered for events %#x, want XID critical errors only", i, calls[0].V)
		}
	}
}

func TestWatchXIDWaitFails(t *testing.T) {
	srv, _, ctx := xidServer(t, func(*server.Server) []wait { return []wait{{ret: nvml.ERROR_UNKNOWN}} })
	out := make(chan XIDEvent, 16)
	err := WatchXID(ctx, srv, nil, out)
	if !errors.Is(err, nvml.ERROR_UNKNOWN) {
		t.Fatalf("WatchXID() = %v, want the wait's error", err)
	}
	close(out)
	var last XIDEvent
	for ev := range out {
		last = ev
	}
	if last.Index != -1 || last.Reason != "GPU health unknown (nvml: waiting for events: ERROR_UNKNOWN)" {
		t.Errorf("last event = %+v, want every GPU affected", last)
	}
	balanced(t, srv)
}

func TestWatchXIDNothingToWatch(t *testing.T) {
	srv, set, ctx := xidServer(t, nil)
	for i := range srv.Devices {
		device(srv, i).GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	}
	err := WatchXID(ctx, srv, nil, make(chan XIDEvent))
	if err == nil || err.Error() != "nvml: no GPU delivers XID events" {
		t.Fatalf("WatchXID() = %v", err)
	}
	if n := len(set.WaitCalls()); n != 0 {
		t.Errorf("waited %d times with nothing registered", n)
	}
	balanced(t, srv)
}

func TestWatchXIDRegisterFails(t *testing.T) {
	srv, _, ctx := xidServer(t, nil)
	device(srv, 4).RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_NO_PERMISSION }
	err := WatchXID(ctx, srv, nil, make(chan XIDEvent, 16))
	if err == nil || err.Error() != "nvml: gpu 4: register events: ERROR_NO_PERMISSION" {
		t.Fatalf("WatchXID() = %v", err)
	}
	balanced(t, srv)
}

func TestWatchXIDStopsWhenReaderGone(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	srv, _, _ := xidServer(t, func(srv *server.Server) []wait { return []wait{xid(srv, 0, 79)} })
	// Nobody reads out; cancelling must release the blocked send. GPU 6's
	// lost event is the first send, so cancel before the watch starts.
	cancel()
	if err := WatchXID(ctx, srv, nil, make(chan XIDEvent)); err != nil {
		t.Fatalf("WatchXID() = %v, want nil after cancel", err)
	}
	balanced(t, srv)
}

func TestWatchHealthMarksStatus(t *testing.T) {
	srv, _, ctx := xidServer(t, func(srv *server.Server) []wait { return []wait{xid(srv, 2, 79)} })
	src := New(srv, WithSysfs(""))
	if _, err := src.Inventory(""); err != nil {
		t.Fatal(err)
	}
	if err := src.WatchHealth(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	st, err := src.Status()
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range st {
		switch i {
		case 2:
			if s.Health != gres.Unhealthy || s.Reason != "XID 79: GPU has fallen off the bus" {
				t.Errorf("gpu 2 status = %+v, want unhealthy with the XID", s)
			}
		case 6:
			if s.Health != gres.Unhealthy {
				t.Errorf("gpu 6 (lost at registration) status = %+v, want unhealthy", s)
			}
		default:
			if s.Health != gres.Healthy {
				t.Errorf("gpu %d status = %+v, want healthy", i, s)
			}
		}
	}
	devs, err := src.Inventory("")
	if err != nil {
		t.Fatal(err)
	}
	if devs[2].Health != gres.Unhealthy {
		t.Errorf("re-inventory forgot the XID on gpu 2")
	}
	balanced(t, srv)
}
