package integration

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/tide-hpc/tide/ctld/api"
)

// The dashboard (ctld/ui) in a real browser: headless Chromium, driven
// over the DevTools protocol (chromedp), signs in on api_addr with a
// token from `tide token` and loads every page of a local cluster with
// jobs in every state. It checks what each page shows, that a page
// updates itself without a reload, that the browser reports no script
// error or policy violation, and that no request leaves the controller's
// origin. Screenshots of every page go to $TIDE_UI_SCREENSHOTS (default:
// a temporary directory of the test).

// chromiumPath finds a Chromium to drive: $TIDE_CHROMIUM, or Debian's
// chromium (apt-get install chromium), or another build on the PATH.
func chromiumPath() string {
	if p := os.Getenv("TIDE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browserLog collects what the browser reports: every request's URL,
// script errors and console errors (a Content-Security-Policy
// violation is one). The listener runs on chromedp's reading
// goroutine, so it only appends under the lock.
type browserLog struct {
	mu       sync.Mutex
	requests []string
	errors   []string
}

func (b *browserLog) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		b.requests = append(b.requests, e.Request.URL)
	case *runtime.EventExceptionThrown:
		b.errors = append(b.errors, "exception: "+e.ExceptionDetails.Text+" "+exceptionText(e.ExceptionDetails))
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			b.errors = append(b.errors, "console.error: "+strings.Join(parts, " "))
		}
	case *cdplog.EventEntryAdded:
		if e.Entry.Level == cdplog.EntryLevelError {
			b.errors = append(b.errors, fmt.Sprintf("%s: %s (%s)", e.Entry.Source, e.Entry.Text, e.Entry.URL))
		}
	}
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil {
		return d.Exception.Description
	}
	return ""
}

func (b *browserLog) snapshot() (requests, errors []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.requests...), append([]string(nil), b.errors...)
}

