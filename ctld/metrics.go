package ctld

import (
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// metrics are tidectld's Prometheus metrics. Gauges of current state are
// computed at scrape time from live state, so they can never drift.
type metrics struct {
	reg         *prometheus.Registry
	submissions prometheus.Counter
	ends        *prometheus.CounterVec
	cycle       prometheus.Histogram
	startDelay  prometheus.Histogram
	reclaims    *prometheus.CounterVec
	preemptions *prometheus.CounterVec
	throttled   *prometheus.CounterVec
	syncs       *prometheus.CounterVec
	commits     prometheus.Counter
	// Connection limits (connlimit.go): refusals, evictions, and the
	// listeners whose open connections the tide_connections gauge shows.
	connRefused *prometheus.CounterVec
	connEvicted *prometheus.CounterVec
	conns       connGauge
	// cache serves every scrape (metricscache.go).
	cache   *cachedGatherer
	scrapes *scrapeCache
	// collectors are every registered collector (register).
	collectors []prometheus.Collector
}

// cycleBuckets are tide_schedule_cycle_seconds' buckets: 100 µs to
// 18.5 s, each √2 times the last. Doubling buckets read a pass p99 only
// to within a factor of two (histogram_quantile interpolates inside a
// bucket: one pass past 102 ms in 31 read as 173 ms, wherever it was
// below 205 ms), and they ended at 3.3 s, below the 5 s of the
// TideSchedulerSlow alert, which could therefore never fire.
var cycleBuckets = prometheus.ExponentialBuckets(0.0001, math.Sqrt2, 36)

// queueWaitBuckets are tide_job_queue_wait_seconds' buckets: 10 ms to
// 7.8 days, doubling. Waits of hours and days are ordinary on a busy
// GPU cluster; the 20 buckets of before ended at 87 minutes, and the
// dashboard's wait quantiles stopped there.
var queueWaitBuckets = prometheus.ExponentialBuckets(0.01, 2, 27)

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		submissions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tide_submissions_total", Help: "Jobs accepted by the controller."}),
		ends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tide_jobs_ended_total", Help: "Jobs that reached a final state, by state."}, []string{"state"}),
		cycle: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tide_schedule_cycle_seconds", Help: "Duration of one scheduling pass.",
			Buckets: cycleBuckets}),
		startDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tide_job_queue_wait_seconds", Help: "Time from submission to start.",
			Buckets: queueWaitBuckets}),
		reclaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tide_gpu_reclaims_total",
			Help: "GPU memory reclaim steps on shared GPUs over their watermark: grow, preempt, stuck."}, []string{"action"}),
	}
	m.preemptions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tide_preemptions_total",
		Help: "Jobs chosen as preemption victims, by mode (requeue, cancel, suspend) and rule (reclaim, priority)."}, []string{"mode", "rule"})
	m.throttled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tide_submissions_throttled_total",
		Help: "Submissions over their queue's rate: buffered (accepted, waiting) or refused (429)."}, []string{"outcome"})
	m.syncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tide_node_syncs_total",
		Help: "Node syncs (heartbeats and reports), by how they were answered: at once, after being held, or empty because the node's next sync came (or its caller left)."}, []string{"answer"})
	m.commits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tide_store_commits_total", Help: "Transactions committed to the state database."})
	m.connRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tide_connections_refused_total",
		Help: "Connections turned away at accept (or at their first keyed request) for a limit, by listener (socket, node, metrics) and limit (peer_limit, limit, reserve, unauthenticated_peer_limit, unauthenticated_limit)."},
		[]string{"listener", "reason"})
	m.connEvicted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tide_connections_evicted_total",
		Help: "Idle connections without the cluster key closed to make room for new ones, by listener."}, []string{"listener"})
	m.register(m.submissions, m.ends, m.cycle, m.startDelay, m.reclaims, m.preemptions, m.throttled,
		m.syncs, m.commits, m.connRefused, m.connEvicted, &m.conns, &stateCollector{s: s})
	// Issue 25: the jobs' usage and the idle-GPU flag (jobseries.go),
	// and what the Grafana dashboard and the alerts (etc/grafana,
	// etc/prometheus) read besides.
	m.register(&seriesCollector{s: s}, &clusterCollector{s: s})
	m.cache = newCachedGatherer(m.reg, time.Second, time.Now)
	m.scrapes = newScrapeCache(m.cache, time.Second, time.Now)
	// How often scrapes made the controller gather (its state collector
	// takes the controller's lock): at most once a second, however many
	// scrapers there are.
	m.register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "tide_metrics_gathered_total",
		Help: "Gatherings of these metrics from the controller's state; scrapes within a second of one share it."},
		func() float64 { return float64(m.cache.gatherings.Load()) }))
	return m
}

