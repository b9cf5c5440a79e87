package ui

import (
	"compress/gzip"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) {
	// Pages print local times: the golden files are in UTC.
	time.Local = time.UTC
	os.Exit(m.Run())
}

// get serves one request and returns the answer with its body
// decompressed.
func get(t *testing.T, h http.Handler, method, target string, hdr map[string]string, body io.Reader) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(method, target, body)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	resp := w.Result()
	var rd io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		rd = zr
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// golden compares got with testdata/name.golden (-update rewrites it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs from %s (-want +got; -update rewrites it):\n%s", name, path, d)
	}
}

// TestPagesGolden renders each page's main part for the small cluster
// and compares it with its golden file: a change to what a page shows
// is a reviewed change of the file.
func TestPagesGolden(t *testing.T) {
	h := New(smallCluster(t))
	for _, tc := range []struct{ name, target string }{
		{"map", "/ui/"},
		{"queue", "/ui/queue"},
		{"queue-finished", "/ui/queue?state=finished"},
		{"job-running", "/ui/jobs/11"},
		{"job-pending", "/ui/jobs/21"},
		{"queues", "/ui/queues"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(t, h, "GET", tc.target+sep(tc.target)+"part=main", nil, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s: %d\n%s", tc.target, resp.StatusCode, body)
			}
			golden(t, tc.name, body)
		})
	}
}

func sep(target string) string {
	if strings.Contains(target, "?") {
		return "&"
	}
	return "?"
}

// TestMapCells checks that every kind of GPU cell is drawn as the
// cluster's state says, with what its tooltip names.
func TestMapCells(t *testing.T) {
	f := smallCluster(t)
	_, body := get(t, New(f), "GET", "/ui/", nil, nil)
	for _, tc := range []struct{ name, want string }{
		{"whole job, measured busy, the viewer's", `<a class="g w u9 me" href="/ui/jobs/11" title="gpu01 GPU 0 (a100, 80 GiB): allocated · job 11 (alice) · busy 90 % · 68.4 GiB in use">`},
		{"unhealthy with the XID", `<i class="g x" title="gpu01 GPU 7 (a100, 80 GiB): unhealthy (XID 79: GPU has fallen off the bus)">!</i>`},
		{"free, measured idle", `<i class="g f u0" title="gpu01 GPU 4 (a100, 80 GiB): free · busy 0 %">`},
		{"three slices with their share", `<a class="g s m7 u4 me" href="/ui/jobs/12" title="gpu02 GPU 0 (a100, 80 GiB): 3 slices, 60 GiB of 80 GiB committed (75 %) · job 12 (alice, 20 GiB), 13 (alice, 20 GiB), 14 (bob, 20 GiB) · busy 40 %">3</a>`},
		{"free on a drained node", `<i class="g d u0" title="gpu03 GPU 1 (a100, 80 GiB): free, node drained · busy 0 %">`},
		{"another user's whole job on a drained node", `<a class="g w u0" href="/ui/jobs/15" title="gpu03 GPU 0 (a100, 80 GiB): allocated · job 15 (bob)`},
		{"node down", `<i class="g o" title="gpu04 GPU 0 (a100, 80 GiB): node down+not_responding">`},
		{"switch group with its path", `<h2>s1 <small>spine › s1</small> <span class="sum">2 nodes · 16 GPUs · 11 free</span></h2>`},
		{"drained node box", `class="node n-drng drain" title="gpu03: MIXED&#43;DRAIN · CPUs 0/64 · memory 0 MiB/512 GiB · 8 × a100 · reason: bad fan"`},
		{"down node box", `class="node n-down off"`},
	} {
		if !strings.Contains(body, tc.want) {
			t.Errorf("%s: the map lacks\n%s", tc.name, tc.want)
		}
	}
	// A whole GPU of a job the viewer may not see names no job.
	f.jobs = f.jobs[:0]
	_, body = get(t, New(f), "GET", "/ui/?part=main", nil, nil)
	if want := `<i class="g w u9" title="gpu01 GPU 0 (a100, 80 GiB): allocated (a job you may not see) · busy 90 %`; !strings.Contains(body, want) {
		t.Errorf("a hidden job's GPU: the map lacks\n%s", want)
	}
}

