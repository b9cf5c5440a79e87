package ctld

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/api/listing"
)

// The callers of the privacy tests, by the uid the socket gives: two
// users, root, and carol, an operator by the configuration.
const (
	uidRoot  = 0
	uidAlice = 1000
	uidBob   = 1001
	uidCarol = 1002
)

// privateConfig is testConfig with private_data words (comma-separated,
// "" for none) and carol an operator.
func privateConfig(words string) string {
	return testConfig + "operators: [carol]\nprivate_data: [" + words + "]\n"
}

// newPrivateHarness is a harness of config whose user names are known,
// with both nodes registered, alice's jobs 1 and 2 and bob's job 3
// submitted and scheduled.
func newPrivateHarness(t *testing.T, config string) *harness {
	t.Helper()
	// A state directory of its own: srun's step grants are signed with
	// a key the controller keeps there.
	h := newHarnessWith(t, strings.Replace(config, "state_dir: /unused", "state_dir: "+t.TempDir(), 1))
	now := time.Now()
	for uid, name := range map[uint32]string{uidRoot: "root", uidAlice: "alice", uidBob: "bob", uidCarol: "carol"} {
		h.s.users.names[uid] = cached{name: name, at: now}
	}
	for _, n := range []string{"gpu01", "gpu02"} {
		h.register(n)
		h.s.mu.Lock()
		h.s.nodes[n].StepAddr = "0.0.0.0:6818"
		h.s.mu.Unlock()
	}
	for i, c := range []caller{h.alice, h.alice, bob} {
		resp, err := h.submitAs(c, api.JobSpec{Name: fmt.Sprintf("j%d", i+1), GPUs: 1})
		if err != nil {
			t.Fatal(err)
		}
		if resp.JobID != uint64(i+1) {
			t.Fatalf("job %d has id %d", i+1, resp.JobID)
		}
	}
	h.s.schedulePass()
	return h
}

// get makes a GET of the local API as uid; accept "" asks for JSON.
func (h *harness) get(uid uint32, path, accept string) *httptest.ResponseRecorder {
	h.t.Helper()
	r := httptest.NewRequest("GET", "http://tide"+path, nil)
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	r = r.WithContext(context.WithValue(r.Context(), credKey{}, syscall.Ucred{Uid: uid, Gid: uid, Pid: 1}))
	w := httptest.NewRecorder()
	h.s.localHandler().ServeHTTP(w, r)
	return w
}

// listed is the ids of a job listing answer, JSON or binary.
func listed(t *testing.T, w *httptest.ResponseRecorder) []uint64 {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("answer %d: %s", w.Code, w.Body)
	}
	var jobs []api.Job
	var err error
	if w.Header().Get("Content-Type") == listing.MediaJobs() {
		jobs, err = listing.ReadJobs(w.Body)
	} else {
		var l api.JobList
		l, err = listing.ReadJobList(w.Body)
		jobs = l.Jobs
	}
	if err != nil {
		t.Fatal(err)
	}
	ids := []uint64{}
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

// refused checks that w is an error answer of status naming want.
func refused(t *testing.T, w *httptest.ResponseRecorder, status int, want string) {
	t.Helper()
	if w.Code != status || !strings.Contains(w.Body.String(), want) {
		t.Fatalf("answer %d %s; want %d with %q", w.Code, strings.TrimSpace(w.Body.String()), status, want)
	}
}

// The jobs of newPrivateHarness.
var (
	allJobs   = []uint64{1, 2, 3}
	aliceJobs = []uint64{1, 2}
	bobJobs   = []uint64{3}
	noJobs    = []uint64{}
)

