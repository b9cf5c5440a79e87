package ctld

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tide-hpc/tide/accounting"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	"github.com/tide-hpc/tide/ctld/state"
)

// Version is the controller's version string.
var Version = "0.1.0"

// Server is the controller. All cluster state lives behind mu; every
// change is written through to the store before anyone outside can act on
// it (a job id is returned only after its submission commits; a launch is
// delivered only after the RUNNING state commits).
type Server struct {
	cl    *Cluster
	log   *slog.Logger
	store Store
	// fair is the accounts' decayed GPU-time for the fair-share factor
	// (fairshare.go).
	fair fairUsage
	// submits commits submissions, several in one transaction when they
	// arrive together (groupcommit.go).
	submits groupCommit
	key     string
	self    uint32
	now     func() time.Time

	// mu guards the server's state; taking it merges the submissions
	// stored meanwhile (submitlane.go).
	mu   serverMu
	jobs map[uint64]*api.Job
	// live holds every job that has not ended, and some that have since:
	// addPending walks it instead of jobs, which keep finished jobs for
	// MinJobAge (thousands on a busy cluster), and drops the ended ones
	// as it goes. addLive puts a job in whenever it (re)enters PENDING.
	live       liveJobs
	nodes      map[string]*nodeRec
	partitions map[string]*api.Partition
	// nextID is the next job id; guarded by lane.mu.
	nextID uint64
	// dirty jobs and queued events/audit are written by flush; they stay
	// queued when a write fails and go out with the next one.
	dirty      map[uint64]bool
	events     []api.Event
	audit      []api.AuditRecord
	dirtyNodes map[string]bool
	lazy       map[uint64]bool
	lazyEvents []api.Event

	strings interner
	// spool holds recent submissions' scripts and environments until
	// their launch (spoolcache.go).
	spool *recentSpool
	// jobsVersion changes with every change listings show (markDirty,
	// a new job, a forgotten one); listCache keys on it.
	jobsVersion uint64
	listCache   listCache
	// capacities keeps each partition's nodes at full capacity for
	// submission checks (partCapacity); a registration bumps capVersion,
	// which retires them.
	capacities map[string]capacityList
	capVersion atomic.Uint64
	kick       chan struct{}
	users      *userCache
	metrics    *metrics
	startTime  time.Time
	lastPass   time.Duration
	// buffer holds submissions over their queue's rate (buffer.go).
	buffer submitBuffer
	// tokens are the submission tokens of the jobs in memory
	// (tokens.go); guarded by lane.mu.
	tokens map[tokenKey]*tokenEntry
	// lane takes submissions without mu (submitlane.go).
	lane submitLane
	// stepKey signs srun's step grants (stepkey.go).
	stepKey stepKeyEntry
	// schedule is the pure core (passMem's Schedule; tests may stand in
	// a plan of their own). passMem is the memory its passes reuse: the
	// plan of one pass is applied before the next starts, under mu.
	schedule func(*sched.Snapshot, time.Time, sched.Config) sched.Plan
	passMem  sched.Scratch
	// keyLog logs node requests without the cluster key, at most once
	// per peer per interval.
	keyLog *refusalLog
	// auth authenticates requests on api_addr (apiauth.go).
	auth authState
	// tls is the cluster CA and the controller's certificate when
	// node_addr and api_addr serve TLS (tls.go).
	tls tlsState
	// warned maps the running jobs whose steps got their --signal
	// warning to the incarnation that got it (signals.go).
	warned map[uint64]int
	// liveSteps holds the running steps of running jobs and what they
	// hold of their allocations (steplive.go); guarded by mu.
	liveSteps map[uint64]map[uint32]*liveStep
	// acct holds the steps' usage reports (stepacct.go); guarded by mu.
	acct usageAcct
	// series holds the jobs' usage series (jobseries.go); guarded by mu.
	series seriesState
	// reconf reloads the configuration (reconfigure.go).
	reconf reconfState
	// ledger is every node's resources and what jobs hold of them: the
	// one account the scheduler's snapshot reads and its plans are
	// applied to (ctld/state, shared with the simulator). Guarded by mu.
	ledger *state.Ledger
	// dash is the web dashboard's handler and history (dashboard.go).
	dash dashboard
	// ha is this controller's name and role among those sharing the
	// store (leader.go).
	ha haState
	// graceUntil holds the first pass after recovery until the nodes
	// are back (recovergrace.go); zero once passes may run.
	graceUntil time.Time
}