// TestMapDenied: without the node list (private_data: nodes) the map
// says why and shows no node.
func TestMapDenied(t *testing.T) {
	f := smallCluster(t)
	f.nodesErr = api.Errorf(api.ErrPermissionDenied, "Access/permission denied: node information is for operators on this cluster (private_data: nodes)")
	resp, body := get(t, New(f), "GET", "/ui/?part=main", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "node information is for operators") || strings.Contains(body, "gpu01") {
		t.Errorf("map under private nodes: %d\n%s", resp.StatusCode, body)
	}
}

// TestQueueFilters checks the filters, the state tabs' counts and the
// order of the rows.
func TestQueueFilters(t *testing.T) {
	h := New(smallCluster(t))
	ids := func(body string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`<td><a href="/ui/jobs/\d+">([^<]+)</a>`).FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"default: running longest first, then pending by priority", "", []string{"11", "12", "13", "14", "15", "21", "22", "23", "24_[0-9]"}},
		{"pending", "state=pending", []string{"21", "22", "23", "24_[0-9]"}},
		{"a user", "user=bob", []string{"14", "15", "22"}},
		{"a user's finished jobs", "user=bob&state=finished", []string{"32"}},
		{"finished, latest end first", "state=finished", []string{"31", "32", "33"}},
		{"a queue nobody uses", "queue=prod", nil},
		{"a partition", "partition=gpu&state=running", []string{"11", "12", "13", "14", "15"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(t, h, "GET", "/ui/queue?"+tc.query, nil, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("%d\n%s", resp.StatusCode, body)
			}
			if d := cmp.Diff(tc.want, ids(body)); d != "" {
				t.Errorf("jobs listed (-want +got):\n%s", d)
			}
		})
	}
	_, body := get(t, h, "GET", "/ui/queue", nil, nil)
	for _, want := range []string{
		`<a href="/ui/queue" aria-current="page">pending and running <b>18</b></a>`, // 9 records, the array's 10 tasks
		`<a href="/ui/queue?state=finished">finished <b>3</b></a>`,
		`<td title="the scheduler&#39;s plan: the earliest start it could reserve, in 00:50:00">2026-11-29 12:50:00</td>`,
		`<span title="waits for free CPUs, memory or GPUs on the nodes it may use; running jobs will free them">Resources</span><br><small>0/4 nodes available: 2 InsufficientGPU, 1 NodeDrained, 1 NodeDown</small>`,
		`<small title="pending tasks of the array">×10</small>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the queue lacks\n%s", want)
		}
	}
}

// TestQueuePages: a long queue is one page of PageSize rows, with
// links to the others.
func TestQueuePages(t *testing.T) {
	h := New(bigCluster(t, 4, 32+250))
	_, body := get(t, h, "GET", "/ui/queue?state=pending&page=2", nil, nil)
	if n := strings.Count(body, "<tr>") + strings.Count(body, `<tr class="me">`); n != PageSize+1 { // + the header row
		t.Errorf("page 2 has %d rows, want %d and a header", n-1, PageSize)
	}
	for _, want := range []string{"Jobs 101–200 of 250", `<a href="/ui/queue?state=pending" rel="prev">`, `<a href="/ui/queue?page=3&amp;state=pending" rel="next">`} {
		if !strings.Contains(body, want) {
			t.Errorf("page 2 lacks %s", want)
		}
	}
	// Past the end: the last page.
	_, body = get(t, h, "GET", "/ui/queue?state=pending&page=9", nil, nil)
	if !strings.Contains(body, "Jobs 201–250 of 250") {
		t.Errorf("page 9 of 3 does not show the last page")
	}
}

// TestBadInput: a bad query value is a 400 page naming it.
func TestBadInput(t *testing.T) {
	h := New(smallCluster(t))
	for _, tc := range []struct{ target, want string }{
		{"/ui/queue?state=bogus", `bad state &#34;bogus&#34;: one of active, pending, running, finished, all`},
		{"/ui/queue?page=0", `bad page &#34;0&#34;: a page number from 1`},
		{"/ui/queue?user=" + strings.Repeat("x", 300), `bad user`},
		{"/ui/jobs/abc", `bad job id &#34;abc&#34;: a job id (a number)`},
		{"/ui/jobs?id=12x", `bad job id &#34;12x&#34;`},
	} {
		resp, body := get(t, h, "GET", tc.target, nil, nil)
		if resp.StatusCode != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d, want 400 with %q:\n%s", tc.target, resp.StatusCode, tc.want, body)
		}
	}
	resp, body := get(t, h, "GET", "/ui/jobs/99", nil, nil)
	if resp.StatusCode != 404 || !strings.Contains(body, "Invalid job id specified") {
		t.Errorf("an unknown job: %d\n%s", resp.StatusCode, body)
	}
	resp, _ = get(t, h, "GET", "/ui/nothing", nil, nil)
	if resp.StatusCode != 404 {
		t.Errorf("an unknown page: %d", resp.StatusCode)
	}
	resp, _ = get(t, h, "GET", "/ui/jobs?id=21", nil, nil)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/ui/jobs/21" {
		t.Errorf("job search: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestJobPage checks the sections of a job's page.
func TestJobPage(t *testing.T) {
	f := smallCluster(t)
	f.usage = JobUsage{
		GPUs:  []GPUReading{{Node: "gpu01", Index: 0, Model: "a100", MemoryMB: 81920, MemUsedMB: 70000, UtilPct: 90, Known: true, Healthy: true}},
		Steps: []api.StepUsage{{JobID: 11, StepID: api.BatchStepID, Tasks: 1, Nodes: 1, UserUsec: 120e6, RSS: api.UsageStat{Max: 3 << 30}}},
		Series: []UsagePoint{{Time: fixedNow.Add(-9 * time.Minute), GPUUtilPct: 80, GPUMemMB: 60000, CPUPct: 100, RSSMB: 2048},
			{Time: fixedNow.Add(-5 * time.Minute), GPUUtilPct: 95, GPUMemMB: 70000, CPUPct: 110, RSSMB: 3072}},
	}
	_, body := get(t, New(f), "GET", "/ui/jobs/11", nil, nil)
	for _, want := range []string{
		`<h1>Job 11 <small>train-11</small> <span class="badge st-r">RUNNING</span></h1>`,
		`<p class="placement" title="Tide:Placement">best fit on gpu01 under leaf s1; link score 400 (4 GPUs, NVLink)</p>`,
		`<tr><td>gpu01</td><td class="num">16</td><td class="num">64 GiB</td><td>0,1,2,3</td><td></td><td>0</td><td class="num">1</td></tr>`,
		`<dt>Standard output</dt><dd><code>/home/alice/out-11.txt</code></dd>`,
		`<td>submit</td><td>PENDING</td><td></td><td class="msg">submitted by alice</td><td>alice</td>`,
		`<td>gpu01 GPU 0</td><td>a100</td><td class="num">90 %</td>`,
		`<td>batch</td><td>1 on 1</td><td class="num">00:02:00</td><td class="num">3 GiB</td>`,
		`<figcaption>GPU utilisation (mean of the job&#39;s GPUs)</figcaption>`,
		`<polyline class="l0"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("job 11's page lacks\n%s", want)
		}
	}
	// Usage the caller may not see, and a refused trail.
	f.usage = JobUsage{Hidden: "The usage of other users' jobs is for operators on this cluster (private_data)."}
	f.eventErr = api.Errorf(api.ErrPermissionDenied, "Access/permission denied: the events of other users' jobs are for operators on this cluster (private_data: events)")
	resp, body := get(t, New(f), "GET", "/ui/jobs/15", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "The usage of other users&#39; jobs is for operators") ||
		!strings.Contains(body, "the events of other users&#39; jobs are for operators") || strings.Contains(body, "<table class=\"events\">") {
		t.Errorf("job 15 of bob, seen by alice: %d\n%s", resp.StatusCode, body)
	}
}

// TestQueuesPage checks the queue table and the history charts, and
// that cluster-wide charts go when the source hides them.
func TestQueuesPage(t *testing.T) {
	f := smallCluster(t)
	_, body := get(t, New(f), "GET", "/ui/queues", nil, nil)
	for _, want := range []string{
		`<tr class="over"><td class="d0"><a href="/ui/queue?queue=research">research</a></td><td class="num">8</td><td class="num">16</td><td class="num">10</td>`,
		`<td class="d1"><a href="/ui/queue?queue=vision">vision</a></td>`,
		`<td>borrows ≤ 8</td><td>alice, bob</td>`,
		`<figcaption>GPU utilisation</figcaption>`,
		`<figcaption>Fragmentation: free GPUs no pending job fits</figcaption>`,
		`<figcaption>GPUs used per queue</figcaption>`,
		`The controller samples the cluster every 30 s`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the queues page lacks\n%s", want)
		}
	}
	f.hist.ClusterHidden = "Cluster-wide figures are node information, for operators on this cluster (private_data: nodes)."
	_, body = get(t, New(f), "GET", "/ui/queues", nil, nil)
	if strings.Contains(body, "<figcaption>GPU utilisation</figcaption>") || !strings.Contains(body, "Cluster-wide figures are node information") ||
		!strings.Contains(body, "<figcaption>GPUs used per queue</figcaption>") {
		t.Errorf("queues page without cluster figures:\n%s", body)
	}
}

// TestRefresh: ?part=main is the main part alone, with an ETag that a
// refresh that saw it gets 304 for.
func TestRefresh(t *testing.T) {
	h := New(smallCluster(t))
	resp, full := get(t, h, "GET", "/ui/queue", nil, nil)
	m := regexp.MustCompile(`data-etag="([^"]+)"`).FindStringSubmatch(full)
	if resp.StatusCode != 200 || m == nil || !strings.Contains(full, `<main id="main" data-poll="5"`) {
		t.Fatalf("full page: %d, no data-poll or data-etag:\n%s", resp.StatusCode, full)
	}
	etag := strings.ReplaceAll(m[1], "&#34;", `"`)
	resp, part := get(t, h, "GET", "/ui/queue?part=main", map[string]string{"X-Tide-UI": "refresh"}, nil)
	if resp.StatusCode != 200 || resp.Header.Get("ETag") != etag || strings.Contains(part, "<html") || !strings.Contains(part, "<h1>Queue</h1>") {
		t.Fatalf("part: %d, ETag %q (page said %q):\n%s", resp.StatusCode, resp.Header.Get("ETag"), etag, part)
	}
	if !strings.Contains(full, part) {
		t.Errorf("the main part is not the page's main")
	}
	resp, _ = get(t, h, "GET", "/ui/queue?part=main", map[string]string{"If-None-Match": etag}, nil)
	if resp.StatusCode != 304 {
		t.Errorf("refresh with the same ETag: %d, want 304", resp.StatusCode)
	}
	resp, _ = get(t, h, "GET", "/ui/queue?part=main", map[string]string{"If-None-Match": `"other"`}, nil)
	if resp.StatusCode != 200 {
		t.Errorf("refresh with another ETag: %d, want 200", resp.StatusCode)
	}
}

