package ctld

import (
	"bufio"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/api/listing"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/ctld/sched"
)

// localHandler serves local clients on the unix socket.
func (s *Server) localHandler() http.Handler {
	mux := newLimitedMux()
	post := mux.post
	post("/api/v1/jobs", s.submitBodyLimit(), "Batch job submission failed", s.handleSubmit)
	mux.HandleFunc("GET /api/v1/jobs", s.handleList)
	mux.HandleFunc("GET /api/v1/jobs/{id}", s.handleJob)
	mux.HandleFunc("GET /api/v1/jobs/{id}/events", s.handleEvents)
	// Usage series (jobseries.go).
	mux.HandleFunc("GET /api/v1/jobs/{id}/usage", s.handleJobUsage)
	mux.HandleFunc("GET /api/v1/jobs/usage", s.handleJobUsages)
	mux.HandleFunc("GET "+api.PathPriority, s.handlePriority) // priority.go
	post("/api/v1/jobs/cancel", smallBody, "Job cancellation failed", s.handleCancel)
	post("/api/v1/jobs/update", smallBody, "Job update failed", s.handleUpdate)
	mux.HandleFunc("GET /api/v1/accounting/jobs", s.handleAccounting)
	mux.HandleFunc("GET /api/v1/audit", s.handleAudit)
	mux.HandleFunc("GET /api/v1/nodes", s.handleNodes)
	post("/api/v1/nodes/update", smallBody, "Node update failed", s.handleNodeUpdate)
	mux.HandleFunc("GET /api/v1/cluster", s.handleCluster)
	// scontrol reconfigure, operators only (reconfigure.go).
	post(api.PathReconfigure, smallBody, "Reconfigure failed", s.handleReconfigure)
	mux.HandleFunc("GET "+api.PathQueues, s.handleQueues)
	// JWTs for api_addr (apiauth.go).
	post(api.PathTokens, smallBody, "Token creation failed", s.handleToken)
	// Join tokens for nodes (nodejoin.go), operators only.
	post(api.PathNodeTokens, smallBody, "Join token creation failed", s.handleNodeToken)
	post("/api/v1/jobs/{id}/checkpoint", smallBody, "Checkpoint failed", s.handleCheckpoint)
	// Steps and allocations (issue 7; handlers in steps.go).
	post("/api/v1/jobs/{id}/steps", stepBody, "Step creation failed", s.handleCreateStep)
	post("/api/v1/jobs/{id}/steps/{step}/end", smallBody, "Step end failed", s.handleStepEnd)
	post("/api/v1/jobs/{id}/release", smallBody, "Allocation release failed", s.handleRelease)
	mux.HandleFunc("GET /api/v1/accounting/steps", s.handleSteps)
	mux.HandleFunc("GET /api/v1/accounting/usage", s.handleUsage) // stepacct.go
	mux.Handle("GET /metrics", s.metrics.handler())
	// The read-only web dashboard (dashboard.go, ctld/ui).
	mux.Handle("/ui/", s.dashboardHandler())
	mux.Handle("/ui", s.dashboardHandler())
	// Profiles for operators, on the local socket only; they hold the
	// connection for their duration.
	mux.HandleFunc("GET /debug/pprof/{name...}", s.operatorOnly(s.profileDeadline(pprof.Index)))
	mux.HandleFunc("GET /debug/pprof/profile", s.operatorOnly(s.profileDeadline(pprof.Profile)))
	// Anything else is a JSON error too, as every answer of the API is.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, api.Errorf(api.ErrNotFound, "%s %s: no such API call", r.Method, r.URL.Path))
	})
	return socketBrowserGuard(mux)
}

func (s *Server) operatorOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.callerOf(r).admin {
			writeErr(w, api.Errorf(api.ErrPermissionDenied, "Access/permission denied: profiles are for operators"))
			return
		}
		h(w, r)
	}
}

