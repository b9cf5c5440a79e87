package ctld

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tide-hpc/tide/ctld/api"
)

// metrics are tidectld's Prometheus metrics. Gauges of current state are
// computed at scrape time from live state, so they can never drift.
type metrics struct {
	reg         *prometheus.Registry
	submissions prometheus.Counter
	ends        *prometheus.CounterVec
	cycle       prometheus.Histogram
	startDelay  prometheus.Histogram
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		submissions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tide_submissions_total", Help: "Jobs accepted by the controller."}),
		ends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tide_jobs_ended_total", Help: "Jobs that reached a final state, by state."}, []string{"state"}),
		cycle: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tide_schedule_cycle_seconds", Help: "Duration of one scheduling pass.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		startDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tide_job_queue_wait_seconds", Help: "Time from submission to start.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 20)}),
	}
	m.reg.MustRegister(m.submissions, m.ends, m.cycle, m.startDelay, &stateCollector{s: s})
	return m
}

func (m *metrics) submitted()                 { m.submissions.Inc() }
func (m *metrics) ended(st api.JobState)      { m.ends.WithLabelValues(string(st)).Inc() }
func (m *metrics) pass(d time.Duration)       { m.cycle.Observe(d.Seconds()) }
func (m *metrics) started(wait time.Duration) { m.startDelay.Observe(wait.Seconds()) }

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

var (
	descJobs     = prometheus.NewDesc("tide_jobs", "Jobs held by the controller, by state.", []string{"state"}, nil)
	descNodes    = prometheus.NewDesc("tide_nodes", "Nodes by sinfo state.", []string{"state"}, nil)
	descGPUs     = prometheus.NewDesc("tide_gpus", "GPUs of registered nodes.", nil, nil)
	descGPUAlloc = prometheus.NewDesc("tide_gpus_allocated", "GPUs allocated to jobs.", nil, nil)
	descCPUAlloc = prometheus.NewDesc("tide_cpus_allocated", "CPUs allocated to jobs.", nil, nil)
)

// stateCollector reads live state at scrape time.
type stateCollector struct{ s *Server }

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descNodes, descGPUs, descGPUAlloc, descCPUAlloc} {
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
	gpus, gpuAlloc, cpuAlloc := 0, 0, 0
	for _, n := range s.nodes {
		nodes[n.SinfoState()]++
		gpus += len(n.GPUs)
		gpuAlloc += n.GPUsInUse()
		cpuAlloc += n.AllocCPUs
	}
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
}