// refusalLogEvery is how often refused connections and keyless node
// requests of one peer are logged (the counters count every one).
const refusalLogEvery = 10 * time.Second

// New opens the store and recovers state, for a controller that runs
// alone (tests; tidectld itself runs RunHA). The caller must Close it.
func New(cl *Cluster, log *slog.Logger) (*Server, error) {
	key, err := prepareController(cl)
	if err != nil {
		return nil, err
	}
	st, err := openStore(cl)
	if err != nil {
		return nil, err
	}
	s, err := newServer(cl, log, st, key, time.Now)
	if err != nil {
		st.Close()
		return nil, err
	}
	return s, nil
}

func newServer(cl *Cluster, log *slog.Logger, st Store, key string, now func() time.Time) (*Server, error) {
	s, err := buildServer(cl, log, st, key, now)
	if err != nil {
		return nil, err
	}
	if err := s.recover(context.Background()); err != nil {
		return nil, err
	}
	return s, nil
}

// buildServer makes a Server without reading the store: a standby's
// (leader.go), or one that recovers next.
func buildServer(cl *Cluster, log *slog.Logger, st Store, key string, now func() time.Time) (*Server, error) {
	s := &Server{
		cl: cl, log: log, store: st, key: key, self: uint32(os.Getuid()), now: now,
		jobs: map[uint64]*api.Job{}, live: newLiveJobs(), spool: newRecentSpool(recentSpoolBytes), nodes: map[string]*nodeRec{}, partitions: map[string]*api.Partition{},
		dirty: map[uint64]bool{}, dirtyNodes: map[string]bool{}, lazy: map[uint64]bool{}, capacities: map[string]capacityList{},
		tokens: map[tokenKey]*tokenEntry{}, kick: make(chan struct{}, 1), users: newUserCache(), startTime: now(),
	}
	s.schedule = s.passMem.Schedule
	s.listCache.now = now
	s.submits.write = s.storeWrite
	s.setupLane()
	s.keyLog = newRefusalLog(log, refusalLogEvery, "refused node request without a valid cluster key")
	for i := range cl.Partitions {
		p := cl.Partitions[i]
		s.partitions[p.Name] = &p
	}
	s.ledger = state.New(ledgerLimits(cl))
	for _, name := range cl.NodeOrder {
		s.nodes[name] = newNodeRec(name, cl, s.ledger)
	}
	s.metrics = newMetrics(s)
	if err := s.setupAuth(); err != nil {
		return nil, err
	}
	if err := s.setupTLS(); err != nil {
		return nil, err
	}
	if s.tls.on {
		s.keyLog = newRefusalLog(log, refusalLogEvery, "refused node request without a node certificate")
	}
	return s, nil
}

// readKey loads the cluster key and refuses a key file others can read.
func readKey(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("cluster key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("cluster key %s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cluster key: %w", err)
	}
	k := strings.TrimSpace(string(b))
	if len(k) < 16 {
		return "", fmt.Errorf("cluster key %s is too short (at least 16 characters)", path)
	}
	return k, nil
}

// recover loads jobs and operator node state from the store and rebuilds
// node allocations from the running jobs.
func (s *Server) recover(ctx context.Context) error {
	last, err := s.store.LastJobID(ctx)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	s.nextID = max(last+1, s.cl.FirstJobID)
	jobs, err := s.store.LoadJobs(ctx, s.now().Add(-s.cl.Timeouts.MinJobAge))
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	running := 0
	for _, j := range jobs {
		s.strings.job(j)
		s.jobs[j.ID] = j
		s.addLive(j)
		s.rememberToken(j)
		if j.State.Active() {
			running++
			for _, a := range j.Alloc {
				if suspendedRelease(j) {
					break // a suspended job gave its resources back
				}
				if n := s.nodes[a.Node]; n != nil {
					n.allocate(a)
				}
			}
			if n := s.nodes[j.BatchHost()]; n != nil {
				n.batch[j.ID] = j
			}
		}
	}
	saved, err := s.store.LoadNodes(ctx)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	for _, sn := range saved {
		if n := s.nodes[sn.Name]; n != nil {
			n.Drain, n.Reason, n.ReasonUser, n.ReasonTime = sn.Drain, sn.Reason, sn.ReasonUser, sn.ReasonTime
			n.adminDown = sn.State == api.NodeDown
		}
	}
	s.recoverBuffer()
	s.recoverSignalWarnings(ctx)
	if len(jobs) > 0 {
		s.armRecoveryGrace(s.now())
	}
	s.log.Info("state recovered", "jobs", len(jobs), "active", running, "next_job_id", s.nextID)
	return nil
}

