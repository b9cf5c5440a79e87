package ctld

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/ui"
	"github.com/tide-hpc/tide/gres"
)

// The web dashboard (issue 25, ctld/ui) in the controller: the data
// it reads, through the same functions and privacy rules as the API
// (dashSource), the history it draws (sampled here), and how a browser
// authenticates on api_addr (uiGate). On the unix socket the dashboard
// is a route like any other, and the caller is the socket peer.

// dashboard is the controller's part of the web dashboard.
type dashboard struct {
	once    sync.Once
	handler *ui.Handler
	hist    history
}

// dashboardHandler is the dashboard's handler, made once.
func (s *Server) dashboardHandler() http.Handler {
	s.dash.once.Do(func() { s.dash.handler = ui.New(dashSource{s}) })
	return s.dash.handler
}

// uiGate lets a browser read the dashboard on api_addr, where every
// request must authenticate (apiHandler). A browser cannot add an
// Authorization header to a page load, so the login page puts the
// user's token (from `tide token`) in a cookie, and uiGate turns that
// cookie back into the header the API checks, for page reads (GET and
// HEAD under /ui/) only: the cookie can never submit, cancel or change
// anything, whatever page makes the browser send it. The login page
// and the static files are answered without a credential (they hold
// no cluster data); any other page without one sends the browser to
// the login page.
func (s *Server) uiGate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ui.Under(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		if ui.Public(r) {
			s.dashboardHandler().ServeHTTP(w, r)
			return
		}
		if len(r.Header.Values("Authorization")) == 0 {
			c, err := r.Cookie(ui.CookieName)
			if err != nil || r.Method != http.MethodGet && r.Method != http.MethodHead {
				ui.ToLogin(w, r, "")
				return
			}
			if _, err := s.jwtIdentity(c.Value, remoteIP(r)); err != nil {
				var ae *authError
				if errors.As(err, &ae) {
					s.auth.log.note(time.Now(), "api", remoteIP(r), ae.reason, err.Error()+" (dashboard cookie, "+r.Method+" "+r.URL.Path+")")
				}
				ui.ToLogin(w, r, err.Error())
				return
			}
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+c.Value)
		}
		next.ServeHTTP(w, r)
	})
}