// TestPrivateJobListings: under private_data: jobs squeue's listing, in
// JSON and in binary, holds only the caller's jobs, whatever the filter
// asks; operators see every job. Other words leave squeue alone.
func TestPrivateJobListings(t *testing.T) {
	type ask struct {
		uid   uint32
		query string
		want  []uint64
	}
	open := []ask{
		{uidAlice, "", allJobs}, {uidBob, "", allJobs}, {uidAlice, "?user=bob", bobJobs}, {uidAlice, "?id=3", bobJobs},
	}
	private := []ask{
		{uidAlice, "", aliceJobs}, {uidBob, "", bobJobs}, {uidRoot, "", allJobs}, {uidCarol, "", allJobs},
		{uidAlice, "?user=bob", noJobs}, {uidCarol, "?user=bob", bobJobs},
		// squeue -j: looked up by id, not scanned.
		{uidAlice, "?id=3", noJobs}, {uidAlice, "?id=1,3", []uint64{1}}, {uidBob, "?id=1,3", bobJobs},
		{uidAlice, "?all=1&name=j3", noJobs}, {uidRoot, "?all=1&name=j3", bobJobs},
	}
	for _, tt := range []struct {
		words string
		asks  []ask
	}{
		{"", open}, {"usage,nodes,events", open}, {"jobs", private}, {"jobs,usage,nodes,events", private},
	} {
		t.Run("private_data="+tt.words, func(t *testing.T) {
			h := newPrivateHarness(t, privateConfig(tt.words))
			for _, a := range tt.asks {
				for _, accept := range []string{"", listing.MediaJobs()} {
					got := listed(t, h.get(a.uid, "/api/v1/jobs"+a.query, accept))
					if !slices.Equal(got, a.want) {
						t.Errorf("uid %d %q (accept %q): jobs %v, want %v", a.uid, a.query, accept, got, a.want)
					}
				}
			}
		})
	}
}

// TestPrivateListCache: binary listings are cached per query and shared
// between callers; a private listing must never be served to another
// user from that cache, nor an operator's to a user.
func TestPrivateListCache(t *testing.T) {
	h := newPrivateHarness(t, privateConfig("jobs"))
	bin := listing.MediaJobs()
	for i, a := range []struct {
		uid  uint32
		want []uint64
	}{
		{uidAlice, aliceJobs}, {uidAlice, aliceJobs}, {uidBob, bobJobs}, {uidRoot, allJobs}, {uidBob, bobJobs},
		{uidAlice, aliceJobs}, {uidCarol, allJobs}, {uidRoot, allJobs}, {1003, noJobs},
	} {
		if got := listed(t, h.get(a.uid, "/api/v1/jobs", bin)); !slices.Equal(got, a.want) {
			t.Fatalf("request %d as uid %d: jobs %v, want %v", i, a.uid, got, a.want)
		}
	}
	// A new job of bob's: his listing changes, alice's does not.
	if _, err := h.submitAs(bob, api.JobSpec{}); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, h.get(uidBob, "/api/v1/jobs", bin)); !slices.Equal(got, []uint64{3, 4}) {
		t.Fatalf("bob after his submission: %v", got)
	}
	if got := listed(t, h.get(uidAlice, "/api/v1/jobs", bin)); !slices.Equal(got, aliceJobs) {
		t.Fatalf("alice after bob's submission: %v", got)
	}
}

// TestViewCacheKeys: no query can make one view's cache key another's.
func TestViewCacheKeys(t *testing.T) {
	alice := ownJobs(caller{uid: 1000, known: true})
	unknown := ownJobs(caller{})
	seen := map[string]string{}
	for _, k := range []struct{ name, key string }{
		{"everyone, no query", seeAll.cacheKey("")},
		{"everyone, query u1000:", seeAll.cacheKey("u1000:")},
		{"everyone, query -", seeAll.cacheKey("-")},
		{"alice, no query", alice.cacheKey("")},
		{"uid 10, query 00:", ownJobs(caller{uid: 10, known: true}).cacheKey("00:")},
		{"unauthenticated, no query", unknown.cacheKey("")},
	} {
		if other, dup := seen[k.key]; dup {
			t.Errorf("%s and %s share the key %q", k.name, other, k.key)
		}
		seen[k.key] = k.name
	}
	if unknown.sees(&api.Job{UserID: 0}) {
		t.Error("an unauthenticated caller sees root's job")
	}
}

