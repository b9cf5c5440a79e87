package ctld

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/ui"
	"github.com/tide-hpc/tide/gres"
)

// uiGet is a GET of a dashboard page on the socket as uid, through a
// tunnel to localhost as a browser would make it.
func (h *harness) uiGet(uid uint32, path string) *httptest.ResponseRecorder {
	h.t.Helper()
	r := httptest.NewRequest("GET", "http://localhost:8080"+path, nil)
	r = r.WithContext(context.WithValue(r.Context(), credKey{}, syscall.Ucred{Uid: uid, Gid: uid, Pid: 1}))
	w := httptest.NewRecorder()
	h.s.localHandler().ServeHTTP(w, r)
	return w
}

// TestDashboardPrivacy: the dashboard shows each caller what the API
// would: under private_data a user's pages hold only their own jobs,
// no node, no other user's job page, trail or usage; operators see
// everything. Without private_data users see the whole cluster.
func TestDashboardPrivacy(t *testing.T) {
	h := newPrivateHarness(t, privateConfig("jobs, usage, nodes, events"))
	h.s.dash.hist.add(h.s.historySample(), historyEvery)
	page := func(uid uint32, path string, status int) string {
		t.Helper()
		w := h.uiGet(uid, path)
		if w.Code != status {
			t.Fatalf("uid %d GET %s: %d, want %d\n%s", uid, path, w.Code, status, w.Body)
		}
		return w.Body.String()
	}
	has := func(body, what string, want bool) {
		t.Helper()
		if strings.Contains(body, what) != want {
			t.Errorf("page has %q: %v, want %v", what, !want, want)
		}
	}
	body := page(uidAlice, "/ui/", 200)
	has(body, "node information is for operators on this cluster", true)
	has(body, "gpu01", false)
	body = page(uidAlice, "/ui/queue", 200)
	has(body, `href="/ui/jobs/1"`, true)
	has(body, `href="/ui/jobs/2"`, true)
	has(body, `href="/ui/jobs/3"`, false)
	has(body, ">bob<", false)
	body = page(uidAlice, "/ui/jobs/3", 404)
	has(body, "Invalid job id specified", true)
	has(body, "j3", false)
	body = page(uidAlice, "/ui/jobs/1", 200)
	has(body, "<h1>Job 1 <small>j1</small>", true)
	has(body, "<h2>Events</h2>", true)
	body = page(uidAlice, "/ui/queues", 200)
	has(body, "Cluster-wide figures are node information", true)
	has(body, "<figcaption>GPU utilisation</figcaption>", false)

	for _, op := range []uint32{uidCarol, uidRoot} {
		body = page(op, "/ui/", 200)
		has(body, `<span class="nn">gpu01</span>`, true)
		has(body, `href="/ui/jobs/3"`, true)
		body = page(op, "/ui/queue", 200)
		has(body, `href="/ui/jobs/3"`, true)
		body = page(op, "/ui/jobs/3", 200)
		has(body, "<h1>Job 3 <small>j3</small>", true)
		body = page(op, "/ui/queues", 200)
		has(body, "<figcaption>GPU utilisation</figcaption>", true)
	}

	open := newPrivateHarness(t, privateConfig(""))
	w := open.uiGet(uidAlice, "/ui/jobs/3")
	if w.Code != 200 || !strings.Contains(w.Body.String(), "<h1>Job 3 <small>j3</small>") {
		t.Errorf("alice on bob's job without private_data: %d\n%s", w.Code, w.Body)
	}
	if w = open.uiGet(uidAlice, "/ui/"); !strings.Contains(w.Body.String(), `href="/ui/jobs/3"`) {
		t.Errorf("alice's map without private_data lacks bob's job 3")
	}
}

// TestDashboardEventsPrivate: under private_data: events alone a user
// sees another user's job but not its trail, as tide events.
func TestDashboardEventsPrivate(t *testing.T) {
	h := newPrivateHarness(t, privateConfig("events"))
	w := h.uiGet(uidAlice, "/ui/jobs/3")
	if w.Code != 200 || !strings.Contains(w.Body.String(), "the events of other users&#39; jobs are for operators") ||
		strings.Contains(w.Body.String(), `<table class="events">`) {
		t.Errorf("alice on bob's job 3 under private_data: events: %d\n%s", w.Code, w.Body)
	}
	if w = h.uiGet(uidAlice, "/ui/jobs/1"); !strings.Contains(w.Body.String(), `<table class="events">`) {
		t.Errorf("alice's own job 1 lacks its trail:\n%s", w.Body)
	}
}

