package ctld

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/accounting"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/api/listing"
	"github.com/tide-hpc/tide/gres"
)

// fakeClock is a settable clock for the controller.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testConfigHeader is the start of every test configuration.
const testConfigHeader = `
version: 1
cluster_name: t
state_dir: /unused
socket: /unused.sock
node_addr: 127.0.0.1:0
timeouts: {node: 30s, kill_wait: 5s, min_job_age: 5m}
`

const testConfig = testConfigHeader + `
partitions:
  - {name: gpu, nodes: "gpu[01-02]", default: true, default_time: "10:00", max_time: "1:00:00"}
nodes:
  - {names: "gpu[01-02]", cpus: 8, memory: 64G, gpus: 8}
`

type harness struct {
	t      *testing.T
	s      *Server
	clock  *fakeClock
	db     string
	alice  caller
	config string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWith(t, testConfig)
}

func newHarnessWith(t *testing.T, config string) *harness {
	t.Helper()
	h := &harness{t: t, clock: &fakeClock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)},
		db:    filepath.Join(t.TempDir(), "tide.db"),
		alice: caller{uid: 1000, gid: 1000, user: "alice", known: true}, config: config}
	h.open()
	return h
}

func (h *harness) open() {
	h.t.Helper()
	cfg, err := ParseConfig(strings.NewReader(h.config))
	if err != nil {
		h.t.Fatal(err)
	}
	cl, err := cfg.Validate()
	if err != nil {
		h.t.Fatal(err)
	}
	st, err := accounting.Open(h.db)
	if err != nil {
		h.t.Fatal(err)
	}
	s, err := newServer(cl, slog.New(slog.NewTextHandler(io.Discard, nil)), st, "k", h.clock.now)
	if err != nil {
		h.t.Fatal(err)
	}
	h.s = s
	h.t.Cleanup(func() { s.Close() })
}

// restart simulates a controller crash: memory is lost, the store stays.
func (h *harness) restart() {
	h.s.Close()
	h.open()
}