// TestPrivateShowJob: scontrol show job of another user's job answers
// Slurm's "Invalid job id specified" under private_data: jobs, live or
// from accounting; under usage only the accounting record is private.
func TestPrivateShowJob(t *testing.T) {
	tests := []struct {
		words string
		// bobLive and bobStored: can alice see bob's job while it is in
		// memory, and once it left for accounting only?
		bobLive, bobStored bool
	}{
		{"", true, true},
		{"nodes,events", true, true},
		{"usage", true, false},
		{"jobs", false, false},
	}
	for _, tt := range tests {
		t.Run("private_data="+tt.words, func(t *testing.T) {
			h := newPrivateHarness(t, privateConfig(tt.words))
			check := func(stage string, aliceSees bool) {
				t.Helper()
				for _, uid := range []uint32{uidBob, uidRoot, uidCarol} {
					if w := h.get(uid, "/api/v1/jobs/3", ""); w.Code != http.StatusOK {
						t.Fatalf("%s: uid %d gets %d %s", stage, uid, w.Code, w.Body)
					}
				}
				w := h.get(uidAlice, "/api/v1/jobs/3", "")
				if aliceSees {
					var j api.Job
					if err := json.NewDecoder(w.Body).Decode(&j); err != nil || j.ID != 3 || j.Script != "" {
						t.Fatalf("%s: alice gets %d %+v, %v (and never the script)", stage, w.Code, j, err)
					}
					return
				}
				refused(t, w, http.StatusNotFound, "Invalid job id specified")
			}
			check("live", tt.bobLive)
			h.s.cancel(bob, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{3}}})
			h.sync(h.job(3).BatchHost(), finished(3, 0))
			h.clock.add(2 * h.s.cl.Timeouts.MinJobAge)
			h.s.mu.Lock()
			h.s.forgetOldJobs(h.clock.now())
			_, live := h.s.jobs[3]
			h.s.mu.Unlock()
			if live {
				t.Fatal("job 3 still in memory")
			}
			check("stored", tt.bobStored)
			// The owner's own job: always, with its script.
			var j api.Job
			if w := h.get(uidAlice, "/api/v1/jobs/1", ""); json.NewDecoder(w.Body).Decode(&j) != nil || j.Script == "" {
				t.Fatalf("alice's own job: %d %+v", w.Code, j)
			}
		})
	}
}

// TestPrivateCancel: acting on another user's job by id stays
// "Access/permission denied" (Slurm's answer under PrivateData too),
// but scancel's filters (-u, -n, ...) only reach the jobs the caller
// sees, so that their answer names no hidden job.
func TestPrivateCancel(t *testing.T) {
	for _, tt := range []struct {
		words string
		// filterResults is what alice's `scancel -u bob` answers.
		filterResults []api.JobResult
	}{
		{"", []api.JobResult{{JobID: 3, Error: "Access/permission denied"}}},
		{"jobs", nil},
	} {
		t.Run("private_data="+tt.words, func(t *testing.T) {
			h := newPrivateHarness(t, privateConfig(tt.words))
			resp, err := h.s.cancel(h.alice, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{3}}})
			if err != nil || len(resp.Results) != 1 || resp.Results[0].Error != "Access/permission denied" {
				t.Fatalf("cancel by id: %+v, %v", resp, err)
			}
			resp, err = h.s.cancel(h.alice, api.CancelRequest{Filter: api.JobFilter{Users: []string{"bob"}}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.filterResults, resp.Results); diff != "" {
				t.Errorf("scancel -u bob as alice (-want +got):\n%s", diff)
			}
			resp, _ = h.s.updateJobs(h.alice, api.JobUpdate{IDs: []uint64{3}, Action: "hold"})
			if len(resp.Results) != 1 || resp.Results[0].Error != "Access/permission denied" {
				t.Fatalf("hold by id: %+v", resp)
			}
			if j := h.job(3); j.State.Terminal() || j.HoldKind != api.HoldNone {
				t.Fatalf("bob's job after alice: %s hold %q", j.State, j.HoldKind)
			}
			// An operator's filter reaches everyone's jobs.
			root := caller{uid: 0, user: "root", admin: true, known: true}
			resp, _ = h.s.cancel(root, api.CancelRequest{Filter: api.JobFilter{Users: []string{"bob"}}})
			if len(resp.Results) != 1 || resp.Results[0].JobID != 3 || resp.Results[0].Error != "" {
				t.Fatalf("scancel -u bob as root: %+v", resp)
			}
		})
	}
}