// register registers cs and keeps them, so that tests can list every
// metric the controller exports (a vector without children gathers
// nothing).
func (m *metrics) register(cs ...prometheus.Collector) {
	m.reg.MustRegister(cs...)
	m.collectors = append(m.collectors, cs...)
}

func (m *metrics) refused(listener, reason string) {
	m.connRefused.WithLabelValues(listener, reason).Inc()
}
func (m *metrics) evicted(listener string) { m.connEvicted.WithLabelValues(listener).Inc() }

func (m *metrics) submitted()                 { m.submissions.Inc() }
func (m *metrics) ended(st api.JobState)      { m.ends.WithLabelValues(string(st)).Inc() }
func (m *metrics) pass(d time.Duration)       { m.cycle.Observe(d.Seconds()) }
func (m *metrics) started(wait time.Duration) { m.startDelay.Observe(wait.Seconds()) }
func (m *metrics) reclaimed(k reclaimKind)    { m.reclaims.WithLabelValues(string(k)).Inc() }
func (m *metrics) preempted(mode api.PreemptMode, reclaim bool) {
	rule := "priority"
	if reclaim {
		rule = "reclaim"
	}
	m.preemptions.WithLabelValues(string(mode), rule).Inc()
}
func (m *metrics) throttle(outcome string) { m.throttled.WithLabelValues(outcome).Inc() }
func (m *metrics) synced(answer string)    { m.syncs.WithLabelValues(answer).Inc() }
func (m *metrics) committed()              { m.commits.Inc() }

// handler serves the metrics from the cache: however many scrapers
// come, the state collector (which takes the server lock) runs at most
// once a second.
func (m *metrics) handler() http.Handler { return m.scrapes }

var descConns = prometheus.NewDesc("tide_connections",
	"Open connections, by listener and whether they showed the cluster key (on the socket every connection counts as authenticated).",
	[]string{"listener", "auth"}, nil)

// connGauge reports the open connections of the listeners Run serves.
type connGauge struct {
	mu        sync.Mutex
	listeners []*limitListener
}

func (g *connGauge) set(ls ...*limitListener) {
	g.mu.Lock()
	g.listeners = ls
	g.mu.Unlock()
}

func (g *connGauge) Describe(ch chan<- *prometheus.Desc) { ch <- descConns }

func (g *connGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	ls := g.listeners
	g.mu.Unlock()
	for _, l := range ls {
		auth, unauth := l.counts()
		ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(auth), l.name, "yes")
		if l.lim.unauth > 0 {
			ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(unauth), l.name, "no")
		}
	}
}

var (
	descJobs     = prometheus.NewDesc("tide_jobs", "Jobs held by the controller, by state.", []string{"state"}, nil)
	descNodes    = prometheus.NewDesc("tide_nodes", "Nodes by sinfo state.", []string{"state"}, nil)
	descGPUs     = prometheus.NewDesc("tide_gpus", "GPUs of registered nodes.", nil, nil)
	descGPUAlloc = prometheus.NewDesc("tide_gpus_allocated", "GPUs allocated to jobs.", nil, nil)
	descCPUAlloc = prometheus.NewDesc("tide_cpus_allocated", "CPUs allocated to jobs.", nil, nil)
	descGPUWhole = prometheus.NewDesc("tide_gpus_allocated_whole", "GPUs allocated whole to one job.", nil, nil)
	descGPUShare = prometheus.NewDesc("tide_gpus_shared", "GPUs shared by GPU slices.", nil, nil)
	descGPUMemC  = prometheus.NewDesc("tide_gpu_mem_committed_bytes",
		"GPU memory the slices of shared GPUs commit (may pass the GPUs' memory where partitions oversubscribe).", nil, nil)
	descGPUMemS = prometheus.NewDesc("tide_gpu_mem_shared_bytes", "Physical memory of the shared GPUs.", nil, nil)
	descGPUFrag = prometheus.NewDesc("tide_gpus_stranded",
		"Fragmentation: free GPUs on usable nodes where no pending GPU job's per-node request fits (0 without pending GPU jobs).", nil, nil)
)