func (h *harness) register(node string, reports ...api.NodeJobReport) api.NodeSyncResponse {
	h.t.Helper()
	gpus, _ := gres.Fake(node, gres.FakeConfig{Count: 8})
	resp, err := h.s.register(api.NodeRegistration{Name: node, CPUs: 8, MemoryMB: 64 * 1024, GPUs: gpus, Jobs: reports})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

func (h *harness) sync(node string, reports ...api.NodeJobReport) api.NodeSyncResponse {
	h.t.Helper()
	resp, err := h.s.sync(context.Background(), api.NodeSyncRequest{Name: node, Jobs: reports})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

func (h *harness) submit(spec api.JobSpec) uint64 {
	h.t.Helper()
	if spec.Script == "" {
		spec.Script = "#!/bin/sh\ntrue\n"
	}
	if spec.WorkDir == "" {
		spec.WorkDir = "/home/alice"
	}
	resp, err := h.s.submit(context.Background(), h.alice, api.SubmitRequest{Spec: spec})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.JobID
}

func (h *harness) job(id uint64) *api.Job {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	j := h.s.jobs[id]
	if j == nil {
		h.t.Fatalf("job %d not in memory", id)
	}
	cp := *j
	return &cp
}

func running(id uint64, restart int) api.NodeJobReport {
	return api.NodeJobReport{JobID: id, Restart: restart, State: api.NodeJobRunning}
}

func finished(id uint64, code int) api.NodeJobReport {
	return api.NodeJobReport{JobID: id, State: api.NodeJobFinished, Exit: api.ExitStatus{Code: code}}
}

func TestJobLifecycle(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	id := h.submit(api.JobSpec{Name: "a", GPUs: 2})
	h.s.schedulePass()
	j := h.job(id)
	if j.State != api.StateRunning || j.AllocGPUs() != 2 || j.TimeLimit != 600 {
		t.Fatalf("after pass: state=%s gpus=%d limit=%d", j.State, j.AllocGPUs(), j.TimeLimit)
	}
	host := j.BatchHost()
	resp := h.sync(host)
	if len(resp.Launch) != 1 || resp.Launch[0].JobID != id || resp.Launch[0].Script == "" {
		t.Fatalf("launch = %+v", resp.Launch)
	}
	// Until the node reports the job, the launch is repeated.
	if resp := h.sync(host); len(resp.Launch) != 1 {
		t.Fatalf("launch not repeated: %+v", resp)
	}
	if resp := h.sync(host, running(id, 0)); len(resp.Launch) != 0 {
		t.Fatalf("launch after report: %+v", resp)
	}
	resp = h.sync(host, finished(id, 3))
	if len(resp.Ack) != 1 {
		t.Fatalf("no ack: %+v", resp)
	}
	j = h.job(id)
	if j.State != api.StateFailed || j.Exit.String() != "3:0" || j.Reason != api.ReasonNonZeroExit {
		t.Fatalf("end: %s %s %s", j.State, j.Exit, j.Reason)
	}
	// Resources are back.
	for _, n := range h.s.nodes {
		if len(n.AllocGPUs) != 0 || n.AllocCPUs != 0 {
			t.Fatalf("node %s still holds %v", n.Name, n.AllocGPUs)
		}
	}
	// The trail and accounting have it.
	ev, _ := h.s.store.Events(context.Background(), id)
	kinds := []string{}
	for _, e := range ev {
		kinds = append(kinds, e.Kind)
	}
	if got := strings.Join(kinds, ","); got != "submit,start,launch,end" {
		t.Fatalf("trail = %s", got)
	}
}

func TestCancel(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	pend := h.submit(api.JobSpec{Hold: true})
	run := h.submit(api.JobSpec{})
	h.s.schedulePass()
	host := h.job(run).BatchHost()
	h.sync(host, running(run, 0))

	bob := caller{uid: 1001, user: "bob", known: true}
	resp, _ := h.s.cancel(bob, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{run}}})
	if resp.Results[0].Error == "" {
		t.Fatal("bob cancelled alice's job")
	}
	resp, _ = h.s.cancel(h.alice, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{pend, run, 9999}}})
	if resp.Results[0].Error != "" || resp.Results[1].Error != "" || resp.Results[2].Error == "" {
		t.Fatalf("results %+v", resp.Results)
	}
	if j := h.job(pend); j.State != api.StateCancelled {
		t.Fatalf("pending job %s", j.State)
	}
	if j := h.job(run); j.State != api.StateCompleting {
		t.Fatalf("running job %s", j.State)
	}
	sr := h.sync(host, running(run, 0))
	if len(sr.Signals) != 1 || !sr.Signals[0].Kill {
		t.Fatalf("no kill: %+v", sr)
	}
	// The kill is not repeated within the kill wait.
	if sr := h.sync(host, running(run, 0)); len(sr.Signals) != 0 {
		t.Fatalf("kill repeated: %+v", sr)
	}
	rep := finished(run, 0)
	rep.Exit.Signal, rep.Killed = 15, true
	h.sync(host, rep)
	if j := h.job(run); j.State != api.StateCancelled || j.CancelledBy == nil || *j.CancelledBy != 1000 {
		t.Fatalf("after kill: %s", j.State)
	}
}

func TestPendingReasons(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	big := h.submit(api.JobSpec{Nodes: 2, GPUsPerNode: 8})
	h.s.schedulePass()
	if h.job(big).State != api.StateRunning {
		t.Fatal("big job did not start")
	}
	waiting := h.submit(api.JobSpec{GPUs: 1})
	later := h.submit(api.JobSpec{GPUs: 1, BeginTime: h.clock.now().Add(time.Hour)})
	long := h.submit(api.JobSpec{TimeLimit: 7200})
	h.s.schedulePass()
	for id, want := range map[uint64]api.ReasonCode{waiting: api.ReasonResources, later: api.ReasonBeginTime, long: api.ReasonPartitionTimeLimit} {
		if j := h.job(id); j.State != api.StatePending || j.Reason != want {
			t.Errorf("job %d: %s %s, want PENDING %s", id, j.State, j.Reason, want)
		}
	}
	if d := h.job(waiting).ReasonDetail; !strings.Contains(d, "InsufficientGPU") {
		t.Errorf("detail %q", d)
	}
	// Impossible requests are refused at submit.
	_, err := h.s.submit(context.Background(), h.alice, api.SubmitRequest{Spec: api.JobSpec{
		Script: "#!/bin/sh\n", WorkDir: "/tmp", GPUsPerNode: 16}})
	if err == nil || !strings.Contains(err.Error(), "Requested node configuration is not available") {
		t.Fatalf("16 GPUs per node accepted: %v", err)
	}
}

