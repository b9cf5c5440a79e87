package ctld

import (
	"context"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// TestSupersededSyncKeepsCommands checks the sync protocol's hand-over:
// a node's new long poll answers the one it has held (empty), a report
// that does not wait leaves it held, and one-shot commands go to the new
// one, also when the held one's caller is gone.
func TestSupersededSyncKeepsCommands(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	id := h.submit(api.JobSpec{})
	h.s.schedulePass()
	h.sync("gpu01")
	h.sync("gpu01", running(id, 0))
	held := func(ctx context.Context) <-chan api.NodeSyncResponse {
		out := make(chan api.NodeSyncResponse, 1)
		go func() {
			resp, err := h.s.sync(ctx, api.NodeSyncRequest{Name: "gpu01", Jobs: []api.NodeJobReport{running(id, 0)}, WaitMS: 60000})
			if err != nil {
				t.Error(err)
			}
			out <- resp
		}()
		deadline := time.Now().Add(30 * time.Second)
		for {
			h.s.mu.Lock()
			n := h.s.nodes["gpu01"].inflight
			h.s.mu.Unlock()
			if n == 1 {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatal("the sync was not held")
			}
			time.Sleep(time.Millisecond)
		}
	}
	queueSignal := func(sig int) { // queued without waking the held sync
		h.s.mu.Lock()
		n := h.s.nodes["gpu01"]
		n.signals = append(n.signals, api.SignalCommand{JobRef: api.JobRef{JobID: id}, Signal: sig})
		h.s.mu.Unlock()
	}

	first := held(context.Background())
	// A report that does not wait leaves the held poll alone.
	h.sync("gpu01", running(id, 0))
	h.s.mu.Lock()
	inflight := h.s.nodes["gpu01"].inflight
	h.s.mu.Unlock()
	if inflight != 1 {
		t.Fatalf("a report without wait ended the held poll (inflight %d)", inflight)
	}
	queueSignal(10)
	next, err := h.s.sync(context.Background(), api.NodeSyncRequest{Name: "gpu01", Jobs: []api.NodeJobReport{running(id, 0)}, WaitMS: 60000})
	if err != nil {
		t.Fatal(err)
	}
	if resp := <-first; len(resp.Signals) != 0 || len(resp.Launch) != 0 {
		t.Errorf("superseded sync answered %+v, want nothing", resp)
	}
	if len(next.Signals) != 1 || next.Signals[0].Signal != 10 {
		t.Errorf("new sync's signals = %+v, want the queued one", next.Signals)
	}

	ctx, cancel := context.WithCancel(context.Background())
	gone := held(ctx)
	queueSignal(12)
	cancel()
	if resp := <-gone; len(resp.Signals) != 0 {
		t.Errorf("a sync whose caller left took %+v", resp.Signals)
	}
	if resp := h.sync("gpu01", running(id, 0)); len(resp.Signals) != 1 || resp.Signals[0].Signal != 12 {
		t.Errorf("next sync's signals = %+v, want the one the gone caller left", resp.Signals)
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if n := h.s.nodes["gpu01"]; n.inflight != 0 || n.supersede != nil {
		t.Errorf("after the syncs: inflight %d, supersede set %v", n.inflight, n.supersede != nil)
	}
}

// TestStaleSyncIgnored checks that a node's report overtaken by a newer
// one (tided sends its held poll and its at-once reports on separate
// connections) cannot undo what the newer one said: a launched job is
// not declared lost, a finished one is not forgotten as unknown.
func TestStaleSyncIgnored(t *testing.T) {
	h := newHarness(t)
	gpus, _ := gres.Fake("gpu01", gres.FakeConfig{Count: 8})
	if _, err := h.s.register(api.NodeRegistration{Name: "gpu01", CPUs: 8, MemoryMB: 64 * 1024, GPUs: gpus, Seq: 100}); err != nil {
		t.Fatal(err)
	}
	sync := func(seq uint64, reports ...api.NodeJobReport) api.NodeSyncResponse {
		t.Helper()
		resp, err := h.s.sync(context.Background(), api.NodeSyncRequest{Name: "gpu01", Seq: seq, Jobs: reports})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	id := h.submit(api.JobSpec{})
	h.s.schedulePass()
	if resp := sync(101); len(resp.Launch) != 1 {
		t.Fatalf("launch = %+v", resp.Launch)
	}
	sync(103, running(id, 0))
	// Taken before the launch, arriving after the report of it.
	if resp := sync(102); len(resp.Launch) != 0 {
		t.Errorf("a stale report brought the launch again: %+v", resp.Launch)
	}
	if j := h.job(id); j.State != api.StateRunning {
		t.Fatalf("job %s after a stale report without it, want RUNNING", j.State)
	}
	if resp := sync(104, finished(id, 0)); len(resp.Ack) != 1 {
		t.Fatalf("no ack: %+v", resp)
	}
	if resp := sync(103, running(id, 0)); len(resp.Forget) != 0 || len(resp.Ack) != 0 {
		t.Errorf("a stale running report was answered %+v", resp)
	}
	if j := h.job(id); j.State != api.StateCompleted {
		t.Fatalf("job %s after a stale running report, want COMPLETED", j.State)
	}

	// A daemon without sequence numbers is always heard; a new
	// registration starts the count again.
	id2 := h.submit(api.JobSpec{})
	h.s.schedulePass()
	sync(0, running(id2, 0))
	if j := h.job(id2); !j.Launched {
		t.Fatal("a report without a sequence number was ignored")
	}
	if _, err := h.s.register(api.NodeRegistration{Name: "gpu01", CPUs: 8, MemoryMB: 64 * 1024, GPUs: gpus, Seq: 7, Jobs: []api.NodeJobReport{running(id2, 0)}}); err != nil {
		t.Fatal(err)
	}
	sync(8, finished(id2, 0))
	if j := h.job(id2); j.State != api.StateCompleted {
		t.Fatalf("job %s: the report after a re-registration with a lower count was ignored", j.State)
	}
}