// stateCollector reads live state at scrape time.
type stateCollector struct{ s *Server }

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descNodes, descGPUs, descGPUAlloc, descCPUAlloc,
		descGPUWhole, descGPUShare, descGPUMemC, descGPUMemS, descGPUFrag} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.Lock()
	jobs := map[api.JobState]int{}
	for _, st := range api.AllJobStates {
		jobs[st] = 0
	}
	for _, j := range s.jobs {
		jobs[j.State]++
	}
	nodes := map[string]int{}
	gpus, gpuAlloc, cpuAlloc, whole, shared := 0, 0, 0, 0, 0
	var committedMB, sharedMB int64
	for _, n := range s.nodes {
		nodes[n.SinfoState()]++
		gpus += len(n.GPUs)
		gpuAlloc += n.GPUsInUse()
		cpuAlloc += n.AllocCPUs
		w, sh, _ := n.GPUCounts()
		whole, shared = whole+w, shared+sh
		for _, g := range n.SharedGPUs {
			committedMB += g.MemMB
			sharedMB += n.GPUMemoryMB(g.Index)
		}
	}
	stranded := s.strandedGPUs()
	s.mu.Unlock()
	for st, n := range jobs {
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(n), string(st))
	}
	for st, n := range nodes {
		ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(n), st)
	}
	ch <- prometheus.MustNewConstMetric(descGPUs, prometheus.GaugeValue, float64(gpus))
	ch <- prometheus.MustNewConstMetric(descGPUAlloc, prometheus.GaugeValue, float64(gpuAlloc))
	ch <- prometheus.MustNewConstMetric(descCPUAlloc, prometheus.GaugeValue, float64(cpuAlloc))
	ch <- prometheus.MustNewConstMetric(descGPUWhole, prometheus.GaugeValue, float64(whole))
	ch <- prometheus.MustNewConstMetric(descGPUShare, prometheus.GaugeValue, float64(shared))
	ch <- prometheus.MustNewConstMetric(descGPUMemC, prometheus.GaugeValue, float64(committedMB)*mib)
	ch <- prometheus.MustNewConstMetric(descGPUMemS, prometheus.GaugeValue, float64(sharedMB)*mib)
	ch <- prometheus.MustNewConstMetric(descGPUFrag, prometheus.GaugeValue, float64(stranded))
}

const mib = 1 << 20

// maxShapes bounds the distinct pending request shapes strandedGPUs
// tries per node, so that a scrape stays cheap with a queue of many odd
// jobs; shapes past it are not tried (the figure can then only be
// higher than the truth).
const maxShapes = 256

// gpuShape is what a pending GPU job needs on one node, at least: the
// smallest per-node share of its GPUs, with its CPUs and memory.
type gpuShape struct {
	part     string
	gpuType  string
	gpus     int
	cpus     int
	memMB    int64
	wholeMem bool
	sliceMB  int64
	slicePct int
}