// nodeHandler serves node daemons on TCP. Every API call needs the
// cluster key, or over TLS (tls.go) a node certificate, except a join,
// which brings a join token instead; /metrics is open for scrapers
// unless metrics_addr moves it to a listener of its own.
func (s *Server) nodeHandler() http.Handler {
	mux := newLimitedMux()
	auth := s.withKey
	if s.tls.on {
		auth = s.withNodeCert
		mux.post(api.PathNodeJoin, joinBody, "Node join failed", s.handleJoin)
		mux.post(api.PathNodeRenew, joinBody, "Certificate renewal failed", auth(s.handleRenew))
	}
	mux.post("/api/v1/node/register", nodeBody, "Node registration failed", auth(s.handleRegister))
	mux.post("/api/v1/node/sync", nodeBody, "Node sync failed", auth(s.handleSync))
	if s.cl.MetricsAddr == "" {
		mux.Handle("GET /metrics", s.metrics.handler())
	}
	mux.HandleFunc("/", auth(func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, api.Errorf(api.ErrNotFound, "%s %s: not a node API call (clients use the local socket or api_addr)", r.Method, r.URL.Path))
	}))
	return mux
}

// metricsHandler serves metrics_addr: /metrics only.
func (s *Server) metricsHandler() http.Handler {
	mux := newLimitedMux()
	mux.Handle("GET /metrics", s.metrics.handler())
	return mux
}

func (s *Server) keyOK(r *http.Request) bool {
	k := r.Header.Get(client.KeyHeader)
	return k != "" && subtle.ConstantTimeCompare([]byte(k), []byte(s.key)) == 1
}

// withKey admits requests that carry the cluster key. Their connection
// leaves the unauthenticated pool (limitListener.promote); requests
// without it are refused, and logged at most once per peer per
// interval.
func (s *Server) withKey(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.keyOK(r) {
			if s.keyLog != nil {
				s.keyLog.note(time.Now(), "node", remoteIP(r), "no_key", r.Method+" "+r.URL.Path)
			}
			writeErr(w, api.Errorf(api.ErrUnauthenticated, "cluster key required"))
			return
		}
		if tc := connOf(r); tc != nil {
			if err := tc.l.promote(tc); err != nil {
				w.Header().Set("Retry-After", "1")
				w.Header().Set("Connection", "close")
				writeErr(w, err)
				return
			}
		}
		h(w, r)
	}
}

// remoteIP is the address part of r.RemoteAddr.
func remoteIP(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

func writeErr(w http.ResponseWriter, err error) {
	status, body := api.NewErrorBody(err)
	var tl *bodyTooLarge
	if errors.As(err, &tl) {
		// The rest of the body is not read: the connection closes after
		// the answer (the client reads it even while still sending).
		status = http.StatusRequestEntityTooLarge
		w.Header().Set("Connection", "close")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// responseWriters recycles writeJSON's buffers: a fresh 64 KiB buffer
// per answer was half of what a busy controller allocated (every submit
// and every node sync answers), and so drove most of its collections.
var responseWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	bw := responseWriters.Get().(*bufio.Writer)
	bw.Reset(w)
	var err error
	if r, ok := v.(api.NodeSyncResponse); ok {
		// The answer to every sync (and registration) is written by
		// hand, as the node reads it, into the buffer's free space: the
		// same bytes and newline as the Encoder's.
		var b []byte
		if b, err = r.AppendJSON(bw.AvailableBuffer()); err == nil {
			_, err = bw.Write(append(b, '\n'))
		}
	} else {
		err = json.NewEncoder(bw).Encode(v)
	}
	if err == nil {
		_ = bw.Flush()
	}
	bw.Reset(nil) // the pool must not keep the response alive
	responseWriters.Put(bw)
}

// decode reads a JSON request body into v; the body is bounded by its
// endpoint's limit (limitedMux).
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badBody(err)
	}
	return nil
}

// readBody reads a request body, bounded by its endpoint's limit
// (limitedMux). A body of known length is read into one buffer of that
// size: io.ReadAll grows its buffer from 512 bytes, several allocations
// for every submission and sync.
func readBody(r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n > 0 {
		data := make([]byte, n)
		if _, err := io.ReadFull(r.Body, data); err != nil {
			return nil, err
		}
		return data, nil
	}
	return io.ReadAll(r.Body)
}