// TestDashboardJobUsage: a running job's page shows its GPUs as the
// node last reported them.
func TestDashboardJobUsage(t *testing.T) {
	h := newPrivateHarness(t, privateConfig(""))
	j := h.job(1)
	if j.State != api.StateRunning || len(j.Alloc) != 1 || len(j.Alloc[0].GPUs) != 1 {
		t.Fatalf("job 1: %s %+v", j.State, j.Alloc)
	}
	a := j.Alloc[0]
	h.s.mu.Lock()
	n := h.s.nodes[a.Node]
	n.Responding = true
	n.GPUStatus = []gres.Status{{Index: a.GPUs[0], Health: gres.Healthy, UtilPct: 73, MemUsedMB: 12288}}
	h.s.mu.Unlock()
	w := h.uiGet(uidAlice, "/ui/jobs/1")
	want := fmt.Sprintf(`<td>%s GPU %d</td><td>a100</td><td class="num">73 %%</td>`, a.Node, a.GPUs[0])
	if !strings.Contains(w.Body.String(), want) || !strings.Contains(w.Body.String(), "12 GiB of 80 GiB") {
		t.Errorf("job 1's page lacks %s and its memory:\n%s", want, w.Body)
	}
}

// TestDashboardHistory: a sample counts the cluster, and the ring
// keeps a day of samples, oldest first.
func TestDashboardHistory(t *testing.T) {
	h := newPrivateHarness(t, privateConfig(""))
	// A fourth job that cannot start while the three run: every GPU.
	if _, err := h.submitAs(h.alice, api.JobSpec{Name: "wait", Nodes: 2, GPUsPerNode: 8}); err != nil {
		t.Fatal(err)
	}
	h.s.schedulePass()
	sm := h.s.historySample()
	if sm.GPUs != 16 || sm.Allocated != 3 || sm.Running != 3 || sm.Pending != 1 || sm.UtilPct != -1 {
		t.Errorf("sample %+v: want 16 GPUs, 3 allocated, 3 running, 1 pending, no utilisation read", sm)
	}
	var hist history
	every := time.Hour // 24 samples a day
	start := h.s.now()
	for i := range 30 {
		hist.add(ui.Sample{Time: start.Add(time.Duration(i) * every), Running: i}, every)
	}
	got := hist.samples()
	if len(got) != 24 || got[0].Running != 6 || got[23].Running != 29 || hist.every() != every {
		t.Errorf("ring of 24 after 30 samples: %d samples from %d to %d, every %s", len(got), got[0].Running, got[len(got)-1].Running, hist.every())
	}
}

