package ctld

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/accounting"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/gres"
)

// fuzzEndpoint is one API call the handler fuzz target can make: the
// method, the path (with %s for the fuzzed path word), whether the body
// is JSON the controller decodes, and whether it is a node call.
type fuzzEndpoint struct {
	method, path string
	json, node   bool
}

var fuzzEndpoints = []fuzzEndpoint{
	{method: "POST", path: "/api/v1/jobs", json: true},
	{method: "POST", path: "/api/v1/jobs/cancel", json: true},
	{method: "POST", path: "/api/v1/jobs/update", json: true},
	{method: "POST", path: "/api/v1/nodes/update", json: true},
	{method: "POST", path: "/api/v1/jobs/%s/checkpoint"},
	{method: "POST", path: "/api/v1/jobs/%s/steps", json: true},
	{method: "POST", path: "/api/v1/jobs/1/steps/%s/end", json: true},
	{method: "POST", path: "/api/v1/jobs/%s/release", json: true},
	{method: "GET", path: "/api/v1/jobs?%s"},
	{method: "GET", path: "/api/v1/accounting/jobs?%s"},
	{method: "GET", path: "/api/v1/jobs/%s"},
	{method: "GET", path: "/api/v1/jobs/%s/events"},
	{method: "GET", path: "/api/v1/accounting/steps?%s"},
	{method: "GET", path: "/api/v1/audit?%s"},
	{method: "POST", path: "/api/v1/node/register", json: true, node: true},
	{method: "POST", path: "/api/v1/node/sync", json: true, node: true},
}

// fuzzServer is a controller as the unit tests build it (newHarness),
// with two registered nodes and one running job of alice's (job 1), for
// FuzzHandlers; it is rebuilt every fuzzRebuild inputs so that the jobs
// fuzzed submissions add stay few.
type fuzzServer struct {
	s     *Server
	local http.Handler
	node  http.Handler
	dir   string
	runs  int
}

const fuzzRebuild = 256

func newFuzzServer(tb testing.TB) *fuzzServer {
	tb.Helper()
	dir, err := os.MkdirTemp("", "tide-fuzz-ctld-")
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := ParseConfig(strings.NewReader(testConfig))
	if err != nil {
		tb.Fatal(err)
	}
	cl, err := cfg.Validate()
	if err != nil {
		tb.Fatal(err)
	}
	st, err := accounting.Open(filepath.Join(dir, "tide.db"))
	if err != nil {
		tb.Fatal(err)
	}
	clock := &fakeClock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	s, err := newServer(cl, slog.New(slog.DiscardHandler), st, "k", clock.now)
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	s.users.names[0] = cached{name: "root", at: now}
	s.users.names[1000] = cached{name: "alice", at: now}
	s.users.names[1001] = cached{name: "bob", at: now}
	for _, n := range []string{"gpu01", "gpu02"} {
		gpus, _ := gres.Fake(n, gres.FakeConfig{Count: 8})
		if _, err := s.register(api.NodeRegistration{Name: n, CPUs: 8, MemoryMB: 64 * 1024, GPUs: gpus}); err != nil {
			tb.Fatal(err)
		}
	}
	alice := caller{uid: 1000, gid: 1000, user: "alice", known: true}
	if _, err := s.submit(context.Background(), alice, api.SubmitRequest{Spec: api.JobSpec{
		Script: "#!/bin/sh\ntrue\n", WorkDir: "/home/alice", GPUs: 1}}); err != nil {
		tb.Fatal(err)
	}
	s.schedulePass()
	return &fuzzServer{s: s, local: s.localHandler(), node: s.nodeHandler(), dir: dir}
}

func (fs *fuzzServer) close() {
	fs.s.Close()
	os.RemoveAll(fs.dir)
}

// serve makes one request as uid (-1: no credentials) and returns the
// recorded answer. Node calls carry the cluster key; a sync's long poll
// ends with the request's short deadline.
func (fs *fuzzServer) serve(ep fuzzEndpoint, word string, body []byte, uid int) *httptest.ResponseRecorder {
	path := ep.path
	if strings.Contains(path, "%s") {
		// PathEscape keeps '=' and '&', so a word can be a query too.
		path = fmt.Sprintf(path, url.PathEscape(word))
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	r := httptest.NewRequest(ep.method, "http://tide"+path, rd)
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Millisecond)
	defer cancel()
	if uid >= 0 {
		ctx = context.WithValue(ctx, credKey{}, syscall.Ucred{Uid: uint32(uid), Gid: uint32(uid), Pid: 1})
	}
	r = r.WithContext(ctx)
	w := httptest.NewRecorder()
	if ep.node {
		r.Header.Set(client.KeyHeader, "k")
		fs.node.ServeHTTP(w, r)
	} else {
		fs.local.ServeHTTP(w, r)
	}
	return w
}

