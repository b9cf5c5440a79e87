package ctld

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/accounting"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/api/listing"
)

// clusterHarness is a controller of cluster name whose store is store
// ("" for tide.db in a new state directory), opened as tidectld opens
// it, with config's private_data and operators, user names known and
// both nodes registered.
func clusterHarness(t *testing.T, name, store, config string) *harness {
	t.Helper()
	cfg, err := ParseConfig(strings.NewReader(strings.Replace(config, "cluster_name: t", "cluster_name: "+name, 1)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.StateDir, cfg.Store = t.TempDir(), store
	cl, err := cfg.Validate()
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStore(cl)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, clock: &fakeClock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)},
		alice: caller{uid: uidAlice, gid: uidAlice, user: "alice", known: true}, config: config}
	s, err := newServer(cl, slog.New(slog.NewTextHandler(io.Discard, nil)), st, "k", h.clock.now)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	h.s = s
	t.Cleanup(func() { s.Close() })
	now := time.Now()
	for uid, user := range map[uint32]string{uidRoot: "root", uidAlice: "alice", uidBob: "bob", uidCarol: "carol"} {
		h.s.users.names[uid] = cached{name: user, at: now}
	}
	h.register("gpu01")
	h.register("gpu02")
	return h
}

// submitJobs submits one job per owner, named after the cluster and its
// place, and returns their ids.
func (h *harness) submitJobs(owners ...caller) []uint64 {
	h.t.Helper()
	var ids []uint64
	for i, c := range owners {
		resp, err := h.submitAs(c, api.JobSpec{Name: fmt.Sprintf("%s%d", h.s.cl.ClusterName, i+1), GPUs: 1})
		if err != nil {
			h.t.Fatal(err)
		}
		ids = append(ids, resp.JobID)
	}
	return ids
}

// listedAt is a job listing answer as cluster:id:user, JSON or binary.
func listedAt(t *testing.T, w *httptest.ResponseRecorder) []string {
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
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.Cluster+":"+strconv.FormatUint(j.ID, 10)+":"+j.User)
	}
	return out
}

