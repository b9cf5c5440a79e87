package ctld

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/config"
)

// Reconfiguration: `scontrol reconfigure` (POST /api/v1/reconfigure,
// operators only) and SIGHUP re-read tide.yaml as tidectld read it at
// start (the file, TIDECTLD_* variables, the command line's overrides)
// and apply it without stopping anything, as slurmctld does.
//
// The new file is validated completely first, then compared with the
// running configuration key by key (config.Diff). A key that only a
// restart can change (restartOnly: listeners, the state directory,
// credentials, the node declarations...) refuses the whole reload, each
// such key named, and so does removing a partition, queue or job class
// that pending or running jobs still use. Otherwise every reloadable
// key is applied at once, under the server's lock, so that a scheduling
// pass sees either the old settings or the new ones; jobs are not
// touched, and a pass follows.
//
// Request handlers read the configuration without the server's lock
// (the submission checks read partitions, queues and limits unlocked:
// they were immutable before reloads existed). So a reload also closes
// requestGate: new requests wait, and the reload waits for the requests
// in progress to end, at most reconfigureDrain, before it swaps
// anything. The node long poll and profiles, which wait on purpose,
// read their settings under the lock and pass the gate.

// reconfigureDrain bounds how long a reload waits for the requests in
// progress; past it the reload gives up, changing nothing.
const reconfigureDrain = 10 * time.Second

// restartOnly are the top-level keys of tide.yaml a running controller
// cannot change: what its listeners, store and credentials were set up
// with at start, the cluster's name (recorded in every job), the first
// job id (read once, for a new cluster), the lease (its holder's name
// and terms are in the store), the operators (the socket's
// listener checks them before any request), and the node declarations
// (nodes registered against them and hold jobs).
var restartOnly = []string{"version", "cluster_name", "state_dir", "store", "socket", "node_addr", "key_file",
	"operators", "first_job_id", "metrics_addr", "limits", "api_addr", "jwt", "munge", "tls", "nodes", "ha"}

// reloaders copy each reloadable top-level key of tide.yaml into the
// running configuration; every key of Config is either here or in
// restartOnly (TestReconfigureKeysClassified).
var reloaders = map[string]func(dst, src *Config){
	"log_level":       func(d, s *Config) { d.LogLevel = s.LogLevel },
	"allow_root_jobs": func(d, s *Config) { d.AllowRootJobs = s.AllowRootJobs },
	"max_array_size":  func(d, s *Config) { d.MaxArraySize = s.MaxArraySize },
	"timeouts":        func(d, s *Config) { d.Timeouts = s.Timeouts },
	"scheduler":       func(d, s *Config) { d.Scheduler = s.Scheduler },
	"partitions":      func(d, s *Config) { d.Partition = slices.Clone(s.Partition) },
	"topology":        func(d, s *Config) { d.Topology = s.Topology },
	"queues":          func(d, s *Config) { d.Queues = slices.Clone(s.Queues) },
	"qos":             func(d, s *Config) { d.QOS = slices.Clone(s.QOS) },
	"default_qos":     func(d, s *Config) { d.DefaultQOS = s.DefaultQOS },
	"submit":          func(d, s *Config) { d.Submit = s.Submit },
	"private_data":    func(d, s *Config) { d.PrivateData = slices.Clone(s.PrivateData) },
}

// reconfState is what a reload needs besides the configuration.
type reconfState struct {
	// source is the file tidectld was started with ("" = defaults and
	// environment only), for messages; load re-reads the configuration
	// from it as tidectld read it at start. nil: reloads are refused.
	source string
	load   func() (Config, error)
	// level is the logger's level, which log_level sets (nil: the
	// logger's level is not the controller's to change).
	level *slog.LevelVar
	// serial runs reloads one at a time.
	serial sync.Mutex
	gate   requestGate
}

// EnableReconfigure lets the server reload its configuration: load
// returns it as tidectld read it at start, from the file source (""
// for defaults and environment only), and level, when not nil, is the
// level of the logger the server logs to. Call it before Run.
func (s *Server) EnableReconfigure(source string, load func() (Config, error), level *slog.LevelVar) {
	s.reconf.source, s.reconf.load, s.reconf.level = source, load, level
}