// TestGzip: large pages are compressed for clients that take it.
func TestGzip(t *testing.T) {
	h := New(bigCluster(t, 64, 600))
	resp, body := get(t, h, "GET", "/ui/", map[string]string{"Accept-Encoding": "gzip, deflate"}, nil)
	if resp.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(body, "gpu0064") {
		t.Errorf("map with gzip: encoding %q", resp.Header.Get("Content-Encoding"))
	}
	resp, _ = get(t, h, "GET", "/ui/", map[string]string{"Accept-Encoding": "gzip;q=0"}, nil)
	if resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("gzip refused with q=0, yet encoded %q", resp.Header.Get("Content-Encoding"))
	}
}

// TestNoIdentity: a page without an identity sends a browser to the
// login page, and a refresh gets 401.
func TestNoIdentity(t *testing.T) {
	f := smallCluster(t)
	f.who = Identity{}
	h := New(f)
	resp, _ := get(t, h, "GET", "/ui/queue?user=bob", nil, nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != 303 || loc != "/ui/login?next=%2Fui%2Fqueue%3Fuser%3Dbob" {
		t.Errorf("page without identity: %d to %q", resp.StatusCode, loc)
	}
	resp, _ = get(t, h, "GET", "/ui/queue?part=main", map[string]string{"X-Tide-UI": "refresh"}, nil)
	if resp.StatusCode != 401 {
		t.Errorf("refresh without identity: %d, want 401", resp.StatusCode)
	}
}

// TestLogin checks the login page and form: the cookie's attributes,
// where it returns to, and what it refuses.
func TestLogin(t *testing.T) {
	f := smallCluster(t)
	f.who = Identity{}
	h := New(f)
	resp, body := get(t, h, "GET", "/ui/login?next=/ui/queues", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `<form id="login" method="post" action="/ui/login">`) ||
		!strings.Contains(body, `<input type="hidden" name="next" value="/ui/queues">`) {
		t.Fatalf("login page: %d\n%s", resp.StatusCode, body)
	}
	post := func(form url.Values, hdr map[string]string) (*http.Response, string) {
		if hdr == nil {
			hdr = map[string]string{}
		}
		hdr["Content-Type"] = "application/x-www-form-urlencoded"
		return get(t, h, "POST", "/ui/login", hdr, strings.NewReader(form.Encode()))
	}
	resp, _ = post(url.Values{"token": {"TIDE_JWT=good.token.sig\n"}, "next": {"/ui/queues"}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/ui/queues" {
		t.Fatalf("good token: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	cs := resp.Cookies()
	if len(cs) != 1 {
		t.Fatalf("good token: cookies %v", cs)
	}
	c := cs[0]
	if c.Name != CookieName || c.Value != "good.token.sig" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui/" ||
		c.MaxAge <= 0 || c.Secure {
		t.Errorf("cookie %+v: want %s=good.token.sig, HttpOnly, SameSite=Strict, Path=/ui/, a MaxAge, not Secure over plain HTTP", c, CookieName)
	}
	for _, tc := range []struct {
		name   string
		form   url.Values
		hdr    map[string]string
		status int
		want   string
	}{
		{"bad token", url.Values{"token": {"bad"}}, nil, 401, "token signature is invalid"},
		{"no token", url.Values{"token": {" "}}, nil, 400, "paste the token"},
		{"from another site", url.Values{"token": {"good.token.sig"}}, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "refused a form sent from another site"},
		{"another origin", url.Values{"token": {"good.token.sig"}}, map[string]string{"Origin": "https://evil.example"}, 403, "Origin: https://evil.example"},
		// A sandboxed frame of another site posts with an opaque
		// origin; without Sec-Fetch-Site (older browsers) that is all
		// there is to refuse it by.
		{"opaque origin", url.Values{"token": {"good.token.sig"}}, map[string]string{"Origin": "null"}, 403, "opaque origin (Origin: null)"},
		{"opaque origin, cross-site", url.Values{"token": {"good.token.sig"}}, map[string]string{"Origin": "null", "Sec-Fetch-Site": "cross-site"}, 403, "Sec-Fetch-Site: cross-site"},
	} {
		resp, body := post(tc.form, tc.hdr)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) || len(resp.Cookies()) != 0 {
			t.Errorf("%s: %d, cookies %v, want %d with %q:\n%s", tc.name, resp.StatusCode, resp.Cookies(), tc.status, tc.want, body)
		}
	}
	// Only a dashboard path of this host is a place to return to.
	for next, want := range map[string]string{"//evil.example/ui/": "/ui/", "https://evil.example/": "/ui/", "/ui/jobs/7": "/ui/jobs/7",
		"/api/v1/jobs": "/ui/", "/ui/login": "/ui/", "/ui/\\evil": "/ui/"} {
		resp, _ := post(url.Values{"token": {"good.token.sig"}, "next": {next}}, nil)
		if got := resp.Header.Get("Location"); got != want {
			t.Errorf("next %q: back to %q, want %q", next, got, want)
		}
	}
	// Signing out clears the cookie.
	resp, _ = get(t, h, "POST", "/ui/logout", map[string]string{"Sec-Fetch-Site": "same-origin"}, nil)
	if cs := resp.Cookies(); resp.StatusCode != 303 || len(cs) != 1 || cs[0].MaxAge >= 0 || cs[0].Name != CookieName {
		t.Errorf("logout: %d, cookies %v", resp.StatusCode, cs)
	}
	// The login page says who a valid cookie names.
	req := httptest.NewRequest("GET", "/ui/login", nil)
	req.AddCookie(&http.Cookie{Name: CookieName, Value: "good.token.sig"})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if !strings.Contains(w.Body.String(), "Signed in as <b>alice</b> until 2026-11-29 20:00") {
		t.Errorf("login page with a valid cookie:\n%s", w.Body.String())
	}
}

// TestSocketHost: on the socket (through a tunnel) only requests for a
// loopback name are answered: a DNS-rebound name is refused.
func TestSocketHost(t *testing.T) {
	f := smallCluster(t)
	f.who = Identity{User: "alice", Known: true, Method: MethodSocket}
	h := New(f)
	for host, want := range map[string]int{"localhost:8080": 200, "127.0.0.1:8080": 200, "[::1]:8080": 200, "app.localhost": 200,
		"evil.example:8080": 403, "10.0.0.1": 403, "localhost.evil.example": 403} {
		req := httptest.NewRequest("GET", "/ui/queue", nil)
		req.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != want {
			t.Errorf("Host %s: %d, want %d", host, w.Code, want)
		}
	}
	// The remote identity is not checked this way: the cookie is bound
	// to the host it was set for.
	f.who.Method = "jwt"
	req := httptest.NewRequest("GET", "/ui/queue", nil)
	req.Host = "ctl.example:6820"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 {
		t.Errorf("remote caller at the controller's name: %d", w.Code)
	}
}

// TestSelfContained: every page sets the policy that keeps the browser
// on this origin, and names no URL of another host; the static files
// exist with their types.
func TestSelfContained(t *testing.T) {
	h := New(smallCluster(t))
	external := regexp.MustCompile(`(?i)(src|href|action)="(https?:)?//|url\(|@import|https?://`)
	for _, target := range []string{"/ui/", "/ui/queue", "/ui/jobs/11", "/ui/jobs/21", "/ui/queues", "/ui/login", "/ui/jobs/99"} {
		resp, body := get(t, h, "GET", target, nil, nil)
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("%s: Content-Security-Policy %q", target, csp)
		}
		if m := external.FindString(body); m != "" {
			t.Errorf("%s names another host: %q", target, m)
		}
		if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("%s: Cache-Control %q, want no-store", target, cc)
		}
	}
	for name, ctype := range map[string]string{"ui.css": "text/css", "ui.js": "text/javascript", "favicon.svg": "image/svg+xml"} {
		resp, body := get(t, h, "GET", "/ui/static/"+name, nil, nil)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Errorf("static %s: %d %q", name, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if m := regexp.MustCompile(`https?://|url\(|@import`).FindString(body); m != "" && name != "favicon.svg" {
			t.Errorf("static %s names another host: %q", name, m)
		}
	}
	resp, _ := get(t, h, "GET", "/ui", nil, nil)
	if resp.StatusCode != 301 || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("/ui: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestPublic: only the login page and static files are public.
func TestPublic(t *testing.T) {
	for path, want := range map[string]bool{"/ui/login": true, "/ui/logout": true, "/ui/static/ui.css": true, "/ui/": false, "/ui/queue": false,
		"/ui/jobs/1": false, "/ui/loginx": false, "/ui/static": false} {
		if got := Public(httptest.NewRequest("GET", path, nil)); got != want {
			t.Errorf("Public(%s) = %v, want %v", path, got, want)
		}
	}
}