// TestAccountingClusters: sacct -M on two controllers of two clusters
// sharing one PostgreSQL database. Their job ids overlap; each answers
// for its own cluster by default and for the clusters asked with -M,
// sorted by cluster and id, under the same private_data rule as its
// own jobs.
func TestAccountingClusters(t *testing.T) {
	url := pgServer.Database(t)
	config := privateConfig("jobs")
	east := clusterHarness(t, "east", url, config)
	west := clusterHarness(t, "west", url, config)
	if got := east.submitJobs(east.alice, bob); !cmp.Equal(got, []uint64{1, 2}) {
		t.Fatalf("east's jobs are %v", got)
	}
	if got := west.submitJobs(bob, west.alice, west.alice); !cmp.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("west's jobs are %v", got)
	}
	// Each answer flushes its controller's submissions to the store.
	if got := listedAt(t, west.get(uidRoot, "/api/v1/accounting/jobs?all=1", "")); !cmp.Equal(got,
		[]string{"west:1:bob", "west:2:alice", "west:3:alice"}) {
		t.Fatalf("west's own accounting: %v", got)
	}

	both := []string{"east:1:alice", "east:2:bob", "west:1:bob", "west:2:alice", "west:3:alice"}
	tests := []struct {
		name  string
		h     *harness
		uid   uint32
		query string
		want  []string
	}{
		{name: "own cluster by default", h: east, uid: uidRoot, query: "", want: both[:2]},
		{name: "own cluster named", h: east, uid: uidRoot, query: "&cluster=east", want: both[:2]},
		{name: "the other cluster", h: east, uid: uidRoot, query: "&cluster=west", want: both[2:]},
		{name: "both", h: east, uid: uidRoot, query: "&cluster=west,east", want: both},
		{name: "all", h: west, uid: uidRoot, query: "&cluster=all", want: both},
		{name: "an operator sees all", h: west, uid: uidCarol, query: "&cluster=all", want: both},
		{name: "alice sees her own on both", h: east, uid: uidAlice, query: "&cluster=all",
			want: []string{"east:1:alice", "west:2:alice", "west:3:alice"}},
		{name: "bob sees his own on both", h: west, uid: uidBob, query: "&cluster=east,west",
			want: []string{"east:2:bob", "west:1:bob"}},
		{name: "alice asks for bob's", h: east, uid: uidAlice, query: "&cluster=all&user=bob", want: []string{}},
		{name: "filters apply on each", h: east, uid: uidRoot, query: "&cluster=all&id=1",
			want: []string{"east:1:alice", "west:1:bob"}},
		{name: "unknown cluster", h: east, uid: uidRoot, query: "&cluster=north", want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, accept := range []string{"", listing.MediaJobs()} {
				got := listedAt(t, tt.h.get(tt.uid, "/api/v1/accounting/jobs?all=1"+tt.query, accept))
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s as uid %d (accept %q) (-want +got):\n%s", tt.query, tt.uid, accept, diff)
				}
			}
		})
	}
	// Steps: each cluster's own, read from the other's tables with the
	// same privacy rule (job 1 is alice's on east, bob's on west).
	for h, name := range map[*harness]string{east: "east-1.0", west: "west-1.0"} {
		st := h.s.store.(*accounting.Store)
		owner := uint32(uidBob)
		if h == east {
			owner = uidAlice
		}
		if err := st.Write(context.Background(), &accounting.Batch{Steps: []api.StepRecord{
			{JobID: 1, StepID: 0, Name: name, UserID: owner, State: api.StateCompleted}}}); err != nil {
			t.Fatal(err)
		}
	}
	steps := func(h *harness, uid uint32, query string) (string, string) {
		w := h.get(uid, "/api/v1/accounting/steps?job=1"+query, "")
		if w.Code != http.StatusOK {
			return fmt.Sprintf("%d %s", w.Code, strings.TrimSpace(w.Body.String())), ""
		}
		var l api.StepList
		if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, st := range l.Steps {
			names = append(names, st.Name)
		}
		return strings.Join(names, ","), l.Cluster
	}
	for _, tt := range []struct {
		h                  *harness
		uid                uint32
		query, want, wantC string
	}{
		{h: east, uid: uidRoot, want: "east-1.0"},
		{h: east, uid: uidRoot, query: "&cluster=west", want: "west-1.0", wantC: "west"},
		{h: east, uid: uidRoot, query: "&cluster=east", want: "east-1.0", wantC: "east"},
		{h: west, uid: uidRoot, query: "&cluster=east", want: "east-1.0", wantC: "east"},
		{h: east, uid: uidAlice, query: "&cluster=west", want: "", wantC: "west"}, // bob's
		{h: east, uid: uidBob, query: "&cluster=west", want: "west-1.0", wantC: "west"},
		{h: east, uid: uidRoot, query: "&cluster=north", want: "", wantC: "north"},
		{h: east, uid: uidRoot, query: "&cluster=all", want: `400 {"error":`},
	} {
		got, gotC := steps(tt.h, tt.uid, tt.query)
		if !strings.HasPrefix(got, tt.want) || tt.want == "" && got != "" || gotC != tt.wantC {
			t.Errorf("steps of job 1%s from %s as uid %d: %q (cluster %q), want %q (cluster %q)",
				tt.query, tt.h.s.cl.ClusterName, tt.uid, got, gotC, tt.want, tt.wantC)
		}
	}

	// Usage: each cluster's own, summed per step from the other's
	// tables, with the same privacy rule. Step 1.0 used 1 s of CPU on
	// each of east's two nodes, 7 s on west's one.
	for h, reports := range map[*harness][]api.NodeUsage{
		east: {clusterUsage(1, uidAlice, "gpu01", 1e6), clusterUsage(1, uidAlice, "gpu02", 1e6)},
		west: {clusterUsage(1, uidBob, "gpu01", 7e6)},
	} {
		if err := h.s.store.(*accounting.Store).Write(context.Background(), &accounting.Batch{Usage: reports}); err != nil {
			t.Fatal(err)
		}
	}
	usage := func(h *harness, uid uint32, query string) (string, string) {
		w := h.get(uid, "/api/v1/accounting/usage?job=1"+query, "")
		if w.Code != http.StatusOK {
			return fmt.Sprintf("%d %s", w.Code, strings.TrimSpace(w.Body.String())), ""
		}
		var l api.UsageList
		if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, u := range l.Usage {
			got = append(got, fmt.Sprintf("%d.%d:nodes=%d,user=%d", u.JobID, u.StepID, u.Nodes, u.UserUsec))
		}
		return strings.Join(got, ","), l.Cluster
	}
	const eastUse, westUse = "1.0:nodes=2,user=2000000", "1.0:nodes=1,user=7000000"
	for _, tt := range []struct {
		h                  *harness
		uid                uint32
		query, want, wantC string
	}{
		{h: east, uid: uidRoot, want: eastUse},
		{h: west, uid: uidRoot, want: westUse},
		{h: east, uid: uidRoot, query: "&cluster=west", want: westUse, wantC: "west"},
		{h: east, uid: uidRoot, query: "&cluster=east", want: eastUse, wantC: "east"},
		{h: west, uid: uidRoot, query: "&cluster=east", want: eastUse, wantC: "east"},
		{h: west, uid: uidRoot, query: "&cluster=East", want: eastUse, wantC: "East"},
		{h: east, uid: uidAlice, query: "&cluster=west", want: "", wantC: "west"}, // bob's
		{h: east, uid: uidBob, query: "&cluster=west", want: westUse, wantC: "west"},
		{h: west, uid: uidAlice, query: "&cluster=east", want: eastUse, wantC: "east"},
		{h: east, uid: uidCarol, query: "&cluster=west", want: westUse, wantC: "west"}, // an operator
		{h: east, uid: uidRoot, query: "&cluster=north", want: "", wantC: "north"},
		{h: east, uid: uidRoot, query: "&cluster=all", want: `400 {"error":`},
		{h: east, uid: uidRoot, query: "&cluster=west&live=1", want: `400 {"error":{"code":"invalid_argument","message":"the running usage of cluster west is with its own controller"`},
	} {
		got, gotC := usage(tt.h, tt.uid, tt.query)
		if !strings.HasPrefix(got, tt.want) || tt.want == "" && got != "" || gotC != tt.wantC {
			t.Errorf("usage of job 1%s from %s as uid %d: %q (cluster %q), want %q (cluster %q)",
				tt.query, tt.h.s.cl.ClusterName, tt.uid, got, gotC, tt.want, tt.wantC)
		}
	}
}