// Close closes the store.
func (s *Server) Close() error { return s.store.Close() }

// Run serves the API and runs the scheduling and housekeeping loops until
// ctx ends.
func (s *Server) Run(ctx context.Context) error { return s.serve(ctx, false) }

// serve listens on every configured address until ctx ends: as the
// primary (the API, the loops), or as a standby that answers pings and
// turns everything else away (leader.go).
func (s *Server) serve(ctx context.Context, standby bool) error {
	nofile, err := raiseNoFile()
	if err != nil {
		s.log.Warn("file descriptor limit", "err", err)
	}
	ul, err := listenUnix(s.cl.Socket)
	if err != nil {
		return err
	}
	listeners := []net.Listener{ul}
	closeAll := func() {
		for _, l := range listeners {
			l.Close()
		}
	}
	tl, err := net.Listen("tcp", s.cl.NodeAddr)
	if err != nil {
		closeAll()
		return fmt.Errorf("listen %s: %w", s.cl.NodeAddr, err)
	}
	listeners = append(listeners, tl)
	var ml net.Listener
	if s.cl.MetricsAddr != "" {
		if ml, err = net.Listen("tcp", s.cl.MetricsAddr); err != nil {
			closeAll()
			return fmt.Errorf("listen %s (metrics_addr): %w", s.cl.MetricsAddr, err)
		}
		listeners = append(listeners, ml)
	}
	var al net.Listener
	if s.cl.APIAddr != "" {
		if al, err = net.Listen("tcp", s.cl.APIAddr); err != nil {
			closeAll()
			return fmt.Errorf("listen %s (api_addr): %w", s.cl.APIAddr, err)
		}
		listeners = append(listeners, al)
	}

	sockLim, nodeLim, metricsLim := s.connLimits()
	// api_addr's connections start unauthenticated as node_addr's do,
	// and are promoted by their first authenticated request.
	apiLim := nodeLim
	lims := []*connLimits{&sockLim, &nodeLim}
	if ml != nil {
		lims = append(lims, &metricsLim)
	}
	if al != nil {
		lims = append(lims, &apiLim)
	}
	if fitConnLimits(lims, nofile) {
		s.log.Warn("connection limits lowered to fit the file descriptor limit (raise the hard RLIMIT_NOFILE, LimitNOFILE= under systemd)",
			"nofile", nofile, "socket", sockLim.total, "node_addr", nodeLim.total, "metrics_addr", metricsLim.total, "api_addr", apiLim.total)
	}
	rlog := newRefusalLog(s.log, refusalLogEvery, "refused connections")
	sock := newLimitListener(ul, "socket", sockLim, s.metrics, rlog)
	sock.identify, sock.privileged, sock.answer = uidPeer, s.privilegedPeer, true
	node := newLimitListener(tl, "node", nodeLim, s.metrics, rlog)
	gauged := []*limitListener{sock, node}
	// TLS goes over the limits: a connection is counted (and may be
	// evicted) from its accept, before its handshake.
	nodeTLS, apiTLS := s.tlsConfigs()
	if nodeTLS != nil {
		node.proof = "a node certificate"
	}

	handler := func(primary func() http.Handler) http.Handler {
		if standby {
			return s.standbyHandler()
		}
		return s.withPing(primary())
	}
	local := s.httpServer(handler(s.localHandler), sock)
	remote := s.httpServer(handler(s.nodeHandler), node)
	servers := []*http.Server{local, remote}
	serving := []net.Listener{sock, withTLS(node, nodeTLS)}
	if ml != nil {
		mlim := newLimitListener(ml, "metrics", metricsLim, s.metrics, rlog)
		gauged = append(gauged, mlim)
		servers = append(servers, s.httpServer(handler(s.metricsHandler), mlim))
		serving = append(serving, mlim)
	}
	if al != nil {
		alim := newLimitListener(al, "api", apiLim, s.metrics, rlog)
		alim.proof = "credentials"
		gauged = append(gauged, alim)
		servers = append(servers, s.httpServer(handler(s.apiHandler), alim))
		serving = append(serving, withTLS(alim, apiTLS))
	}
	s.metrics.conns.set(gauged...)
	role := api.RolePrimary
	if standby {
		role = api.RoleStandby
	}
	s.log.Info("tidectld serving", "role", role, "controller", s.ha.name, "epoch", s.ha.epoch, "socket", s.cl.Socket, "node_addr", tl.Addr().String(), "metrics_addr", s.cl.MetricsAddr,
		"api_addr", addrOf(al), "jwt", s.auth.jwtKey != nil, "tls", s.tls.on,
		"cluster", s.cl.ClusterName, "nofile", nofile, "max_connections", sockLim.total)
	if s.tls.on {
		s.log.Info("TLS on node_addr and api_addr: nodes authenticate with certificates of the cluster CA",
			"ca", filepath.Join(s.tls.dir, "ca.crt"), "ca_sha256", s.tls.ca.Fingerprint(), "hosts", s.tls.hosts)
	} else {
		s.log.Warn("no TLS: node_addr (and api_addr) serve plain HTTP, and nodes send the cluster key in clear; run tidectld ca init and restart (tls.mode)",
			"tls_mode", s.cl.TLS.Mode)
	}

	var wg sync.WaitGroup
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(serving[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	if !standby {
		wg.Add(1)
		go func() { defer wg.Done(); s.loop(ctx) }()
		wg.Add(1)
		go func() { defer wg.Done(); s.recordHistory(ctx) }()
	}
	renewCtx, stopRenew := context.WithCancel(ctx)
	defer stopRenew()
	if s.tls.on {
		wg.Add(1)
		go func() { defer wg.Done(); s.renewServerCert(renewCtx) }()
	}
	if !standby {
		s.Kick()
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s.wakeAllNodes()
	for _, srv := range servers {
		_ = srv.Shutdown(sctx)
	}
	stopRenew()
	wg.Wait()
	removeIfSame(s.cl.Socket, ul.(*sockListener).fi)
	if !standby {
		s.mu.Lock()
		s.flushAll()
		s.mu.Unlock()
	}
	return runErr
}

// addrOf is l's address, "" for none.
func addrOf(l net.Listener) string {
	if l == nil {
		return ""
	}
	return l.Addr().String()
}

// connLimits turns limits.* into the socket's, node_addr's and
// metrics_addr's caps. The socket knows its peers at accept; the TCP
// listeners start every connection unauthenticated, and metrics_addr
// has nothing else (nothing there shows the key).
func (s *Server) connLimits() (sock, node, metrics connLimits) {
	l := s.cl.Limits
	sock = connLimits{total: l.Connections, perPeer: l.ConnectionsPerPeer, reserve: l.OperatorReserve}
	node = connLimits{total: l.Connections, perPeer: l.ConnectionsPerPeer,
		unauth: l.Unauthenticated, unauthPerPeer: l.UnauthenticatedPerPeer, unauthIdle: l.UnauthenticatedTimeout}
	metrics = node
	metrics.total = l.Unauthenticated
	return sock, node, metrics
}

// httpServer serves h on l with limits.*'s timeouts (see reqlimits.go
// for why there is no ReadTimeout or WriteTimeout).
func (s *Server) httpServer(h http.Handler, l *limitListener) *http.Server {
	lim := s.cl.Limits
	return &http.Server{
		Handler:           s.requestLimits(s.gated(h)),
		ConnContext:       connContext,
		ConnState:         l.connState,
		ReadHeaderTimeout: lim.HeaderTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelInfo),
	}
}

// maxHeaderBytes bounds a request's headers (net/http's default is
// 1 MiB; Tide's requests carry a few hundred bytes, and a listing's
// query string a few kilobytes).
const maxHeaderBytes = 64 << 10

func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("socket dir: %w", err)
	}
	// A socket left by a crashed controller is removed; a live one is
	// not stolen.
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("another tidectld is serving %s", path)
	}
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	// The path is removed by us, and only while it is still our socket:
	// a restarted controller may already have put its own there.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	// Every local user may connect; identity comes from SO_PEERCRED.
	if err := os.Chmod(path, 0o666); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("stat socket: %w", err)
	}
	return &sockListener{Listener: l, fi: fi}, nil
}