// TestPrivateEvents: tide events of another user's job: refused under
// events, nonexistent under jobs; owners and operators always read it.
// The audit log is for operators whatever the words.
func TestPrivateEvents(t *testing.T) {
	ok := func(t *testing.T, w *httptest.ResponseRecorder) {
		t.Helper()
		var ev []api.Event
		if w.Code != http.StatusOK || json.NewDecoder(w.Body).Decode(&ev) != nil || len(ev) == 0 || ev[0].JobID != 3 {
			t.Fatalf("trail: %d %s", w.Code, w.Body)
		}
	}
	tests := []struct {
		words string
		// status and message of alice's request (0: she reads it).
		status int
		msg    string
	}{
		{"", 0, ""},
		{"usage,nodes", 0, ""},
		{"events", http.StatusForbidden, "Access/permission denied: the events of other users' jobs are for operators on this cluster (private_data: events)"},
		{"jobs", http.StatusNotFound, "Invalid job id specified"},
		{"jobs,events", http.StatusNotFound, "Invalid job id specified"},
	}
	for _, tt := range tests {
		t.Run("private_data="+tt.words, func(t *testing.T) {
			h := newPrivateHarness(t, privateConfig(tt.words))
			for _, uid := range []uint32{uidBob, uidRoot, uidCarol} {
				ok(t, h.get(uid, "/api/v1/jobs/3/events", ""))
			}
			if tt.status == 0 {
				ok(t, h.get(uidAlice, "/api/v1/jobs/3/events", ""))
			} else {
				refused(t, h.get(uidAlice, "/api/v1/jobs/3/events", ""), tt.status, tt.msg)
			}
			// The same once the job left memory.
			h.s.cancel(bob, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{3}}})
			h.sync(h.job(3).BatchHost(), finished(3, 0))
			h.clock.add(2 * h.s.cl.Timeouts.MinJobAge)
			h.s.mu.Lock()
			h.s.forgetOldJobs(h.clock.now())
			h.s.mu.Unlock()
			ok(t, h.get(uidBob, "/api/v1/jobs/3/events", ""))
			if tt.status != 0 {
				refused(t, h.get(uidAlice, "/api/v1/jobs/3/events", ""), tt.status, tt.msg)
			}
			refused(t, h.get(uidAlice, "/api/v1/jobs/99/events", ""), http.StatusNotFound, "Invalid job id specified")
			refused(t, h.get(uidAlice, "/api/v1/audit", ""), http.StatusForbidden, "the audit log is for operators")
			if w := h.get(uidCarol, "/api/v1/audit", ""); w.Code != http.StatusOK {
				t.Fatalf("audit as an operator: %d %s", w.Code, w.Body)
			}
		})
	}
}