// clusterUsage is a final node report of step job.0 on node: one task
// that used user microseconds of CPU.
func clusterUsage(job uint64, uid uint32, node string, user uint64) api.NodeUsage {
	return api.NodeUsage{JobID: job, StepID: 0, Node: node, UserID: uid, Final: true,
		Tasks: []api.TaskUsage{{Task: 0, UserUsec: user}}}
}

// TestAccountingClustersSQLite: an SQLite store holds its controller's
// cluster alone. sacct -M naming it or all answers as without -M; naming
// another cluster is refused, saying what to do.
func TestAccountingClustersSQLite(t *testing.T) {
	h := clusterHarness(t, "tide", "", testConfig)
	h.submitJobs(h.alice, h.alice)
	want := []string{"tide:1:alice", "tide:2:alice"}
	for _, q := range []string{"", "&cluster=tide", "&cluster=all", "&cluster=TIDE", "&cluster=tide,all"} {
		if got := listedAt(t, h.get(uidAlice, "/api/v1/accounting/jobs?all=1"+q, "")); !cmp.Equal(got, want) {
			t.Errorf("%q: %v, want %v", q, got, want)
		}
	}
	w := h.get(uidAlice, "/api/v1/accounting/jobs?all=1&cluster=tide,other", "")
	const msg = "cluster other: the accounting store is SQLite: it holds only cluster tide; several clusters need a shared PostgreSQL store"
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), msg) {
		t.Errorf("-M tide,other: %d %s, want 400 with %q", w.Code, w.Body, msg)
	}
	// Steps and usage of another cluster are refused alike; the own
	// cluster, named in any case, answers from its own tables.
	st := h.s.store.(*accounting.Store)
	if err := st.Write(context.Background(), &accounting.Batch{Usage: []api.NodeUsage{clusterUsage(1, uidAlice, "gpu01", 3e6)}}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"steps", "usage"} {
		w := h.get(uidRoot, "/api/v1/accounting/"+path+"?job=1&cluster=other", "")
		if msg := "cluster other: the accounting store is SQLite"; w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), msg) {
			t.Errorf("%s of cluster other: %d %s, want 400 with %q", path, w.Code, w.Body, msg)
		}
	}
	w = h.get(uidRoot, "/api/v1/accounting/usage?job=1&cluster=TIDE", "")
	var l api.UsageList
	if err := json.Unmarshal(w.Body.Bytes(), &l); w.Code != http.StatusOK || err != nil || l.Cluster != "TIDE" ||
		len(l.Usage) != 1 || l.Usage[0].UserUsec != 3e6 {
		t.Errorf("usage of cluster TIDE: %d %s, want tide's step 1.0 (3 s), cluster TIDE", w.Code, w.Body)
	}
}