// ReloadOnHangup reloads the configuration on every SIGHUP, as
// slurmctld does, and logs the result, until ctx ends or stop is
// called. Without it a SIGHUP would end the process (Go's default).
func (s *Server) ReloadOnHangup(ctx context.Context) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-ch:
				self := caller{uid: s.self, gid: uint32(os.Getgid()), user: s.users.name(s.self), admin: true, known: true}
				if _, err := s.reconfigure(self, "SIGHUP"); err != nil {
					s.log.Error("reconfigure on SIGHUP failed", "err", err)
				}
			}
		}
	})
	return func() {
		signal.Stop(ch)
		close(done)
		wg.Wait()
	}
}

// handleReconfigure is POST /api/v1/reconfigure.
func (s *Server) handleReconfigure(w http.ResponseWriter, r *http.Request) {
	resp, err := s.reconfigure(s.callerOf(r), "api")
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, resp)
}

// reconfigure reloads the configuration for caller c (via names the
// way it came: "api" or "SIGHUP"). It changes everything or, with an
// error that names each problem, nothing.
func (s *Server) reconfigure(c caller, via string) (api.ReconfigureResponse, error) {
	if !c.admin {
		s.log.Warn("reconfigure refused: not an operator", "uid", c.uid, "user", c.user)
		return api.ReconfigureResponse{}, api.Errorf(api.ErrPermissionDenied,
			"Access/permission denied: only operators may reconfigure the controller")
	}
	rc := &s.reconf
	rc.serial.Lock()
	defer rc.serial.Unlock()
	if rc.load == nil {
		return api.ReconfigureResponse{}, api.Errorf(api.ErrUnavailable, "this controller cannot re-read its configuration (it was not started by tidectld)")
	}
	cfg, err := rc.load()
	if err != nil {
		return api.ReconfigureResponse{}, api.Invalid("%s (nothing changed)", oneLine(err.Error()))
	}
	cl, err := cfg.Validate()
	if err != nil {
		return api.ReconfigureResponse{}, api.Invalid("invalid config %s (nothing changed): %s", rc.sourceName(), oneLine(err.Error()))
	}
	// Only reloads write s.cl, and they run one at a time: reading it
	// here without the lock races with no one.
	changes := config.Diff(s.cl.Config, cl.Config)
	if why := restartNeeded(s.cl, cl, changes); len(why) > 0 {
		return api.ReconfigureResponse{}, api.Errorf(api.ErrConflict, "%s (nothing changed)", strings.Join(why, "; "))
	}
	if busy := rc.gate.close(reconfigureDrain); busy > 0 {
		return api.ReconfigureResponse{}, api.Errorf(api.ErrUnavailable,
			"%d requests still in progress after %s (nothing changed); try again", busy, reconfigureDrain)
	}
	defer rc.gate.open()

	s.mu.Lock()
	if why := s.reloadConflicts(cl); len(why) > 0 {
		s.mu.Unlock()
		return api.ReconfigureResponse{}, api.Errorf(api.ErrConflict, "%s (nothing changed)", strings.Join(why, "; "))
	}
	if !slices.ContainsFunc(changes, func(ch api.ConfigChange) bool { return topKey(ch.Key) == "topology" }) &&
		treeSignature(s.cl) != treeSignature(cl) {
		// Same settings, but the topology file they name was edited.
		changes = append(changes, api.ConfigChange{Key: "topology.file", Old: cl.Topology.File, New: cl.Topology.File + " (contents changed)"})
	}
	s.applyConfig(cl)
	keys := make([]string, len(changes))
	for i, ch := range changes {
		keys[i] = ch.Key
	}
	detail := "no changes"
	if len(keys) > 0 {
		detail = "changed " + strings.Join(keys, ", ")
	}
	s.auditf(c, "reconfigure", "controller", "%s (%s)", detail, via)
	s.flush()
	s.mu.Unlock()

	for _, ch := range changes {
		s.log.Info("config changed", "key", ch.Key, "old", ch.Old, "new", ch.New)
	}
	s.log.Info("reconfigured", "config", rc.sourceName(), "changes", len(changes), "by", c.user, "via", via)
	s.Kick()
	if changes == nil {
		changes = []api.ConfigChange{}
	}
	return api.ReconfigureResponse{Changed: changes}, nil
}

// oneLine joins the lines of a multi-line error (errors.Join's, the
// YAML decoder's) with "; ": the CLI prints a newline in a message as
// \n.
func oneLine(msg string) string {
	var parts []string
	for l := range strings.SplitSeq(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, strings.TrimSuffix(l, ":"))
		}
	}
	return strings.Join(parts, "; ")
}