func pathID(r *http.Request) (uint64, error) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		return 0, api.Invalid("Invalid job id specified: %s", r.PathValue("id"))
	}
	return id, nil
}

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request) {
	// Announced before decoding, so that a commit in progress can wait
	// for this submission to join the next one (groupCommit).
	a := s.submits.arrive()
	defer a.leave()
	var req api.SubmitRequest
	data, err := readBody(r)
	if err == nil {
		err = api.DecodeSubmitRequest(data, &req)
	}
	if err != nil {
		writeErr(w, badBody(err))
		return
	}
	resp, err := s.submit(withArrival(r.Context(), a), s.callerOf(r), req)
	if err != nil {
		var tm *tooManyRequests
		if errors.As(err, &tm) {
			w.Header().Set("Retry-After", strconv.Itoa(tm.retryAfter))
		}
		writeErr(w, err)
		return
	}
	if resp.JobID != 0 {
		s.log.Debug("job submitted", "job_id", resp.JobID)
	}
	writeSubmitted(w, resp)
}

// writeSubmitted answers a submission with the bytes writeJSON would
// write. The usual answer, a job id alone, is written by hand in one
// small write: writeJSON's 64 KiB buffers, dropped from their pool at
// every collection, were a tenth of the bytes a submission allocated.
func writeSubmitted(w http.ResponseWriter, resp api.SubmitResponse) {
	if len(resp.Warnings) > 0 || !resp.TestStart.IsZero() || resp.TestNodes != "" || resp.TestCPUs != 0 ||
		resp.TestPartition != "" {
		writeJSON(w, resp)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	var buf [40]byte
	b := strconv.AppendUint(append(buf[:0], `{"job_id":`...), resp.JobID, 10)
	_, _ = w.Write(append(b, "}\n"...))
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	f, err := api.ParseJobFilter(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	v := s.jobView(s.callerOf(r))
	if !wantsBinary(r) {
		writeList(w, r, s.listJobs(f, v))
		return
	}
	version := s.listVersion()
	if r.Context().Err() != nil {
		// The client left while the lock was held (a scheduling pass
		// over a large backlog after a restart): building its listing
		// would only delay the next one, and a client that retries on
		// a timeout would then never be answered in time.
		return
	}
	body, now := s.listCache.get(v.cacheKey(r.URL.RawQuery), version, func() []byte {
		b, _ := listing.AppendJobs(nil, s.listJobs(f, v).Jobs)
		return b
	})
	w.Header().Set("Content-Type", listing.MediaJobs())
	w.Header().Set(listing.NowHeader, now.Format(time.RFC3339Nano))
	_, _ = w.Write(body)
}

// wantsBinary reports whether the client asks for binary listings of
// this controller's api.Job (listing.MediaJobs); a client built with
// another api.Job gets JSON.
func wantsBinary(r *http.Request) bool {
	return listing.AcceptsJobs(r.Header.Get("Accept"))
}

// writeList sends a job listing as JSON, or in binary when the client
// asks for listing.MediaJobs.
func writeList(w http.ResponseWriter, r *http.Request, l api.JobList) {
	if wantsBinary(r) {
		w.Header().Set("Content-Type", listing.MediaJobs())
		w.Header().Set(listing.NowHeader, l.Now.Format(time.RFC3339Nano))
		_ = listing.WriteJobs(w, l.Jobs)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = listing.WriteJobList(w, l)
}

func (s *Server) handleJob(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	j, err := s.getJob(r.Context(), s.callerOf(r), id)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, j)
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	if err := s.checkTrail(r.Context(), s.callerOf(r), id); err != nil {
		writeErr(w, err)
		return
	}
	s.mu.Lock()
	s.flushAll() // the trail shows everything decided so far
	_, live := s.jobs[id]
	s.mu.Unlock()
	ev, err := s.store.Events(r.Context(), id)
	if err != nil {
		writeErr(w, err)
		return
	}
	if len(ev) == 0 && !live {
		writeErr(w, api.Errorf(api.ErrNotFound, "Invalid job id specified"))
		return
	}
	writeJSON(w, ev)
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	var req api.CancelRequest
	if err := decode(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	resp, err := s.cancel(s.callerOf(r), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, resp)
}

func (s *Server) handleUpdate(w http.ResponseWriter, r *http.Request) {
	var u api.JobUpdate
	if err := decode(r, &u); err != nil {
		writeErr(w, err)
		return
	}
	resp, err := s.updateJobs(s.callerOf(r), u)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, resp)
}

func (s *Server) handleAccounting(w http.ResponseWriter, r *http.Request) {
	f, err := api.ParseJobFilter(r.URL.Query())
	if err != nil {
		writeErr(w, err)
		return
	}
	s.mu.Lock()
	s.flushAll() // accounting shows every change made so far
	now := s.now()
	s.mu.Unlock()
	v := s.accountingView(s.callerOf(r))
	jobs, err := s.queryAccounting(r.Context(), v.narrow(f)) // clusters.go
	if err != nil {
		writeErr(w, err)
		return
	}
	writeList(w, r, api.JobList{Jobs: v.keepJobs(jobs), Now: now})
}

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	c := s.callerOf(r)
	if !c.admin {
		writeErr(w, api.Errorf(api.ErrPermissionDenied, "Access/permission denied: the audit log is for operators"))
		return
	}
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 {
		limit = 100
	}
	s.mu.Lock()
	s.flush()
	s.mu.Unlock()
	recs, err := s.store.AuditLog(r.Context(), limit)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, recs)
}