// socketBrowserGuard refuses a web browser's requests to the API on
// the unix socket (everything but the dashboard's /ui/ pages). A
// browser reaches the socket only through a tunnel (the dashboard's
// `ssh -L 8080:/run/tide/tidectld.sock`), and every web page it opens
// can then send requests to that port: a form or fetch() POST of a
// text/plain body (no CORS preflight) that submits or cancels jobs as
// the SSH user, or, under a name of its own rebound to 127.0.0.1, reads
// jobs and mints tokens. The CLI, curl and programs send none of the
// headers browsers add to every request (Sec-Fetch-Site) or to every
// POST (Origin); the dashboard's pages need no API call. Callers on
// api_addr are not concerned: a browser there holds no credential the
// API takes (uiGate).
func socketBrowserGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, socket := r.Context().Value(credKey{}).(syscall.Ucred); socket && !ui.Under(r.URL.Path) {
			if h := browserHeader(r); h != "" {
				writeErr(w, api.Errorf(api.ErrPermissionDenied,
					"%s %s: the API on the local socket does not answer web browsers (this request carries %s): "+
						"a page could use a tunnel to the socket as you; the dashboard is under /ui/", r.Method, r.URL.Path, h))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// browserHeader names a header that only a browser's request carries,
// or "".
func browserHeader(r *http.Request) string {
	for _, h := range []string{"Origin", "Sec-Fetch-Site", "Sec-Fetch-Mode"} {
		if len(r.Header.Values(h)) > 0 {
			return h
		}
	}
	return ""
}

// dashSource is the dashboard's ui.Source: every method reads what the
// API would answer the request's caller.
type dashSource struct{ s *Server }

var _ ui.Source = dashSource{}

func (d dashSource) Identity(r *http.Request) ui.Identity {
	c := d.s.callerOf(r)
	return ui.Identity{User: c.user, Operator: c.admin, Known: c.known, Method: c.auth.String()}
}

func (d dashSource) Cluster(*http.Request) ui.Cluster {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	cl := ui.Cluster{Name: s.cl.ClusterName, Version: Version, Now: s.now(), Started: s.startTime,
		Scheduler: schedulerType(s.cl.Policy), Tree: s.cl.Tree}
	for _, p := range s.cl.Partitions {
		cl.Partitions = append(cl.Partitions, p.Name)
	}
	return cl
}

func (d dashSource) Nodes(r *http.Request) (api.NodeList, error) {
	if err := d.s.checkNodeList(d.s.callerOf(r)); err != nil {
		return api.NodeList{}, err
	}
	return d.s.nodeList(), nil
}

func (d dashSource) Jobs(r *http.Request, f api.JobFilter) api.JobList {
	return d.s.listJobs(f, d.s.jobView(d.s.callerOf(r)))
}

// Running is listJobs' view of the active jobs with only what the map
// draws: on a cluster of thousands of running jobs a copy of each
// whole record, under the lock every sync waits for, cost more than
// drawing the map.
func (d dashSource) Running(r *http.Request) []ui.RunningJob {
	s := d.s
	v := s.jobView(s.callerOf(r))
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ui.RunningJob
	for _, j := range s.jobs {
		if j.State.Active() && v.sees(j) {
			out = append(out, ui.RunningJob{ID: j.ID, Label: j.ArrayID(), User: j.User, Alloc: slices.Clone(j.Alloc)})
		}
	}
	return out
}

func (d dashSource) Job(r *http.Request, id uint64) (api.Job, error) {
	j, err := d.s.getJob(r.Context(), d.s.callerOf(r), id)
	// The page shows neither script nor environment.
	j.Script, j.Environment = "", nil
	return j, err
}

// Events is handleEvents' answer.
func (d dashSource) Events(r *http.Request, id uint64) ([]api.Event, error) {
	s := d.s
	if err := s.checkTrail(r.Context(), s.callerOf(r), id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.flushAll() // the trail shows everything decided so far
	s.mu.Unlock()
	return s.store.Events(r.Context(), id)
}

func (d dashSource) Queues(r *http.Request) api.QueueList {
	return d.s.visibleQueues(d.s.callerOf(r), d.s.queueList())
}

// Usage is what job j uses: its GPUs as their nodes last reported
// them, its steps' usage as sstat (running) or sacct (finished) would
// show it to the caller, and its usage series (jobSeries).
func (d dashSource) Usage(r *http.Request, j *api.Job) ui.JobUsage {
	s := d.s
	c := s.callerOf(r)
	if !s.usageVisible(c, j.UserID) { // as GET /api/v1/jobs/{id}/usage and sstat
		return ui.JobUsage{Hidden: "The usage of other users' jobs is for operators on this cluster (private_data)."}
	}
	var u ui.JobUsage
	if j.State.Active() {
		s.mu.Lock()
		for _, a := range j.Alloc {
			n := s.nodes[a.Node]
			if n == nil {
				continue
			}
			for _, g := range a.GPUs {
				u.GPUs = append(u.GPUs, gpuReading(n, g, a))
			}
		}
		s.mu.Unlock()
		u.Steps = s.listLiveUsage([]uint64{j.ID})
	} else if j.State.Terminal() {
		u.Steps, _ = s.listUsage(r.Context(), []uint64{j.ID})
	}
	u.Series = s.dashSeries(j)
	return u
}

// gpuReading is GPU index g of node n as the node last reported it,
// with job allocation a's slice of it. Called with mu held.
func gpuReading(n *nodeRec, g int, a api.NodeAlloc) ui.GPUReading {
	rd := ui.GPUReading{Node: n.Name, Index: g, Healthy: true, Slice: a.Sliced(), SliceMemMB: a.GPUMemMB, SlicePct: a.GPUComputePct}
	for i := range n.GPUs {
		if d := &n.GPUs[i]; d.Index == g {
			rd.Model, rd.MemoryMB = d.ModelShort(), d.MemoryMB
			rd.Healthy = d.Health != gres.Unhealthy
		}
	}
	if n.Responding {
		for _, st := range n.GPUStatus {
			if st.Index == g {
				rd.Known, rd.UtilPct, rd.MemUsedMB = true, st.UtilPct, st.MemUsedMB
				rd.Healthy = rd.Healthy && st.Health != gres.Unhealthy
			}
		}
	}
	return rd
}

// dashSeries is job j's usage over time for the job page's charts:
// the points of the series the controller samples (jobseries.go) of
// the job's latest incarnation, nil when it keeps none. A value the
// samples behind a point did not read is negative (unknown).
func (s *Server) dashSeries(j *api.Job) []ui.UsagePoint {
	ser, ok := s.JobUsageSeries(j.ID)
	if !ok || ser.Restart != j.Restarts {
		return nil
	}
	out := make([]ui.UsagePoint, 0, len(ser.Points))
	for _, p := range ser.Points {
		up := ui.UsagePoint{Time: p.Time, GPUUtilPct: -1, GPUMemMB: -1, CPUPct: -1, RSSMB: -1}
		if p.GPUSamples > 0 {
			up.GPUUtilPct, up.GPUMemMB = p.GPUUtil, float64(p.GPUMem)/mib
		}
		if p.CPUSamples > 0 {
			up.CPUPct = p.CPUs * 100
		}
		if p.CPUSamples > 0 || p.RSS > 0 {
			up.RSSMB = float64(p.RSS) / mib
		}
		out = append(out, up)
	}
	return out
}

// History is the sampled history: all of it for operators, and without
// the cluster-wide figures under private_data: nodes (they are node
// information) and with only the caller's queues under private_data:
// usage, as the queue listing shows them.
func (d dashSource) History(r *http.Request) ui.History {
	s := d.s
	c := s.callerOf(r)
	// The ring's samples, and the cluster now as the last point: a
	// controller that started a minute ago draws more than one dot.
	h := ui.History{Every: s.dash.hist.every(), Samples: append(s.dash.hist.samples(), s.historySample())}
	if err := s.checkNodeList(c); err != nil {
		h.ClusterHidden = "Cluster-wide figures are node information, for operators on this cluster (private_data: nodes)."
		for i := range h.Samples {
			sm := &h.Samples[i]
			sm.GPUs, sm.Allocated, sm.Stranded, sm.UtilPct, sm.Running, sm.Pending = 0, 0, 0, -1, 0, 0
		}
	}
	if s.cl.Private.Usage && !c.admin {
		keep := map[string]bool{}
		for _, q := range s.visibleQueues(c, s.queueList()).Queues {
			keep[q.Name] = true
		}
		for i := range h.Samples {
			sm := &h.Samples[i]
			sm.Queues = slices.DeleteFunc(sm.Queues, func(q ui.QueueSample) bool { return !keep[q.Name] })
		}
	}
	return h
}

// CheckToken verifies a token as api_addr does for a Bearer header.
func (d dashSource) CheckToken(token string) (string, time.Time, error) {
	id, err := d.s.jwtIdentity(token, "")
	if err != nil {
		return "", time.Time{}, err
	}
	return id.user, id.expires, nil
}

// Dashboard history: a sample of the cluster every historyEvery, a
// day of them in a ring (2,880 samples of a few dozen bytes plus the
// queues'), for the queues page's charts. It lives in memory only: a
// restarted controller starts a new day.

// historyEvery is how often the controller samples the cluster.
const historyEvery = 30 * time.Second

// history is the ring of samples; its own lock, so that drawing it
// never waits for the controller's.
type history struct {
	mu   sync.Mutex
	ring []ui.Sample
	next int
	full bool
	// period is the interval the ring was made for.
	period time.Duration
}

// historySize is how many samples a day holds.
func historySize(every time.Duration) int { return int(ui.HistorySpan / every) }

func (h *history) add(sm ui.Sample, every time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.period != every || h.ring == nil {
		h.ring, h.next, h.full, h.period = make([]ui.Sample, historySize(every)), 0, false, every
	}
	h.ring[h.next] = sm
	h.next++
	if h.next == len(h.ring) {
		h.next, h.full = 0, true
	}
}

// samples copies the ring, oldest first.
func (h *history) samples() []ui.Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []ui.Sample
	if h.full {
		out = append(out, h.ring[h.next:]...)
	}
	out = append(out, h.ring[:h.next]...)
	for i := range out {
		out[i].Queues = slices.Clone(out[i].Queues)
	}
	return out
}

// every is the sampling interval (historyEvery before the first
// sample).
func (h *history) every() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.period > 0 {
		return h.period
	}
	return historyEvery
}

// recordHistory samples the cluster now and every historyEvery until
// ctx ends.
func (s *Server) recordHistory(ctx context.Context) {
	tick := time.NewTicker(historyEvery)
	defer tick.Stop()
	for {
		s.dash.hist.add(s.historySample(), historyEvery)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// historySample is the cluster now: GPUs, allocation, measured
// utilisation, fragmentation (as tide_gpus_stranded), job counts, and
// each queue's use.
func (s *Server) historySample() ui.Sample {
	s.mu.Lock()
	sm := ui.Sample{Time: s.now(), UtilPct: -1}
	util, reporting := 0, 0
	for _, n := range s.nodes {
		if !n.registered {
			continue
		}
		sm.GPUs += len(n.GPUs)
		sm.Allocated += n.GPUsInUse()
		if n.Responding {
			for _, st := range n.GPUStatus {
				util += st.UtilPct
				reporting++
			}
		}
	}
	if reporting > 0 {
		sm.UtilPct = float64(util) / float64(reporting)
	}
	sm.Stranded = s.strandedGPUs()
	for _, j := range s.jobs {
		switch {
		case j.State == api.StatePending:
			sm.Pending += jobCount(j)
		case j.State.Active():
			sm.Running++
		}
	}
	s.mu.Unlock()
	for _, q := range s.queueList().Queues {
		sm.Queues = append(sm.Queues, ui.QueueSample{Name: q.Name, Used: q.UsedGPUs, Borrowed: q.BorrowedGPUs, Pending: q.Pending})
	}
	return sm
}