// TestPrivateAccounting: sacct holds only the caller's jobs under
// private_data: usage or jobs (Slurm's sacct hides them under jobs),
// in JSON and binary.
func TestPrivateAccounting(t *testing.T) {
	open := map[uint32][]uint64{uidAlice: allJobs, uidBob: allJobs, uidRoot: allJobs, uidCarol: allJobs}
	private := map[uint32][]uint64{uidAlice: aliceJobs, uidBob: bobJobs, uidRoot: allJobs, uidCarol: allJobs, 1003: noJobs}
	for _, tt := range []struct {
		words string
		want  map[uint32][]uint64
	}{
		{"", open}, {"nodes,events", open}, {"usage", private}, {"jobs", private},
	} {
		t.Run("private_data="+tt.words, func(t *testing.T) {
			h := newPrivateHarness(t, privateConfig(tt.words))
			for uid, want := range tt.want {
				for _, accept := range []string{"", listing.MediaJobs()} {
					if got := listed(t, h.get(uid, "/api/v1/accounting/jobs?all=1", accept)); !slices.Equal(got, want) {
						t.Errorf("sacct -a as uid %d (accept %q): %v, want %v", uid, accept, got, want)
					}
				}
				// -u bob: bob's jobs that the caller may see.
				wantBob := slices.DeleteFunc(slices.Clone(want), func(id uint64) bool { return id != 3 })
				if got := listed(t, h.get(uid, "/api/v1/accounting/jobs?all=1&user=bob", "")); !slices.Equal(got, wantBob) {
					t.Errorf("sacct -u bob as uid %d: %v, want %v", uid, got, wantBob)
				}
			}
		})
	}
}

// TestPrivateSteps: the steps of sacct follow the accounting rule.
func TestPrivateSteps(t *testing.T) {
	for _, tt := range []struct {
		words string
		// aliceSees are the jobs whose steps alice gets.
		aliceSees []uint64
	}{
		{"", []uint64{1, 3}}, {"nodes,events", []uint64{1, 3}}, {"usage", []uint64{1}}, {"jobs", []uint64{1}},
	} {
		t.Run("private_data="+tt.words, func(t *testing.T) {
			h := newPrivateHarness(t, privateConfig(tt.words))
			ctx := context.Background()
			req := api.StepRequest{Argv: []string{"/bin/true"}, Cwd: "/tmp"}
			for _, s := range []struct {
				c  caller
				id uint64
			}{{h.alice, 1}, {bob, 3}} {
				if _, err := h.s.createStep(ctx, s.c, s.id, req); err != nil {
					t.Fatal(err)
				}
			}
			stepsOf := func(uid uint32) []uint64 {
				w := h.get(uid, "/api/v1/accounting/steps?job=1&job=3", "")
				var l api.StepList
				if w.Code != http.StatusOK || json.NewDecoder(w.Body).Decode(&l) != nil {
					t.Fatalf("steps as uid %d: %d %s", uid, w.Code, w.Body)
				}
				ids := []uint64{}
				for _, st := range l.Steps {
					ids = append(ids, st.JobID)
				}
				return ids
			}
			if got := stepsOf(uidAlice); !slices.Equal(got, tt.aliceSees) {
				t.Errorf("alice's steps: jobs %v, want %v", got, tt.aliceSees)
			}
			for _, uid := range []uint32{uidRoot, uidCarol} {
				if got := stepsOf(uid); !slices.Equal(got, []uint64{1, 3}) {
					t.Errorf("steps as operator %d: jobs %v", uid, got)
				}
			}
		})
	}
}

// TestPrivateNodes: under private_data: nodes sinfo and scontrol show
// node are for operators, as Slurm refuses REQUEST_NODE_INFO; scontrol
// show config prints the words as Slurm's PrivateData.
func TestPrivateNodes(t *testing.T) {
	for _, tt := range []struct {
		words, slurm string
		hidden       bool
	}{
		{"", "none", false},
		{"jobs,usage,events", "events,jobs,usage", false},
		{"nodes", "nodes", true},
		{"usage,nodes,jobs,events", "events,jobs,nodes,usage", true},
	} {
		t.Run("private_data="+tt.words, func(t *testing.T) {
			h := newPrivateHarness(t, privateConfig(tt.words))
			var nl api.NodeList
			for _, uid := range []uint32{uidRoot, uidCarol} {
				if w := h.get(uid, "/api/v1/nodes", ""); w.Code != http.StatusOK || json.NewDecoder(w.Body).Decode(&nl) != nil || len(nl.Nodes) != 2 {
					t.Fatalf("nodes as operator %d: %d %s", uid, w.Code, w.Body)
				}
			}
			w := h.get(uidAlice, "/api/v1/nodes", "")
			if tt.hidden {
				refused(t, w, http.StatusForbidden, "Access/permission denied: node information is for operators on this cluster (private_data: nodes)")
			} else if w.Code != http.StatusOK {
				t.Fatalf("nodes as alice: %d %s", w.Code, w.Body)
			}
			var info api.ClusterInfo
			if w := h.get(uidAlice, "/api/v1/cluster", ""); json.NewDecoder(w.Body).Decode(&info) != nil || info.Config["PrivateData"] != tt.slurm {
				t.Fatalf("PrivateData = %q, want %q", info.Config["PrivateData"], tt.slurm)
			}
		})
	}
}