func (s *Server) handleNodes(w http.ResponseWriter, r *http.Request) {
	if err := s.checkNodeList(s.callerOf(r)); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, s.nodeList())
}

// nodeList copies nodes and partitions for clients.
func (s *Server) nodeList() api.NodeList {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := api.NodeList{Now: s.now()}
	for _, name := range s.cl.NodeOrder {
		n := s.nodes[name].Node
		n.AllocGPUs = append([]int(nil), n.AllocGPUs...)
		out.Nodes = append(out.Nodes, n)
	}
	for _, p := range s.cl.Partitions {
		out.Partitions = append(out.Partitions, *s.partitions[p.Name])
	}
	return out
}

func (s *Server) handleNodeUpdate(w http.ResponseWriter, r *http.Request) {
	var u api.NodeUpdate
	if err := decode(r, &u); err != nil {
		writeErr(w, err)
		return
	}
	if err := s.updateNodes(s.callerOf(r), u); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, struct{}{})
}

func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request) {
	c := s.callerOf(r)
	info := api.ClusterInfo{Name: s.cl.ClusterName, Version: Version, StartTime: s.startTime, Now: s.now(),
		CallerUID: c.uid, CallerUser: c.user, CallerAdmin: c.admin, Config: s.configSummary(), Limits: s.specLimits()}
	for _, p := range s.cl.Partitions {
		info.Partitions = append(info.Partitions, *s.partitions[p.Name])
	}
	writeJSON(w, info)
}

// configSummary is what `scontrol show config` prints.
func (s *Server) configSummary() map[string]string {
	c := s.cl
	yesno := func(b bool) string {
		if b {
			return "Yes"
		}
		return "No"
	}
	host, port, err := net.SplitHostPort(c.NodeAddr)
	if err != nil {
		host, port = c.NodeAddr, ""
	}
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "localhost"
	}
	// A job runs one task per CPU of a node, or with --overcommit up to
	// Slurm's default MaxTasksPerNode of 512 on smaller nodes
	// (api.MaxTasksPerNode): the largest declared node or 512 bounds
	// them. A node that reports more CPUs than it declares runs one
	// task per CPU there too.
	maxTasks := api.MaxTasksPerNode(0)
	for _, d := range c.NodeDecl {
		maxTasks = max(maxTasks, api.MaxTasksPerNode(d.CPUs))
	}
	out := map[string]string{
		"ClusterName":      c.ClusterName,
		"SlurmctldHost[0]": name + "(" + host + ")",
		// SlurmctldPort is the port node daemons reach the controller on,
		// as in Slurm (tools read the two to name the controller).
		"SlurmctldPort":     port,
		"MaxTasksPerNode":   strconv.Itoa(maxTasks),
		"TideVersion":       Version,
		"StateSaveLocation": c.StateDir,
		"SlurmctldAddr":     c.NodeAddr,
		"TideSocket":        c.Socket,
		"TideAPIAddr":       orNull(c.APIAddr),
		"AuthAltTypes":      authAltTypes(s.auth.jwtKey != nil),
		"SlurmdTimeout":     fmt.Sprintf("%d sec", int(c.Timeouts.Node.Seconds())),
		"KillWait":          fmt.Sprintf("%d sec", int(c.Timeouts.KillWait.Seconds())),
		"MinJobAge":         fmt.Sprintf("%d sec", int(c.Timeouts.MinJobAge.Seconds())),
		"FirstJobId":        strconv.FormatUint(c.FirstJobID, 10),
		"MaxArraySize":      strconv.Itoa(c.MaxArraySize),
		"DisableRootJobs":   yesno(!c.AllowRootJobs),
		// Slurm's names for what Tide does: every job gets its own CPUs,
		// memory and GPUs of a node (cons_tres), and the policy decides
		// whether shorter jobs pass a blocked one (backfill) or not.
		"SchedulerType":        schedulerType(c.Policy),
		"SelectType":           "select/cons_tres",
		"SelectTypeParameters": "CR_CPU_MEMORY",
		// Features Tide does not have, in Slurm's words for "off".
		"OverTimeLimit":            "0 min",
		"TrackWCKey":               "No",
		"AccountingStorageEnforce": "none",
		"MpiDefault":               "none",
		"JobRequeue":               "1",
		// What sacct reports per job (AllocTRES, --json tres).
		"AccountingStorageTRES": "cpu,mem,node,billing,gres/gpu",
		// A job over a partition's limits waits (PartitionTimeLimit, ...)
		// rather than being refused at submission.
		"EnforcePartLimits": "NO",
		"GresTypes":         "gpu",
		// The Slurm release Tide's commands behave as, which tools parse
		// (TideVersion is Tide's own).
		"SLURM_VERSION":         "22.05.8",
		"AccountingStorageType": "accounting_storage/tide_sqlite",
		"DefMemPerCPU":          strconv.FormatInt(c.Scheduler.DefMemPerCPUMB, 10),
		"PrivateData":           c.Private.String(),
		"SchedulerParameters": fmt.Sprintf("max_script_size=%d,max_env_size=%d,max_env_vars=%d",
			c.Submit.MaxScriptSize, c.Submit.MaxEnvSize, c.Submit.MaxEnvVars),
	}
	return out
}