// sockListener remembers which socket file it created.
type sockListener struct {
	net.Listener
	fi os.FileInfo
}

// removeIfSame removes path if it is still the file fi.
func removeIfSame(path string, fi os.FileInfo) {
	if cur, err := os.Stat(path); err == nil && os.SameFile(cur, fi) {
		_ = os.Remove(path)
	}
}

// Kick asks for a scheduling pass soon.
func (s *Server) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// passThrottle spaces kicked passes (scheduler.min_interval). The kick
// channel alone coalesced the kicks that came during a pass into one
// more pass, but under a submission storm that meant passes back to
// back, each reading every node and pending job under the lock: at
// 2,000 nodes half the controller's CPU, and submissions queued behind
// them. A kick after a quiet spell still runs its pass at once.
type passThrottle struct {
	minGap  time.Duration
	lastEnd time.Time     // when the last pass ended
	lastDur time.Duration // how long it took
}

// passGapFactor is how many times its own length the gap after a kicked
// pass lasts at least: passes kicked in a row take at most a quarter of
// the time. Half (a gap of one pass) left a storm of submissions at
// 2,000 nodes with a third of the controller's CPU in passes that
// started nothing (the cluster full) and gave the new jobs their first
// reason; the submissions are CPU-bound on a 2-core machine, and a
// quarter cut the controller's CPU per submitted job by about a tenth
// (docs/performance.md). It delays nothing on a small cluster, whose
// passes take well under min_interval/3.
const passGapFactor = 3