func TestNodeFailure(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	id := h.submit(api.JobSpec{})
	h.s.schedulePass()
	h.sync("gpu01", running(id, 0))
	h.clock.add(31 * time.Second)
	h.s.mu.Lock()
	h.s.checkNodes(h.clock.now())
	h.s.mu.Unlock()
	if j := h.job(id); j.State != api.StateNodeFail {
		t.Fatalf("state %s", j.State)
	}
	// The node comes back and still runs the job: it is told to forget it.
	if resp := h.sync("gpu01", running(id, 0)); len(resp.Forget) != 1 {
		t.Fatalf("no forget: %+v", resp)
	}
}

func TestRecoveryAfterCrash(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	run := h.submit(api.JobSpec{Nodes: 2, GPUsPerNode: 8})
	h.s.schedulePass()
	h.sync("gpu01", running(run, 0))
	pend := h.submit(api.JobSpec{GPUs: 8})
	h.s.schedulePass()
	h.restart()
	if j := h.job(run); j.State != api.StateRunning || j.AllocGPUs() != 16 {
		t.Fatalf("running job after restart: %s %d GPUs", j.State, j.AllocGPUs())
	}
	if j := h.job(pend); j.State != api.StatePending {
		t.Fatalf("pending job after restart: %s", j.State)
	}
	// Nodes must register again; the batch host reports the end.
	if resp := h.sync("gpu01"); !resp.Unregistered {
		t.Fatal("sync before registration accepted")
	}
	h.register("gpu01", finished(run, 0))
	h.register("gpu02")
	if j := h.job(run); j.State != api.StateCompleted {
		t.Fatalf("after report: %s", j.State)
	}
	h.s.schedulePass()
	if j := h.job(pend); j.State != api.StateRunning {
		t.Fatalf("pending job did not start: %s %s", j.State, j.Reason)
	}
	next := h.submit(api.JobSpec{})
	if next <= pend {
		t.Fatalf("id %d reused", next)
	}
}

func TestRequeueAndHold(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	id := h.submit(api.JobSpec{})
	h.s.schedulePass()
	h.sync("gpu01", running(id, 0))
	if _, err := h.s.updateJobs(h.alice, api.JobUpdate{IDs: []uint64{id}, Action: "requeue"}); err != nil {
		t.Fatal(err)
	}
	sr := h.sync("gpu01", running(id, 0))
	if len(sr.Signals) != 1 || !sr.Signals[0].Kill {
		t.Fatalf("requeue sent no kill: %+v", sr)
	}
	h.sync("gpu01", finished(id, 0))
	if j := h.job(id); j.State != api.StatePending || j.Restarts != 1 {
		t.Fatalf("after requeue: %s restarts=%d", j.State, j.Restarts)
	}
	res, _ := h.s.updateJobs(h.alice, api.JobUpdate{IDs: []uint64{id}, Action: "hold"})
	if res.Results[0].Error != "" || h.job(id).Reason != api.ReasonJobHeldUser {
		t.Fatalf("hold: %+v %s", res, h.job(id).Reason)
	}
	h.s.schedulePass()
	if h.job(id).State != api.StatePending {
		t.Fatal("held job started")
	}
	h.s.updateJobs(h.alice, api.JobUpdate{IDs: []uint64{id}, Action: "release"})
	h.s.schedulePass()
	if j := h.job(id); j.State != api.StateRunning {
		t.Fatalf("released job: %s", j.State)
	}
	// The new incarnation is launched with restart 1.
	sr = h.sync("gpu01")
	if len(sr.Launch) != 1 || sr.Launch[0].Restart != 1 {
		t.Fatalf("relaunch: %+v", sr.Launch)
	}
}

func TestSubmittedHeldJobIsReleased(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	id := h.submit(api.JobSpec{Hold: true})
	h.s.schedulePass()
	if j := h.job(id); j.State != api.StatePending || j.Reason != api.ReasonJobHeldUser {
		t.Fatalf("held job: %s %s", j.State, j.Reason)
	}
	res, _ := h.s.updateJobs(h.alice, api.JobUpdate{IDs: []uint64{id}, Action: "release"})
	if res.Results[0].Error != "" {
		t.Fatal(res.Results[0].Error)
	}
	h.s.schedulePass()
	if j := h.job(id); j.State != api.StateRunning {
		t.Fatalf("released job: %s %s", j.State, j.Reason)
	}
}