// schedulerType names the scheduling policy as Slurm's SchedulerType:
// policies tide, backfill and easy are sched/backfill; priority and fifo, where nothing
// passes a blocked job, are Slurm's main scheduler alone.
func schedulerType(p sched.Policy) string {
	if p.Backfills() {
		return "sched/backfill"
	}
	return "sched/builtin"
}

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	var reg api.NodeRegistration
	if err := decode(r, &reg); err != nil {
		writeErr(w, err)
		return
	}
	if err := s.checkNodeIdentity(r, reg.Name); err != nil {
		writeErr(w, fmt.Errorf("Node registration failed: %w", err))
		return
	}
	resp, err := s.register(reg)
	if err == nil && s.ha.lapsed() {
		// The answer was held (a long poll) or worked out across a
		// pause: not sent if the lease may have lapsed meanwhile
		// (leader.go). Nodes resend what a lost answer held.
		err = s.errLapsed()
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	resp.Epoch = s.ha.epoch
	writeJSON(w, resp)
}

func (s *Server) handleSync(w http.ResponseWriter, r *http.Request) {
	// Read by hand as decode would read it: every node syncs once or
	// twice per job, and encoding/json's reflection over the reports was
	// a visible share of the controller's CPU in a storm of small jobs.
	var req api.NodeSyncRequest
	data, err := readBody(r)
	if err == nil {
		err = api.DecodeNodeSyncRequest(data, &req)
	}
	if err != nil {
		writeErr(w, badBody(err))
		return
	}
	if err := s.checkNodeIdentity(r, req.Name); err != nil {
		writeErr(w, fmt.Errorf("Node sync failed: %w", err))
		return
	}
	if req.WaitMS > 0 {
		// The controller may hold the answer up to the node's wait.
		s.extendDeadline(w, time.Duration(min(req.WaitMS, maxSyncWaitMS))*time.Millisecond)
	}
	resp, err := s.sync(r.Context(), req)
	if err == nil && s.ha.lapsed() {
		// The answer was held (a long poll) or worked out across a
		// pause: not sent if the lease may have lapsed meanwhile
		// (leader.go). Nodes resend what a lost answer held.
		err = s.errLapsed()
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	resp.Epoch = s.ha.epoch
	writeJSON(w, resp)
}

func (s *Server) handleQueues(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, s.visibleQueues(s.callerOf(r), s.queueList()))
}

func (s *Server) handleCheckpoint(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	if err := s.checkpoint(r.Context(), s.callerOf(r), id); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