// wait is how long a pass kicked at now waits: until minGap after the
// last pass ended, and at least passGapFactor times as long as that
// pass took; none if that time is past or minGap is 0.
func (t *passThrottle) wait(now time.Time) time.Duration {
	if t.minGap <= 0 || t.lastEnd.IsZero() {
		return 0
	}
	return max(0, t.lastEnd.Add(max(t.minGap, passGapFactor*t.lastDur)).Sub(now))
}

// ran records a pass from start to end.
func (t *passThrottle) ran(start, end time.Time) {
	t.lastEnd, t.lastDur = end, end.Sub(start)
}

// loop runs scheduling passes on kicks and on a timer, and housekeeping.
// Kicks that come too soon after a pass (passThrottle) arm one timer,
// whose pass serves all of them.
func (s *Server) loop(ctx context.Context) {
	s.mu.Lock()
	interval, spoolKeep := s.loopSettings()
	throttle := passThrottle{minGap: s.cl.Scheduler.MinInterval}
	s.mu.Unlock()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	house := time.NewTicker(time.Second)
	defer house.Stop()
	delayed := time.NewTimer(time.Hour)
	delayed.Stop()
	defer delayed.Stop()
	armed := false // a delayed pass is due
	pass := func() {
		if armed {
			// This pass serves the kicks the delayed one was for.
			delayed.Stop()
			armed = false
		}
		s.mu.Lock()
		held := s.passHeld(s.now())
		s.mu.Unlock()
		if held > 0 {
			// Recovered, nodes not back yet (recovergrace.go): the last
			// registration's kick runs the pass, else this timer does
			// (not armed, so that kicks still come through).
			delayed.Reset(held)
			return
		}
		t0 := time.Now()
		s.schedulePass()
		throttle.ran(t0, time.Now())
	}
	lastPurge := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
			if armed {
				continue
			}
			if d := throttle.wait(time.Now()); d > 0 {
				delayed.Reset(d)
				armed = true
				continue
			}
			pass()
		case <-delayed.C:
			armed = false
			pass()
		case <-tick.C:
			pass()
		case <-house.C:
			now := s.now()
			s.mu.Lock()
			s.checkNodes(now)
			s.checkPreemptions(now)
			s.sampleJobUsage(now) // jobseries.go
			if s.releaseBuffered(now) {
				s.Kick()
			}
			s.forgetOldJobs(now)
			s.flushAll()
			iv := interval
			if interval, spoolKeep = s.loopSettings(); iv != interval {
				tick.Reset(interval) // a reload changed it
			}
			throttle.minGap = s.cl.Scheduler.MinInterval
			s.mu.Unlock()
			returnIdleMemory()
			if now.Sub(lastPurge) > time.Hour {
				lastPurge = now
				if n, err := s.store.PurgeSpool(ctx, now.Add(-spoolKeep)); err != nil {
					s.log.Warn("purge spool", "err", err)
				} else if n > 0 {
					s.log.Info("purged spool", "jobs", n)
				}
			}
		}
	}
}