// TestDashboardSignIn runs the browser's way in on api_addr: pages send
// it to the login page, the token from `tide token` becomes a cookie,
// and the cookie reads pages but nothing of the API.
func TestDashboardSignIn(t *testing.T) {
	a := serveAPI(t, "")
	base := "http://" + a.api
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, body string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, _ := do("GET", "/ui/queue", "", nil)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/ui/login?next=%2Fui%2Fqueue" {
		t.Fatalf("page without a credential: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, p := range []string{"/ui/login", "/ui/static/ui.css", "/ui/static/ui.js"} {
		if resp, _ := do("GET", p, "", nil); resp.StatusCode != 200 {
			t.Errorf("public %s: %d", p, resp.StatusCode)
		}
	}
	tok := a.token(t, "nobody", time.Hour)
	resp, _ = do("POST", "/ui/login", url.Values{"token": {"TIDE_JWT=" + tok}, "next": {"/ui/queue"}}.Encode(),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": base})
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/ui/queue" || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d to %q, cookies %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	cookie := resp.Cookies()[0]
	withCookie := map[string]string{"Cookie": cookie.Name + "=" + cookie.Value}
	resp, body := do("GET", "/ui/queue", "", withCookie)
	if resp.StatusCode != 200 || !strings.Contains(body, `<span class="who">nobody</span>`) {
		t.Errorf("page with the cookie: %d\n%s", resp.StatusCode, body)
	}
	// Signing out clears the cookie.
	resp, _ = do("POST", "/ui/logout", "", map[string]string{"Cookie": withCookie["Cookie"], "Origin": base})
	if cs := resp.Cookies(); resp.StatusCode != 303 || len(cs) != 1 || cs[0].Name != ui.CookieName || cs[0].MaxAge >= 0 {
		t.Errorf("logout: %d, cookies %v", resp.StatusCode, cs)
	}
	// The cookie is no credential for the API, reading or writing.
	if resp, _ = do("GET", "/api/v1/jobs", "", withCookie); resp.StatusCode != 401 {
		t.Errorf("API listing with the cookie: %d, want 401", resp.StatusCode)
	}
	if resp, _ = do("POST", "/api/v1/jobs/cancel", `{"filter":{"ids":[1]}}`, withCookie); resp.StatusCode != 401 {
		t.Errorf("cancel with the cookie: %d, want 401", resp.StatusCode)
	}
	// The Authorization header works for pages as for the API.
	if resp, _ = do("GET", "/ui/queues", "", map[string]string{"Authorization": "Bearer " + tok}); resp.StatusCode != 200 {
		t.Errorf("page with a Bearer header: %d", resp.StatusCode)
	}
	// A bad or expired cookie sends a page back to the login page,
	// saying why, and a refresh gets 401.
	bad := map[string]string{"Cookie": ui.CookieName + "=" + tok[:len(tok)-2] + "xx"}
	resp, _ = do("GET", "/ui/", "", bad)
	if loc := resp.Header.Get("Location"); resp.StatusCode != 303 || !strings.HasPrefix(loc, "/ui/login?next=%2Fui%2F&why=") {
		t.Errorf("page with a bad cookie: %d to %q", resp.StatusCode, loc)
	}
	bad["X-Tide-UI"] = "refresh"
	if resp, _ = do("GET", "/ui/?part=main", "", bad); resp.StatusCode != 401 {
		t.Errorf("refresh with a bad cookie: %d, want 401", resp.StatusCode)
	}
	expired := a.token(t, "nobody", time.Second)
	a.h.clock.add(time.Minute)
	resp, _ = do("GET", "/ui/", "", map[string]string{"Cookie": ui.CookieName + "=" + expired})
	if loc := resp.Header.Get("Location"); resp.StatusCode != 303 || !strings.Contains(loc, "why=") || !strings.Contains(loc, "expired") {
		t.Errorf("page with an expired cookie: %d to %q", resp.StatusCode, loc)
	}
	// A form from another site signs nobody in.
	resp, _ = do("POST", "/ui/login", url.Values{"token": {tok}}.Encode(),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site"})
	if resp.StatusCode != 403 || len(resp.Cookies()) != 0 {
		t.Errorf("cross-site login: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
}

// BenchmarkDashboard times each page of the dashboard (rendered and
// compressed as a browser asks for it) on a controller of 1,000 nodes
// × 8 GPUs, all busy with 8,000 one-GPU jobs, and 2,000 pending jobs:
// 10,000 jobs. The target is 200 ms a page (ms/page).
func BenchmarkDashboard(b *testing.B) {
	s := scaleServer(b, 1000)
	alice := caller{uid: 1000, gid: 1000, user: "alice", known: true}
	submit := func(n int) {
		for i := range n {
			spec := api.JobSpec{Name: fmt.Sprintf("bench-%d", i), GPUs: 1, CPUsPerTask: 4, TimeLimit: 3600,
				Script: "#!/bin/sh\n", WorkDir: "/w"}
			if _, err := s.submit(context.Background(), alice, api.SubmitRequest{Spec: spec}); err != nil {
				b.Fatal(err)
			}
		}
		s.schedulePass()
	}
	submit(8000)
	submit(2000)
	// A full day of history (the same sample at every time).
	sm := s.historySample()
	for i := range historySize(historyEvery) {
		sm.Time = s.now().Add(-ui.HistorySpan + time.Duration(i)*historyEvery)
		s.dash.hist.add(sm, historyEvery)
	}
	s.mu.Lock()
	n := len(s.jobs)
	s.mu.Unlock()
	if n != 10000 {
		b.Fatalf("%d jobs, want 10,000", n)
	}
	h := s.localHandler()
	for _, page := range []struct{ name, path string }{{"map", "/ui/"}, {"queue", "/ui/queue"},
		{"queue-pending-page10", "/ui/queue?state=pending&page=10"}, {"job", "/ui/jobs/5000"}, {"queues", "/ui/queues"}} {
		path := page.path
		b.Run(page.name, func(b *testing.B) {
			get := func() *httptest.ResponseRecorder {
				r := httptest.NewRequest("GET", "http://localhost"+path, nil)
				r.Header.Set("Accept-Encoding", "gzip")
				r = r.WithContext(context.WithValue(r.Context(), credKey{}, syscall.Ucred{Uid: 0, Gid: 0, Pid: 1}))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			if w := get(); w.Code != 200 {
				b.Fatalf("GET %s: %d\n%s", path, w.Code, w.Body)
			}
			for b.Loop() {
				get()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}