// queueConfig has queues for alice, for bob, for a group of alice's
// (her primary group is named vision-team below) and one open to all.
const queueConfig = testConfigHeader + `
partitions:
  - {name: gpu, nodes: "gpu[01-02]", default: true, default_time: "3:00:00", max_time: "10:00:00"}
nodes:
  - {names: "gpu[01-02]", cpus: 8, memory: 64G, gpus: 8}
queues:
  - {name: vision, users: [alice], guaranteed: 4}
  - {name: nlp, users: [bob], guaranteed: 4}
  - {name: lab, groups: [vision-team], guaranteed: 4}
  - {name: open, guaranteed: 4}
submit: {rate_per_queue: 1000}
operators: [carol]
`

// TestPrivateQueues: under private_data: usage the queue listing (tide
// queues, sprio's queue share) holds only the queues the caller may
// submit to; job classes stay. Other words leave it whole.
func TestPrivateQueues(t *testing.T) {
	every := []string{"vision", "nlp", "lab", "open"}
	for _, tt := range []struct {
		words      string
		alice, bob []string
	}{
		{"", every, every},
		{"jobs,nodes,events", every, every},
		{"usage", []string{"vision", "lab", "open"}, []string{"nlp", "open"}},
	} {
		t.Run("private_data="+tt.words, func(t *testing.T) {
			h := newHarnessWith(t, queueConfig+"private_data: ["+tt.words+"]\n")
			now := time.Now()
			for uid, name := range map[uint32]string{uidAlice: "alice", uidBob: "bob", uidCarol: "carol"} {
				h.s.users.names[uid] = cached{name: name, at: now}
			}
			h.s.users.groups[uidAlice] = cached{name: "vision-team", at: now}
			h.s.users.groups[uidBob] = cached{name: "nlp-team", at: now}
			h.register("gpu01")
			if _, err := h.submitAs(bob, api.JobSpec{Account: "nlp", GPUs: 2}); err != nil {
				t.Fatal(err)
			}
			h.s.schedulePass()
			for _, c := range []struct {
				uid  uint32
				want []string
			}{{uidAlice, tt.alice}, {uidBob, tt.bob}, {uidCarol, every}, {uidRoot, every}} {
				var ql api.QueueList
				w := h.get(c.uid, api.PathQueues, "")
				if w.Code != http.StatusOK || json.NewDecoder(w.Body).Decode(&ql) != nil {
					t.Fatalf("queues as uid %d: %d %s", c.uid, w.Code, w.Body)
				}
				var got []string
				for _, q := range ql.Queues {
					got = append(got, q.Name)
					if q.Name == "nlp" && q.UsedGPUs != 2 {
						t.Errorf("uid %d: nlp uses %d GPUs, want 2", c.uid, q.UsedGPUs)
					}
				}
				if !slices.Equal(got, c.want) {
					t.Errorf("queues as uid %d: %v, want %v", c.uid, got, c.want)
				}
				if len(ql.QOS) == 0 {
					t.Errorf("uid %d sees no job classes", c.uid)
				}
			}
		})
	}
}