// forgetOldJobs drops finished jobs older than MinJobAge from memory; the
// store keeps them for sacct.
func (s *Server) forgetOldJobs(now time.Time) {
	cut := now.Add(-s.cl.Timeouts.MinJobAge)
	for id, j := range s.jobs {
		if j.State.Terminal() && j.EndTime.Before(cut) && !s.dirty[id] && !s.lazy[id] {
			s.forgetToken(j)
			delete(s.jobs, id)
			s.jobsVersion++
		}
	}
}

// flush writes dirty jobs, queued events, audit records and node state in
// one transaction. Called with mu held.
func (s *Server) flush() bool {
	if len(s.dirty) == 0 && len(s.events) == 0 && len(s.audit) == 0 && len(s.dirtyNodes) == 0 && len(s.acct.queue) == 0 {
		return true
	}
	b := s.pendingBatch()
	if err := s.storeWrite(context.Background(), b); err != nil {
		s.log.Error("write state", "err", err, "jobs", len(b.Jobs), "events", len(b.Events))
		return false
	}
	s.stored()
	return true
}

// pendingBatch gathers everything queued for the store: dirty and lazy
// jobs, trail events, audit records and node state. Called with mu held.
func (s *Server) pendingBatch() *accounting.Batch {
	b := &accounting.Batch{Events: append(slices.Clip(s.lazyEvents), s.events...), Audit: slices.Clip(s.audit)}
	ids := make([]uint64, 0, len(s.dirty)+len(s.lazy))
	for id := range s.dirty {
		ids = append(ids, id)
	}
	for id := range s.lazy {
		if !s.dirty[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		if j := s.jobs[id]; j != nil {
			b.Jobs = append(b.Jobs, j)
		}
	}
	for name := range s.dirtyNodes {
		if n := s.nodes[name]; n != nil {
			b.Nodes = append(b.Nodes, n.saved())
		}
	}
	b.Usage = slices.Clip(s.acct.queue) // stepacct.go
	return b
}

// stored forgets the queue after a pendingBatch was written.
func (s *Server) stored() {
	clear(s.dirty)
	clear(s.dirtyNodes)
	clear(s.lazy)
	s.events = s.events[:0]
	s.lazyEvents = s.lazyEvents[:0]
	s.audit = s.audit[:0]
	s.acct.queue = s.acct.queue[:0]
}

// flushAll writes also what waits in the lazy set (see markLazy).
func (s *Server) flushAll() bool {
	if len(s.lazy) > 0 || len(s.lazyEvents) > 0 {
		for id := range s.lazy {
			s.dirty[id] = true
		}
		s.events = append(s.lazyEvents, s.events...)
		s.lazyEvents = nil
		clear(s.lazy)
	}
	return s.flush()
}

// markLazy records a change that nobody acts on before it is stored (a
// node's first report of a launched job): it rides along with the next
// write, or the housekeeping tick writes it within a second. Losing it
// in a crash only repeats a launch the node then ignores. It spares one
// SQLite commit per job.
func (s *Server) markLazy(j *api.Job, ev api.Event) {
	s.lazy[j.ID] = true
	s.lazyEvents = append(s.lazyEvents, ev)
}

// event queues a trail entry for job j.
func (s *Server) event(j *api.Job, kind, reason, msg, actor string) {
	s.events = append(s.events, api.Event{JobID: j.ID, Time: s.now(), Kind: kind, State: j.State,
		Reason: reason, Message: msg, Actor: actor})
}

// auditf queues an audit record; a remote caller's record says how it
// authenticated and from where (caller.authDetail).
func (s *Server) auditf(c caller, action, target, format string, args ...any) {
	s.audit = append(s.audit, api.AuditRecord{Time: s.now(), UID: c.uid, User: c.user,
		Action: action, Target: target, Detail: withAuthDetail(fmt.Sprintf(format, args...), c)})
}

// withAuthDetail appends c.authDetail() to an audit detail.
func withAuthDetail(detail string, c caller) string {
	d := c.authDetail()
	if d == "" || detail == "" {
		return detail + d
	}
	return detail + " " + d
}

func (s *Server) markDirty(j *api.Job) {
	s.dirty[j.ID] = true
	s.jobsVersion++
}

// storeWrite commits b, counting the commit.
func (s *Server) storeWrite(ctx context.Context, b *accounting.Batch) error {
	if err := s.store.Write(ctx, b); err != nil {
		if errFenced(err) && s.ha.fenced != nil {
			s.ha.fenced()
		}
		return err
	}
	if !b.Empty() {
		s.metrics.committed()
	}
	return nil
}