// fuzzSeeds are valid and hostile bodies for the endpoints.
func fuzzSeeds() []struct {
	ep   uint8
	word string
	body string
} {
	j := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	gpus, _ := gres.Fake("gpu01", gres.FakeConfig{Count: 8})
	tl, name, nice := int64(60), "renamed", -5
	return []struct {
		ep   uint8
		word string
		body string
	}{
		{0, "", j(api.SubmitRequest{Spec: api.JobSpec{Script: "#!/bin/sh\n", WorkDir: "/tmp", GPUs: 2, TimeLimit: 60}})},
		{0, "", j(api.SubmitRequest{Spec: api.JobSpec{Script: "#!/bin/sh\n", WorkDir: "/tmp", Array: "0-3%2",
			Dependency: "afterok:1", Constraint: "(a|b)&c", NodeList: []string{"gpu01"}, Stdout: "%x-%j-%a.out"}})},
		{0, "", `{"spec":{"script":"#!/bin/sh\n","work_dir":"/tmp","time_limit":-7,"nodes":-1,"mem_per_node_mb":-3}}`},
		{0, "", `{"spec":{"script":"#!/bin/sh\n","work_dir":"/tmp","array":"3-4:9223372036854775806"}}`},
		{0, "", `{"spec":{"script":"#!/bin/sh\n","work_dir":"/tmp","constraint":"` + strings.Repeat("(a|b)&", 10) + `c"}}`},
		{0, "", `{"spec":{"script":"#!/bin/sh\n","work_dir":"/tmp","dependency":"afterok:1?afterok:99999999999999999999"}}`},
		{0, "", `{"spec":{"script":"#!/bin/sh\n","work_dir":"/tmp","gpus":9223372036854775807}}`},
		{0, "", `{"spec":{"script":"#!/bin/sh\n","work_dir":"/tmp","begin_time":"9999-12-31T23:59:59Z"}}`},
		{0, "", `{"test_only":true,"spec":{"script":"#!/bin/sh\n","work_dir":"/tmp","partition":"nope"}}`},
		{0, "", "{"}, {0, "", "null"}, {0, "", `{"spec":null}`}, {0, "", `[]`}, {0, "", "\xff"}, {0, "", ""},
		{0, "", strings.Repeat("[", 10000)},
		{1, "", j(api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{1}}})},
		{1, "", j(api.CancelRequest{Filter: api.JobFilter{Tasks: []api.TaskRef{{JobID: 1, Task: -1}}}, Signal: 99})},
		{1, "", `{"filter":{}}`}, {1, "", `{"filter":{"all":true},"signal":-1}`}, {1, "", `{"bogus":1}`},
		{2, "", j(api.JobUpdate{IDs: []uint64{1}, Action: "hold"})},
		{2, "", j(api.JobUpdate{IDs: []uint64{1}, Action: "update", TimeLimit: &tl, Name: &name, Nice: &nice})},
		{2, "", `{"ids":[1],"action":"update","time_limit":-9223372036854775808}`},
		{2, "", `{"ids":[1],"action":"update","nice":-2147483648}`}, {2, "", `{"ids":[1],"action":"requeue"}`},
		{2, "", `{"ids":[],"action":"bogus"}`},
		{3, "", j(api.NodeUpdate{Names: []string{"gpu01"}, State: "DRAIN", Reason: "x"})},
		{3, "", `{"names":["gpu[01-99999999]"],"state":"DOWN"}`}, {3, "", `{"names":null,"state":""}`},
		{4, "1", ""}, {4, "99999999999999999999", ""}, {4, "-1", ""},
		{5, "1", j(api.StepRequest{Argv: []string{"hostname"}, Nodes: 1, Tasks: 1})},
		{5, "1", `{"argv":[],"tasks":-1,"gpus_per_task":99999999}`},
		{6, "0", `{"exit":{}}`}, {6, "4294967296", `{}`},
		{7, "1", `{"exit":{}}`},
		{8, "user=alice&state=R,PD", ""}, {8, "task=1_[0-99999]", ""}, {8, "id=x", ""},
		{9, "since=2026-01-01T00:00:00Z&until=x", ""}, {9, "state=bogus", ""},
		{10, "1", ""}, {10, "0", ""}, {11, "1", ""}, {12, "job=1&job=x", ""}, {13, "limit=-1", ""},
		{14, "", j(api.NodeRegistration{Name: "gpu01", CPUs: 8, MemoryMB: 64 << 10, GPUs: gpus, Version: "x"})},
		{14, "", `{"name":"nope","cpus":-1,"memory_mb":-1}`}, {14, "", `{"name":"gpu02","gpus":[{"index":-1}]}`},
		{15, "", j(api.NodeSyncRequest{Name: "gpu01", Jobs: []api.NodeJobReport{{JobID: 1, State: api.NodeJobRunning}}})},
		{15, "", `{"name":"gpu01","jobs":[{"job_id":1,"state":"finished","exit_code":-1}],"wait_ms":60000}`},
		{15, "", `{"name":"gpu02","jobs":[{"job_id":424242,"state":"running"}]}`},
	}
}