func TestNodeMissingAfterRestart(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	id := h.submit(api.JobSpec{})
	h.s.schedulePass()
	h.sync("gpu01", running(id, 0))
	h.restart()
	h.clock.add(31 * time.Second)
	h.s.mu.Lock()
	h.s.checkNodes(h.clock.now())
	h.s.mu.Unlock()
	if j := h.job(id); j.State != api.StateNodeFail {
		t.Fatalf("job on a node that never came back: %s", j.State)
	}
}

func TestBinaryListingCache(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	list := func(query string) []api.Job {
		t.Helper()
		req := httptest.NewRequest("GET", "/api/v1/jobs?"+query, nil)
		req.Header.Set("Accept", listing.MediaJobs())
		rec := httptest.NewRecorder()
		h.s.localHandler().ServeHTTP(rec, req)
		if rec.Code != 200 || rec.Header().Get(listing.NowHeader) == "" {
			t.Fatalf("status %d headers %v", rec.Code, rec.Header())
		}
		if ct := rec.Header().Get("Content-Type"); ct != listing.MediaJobs() {
			t.Fatalf("Content-Type %q", ct)
		}
		jobs, err := listing.ReadJobs(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	a := h.submit(api.JobSpec{Hold: true})
	if got := list(""); len(got) != 1 || got[0].ID != a {
		t.Fatalf("listing %+v", got)
	}
	// A change after the first (cached) listing shows in the next one.
	b := h.submit(api.JobSpec{Hold: true})
	if got := list(""); len(got) != 2 {
		t.Fatalf("cached listing missed job %d: %d jobs", b, len(got))
	}
	h.s.updateJobs(h.alice, api.JobUpdate{IDs: []uint64{a}, Action: "release"})
	h.s.schedulePass()
	got := list("")
	for _, j := range got {
		if j.ID == a && j.State != api.StateRunning {
			t.Fatalf("cached listing shows job %d %s", a, j.State)
		}
	}
	if got := list("id=" + strconv.FormatUint(b, 10)); len(got) != 1 || got[0].ID != b {
		t.Fatalf("filtered listing %+v", got)
	}
	// A client built with another api.Job (another fingerprint) gets JSON.
	req := httptest.NewRequest("GET", "/api/v1/jobs", nil)
	req.Header.Set("Accept", "application/x-tide-jobs; schema=0000000000000000")
	rec := httptest.NewRecorder()
	h.s.localHandler().ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); rec.Code != 200 || ct != "application/json" {
		t.Fatalf("other schema: status %d Content-Type %q", rec.Code, ct)
	}
	if l, err := listing.ReadJobList(rec.Body); err != nil || len(l.Jobs) != 2 {
		t.Fatalf("other schema: %d jobs, %v", len(l.Jobs), err)
	}
}

func TestUnhealthyGPUDrainsNode(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	resp, err := h.s.sync(context.Background(), api.NodeSyncRequest{Name: "gpu01", GPUStatus: []gres.Status{
		{Index: 0, Health: gres.Healthy}, {Index: 3, Health: gres.Unhealthy, Reason: "XID 79: GPU fell off the bus"}}})
	if err != nil || resp.Unregistered {
		t.Fatalf("sync: %v %+v", err, resp)
	}
	n := h.s.nodeList().Nodes[0]
	if !n.Drain || !strings.Contains(n.Reason, "GPU 3 unhealthy: XID 79") || n.GPUs[3].Health != gres.Unhealthy {
		t.Fatalf("node %s drain=%v reason=%q gpu3=%q", n.Name, n.Drain, n.Reason, n.GPUs[3].Health)
	}
	id := h.submit(api.JobSpec{})
	h.s.schedulePass()
	if j := h.job(id); j.State != api.StatePending {
		t.Fatalf("job started on a drained node: %s", j.State)
	}
}

func TestPartitionCPUsAndMemoryPerGPU(t *testing.T) {
	h := newHarnessWith(t, strings.Replace(testConfig, `max_time: "1:00:00"}`,
		`max_time: "1:00:00", def_cpus_per_gpu: 2, def_mem_per_gpu: 8G}`, 1))
	h.register("gpu01")
	id := h.submit(api.JobSpec{GPUs: 2})
	cpuOnly := h.submit(api.JobSpec{CPUsPerTask: 3})
	own := h.submit(api.JobSpec{GPUs: 1, CPUsPerGPU: 1, MemPerNodeMB: 100})
	h.s.schedulePass()
	a := h.job(id).Alloc[0]
	if a.CPUs != 4 || a.MemoryMB != 16*1024 || len(a.GPUs) != 2 {
		t.Fatalf("2-GPU job got %d CPUs, %d MB, %d GPUs; want 4, 16384, 2", a.CPUs, a.MemoryMB, len(a.GPUs))
	}
	if c := h.job(cpuOnly).Alloc[0]; c.CPUs != 3 || c.MemoryMB != 0 {
		t.Fatalf("CPU-only job got %d CPUs, %d MB", c.CPUs, c.MemoryMB)
	}
	if o := h.job(own).Alloc[0]; o.CPUs != 1 || o.MemoryMB != 100 {
		t.Fatalf("job with its own sizes got %d CPUs, %d MB", o.CPUs, o.MemoryMB)
	}
}

func TestPlacementFollowsNVLinkIslands(t *testing.T) {
	h := newHarness(t)
	gpus, _ := gres.Fake("gpu01", gres.FakeConfig{Count: 8, Topology: gres.TopologyIslands})
	if _, err := h.s.register(api.NodeRegistration{Name: "gpu01", CPUs: 8, MemoryMB: 64 * 1024, GPUs: gpus}); err != nil {
		t.Fatal(err)
	}
	one := h.submit(api.JobSpec{GPUs: 1})
	four := h.submit(api.JobSpec{GPUs: 4})
	h.s.schedulePass()
	a, b := h.job(one).Alloc[0].GPUs, h.job(four).Alloc[0].GPUs
	island := func(g int) int { return g / 4 }
	for _, g := range b {
		if island(g) != island(b[0]) {
			t.Fatalf("4-GPU job got %v across NVLink islands", b)
		}
	}
	if island(a[0]) == island(b[0]) {
		t.Fatalf("1-GPU job (%v) broke the island the 4-GPU job (%v) needed", a, b)
	}
}

// registerBig registers node with 64 CPUs and eight 80 GB fake GPUs, so
// that CPUs do not limit how many slices fit.
func (h *harness) registerBig(node string) {
	h.t.Helper()
	gpus, _ := gres.Fake(node, gres.FakeConfig{Count: 8})
	if _, err := h.s.register(api.NodeRegistration{Name: node, CPUs: 64, MemoryMB: 256 * 1024, GPUs: gpus}); err != nil {
		h.t.Fatal(err)
	}
}

// slicesPerGPU counts the running slices per GPU of node.
func (h *harness) slicesPerGPU(node string, ids []uint64) map[int]int {
	out := map[int]int{}
	for _, id := range ids {
		j := h.job(id)
		if j.State != api.StateRunning {
			continue
		}
		for _, a := range j.Alloc {
			if a.Node == node && a.Sliced() {
				for _, g := range a.GPUs {
					out[g]++
				}
			}
		}
	}
	return out
}

func TestGPUSlicesEndToEnd(t *testing.T) {
	h := newHarness(t)
	h.registerBig("gpu01")
	whole := h.submit(api.JobSpec{GPUs: 4, NodeList: []string{"gpu01"}})
	slice := h.submit(api.JobSpec{GPUMemMB: 8192, GPUComputePct: 10, NodeList: []string{"gpu01"}})
	h.s.schedulePass()
	w, s := h.job(whole), h.job(slice)
	if w.State != api.StateRunning || s.State != api.StateRunning {
		t.Fatalf("whole %s, slice %s; want both RUNNING (slice reason %s %s)", w.State, s.State, s.Reason, s.ReasonDetail)
	}
	sa := s.Alloc[0]
	if len(sa.GPUs) != 1 || sa.GPUMemMB != 8192 || sa.GPUComputePct != 10 || slices.Contains(w.Alloc[0].GPUs, sa.GPUs[0]) {
		t.Fatalf("slice alloc %+v next to whole GPUs %v", sa, w.Alloc[0].GPUs)
	}

	// Eleven more 8 GB slices: the shared GPU fills to 10 before a
	// second GPU is touched, whole GPUs are never shared.
	ids := []uint64{slice}
	for range 11 {
		ids = append(ids, h.submit(api.JobSpec{GPUMemMB: 8192, NodeList: []string{"gpu01"}}))
	}
	h.s.schedulePass()
	per := h.slicesPerGPU("gpu01", ids)
	if per[sa.GPUs[0]] != 10 || len(per) != 2 {
		t.Fatalf("slices per GPU %v, want 10 on GPU %d and 2 on another", per, sa.GPUs[0])
	}
	for g := range per {
		if slices.Contains(w.Alloc[0].GPUs, g) {
			t.Fatalf("slice on GPU %d of the whole-GPU job %v", g, w.Alloc[0].GPUs)
		}
	}
	// A restart rebuilds the shared GPUs from the running jobs: the
	// next slice goes onto the partly filled second GPU, a whole-GPU
	// job of 2 finds the 2 GPUs left.
	h.restart()
	h.registerBig("gpu01")
	next := h.submit(api.JobSpec{GPUMemMB: 8192, NodeList: []string{"gpu01"}})
	two := h.submit(api.JobSpec{GPUs: 2, NodeList: []string{"gpu01"}})
	three := h.submit(api.JobSpec{GPUs: 3, NodeList: []string{"gpu01"}})
	h.s.schedulePass()
	per = h.slicesPerGPU("gpu01", append(ids, next))
	if len(per) != 2 || h.job(next).State != api.StateRunning {
		t.Fatalf("after restart slices per GPU %v, next %s", per, h.job(next).State)
	}
	if h.job(two).State != api.StateRunning || h.job(three).State != api.StatePending {
		t.Fatalf("whole jobs: 2 GPUs %s, 3 GPUs %s %s", h.job(two).State, h.job(three).State, h.job(three).ReasonDetail)
	}
	if d := h.job(three).ReasonDetail; !strings.Contains(d, "InsufficientGPU") {
		t.Errorf("3-GPU job detail %q", d)
	}
}

func TestGPUSliceSubmit(t *testing.T) {
	offConfig := strings.Replace(testConfig, `max_time: "1:00:00"}`, `max_time: "1:00:00", gpu_slicing: false}`, 1)
	ratioConfig := strings.Replace(testConfig, `max_time: "1:00:00"}`, `max_time: "1:00:00", gpu_mem_oversubscribe: 1.2, shards_per_gpu: 4}`, 1)
	tests := []struct {
		name     string
		config   string
		register bool
		spec     api.JobSpec
		err      string
		// wantMB is the slice memory the stored job asks for.
		wantMB int64
	}{
		{name: "fits", register: true, spec: api.JobSpec{GPUMemMB: 8192}, wantMB: 8192},
		{name: "oversized", register: true, spec: api.JobSpec{GPUMemMB: 96 * 1024},
			err: "Requested node configuration is not available (GPU slice of 96G memory requested, GPUs of partition gpu take at most 80G"},
		{name: "oversized-fits-ratio", config: ratioConfig, register: true, spec: api.JobSpec{GPUMemMB: 96 * 1024}, wantMB: 96 * 1024},
		{name: "before-registration", spec: api.JobSpec{GPUMemMB: 96 * 1024}, wantMB: 96 * 1024},
		{name: "slicing-off", config: offConfig, register: true, spec: api.JobSpec{GPUMemMB: 8192},
			err: "partition gpu does not allow GPU slices (gpu_slicing: false)"},
		{name: "whole-gpus-slicing-off", config: offConfig, register: true, spec: api.JobSpec{GPUs: 2}},
		{name: "compute-over-100", register: true, spec: api.JobSpec{GPUComputePct: 150}, err: "--gpu-compute must be a percentage"},
		{name: "shards", register: true, spec: api.JobSpec{GPUShards: 2}, wantMB: 20 * 1024},
		{name: "shards-per-gpu-4", config: ratioConfig, register: true, spec: api.JobSpec{GPUShards: 1}, wantMB: 20 * 1024},
		{name: "too-many-shards", register: true, spec: api.JobSpec{GPUShards: 9}, err: "GPU slice of 90G memory requested"},
		{name: "shards-before-registration", spec: api.JobSpec{GPUShards: 1}, err: "--gres=shard cannot be sized yet"},
		{name: "shards-and-mem-disagree", register: true, spec: api.JobSpec{GPUShards: 1, GPUMemMB: 1024}, err: "disagree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			config := tt.config
			if config == "" {
				config = testConfig
			}
			h := newHarnessWith(t, config)
			if tt.register {
				h.register("gpu01")
				h.register("gpu02")
			}
			spec := tt.spec
			spec.Script, spec.WorkDir = "#!/bin/sh\n", "/tmp"
			resp, err := h.s.submit(context.Background(), h.alice, api.SubmitRequest{Spec: spec})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, api.ErrInvalidArgument) {
					t.Fatalf("submit error %v, want an invalid-argument error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := h.job(resp.JobID).GPUMemMB; got != tt.wantMB {
				t.Errorf("stored slice %d MB, want %d", got, tt.wantMB)
			}
		})
	}
}