// sourceName names the configuration's origin in messages.
func (rc *reconfState) sourceName() string {
	if rc.source == "" {
		return "(defaults and environment)"
	}
	return rc.source
}

// topKey is the top-level key of a change's key ("partitions" of
// "partitions[gpu].max_time").
func topKey(key string) string {
	if i := strings.IndexAny(key, ".["); i >= 0 {
		return key[:i]
	}
	return key
}

// restartNeeded names each change of old to cl that only a restart can
// apply.
func restartNeeded(old, cl *Cluster, changes []api.ConfigChange) []string {
	var why []string
	for _, ch := range changes {
		if slices.Contains(restartOnly, topKey(ch.Key)) {
			why = append(why, ch.Key+" changed: restart tidectld to apply")
		}
	}
	// The submission endpoint's body limit is set when the listeners
	// start; when limits.max_submit_body leaves it to the script and
	// environment limits, a change of those that moves it waits for a
	// restart too (a larger script would be refused by the body limit
	// before the script limit could allow it).
	ob, oerr := old.SubmitBodyLimit()
	nb, nerr := cl.SubmitBodyLimit()
	if oerr == nil && nerr == nil && ob != nb {
		for _, ch := range changes {
			if ch.Key == "submit.max_script_size" || ch.Key == "submit.max_env_size" {
				why = append(why, ch.Key+" changed: restart tidectld to apply (it sizes the submission body limit)")
			}
		}
	}
	return why
}

// reloadConflicts names what the jobs in memory keep cl from being
// applied: a removed partition, queue or job class that a pending or
// running job still names, and turning queues and classes on or off
// while jobs wait or run (their priorities follow the scheme they were
// submitted under). Called with mu held.
func (s *Server) reloadConflicts(cl *Cluster) []string {
	parts := map[string]bool{}
	for _, p := range cl.Partitions {
		parts[p.Name] = true
	}
	queues := map[string]bool{}
	for _, q := range cl.Sharing.Queues {
		queues[q.Name] = true
	}
	old := s.sharing()
	users := map[string][]uint64{} // "partition gpu" -> job ids
	var order []string
	use := func(what string, id uint64) {
		if _, ok := users[what]; !ok {
			order = append(order, what)
		}
		if ids := users[what]; len(ids) == 0 || ids[len(ids)-1] != id {
			users[what] = append(ids, id)
		}
	}
	active := 0
	for _, j := range s.jobs {
		if j.State.Terminal() {
			continue
		}
		active++
		for _, p := range append(api.PartitionNames(j.ReqPartition()), j.Partition) {
			if _, had := s.partitions[p]; had && !parts[p] {
				use("partition "+p, j.ID)
			}
		}
		if j.Account != "" && old.Queue(j.Account) != nil && !queues[j.Account] {
			use("queue "+j.Account, j.ID)
		}
		if _, had := old.QOS[j.QOS]; had && j.QOS != "" && cl.Sharing.QOS[j.QOS] == nil {
			use("qos "+j.QOS, j.ID)
		}
	}
	slices.Sort(order)
	var why []string
	for _, what := range order {
		ids := users[what]
		slices.Sort(ids)
		why = append(why, fmt.Sprintf("%s removed while pending or running jobs use it: %s", what, jobIDList(ids)))
	}
	if old.Configured != cl.Sharing.Configured && active > 0 {
		why = append(why, fmt.Sprintf("turning queues and qos on or off while %d jobs are pending or running is refused: their priorities follow the scheme they were submitted under", active))
	}
	return why
}

// jobIDList lists up to five job ids ("3,7,9 and 4 more").
func jobIDList(ids []uint64) string {
	const most = 5
	var b strings.Builder
	for i, id := range ids[:min(len(ids), most)] {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(id, 10))
	}
	if len(ids) > most {
		fmt.Fprintf(&b, " and %d more", len(ids)-most)
	}
	return b.String()
}

// treeSignature summarizes a cluster's switch tree as placement sees
// it: each node's leaf switch and address.
func treeSignature(cl *Cluster) string {
	var b strings.Builder
	for _, n := range cl.NodeOrder {
		addr, pattern := cl.Tree.NodeAddr(n)
		fmt.Fprintf(&b, "%s=%s/%s/%s;", n, cl.Tree.LeafOf(n), addr, pattern)
	}
	return b.String()
}