// FuzzHandlers feeds fuzzed bodies, path words and queries to every API
// call of the controller's local and node handlers, as alice, bob, root
// or a caller without credentials, then runs a scheduling pass. The
// controller must never panic, never answer 5xx, never accept a body
// that is not JSON, and still answer afterwards. The controller lives
// across inputs (rebuilt every fuzzRebuild), so a failure may depend on
// what earlier inputs did; its saved input then only reproduces it with
// luck.
func FuzzHandlers(f *testing.F) {
	for _, sd := range fuzzSeeds() {
		f.Add(sd.ep, sd.word, []byte(sd.body), uint8(0))
	}
	f.Add(uint8(2), "", []byte(`{"ids":[1],"action":"release"}`), uint8(2))
	f.Add(uint8(3), "", []byte(`{"names":["gpu02"],"state":"RESUME"}`), uint8(2))
	f.Add(uint8(13), "", []byte(nil), uint8(3))
	var fs *fuzzServer
	f.Cleanup(func() {
		if fs != nil {
			fs.close()
		}
	})
	f.Fuzz(func(t *testing.T, epIdx uint8, word string, body []byte, who uint8) {
		if fs == nil || fs.runs >= fuzzRebuild {
			if fs != nil {
				fs.close()
			}
			fs = newFuzzServer(t)
		}
		fs.runs++
		ep := fuzzEndpoints[int(epIdx)%len(fuzzEndpoints)]
		uid := [...]int{1000, 1001, 0, -1}[who%4]
		if ep.method == "GET" {
			body = nil
		}
		w := fs.serve(ep, word, body, uid)
		if w.Code >= 500 {
			t.Fatalf("%s %s as uid %d, body %q: %d %s", ep.method, ep.path, uid, body, w.Code, w.Body)
		}
		// A body whose first value is not JSON is refused (what follows
		// it is not read, as by any json.Decoder). A path the mux cleans,
		// "/api/v1/jobs//steps", is redirected before any body is read:
		// a 3xx.
		var first any
		if ep.json && json.NewDecoder(bytes.NewReader(body)).Decode(&first) != nil && w.Code < 300 {
			t.Fatalf("%s %s as uid %d, body %q (not JSON): %d %s", ep.method, ep.path, uid, body, w.Code, w.Body)
		}
		// ServeMux answers a path no route matches ("/api/v1/jobs/a/b")
		// in plain text; every answer of the API itself is JSON.
		if muxText := w.Code == http.StatusNotFound && w.Body.String() == "404 page not found\n"; w.Code >= 400 && !muxText {
			var eb api.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || eb.Error.Message == "" {
				t.Fatalf("%s %s: %d with body %q, not an error body: %v", ep.method, ep.path, w.Code, w.Body, err)
			}
		}
		fs.s.schedulePass()
		for _, path := range []string{"/api/v1/cluster", "/api/v1/jobs?all=1", "/api/v1/nodes"} {
			w := fs.serve(fuzzEndpoint{method: "GET", path: path}, "", nil, 1000)
			if w.Code != http.StatusOK || !json.Valid(w.Body.Bytes()) {
				t.Fatalf("after %s %s, body %q: GET %s answered %d %q", ep.method, ep.path, body, path, w.Code, w.Body)
			}
		}
	})
}