// gpuSync sends a heartbeat with GPU gpu of node showing the given use
// per job (one process per job, pid 100+job id) and reports every job of
// running as running.
func (h *harness) gpuSync(node string, gpu int, use map[uint64]int64, running ...api.NodeJobReport) api.NodeSyncResponse {
	h.t.Helper()
	st := gres.Status{Index: gpu, Health: gres.Healthy}
	pids := map[int]uint64{}
	for id, mb := range use {
		pid := 100 + int(id)
		st.Processes = append(st.Processes, gres.ProcUsage{PID: pid, MemMB: mb})
		st.MemUsedMB += mb
		pids[pid] = id
	}
	slices.SortFunc(st.Processes, func(a, b gres.ProcUsage) int { return a.PID - b.PID })
	resp, err := h.s.sync(context.Background(), api.NodeSyncRequest{Name: node, Jobs: running,
		GPUStatus: []gres.Status{st}, GPUProcJobs: pids})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

// trail lists a job's events as "kind/reason".
func (h *harness) trail(id uint64) []string {
	h.t.Helper()
	ev, err := h.s.store.Events(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range ev {
		out = append(out, e.Kind+"/"+e.Reason)
	}
	return out
}

func TestGPUMemReclaim(t *testing.T) {
	h := newHarness(t)
	h.registerBig("gpu01")
	on := []string{"gpu01"}
	whole := h.submit(api.JobSpec{GPUs: 4, NodeList: on})
	hi := h.submit(api.JobSpec{GPUMemMB: 8 * 1024, NodeList: on})
	lo1 := h.submit(api.JobSpec{GPUMemMB: 8 * 1024, NodeList: on, Nice: 100})
	h.s.schedulePass()
	h.clock.add(time.Minute)
	lo2 := h.submit(api.JobSpec{GPUMemMB: 8 * 1024, NodeList: on, Nice: 100})
	h.s.schedulePass()
	g := h.job(hi).Alloc[0].GPUs[0]
	for _, id := range []uint64{lo1, lo2} {
		if a := h.job(id).Alloc; h.job(id).State != api.StateRunning || a[0].GPUs[0] != g {
			t.Fatalf("job %d: %s on %v, want RUNNING on shared GPU %d", id, h.job(id).State, a, g)
		}
	}
	all := []api.NodeJobReport{running(whole, 0), running(hi, 0), running(lo1, 0), running(lo2, 0)}
	h.sync("gpu01", all...)

	// Job hi overruns its 8G slice to 62G: 78G of 80G in use, above the
	// 76G watermark, with 56G uncommitted: hi grows, nobody is
	// preempted.
	resp := h.gpuSync("gpu01", g, map[uint64]int64{hi: 62 * 1024, lo1: 8 * 1024, lo2: 8 * 1024}, all...)
	if got := h.job(hi).Alloc[0].GPUMemMB; got != 62*1024 {
		t.Fatalf("hi's slice is %d MB after the overrun, want grown to %d", got, 62*1024)
	}
	for _, id := range []uint64{lo1, lo2, whole} {
		if j := h.job(id); j.State != api.StateRunning || j.RequeueRequested {
			t.Fatalf("job %d %s (requeue %v) after a grow", id, j.State, j.RequeueRequested)
		}
	}
	if len(resp.Signals) != 0 {
		t.Fatalf("signals after a grow: %+v", resp.Signals)
	}
	if sh := h.s.nodeList().Nodes[0].SharedGPUs; len(sh) != 1 || sh[0].Index != g || sh[0].MemMB != 78*1024 || sh[0].Slices != 3 {
		t.Fatalf("shared GPUs %+v, want GPU %d with 3 slices committing 78G", sh, g)
	}
	if tr := h.trail(hi); !slices.Contains(tr, "reclaim/GPUMemReclaim") {
		t.Fatalf("hi's trail %v has no reclaim event", tr)
	}

	// hi grows on to 66G: only 2G are uncommitted, so the
	// lowest-priority slice goes, the newer of the two at nice 100.
	resp = h.gpuSync("gpu01", g, map[uint64]int64{hi: 66 * 1024, lo1: 6 * 1024, lo2: 6 * 1024}, all...)
	j := h.job(lo2)
	if j.State != api.StateCompleting || !j.RequeueRequested || j.Reason != api.ReasonGPUMemReclaim {
		t.Fatalf("lo2 %s requeue=%v reason %s, want COMPLETING on its way to a requeue for GPUMemReclaim", j.State, j.RequeueRequested, j.Reason)
	}
	if len(resp.Signals) != 1 || resp.Signals[0].JobID != lo2 || !resp.Signals[0].Kill {
		t.Fatalf("signals %+v, want a kill of job %d in the same answer", resp.Signals, lo2)
	}
	for _, id := range []uint64{hi, lo1, whole} {
		if j := h.job(id); j.State != api.StateRunning {
			t.Fatalf("job %d %s, only lo2 should be preempted", id, j.State)
		}
	}
	if got := h.job(hi).Alloc[0].GPUMemMB; got != 62*1024 {
		t.Errorf("hi's slice %d MB: it must not grow past the GPU", got)
	}

	// The same readings while lo2 is being killed change nothing more.
	h.gpuSync("gpu01", g, map[uint64]int64{hi: 66 * 1024, lo1: 6 * 1024, lo2: 6 * 1024}, all...)
	if j := h.job(lo1); j.State != api.StateRunning {
		t.Fatalf("lo1 %s while lo2 is already leaving", j.State)
	}

	// lo2 ends: it is back to PENDING for another run, and its trail
	// says why at each step.
	h.gpuSync("gpu01", g, map[uint64]int64{hi: 66 * 1024, lo1: 6 * 1024},
		running(whole, 0), running(hi, 0), running(lo1, 0), api.NodeJobReport{JobID: lo2, State: api.NodeJobFinished, Exit: api.ExitStatus{Signal: 15}})
	j = h.job(lo2)
	if j.State != api.StatePending || j.Restarts != 1 || j.Reason != api.ReasonGPUMemReclaim {
		t.Fatalf("lo2 after its end: %s restarts=%d reason %s", j.State, j.Restarts, j.Reason)
	}
	want := []string{"submit/None", "start/", "launch/", "reclaim/GPUMemReclaim", "requeue/GPUMemReclaim"}
	if diff := cmp.Diff(want, h.trail(lo2)); diff != "" {
		t.Errorf("lo2's trail (-want +got):\n%s", diff)
	}
	if tr := h.trail(lo1); slices.ContainsFunc(tr, func(e string) bool { return strings.HasPrefix(e, "reclaim") }) {
		t.Errorf("lo1 was touched: %v", tr)
	}
}

// TestPendingReasonBeforeNodesRegister: after a controller restart,
// until the nodes register, pending jobs wait for them (NodeDown), not
// for ever (BadConstraints) as if no node could ever hold them.
func TestPendingReasonBeforeNodesRegister(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	busy := h.submit(api.JobSpec{Nodes: 2, GPUsPerNode: 8})
	h.s.schedulePass()
	if h.job(busy).State != api.StateRunning {
		t.Fatal("first job did not start")
	}
	id := h.submit(api.JobSpec{GPUsPerNode: 4, CPUsPerTask: 4})
	h.restart()
	h.s.schedulePass()
	if j := h.job(id); j.State != api.StatePending || j.Reason != api.ReasonNodeDown {
		t.Fatalf("job %s %s (%s), want PENDING NodeDown", j.State, j.Reason, j.ReasonDetail)
	}
}