// apiSPKI is the base64 SHA-256 of the public key the controller shows
// on api_addr, after checking its certificate against the cluster CA:
// Chromium is told to accept that key (and no other) without knowing
// the CA.
func apiSPKI(t *testing.T, c *cluster, addr string) string {
	t.Helper()
	pem, err := os.ReadFile(c.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", c.caFile)
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS to api_addr with the cluster CA: %v", err)
	}
	defer conn.Close()
	sum := sha256.Sum256(conn.ConnectionState().PeerCertificates[0].RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// busyJobs are the jobs of the dashboard's cluster, by what they show.
type busyJobs struct {
	train, eval, serve, finetune uint64
	notebooks                    []uint64
	pretrain, held, after, sweep uint64
	done, broken, cancelled      uint64
}

// busyCluster fills c (three nodes of eight GPUs: gpu01-02 under leaf
// s1, gpu03 under s2) with jobs in every state: whole GPUs and slices
// running, gpu03 drained under a running job, jobs pending for
// resources, on a hold, on a dependency and as an array, and finished
// ones completed, failed and cancelled.
func busyCluster(t *testing.T, c *cluster) busyJobs {
	t.Helper()
	const sleep = "#!/bin/sh\nexec sleep 600\n"
	var b busyJobs
	// The finished ones first: later the pending jobs hold the nodes
	// they wait for, and gpu03 is drained.
	b.done = c.submit("#!/bin/sh\necho done\n", "-J", "quick-check", "-A", "prod")
	b.broken = c.submit("#!/bin/sh\necho failing >&2\nexit 3\n", "-J", "broken-config", "-A", "prod")
	b.cancelled = c.submit(sleep, "-J", "abandoned", "-A", "prod", "-H")
	if r := c.cli("scancel", fmt.Sprint(b.cancelled)); r.code != 0 {
		t.Fatalf("scancel: %s%s", r.out, r.err)
	}
	for _, id := range []uint64{b.done, b.broken, b.cancelled} {
		c.waitTerminal(id, 30*time.Second)
	}
	run := func(name, queue, node string, args ...string) uint64 {
		return c.submit(sleep, append([]string{"-J", name, "-A", queue, "-w", node, "-t", "30:00"}, args...)...)
	}
	b.train = run("train-llm", "research", "gpu01", "--gpus=4")
	b.eval = run("eval-suite", "vision", "gpu01", "--gpus=2")
	b.serve = run("serve-api", "prod", "gpu02", "--gpus=4")
	for i := range 3 {
		args := []string{"-J", fmt.Sprintf("notebook-%d", i), "-A", "vision", "-w", "gpu02", "-t", "30:00", "--gpu-mem=20G"}
		if os.Getuid() == 0 {
			// Another user's, as on a shared cluster.
			b.notebooks = append(b.notebooks, c.submitAs(nobodyCred, sleep, args...))
		} else {
			b.notebooks = append(b.notebooks, c.submit(sleep, args...))
		}
	}
	b.finetune = run("finetune", "prod", "gpu03", "--gpus=2", "-t", "20:00")
	for _, id := range append([]uint64{b.train, b.eval, b.serve, b.finetune}, b.notebooks...) {
		c.waitState(id, api.StateRunning, 30*time.Second)
	}
	if r := c.cli("scontrol", "update", "nodename=gpu03", "state=drain", "reason=fan failure"); r.code != 0 {
		t.Fatalf("drain gpu03: %s%s", r.out, r.err)
	}
	b.pretrain = c.submit(sleep, "-J", "pretrain", "-A", "research", "--gpus-per-node=8", "-t", "1:00:00")
	b.held = c.submit(sleep, "-J", "on-hold", "-A", "research", "-H", "--gpus=1")
	b.after = c.submit(sleep, "-J", "after-train", "-A", "research", fmt.Sprintf("--dependency=afterok:%d", b.train), "--gpus=4")
	b.sweep = c.submit(sleep, "-J", "sweep", "-A", "vision", "--array=0-7", "--gpus=8", "-t", "20:00")
	c.eventually(20*time.Second, "the pending jobs have their reasons", func() bool {
		for _, id := range []uint64{b.pretrain, b.held, b.after} {
			if j := c.job(id); j.State != api.StatePending || j.Reason == "" || j.Reason == api.ReasonNone {
				return false
			}
		}
		return true
	})
	return b
}

// TestDashboardInBrowser is the dashboard's acceptance: see the top of
// the file.
func TestDashboardInBrowser(t *testing.T) {
	chrome := chromiumPath()
	if chrome == "" {
		t.Skip("no Chromium to drive (apt-get install chromium, or set TIDE_CHROMIUM): the dashboard's browser test needs one")
	}
	key := make([]byte, 32)
	rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "jwt_hs256.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	c := newClusterOpts(t, clusterOpts{nodes: 3, singleHost: true,
		switches: []string{`{name: s1, nodes: "gpu[01-02]"}`, `{name: s2, nodes: "gpu03"}`, `{name: spine, switches: "s[1-2]"}`},
		ctldYAML: fmt.Sprintf(`api_addr: %s
jwt: {key_file: %s, max_lifespan: 2h}
queues:
  - {name: research, guaranteed: "40%%"}
  - {name: vision, parent: research, guaranteed: "20%%"}
  - {name: prod, guaranteed: "20%%"}
submit: {rate_per_queue: 10000}
`, addr, keyFile)})
	jobs := busyCluster(t, c)
	r := c.cli("tide", "token", "--lifespan=1h")
	tok, ok := strings.CutPrefix(strings.TrimSpace(r.out), "TIDE_JWT=")
	if r.code != 0 || !ok {
		t.Fatalf("tide token: exit %d, %q %q", r.code, r.out, r.err)
	}
	shots := os.Getenv("TIDE_UI_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	origin := "https://" + addr
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		// Root cannot run Chromium's sandbox, and containers often
		// cannot either; the pages are the test's own.
		chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("ignore-certificate-errors-spki-list", apiSPKI(t, c, addr)),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc() // stops Chromium, by its pid
	bctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	if err := chromedp.Do(bctx); err != nil { // starts the browser, no timeout
		t.Fatalf("start %s: %v", chrome, err)
	}
	var blog browserLog
	if err := chromedp.Listen(bctx, blog.listen); err != nil {
		t.Fatal(err)
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	enable := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		if _, err := cdp.Call(ctx, tg, cdplog.Enable, cdp.Empty{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, runtime.Enable, cdp.Empty{})
		return err
	})
	step("enable network and log events", enable)
	text := func(sel string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	eval := func(js string) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](js))
		if err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
		return n
	}
	shoot := func(name string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		path := filepath.Join(shots, name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
	location := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 10*time.Second)
		defer cancel()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname + location.search`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	wants := func(page, got string, subs ...string) {
		t.Helper()
		for _, s := range subs {
			if !strings.Contains(got, s) {
				t.Errorf("%s: the page lacks %q; it reads:\n%s", page, s, got)
			}
		}
	}

	// Signing in: a page without the cookie goes to the login page; a
	// login link with the token in its fragment signs in and returns.
	step("open the queue without signing in", chromedp.Navigate(origin+"/ui/queue"), chromedp.WaitVisible(chromedp.CSS("#login")))
	if loc := location(); loc != "/ui/login?next=%2Fui%2Fqueue" {
		t.Errorf("without a cookie the queue went to %s, want the login page", loc)
	}
	shoot("login")
	step("sign in with a login link", chromedp.Navigate(origin+"/ui/login?next=%2Fui%2F#token="+url.QueryEscape(tok)),
		chromedp.WaitVisible(chromedp.CSS("section.switch")))
	if loc := location(); loc != "/ui/" {
		t.Errorf("after signing in the browser is at %s, want /ui/", loc)
	}

	// The cluster map.
	main := text("#main")
	wants("map", main, "Cluster", "s1", "spine › s1", "s2", "gpu01", "gpu02", "gpu03", "drng")
	for sel, atLeast := range map[string]int{
		".g.w":            12, // train 4, eval 2, serve 4, finetune 2
		".g.s":            1,  // the notebooks' slices
		".g.d":            6,  // gpu03's free GPUs, drained
		".g.f":            1,
		`.g[class*=" u"]`: 24, // every GPU of a responding node has a reading
		".node.drain":     1,
	} {
		if n := eval(fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)); n < atLeast {
			t.Errorf("map: %d cells %s, want at least %d", n, sel, atLeast)
		}
	}
	if n := eval(fmt.Sprintf(`document.querySelectorAll('a.g[href="/ui/jobs/%d"]').length`, jobs.train)); n != 4 {
		t.Errorf("map: %d GPU cells link to job %d, want its 4", n, jobs.train)
	}
	shoot("cluster-map")

	// The queue, its filters and the planned start.
	step("open the queue", chromedp.Navigate(origin+"/ui/queue"), chromedp.WaitVisible(chromedp.CSS("table.jobs")))
	main = text("#main")
	pre := c.job(jobs.pretrain)
	wants("queue", main, "train-llm", "RUNNING", "pretrain", "PENDING", string(pre.Reason), pre.ReasonDetail, "JobHeldUser", "Dependency",
		fmt.Sprintf("%d_[0-7]", jobs.sweep))
	if n := eval(`document.querySelectorAll('table.jobs tbody tr').length`); n < 11 {
		t.Errorf("queue: %d rows, want the 11 running and pending jobs", n)
	}
	shoot("queue")
	step("filter the queue", chromedp.Navigate(origin+"/ui/queue?queue=vision&state=running"), chromedp.WaitVisible(chromedp.CSS("table.jobs")))
	main = text("table.jobs")
	wants("queue of vision, running", main, "eval-suite", "notebook-0", "notebook-2")
	if strings.Contains(main, "train-llm") || strings.Contains(main, "pretrain") {
		t.Errorf("queue of vision, running, lists other jobs:\n%s", main)
	}
	step("finished jobs", chromedp.Navigate(origin+"/ui/queue?state=finished"), chromedp.WaitVisible(chromedp.CSS("table.jobs")))
	wants("finished jobs", text("table.jobs"), "COMPLETED", "FAILED", "CANCELLED", "quick-check", "broken-config", "abandoned")
	shoot("queue-finished")

	// Job pages: running (placement, trail, output, usage), pending
	// (reason and diagnosis), finished.
	step("a running job", chromedp.Navigate(fmt.Sprintf("%s/ui/jobs/%d", origin, jobs.train)), chromedp.WaitVisible(chromedp.CSS("table.events")))
	main = text("#main")
	wants("running job", main, fmt.Sprintf("Job %d", jobs.train), "train-llm", "RUNNING", "Placement", "gpu01", "Events", "submit", "start",
		"Standard output", filepath.Join(c.workDir(), fmt.Sprintf("slurm-%d.out", jobs.train)), "Usage")
	if n := eval(`document.querySelectorAll('table.gpus tbody tr').length`); n != 4 {
		t.Errorf("running job: %d GPUs in its usage, want 4", n)
	}
	shoot("job-running")
	step("a pending job", chromedp.Navigate(fmt.Sprintf("%s/ui/jobs/%d", origin, jobs.pretrain)), chromedp.WaitVisible(chromedp.CSS("h1")))
	wants("pending job", text("#main"), "pretrain", "PENDING", string(pre.Reason), pre.ReasonDetail, "Planned start", "The job has not started.")
	shoot("job-pending")
	step("a failed job", chromedp.Navigate(fmt.Sprintf("%s/ui/jobs/%d", origin, jobs.broken)), chromedp.WaitVisible(chromedp.CSS("h1")))
	wants("failed job", text("#main"), "broken-config", "FAILED", "3:0", "end")

	// Queues and the last 24 hours.
	step("queues", chromedp.Navigate(origin+"/ui/queues"), chromedp.WaitVisible(chromedp.CSS("table.queues")))
	wants("queues", text("#main"), "research", "vision", "prod", "GPU utilisation", "Fragmentation", "GPUs used per queue")
	if n := eval(`document.querySelectorAll('figure.chart svg').length`); n < 4 {
		t.Errorf("queues: %d charts drawn, want 4", n)
	}
	shoot("queues")

	// Updates without a reload: the queue page, marked, loses the held
	// job once it is cancelled, and keeps the mark.
	if d := os.Getenv("TIDE_UI_SETTLE"); d != "" {
		// For screenshots that show some history: wait, then shoot the
		// pages again (docs/operations.md, Dashboard).
		settle, err := time.ParseDuration(d)
		if err != nil {
			t.Fatalf("TIDE_UI_SETTLE=%q: %v", d, err)
		}
		time.Sleep(settle)
		for name, p := range map[string]string{"cluster-map": "/ui/", "queues": "/ui/queues",
			"job-running": fmt.Sprintf("/ui/jobs/%d", jobs.train)} {
			step("reload "+p, chromedp.Navigate(origin+p), chromedp.WaitVisible(chromedp.CSS("#main h1")))
			shoot(name)
		}
	}
	step("queue for the update", chromedp.Navigate(origin+"/ui/queue"), chromedp.WaitVisible(chromedp.CSS("table.jobs")))
	eval(`window.tideNoReload = 1; 1`)
	if r := c.cli("scancel", fmt.Sprint(jobs.held)); r.code != 0 {
		t.Fatalf("scancel %d: %s%s", jobs.held, r.out, r.err)
	}
	step("the queue drops the cancelled job by itself", chromedp.Poll[chromedp.Void](fmt.Sprintf(
		`window.tideNoReload === 1 && !document.querySelector('a[href="/ui/jobs/%d"]')`, jobs.held),
		chromedp.WithPollingTimeout(45*time.Second)))

	// Signing out: the cookie goes, and pages send the browser back to
	// the login page.
	step("sign out", chromedp.Click(chromedp.CSS(".logout button")), chromedp.WaitVisible(chromedp.CSS("#login")),
		chromedp.Navigate(origin+"/ui/queues"), chromedp.WaitVisible(chromedp.CSS("#login")))
	if loc := location(); loc != "/ui/login?next=%2Fui%2Fqueues" {
		t.Errorf("after signing out the queues page went to %s, want the login page", loc)
	}

	// What the browser asked for, and what it complained about.
	requests, errs := blog.snapshot()
	if len(errs) > 0 {
		t.Errorf("the browser reported %d errors:\n%s", len(errs), strings.Join(errs, "\n"))
	}
	var refreshes, static int
	for _, u := range requests {
		if !strings.HasPrefix(u, origin+"/") {
			t.Errorf("a request left the controller's origin %s: %s", origin, u)
		}
		if strings.Contains(u, "part=main") {
			refreshes++
		}
		if strings.HasPrefix(u, origin+"/ui/static/") {
			static++
		}
	}
	if refreshes == 0 || static < 2 || len(requests) < 15 {
		t.Errorf("the browser made %d requests, %d refreshes and %d of static files: too few to judge", len(requests), refreshes, static)
	}
}