// shapeOf is job j's smallest per-node GPU need (ok false for a job
// that wants no GPU). It mirrors the scheduler's per-node slots: tasks
// and GPUs spread evenly over the nodes, CPUs per task or per GPU,
// memory per node, CPU or GPU.
func shapeOf(j *api.Job, defMemPerCPU int64) (gpuShape, bool) {
	n := j.ReqNodes()
	tasks := j.TasksPerNode
	if tasks == 0 {
		tasks = max(j.ReqTasks()/n, 1)
	}
	var gpus int
	switch {
	case j.GPUsPerNode > 0:
		gpus = j.GPUsPerNode
	case j.GPUs > 0:
		gpus = max(j.GPUs/n, 1)
	case j.GPUsPerTask > 0:
		gpus = j.GPUsPerTask * tasks
	case j.Sliced():
		gpus = 1
	default:
		return gpuShape{}, false
	}
	sh := gpuShape{part: j.Partition, gpuType: j.GPUType, gpus: gpus, cpus: max(tasks*j.ReqCPUsPerTask(), 1)}
	if j.CPUsPerGPU > 0 {
		sh.cpus = max(sh.cpus, gpus*j.CPUsPerGPU)
	}
	switch {
	case j.MemPerNodeMB == api.MemWholeNode:
		sh.wholeMem = true
	case j.MemPerNodeMB > 0:
		sh.memMB = j.MemPerNodeMB
	case j.MemPerCPUMB > 0:
		sh.memMB = j.MemPerCPUMB * int64(sh.cpus)
	case j.MemPerGPUMB > 0:
		sh.memMB = j.MemPerGPUMB * int64(gpus)
	default:
		sh.memMB = defMemPerCPU * int64(sh.cpus)
	}
	if j.GPUMemMB > 0 || j.GPUComputePct > 0 {
		sh.sliceMB, sh.slicePct = j.GPUMemMB, j.GPUComputePct
	}
	return sh, true
}

// strandedGPUs is the fragmentation figure: free GPUs on usable nodes
// where no pending GPU job's smallest per-node need fits now. It is 0
// when no GPU job is pending: idle GPUs nobody asks for are not
// fragmented. Computed at scrape time from live state, in O(shapes ×
// nodes). Called with mu held.
func (s *Server) strandedGPUs() int {
	shapes := map[gpuShape]struct{}{}
	for _, j := range s.jobs {
		if j.State != api.StatePending || j.HoldKind != api.HoldNone || j.Hold {
			continue
		}
		if sh, ok := shapeOf(j, s.cl.Scheduler.DefMemPerCPUMB); ok && len(shapes) < maxShapes {
			shapes[sh] = struct{}{}
		}
	}
	if len(shapes) == 0 {
		return 0
	}
	stranded := 0
	for _, n := range s.nodes {
		if ok, _ := n.usable(); !ok {
			continue
		}
		free := freeGPUs(n)
		if free == 0 {
			continue
		}
		fits := false
		for sh := range shapes {
			if s.shapeFits(n, sh, free) {
				fits = true
				break
			}
		}
		if !fits {
			stranded += free
		}
	}
	return stranded
}

// freeGPUs counts n's healthy GPUs that no job holds.
func freeGPUs(n *nodeRec) int {
	free := 0
	for _, d := range n.GPUs {
		if (d.Health == "" || d.Health == gres.Healthy) && !slices.Contains(n.AllocGPUs, d.Index) {
			free++
		}
	}
	return free
}

// shapeFits reports whether sh fits n's free resources now; free is n's
// free GPU count.
func (s *Server) shapeFits(n *nodeRec, sh gpuShape, free int) bool {
	if !slices.Contains(n.Partitions, sh.part) || n.CPUs-n.AllocCPUs < sh.cpus {
		return false
	}
	if sh.gpuType != "" && !strings.EqualFold(sh.gpuType, n.GPUModel()) {
		return false
	}
	if sh.wholeMem && n.AllocMemMB > 0 || n.MemoryMB-n.AllocMemMB < sh.memMB {
		return false
	}
	if sh.sliceMB == 0 && sh.slicePct == 0 {
		return free >= sh.gpus
	}
	p := s.partitions[sh.part]
	if p == nil || !p.GPUSlicing {
		return false
	}
	ratio := func(r float64) float64 {
		if r <= 0 {
			return 1
		}
		return r
	}
	memRatio, pctRatio := ratio(p.GPUMemOversubscribe), ratio(p.GPUComputeOversubscribe)
	room := free
	for _, g := range n.SharedGPUs {
		if float64(g.MemMB+sh.sliceMB) <= float64(n.GPUMemoryMB(g.Index))*memRatio &&
			float64(g.ComputePct+sh.slicePct) <= 100*pctRatio {
			room++
		}
	}
	return room >= sh.gpus
}