// applyConfig makes cl the running configuration: the reloadable keys
// and what is derived from them, the partitions and each node's
// partitions and switch. The restart-only keys are equal (checked
// before) and are not written: goroutines outside requests read them
// unlocked. Called with mu held and requestGate closed.
func (s *Server) applyConfig(cl *Cluster) {
	cur := s.cl
	for _, copyKey := range reloaders {
		copyKey(&cur.Config, &cl.Config)
	}
	cur.Partitions, cur.DefaultPart, cur.Tree, cur.Policy = cl.Partitions, cl.DefaultPart, cl.Tree, cl.Policy
	cur.Sharing, cur.Private = cl.Sharing, cl.Private
	parts := make(map[string]*api.Partition, len(cl.Partitions))
	for i := range cl.Partitions {
		p := cl.Partitions[i]
		parts[p.Name] = &p
	}
	s.partitions = parts
	// A new max_gpu_oversubscribe bounds the slices placed from now on;
	// the ones running keep what they hold.
	s.ledger.SetLimits(ledgerLimits(cur))
	for _, name := range cur.NodeOrder {
		n := s.nodes[name]
		n.Switch = cur.Tree.LeafOf(name)
		var in []string
		for _, p := range cur.Partitions {
			if slices.Contains(p.Nodes, name) {
				in = append(in, p.Name)
			}
		}
		n.Partitions = in
	}
	// Submission checks cache partitions' capacities and the scheduler
	// settings they were built with; listings may show partitions.
	s.capVersion.Add(1)
	s.capacities = map[string]capacityList{}
	s.jobsVersion++
	if s.reconf.level != nil {
		s.reconf.level.Set(logLevel(cur.LogLevel))
	}
}

// requestGate lets a reload wait out the requests in progress and hold
// new ones back while it swaps the settings they read without the
// server's lock.
type requestGate struct {
	mu     sync.Mutex
	active int
	// closed is not nil while a reload holds the gate; it is closed
	// when the gate opens. drained is closed when the last request in
	// progress ends while the gate is closed.
	closed  chan struct{}
	drained chan struct{}
}

// enter waits while the gate is closed, then counts a request in.
func (g *requestGate) enter() {
	g.mu.Lock()
	for g.closed != nil {
		wait := g.closed
		g.mu.Unlock()
		<-wait
		g.mu.Lock()
	}
	g.active++
	g.mu.Unlock()
}

// leave counts a request out.
func (g *requestGate) leave() {
	g.mu.Lock()
	g.active--
	if g.active == 0 && g.drained != nil {
		close(g.drained)
		g.drained = nil
	}
	g.mu.Unlock()
}

// close holds new requests back and waits up to d for those in
// progress to end. It returns 0 with the gate closed (open must
// follow), or the number of requests still in progress at d with the
// gate open again.
func (g *requestGate) close(d time.Duration) int {
	g.mu.Lock()
	g.closed = make(chan struct{})
	if g.active == 0 {
		g.mu.Unlock()
		return 0
	}
	drained := make(chan struct{})
	g.drained = drained
	g.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-drained:
		return 0
	case <-t.C:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.drained = nil
	if g.active == 0 {
		return 0 // the last one left just now
	}
	close(g.closed)
	g.closed = nil
	return g.active
}

// open lets requests in again after a successful close.
func (g *requestGate) open() {
	g.mu.Lock()
	close(g.closed)
	g.closed = nil
	g.mu.Unlock()
}

// gated passes every request through the reload gate except the node
// long poll and profiles, which wait on purpose (and read their
// settings under the server's lock), and the reload itself.
func (s *Server) gated(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == api.PathReconfigure, p == "/api/v1/node/sync", strings.HasPrefix(p, "/debug/pprof"):
			h.ServeHTTP(w, r)
			return
		}
		s.reconf.gate.enter()
		defer s.reconf.gate.leave()
		h.ServeHTTP(w, r)
	})
}

// loopSettings are the scheduling loop's settings a reload may change:
// the pass interval and how long finished jobs' scripts are kept.
// Called with mu held.
func (s *Server) loopSettings() (interval, spoolKeep time.Duration) {
	return s.cl.Scheduler.Interval, s.cl.Timeouts.SpoolKeep
}
