package noded

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
)

// fakeCtld implements the controller's side of the node protocol:
// /api/v1/node/register and /api/v1/node/sync with the cluster key, a
// long poll held until commands are queued, and a record of reports.
//
// Like the real controller must, it treats commands as state, not as
// messages: tided reports a local change in a sync that does not wait
// while its long poll stays held, a new long poll answers the held one
// empty (as the real controller does), and tided may cancel one, so an
// answer may be lost. A
// launch is repeated until the node reports the job, a kill until the
// job is reported finished, an ack or forget until the node stops
// reporting the job. Only limits and plain signals are sent once.
type fakeCtld struct {
	key string
	srv *httptest.Server

	mu            sync.Mutex
	registered    bool
	registrations int
	lastReg       api.NodeRegistration
	reports       map[api.JobRef]api.NodeJobReport
	launches      map[api.JobRef]api.LaunchSpec
	kills         map[api.JobRef]api.SignalCommand
	acks          map[api.JobRef]bool
	forgets       map[api.JobRef]bool
	once          api.NodeSyncResponse
	// syncs numbers sync requests: one-shot commands go only to the
	// newest, because an answer to a cancelled one is lost.
	syncs int
	down  bool
	// kick is closed (and replaced) when commands are queued or the
	// controller goes down; changed when reports change.
	kick    chan struct{}
	changed chan struct{}
	// supersede is closed when a sync arrives, answering held ones.
	supersede chan struct{}
	// conns counts the connections tided opened.
	conns atomic.Int64
	// gpuSyncs counts the syncs that carried GPU status.
	gpuSyncs int
	// seq is the newest report sequence number recorded; stale counts
	// the syncs that arrived after a newer one (their reports are not
	// recorded, as the real controller ignores them).
	seq   uint64
	stale int
	// stepKey is the public step key registration answers carry ("" for
	// none); hosted and hostedGen the hosted-job list, sent while the
	// node's echo (ackedGen, its last sync's) differs, as the real
	// controller does.
	stepKey   string
	hosted    []api.HostedJob
	hostedGen uint64
	ackedGen  uint64
}

func newFakeCtld(t testing.TB, key string) *fakeCtld {
	f := &fakeCtld{key: key, reports: map[api.JobRef]api.NodeJobReport{},
		launches: map[api.JobRef]api.LaunchSpec{}, kills: map[api.JobRef]api.SignalCommand{},
		acks: map[api.JobRef]bool{}, forgets: map[api.JobRef]bool{},
		kick: make(chan struct{}), changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/node/register", f.register)
	mux.HandleFunc("POST /api/v1/node/sync", f.sync)
	f.srv = httptest.NewUnstartedServer(mux)
	f.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			f.conns.Add(1)
		}
	}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeCtld) addr() string { return f.srv.Listener.Addr().String() }

