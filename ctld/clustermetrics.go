package ctld

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// Metrics the Grafana dashboard and the alerts (etc/grafana/tide.json,
// etc/prometheus/alerts.yaml) need besides the state collector's: the
// queue's depth by reason, the queues' share and borrowing, unhealthy
// GPUs, the GPUs' real utilisation, and the controller's start. All are
// computed at scrape time from live state, as the state collector's
// are; every label takes a bounded set of values (reason codes,
// configured queues, node names).
var (
	descJobsPending = prometheus.NewDesc("tide_jobs_pending",
		"Pending jobs (array tasks counted one by one) by queue and Slurm reason (Resources, Priority, Dependency…).",
		[]string{"queue", "reason"}, nil)
	descQueueUsed = prometheus.NewDesc("tide_queue_gpus_used",
		"GPUs the running jobs of a queue hold (its children's included).", []string{"queue"}, nil)
	descQueueGuaranteed = prometheus.NewDesc("tide_queue_gpus_guaranteed",
		"GPUs guaranteed to a queue (its share resolved against the cluster).", []string{"queue"}, nil)
	descQueueBorrowed = prometheus.NewDesc("tide_queue_gpus_borrowed",
		"GPUs a queue uses beyond its guarantee (borrowed from idle shares).", []string{"queue"}, nil)
	descQueueLent = prometheus.NewDesc("tide_queue_gpus_lent",
		"GPUs of a queue's idle guarantee that other queues borrow.", []string{"queue"}, nil)
	descGPUsUnhealthy = prometheus.NewDesc("tide_gpus_unhealthy",
		"GPUs their nodes report unhealthy (a critical XID error, a GPU lost).", nil, nil)
	descNodeGPUsUnhealthy = prometheus.NewDesc("tide_node_gpus_unhealthy",
		"Unhealthy GPUs of a node, for the nodes that have any.", []string{"node"}, nil)
	descGPUUtil = prometheus.NewDesc("tide_gpu_utilization_mean",
		"Mean utilisation of the GPUs whose use responding nodes read, percent (0-100): all of them, or those jobs hold; absent when none is read.",
		[]string{"gpus"}, nil)
	descGPUsRead = prometheus.NewDesc("tide_gpus_utilization_read",
		"GPUs behind tide_gpu_utilization_mean: all, or those jobs hold.", []string{"gpus"}, nil)
	descStartTime = prometheus.NewDesc("tide_controller_start_time_seconds",
		"When the controller started, in seconds since the epoch (a change is a restart).", nil, nil)
	descBuildInfo = prometheus.NewDesc("tide_build_info",
		"The controller's version, as a label; always 1.", []string{"version"}, nil)
)

// clusterCollector reads the queue, the queues and the nodes at scrape
// time.
type clusterCollector struct{ s *Server }

var _ prometheus.Collector = (*clusterCollector)(nil)

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobsPending, descQueueUsed, descQueueGuaranteed, descQueueBorrowed,
		descQueueLent, descGPUsUnhealthy, descNodeGPUsUnhealthy, descGPUUtil, descGPUsRead, descStartTime, descBuildInfo} {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	queues := s.queueList() // takes mu itself
	type pendingKey struct{ queue, reason string }
	pending := map[pendingKey]int{}
	unhealthy := map[string]int{}
	var allSum, allocSum float64
	var allN, allocN int
	s.mu.Lock()
	for _, j := range s.jobs {
		if j.State != api.StatePending {
			continue
		}
		reason := string(j.Reason)
		if reason == "" {
			reason = string(api.ReasonNone)
		}
		pending[pendingKey{j.Account, reason}] += jobCount(j)
	}
	for _, n := range s.nodes {
		for _, d := range n.GPUs {
			if d.Health == gres.Unhealthy {
				unhealthy[n.Name]++
			}
		}
		if !n.Responding || n.State == api.NodeDown {
			continue
		}
		for _, st := range n.GPUStatus {
			if st.Health == gres.Unhealthy || st.UtilPct < 0 {
				continue
			}
			u := float64(min(st.UtilPct, 100))
			allSum += u
			allN++
			if slices.Contains(n.AllocGPUs, st.Index) {
				allocSum += u
				allocN++
			}
		}
	}
	start := s.startTime
	s.mu.Unlock()

	for k, n := range pending {
		ch <- prometheus.MustNewConstMetric(descJobsPending, prometheus.GaugeValue, float64(n), k.queue, k.reason)
	}
	for _, q := range queues.Queues {
		ch <- prometheus.MustNewConstMetric(descQueueUsed, prometheus.GaugeValue, float64(q.UsedGPUs), q.Name)
		ch <- prometheus.MustNewConstMetric(descQueueGuaranteed, prometheus.GaugeValue, float64(q.Guaranteed), q.Name)
		ch <- prometheus.MustNewConstMetric(descQueueBorrowed, prometheus.GaugeValue, float64(q.BorrowedGPUs), q.Name)
		ch <- prometheus.MustNewConstMetric(descQueueLent, prometheus.GaugeValue, float64(q.LentGPUs), q.Name)
	}
	total := 0
	for node, n := range unhealthy {
		total += n
		ch <- prometheus.MustNewConstMetric(descNodeGPUsUnhealthy, prometheus.GaugeValue, float64(n), node)
	}
	ch <- prometheus.MustNewConstMetric(descGPUsUnhealthy, prometheus.GaugeValue, float64(total))
	for _, g := range []struct {
		label string
		sum   float64
		n     int
	}{{"all", allSum, allN}, {"allocated", allocSum, allocN}} {
		ch <- prometheus.MustNewConstMetric(descGPUsRead, prometheus.GaugeValue, float64(g.n), g.label)
		if g.n > 0 {
			ch <- prometheus.MustNewConstMetric(descGPUUtil, prometheus.GaugeValue, g.sum/float64(g.n), g.label)
		}
	}
	ch <- prometheus.MustNewConstMetric(descStartTime, prometheus.GaugeValue, float64(start.UnixNano())/1e9)
	ch <- prometheus.MustNewConstMetric(descBuildInfo, prometheus.GaugeValue, 1, Version)
}

// metricUser is the user label of the per-job metrics: the user's name
// (their uid when it has none), or "" when private_data hides other
// users' jobs or usage (/metrics is open to any scraper).
func (s *Server) metricUser(name string, uid uint32) string {
	if s.cl.Private.Jobs || s.cl.Private.Usage {
		return ""
	}
	if name == "" {
		return strconv.FormatUint(uint64(uid), 10)
	}
	return name
}