func (f *fakeCtld) deny(w http.ResponseWriter, err error) {
	status, body := api.NewErrorBody(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// checkLocked rejects requests without the key or while down.
func (f *fakeCtld) checkLocked(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get(client.KeyHeader) != f.key {
		f.deny(w, api.Errorf(api.ErrUnauthenticated, "bad cluster key"))
		return false
	}
	if f.down {
		f.deny(w, api.Errorf(api.ErrUnavailable, "controller is down"))
		return false
	}
	return true
}

func (f *fakeCtld) signalChanged() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeCtld) recordLocked(jobs []api.NodeJobReport) {
	changed := false
	for _, j := range jobs {
		ref := api.JobRef{JobID: j.JobID, Restart: j.Restart}
		if f.reports[ref] != j {
			f.reports[ref] = j
			changed = true
		}
	}
	if changed {
		f.signalChanged()
	}
}

// commandsLocked computes the answer to a sync that reported jobs, and
// retires the commands the reports show done.
func (f *fakeCtld) commandsLocked(jobs []api.NodeJobReport, seq int) api.NodeSyncResponse {
	reported := map[api.JobRef]api.NodeJobReport{}
	for _, j := range jobs {
		reported[api.JobRef{JobID: j.JobID, Restart: j.Restart}] = j
	}
	var resp api.NodeSyncResponse
	if seq == f.syncs {
		resp = f.once
		f.once = api.NodeSyncResponse{}
	}
	for ref, l := range f.launches {
		if _, ok := reported[ref]; ok {
			delete(f.launches, ref)
		} else {
			resp.Launch = append(resp.Launch, l)
		}
	}
	for ref, k := range f.kills {
		if r, ok := reported[ref]; !ok || r.State == api.NodeJobFinished {
			delete(f.kills, ref)
		} else {
			resp.Signals = append(resp.Signals, k)
		}
	}
	for ref := range f.acks {
		if _, ok := reported[ref]; !ok {
			delete(f.acks, ref)
		} else {
			resp.Ack = append(resp.Ack, ref)
		}
	}
	for ref := range f.forgets {
		if _, ok := reported[ref]; !ok {
			delete(f.forgets, ref)
		} else {
			resp.Forget = append(resp.Forget, ref)
		}
	}
	return resp
}

func (f *fakeCtld) register(w http.ResponseWriter, r *http.Request) {
	var reg api.NodeRegistration
	if err := json.NewDecoder(r.Body).Decode(&reg); err != nil {
		f.deny(w, api.Invalid("bad registration: %v", err))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.checkLocked(w, r) {
		return
	}
	f.registered = true
	f.registrations++
	f.lastReg = reg
	f.seq = reg.Seq
	f.recordLocked(reg.Jobs)
	f.signalChanged()
	json.NewEncoder(w).Encode(api.NodeSyncResponse{StepKey: f.stepKey, Hosted: f.hosted, HostedGen: f.hostedGen})
}

// addHostedLocked puts the hosted list in resp unless the node echoed
// it.
func (f *fakeCtld) addHostedLocked(resp *api.NodeSyncResponse) {
	if f.hostedGen != 0 && f.hostedGen != f.ackedGen {
		resp.Hosted, resp.HostedGen = f.hosted, f.hostedGen
	}
}

// setHosted replaces the hosted list (gen names it) and wakes the
// node's held sync.
func (f *fakeCtld) setHosted(list []api.HostedJob, gen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hosted, f.hostedGen = list, gen
	close(f.kick)
	f.kick = make(chan struct{})
}

// waitHostedAck waits for a sync echoing hosted list gen.
func (f *fakeCtld) waitHostedAck(t testing.TB, gen uint64) {
	t.Helper()
	f.waitFor(t, fmt.Sprintf("hosted list %d echoed", gen), func() bool { return f.ackedGen == gen })
}

func (f *fakeCtld) sync(w http.ResponseWriter, r *http.Request) {
	var req api.NodeSyncRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		f.deny(w, api.Invalid("bad sync: %v", err))
		return
	}
	f.mu.Lock()
	if !f.checkLocked(w, r) {
		f.mu.Unlock()
		return
	}
	if req.HostedGen != f.ackedGen {
		f.ackedGen = req.HostedGen
		f.signalChanged()
	}
	if req.Seq != 0 && req.Seq <= f.seq {
		f.stale++
	} else {
		f.seq = max(f.seq, req.Seq)
		f.recordLocked(req.Jobs)
	}
	if !f.registered {
		f.mu.Unlock()
		json.NewEncoder(w).Encode(api.NodeSyncResponse{Unregistered: true})
		return
	}
	f.syncs++
	seq := f.syncs
	if req.GPUStatus != nil {
		f.gpuSyncs++
		f.signalChanged()
	}
	if req.WaitMS > 0 && f.supersede != nil {
		close(f.supersede)
		f.supersede = nil
	}
	resp := f.commandsLocked(req.Jobs, seq)
	f.addHostedLocked(&resp)
	if isEmpty(resp) {
		kick := f.kick
		if f.supersede == nil {
			f.supersede = make(chan struct{})
		}
		sup := f.supersede
		f.mu.Unlock()
		t := time.NewTimer(time.Duration(req.WaitMS) * time.Millisecond)
		select {
		case <-kick:
		case <-t.C:
		case <-r.Context().Done():
		case <-sup:
			t.Stop()
			json.NewEncoder(w).Encode(api.NodeSyncResponse{})
			return
		}
		t.Stop()
		f.mu.Lock()
		if !f.checkLocked(w, r) {
			f.mu.Unlock()
			return
		}
		resp = f.commandsLocked(req.Jobs, seq)
		f.addHostedLocked(&resp)
	}
	f.mu.Unlock()
	json.NewEncoder(w).Encode(resp)
}

func isEmpty(r api.NodeSyncResponse) bool {
	return len(r.Launch) == 0 && len(r.Signals) == 0 && len(r.Limits) == 0 &&
		len(r.Ack) == 0 && len(r.Forget) == 0 && !r.Unregistered
}

// queue adds commands for the node (see fakeCtld for how long each is
// repeated).
func (f *fakeCtld) queue(cmds api.NodeSyncResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range cmds.Launch {
		f.launches[l.JobRef] = l
	}
	for _, s := range cmds.Signals {
		if s.Kill {
			f.kills[s.JobRef] = s
		} else {
			f.once.Signals = append(f.once.Signals, s)
		}
	}
	for _, ref := range cmds.Ack {
		f.acks[ref] = true
	}
	for _, ref := range cmds.Forget {
		f.forgets[ref] = true
	}
	f.once.Limits = append(f.once.Limits, cmds.Limits...)
	close(f.kick)
	f.kick = make(chan struct{})
}

// sendOnce puts commands in the next answer only, whatever the node
// reports (to test tided against repeated or stale commands).
func (f *fakeCtld) sendOnce(cmds api.NodeSyncResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.once.Launch = append(f.once.Launch, cmds.Launch...)
	f.once.Ack = append(f.once.Ack, cmds.Ack...)
	close(f.kick)
	f.kick = make(chan struct{})
}

func (f *fakeCtld) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
	close(f.kick)
	f.kick = make(chan struct{})
}

// restart forgets the node's registration, as a controller that lost
// its state would.
func (f *fakeCtld) restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.registered = false
}

// waitFor blocks until cond holds on the fake's state.
func (f *fakeCtld) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		ok, ch := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			f.mu.Lock()
			defer f.mu.Unlock()
			t.Fatalf("gave up waiting for %s; reports: %+v (stale syncs: %d)", what, f.reports, f.stale)
		}
	}
}

// waitReport waits for a report of ref in the given state.
func (f *fakeCtld) waitReport(t testing.TB, ref api.JobRef, state api.NodeJobState) api.NodeJobReport {
	t.Helper()
	var r api.NodeJobReport
	f.waitFor(t, "job "+dirName(ref)+" "+string(state), func() bool {
		var ok bool
		r, ok = f.reports[ref]
		return ok && r.State == state
	})
	return r
}
