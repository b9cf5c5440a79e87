package ctld

// Usage series of jobs (issue 25): every job_usage.interval the
// controller samples each running job from what it already holds, and
// appends the sample to the job's series.
//
//   - GPU: the GPUs the job holds, as their node's latest GPU reading
//     shows them (heartbeats, at most every 5 s; a reading that arrived
//     within 5 s of the job's start may predate it and is not used): the
//     mean utilisation over the job's GPUs, and the memory in use on its
//     whole GPUs plus what its processes hold on the GPUs it shares (the
//     node's pid → job map; a slice alone on its GPU is charged the
//     GPU's memory). A GPU whose node does not respond, is unhealthy, or
//     reads gres.UsageUnknown (a static GPU list) is not read: a job with
//     no GPU read has no GPU figures, never idle ones.
//   - CPU and memory: tided's latest reports of the job's running steps
//     (stepacct.go, every acct_gather_frequency): the CPUs kept busy
//     (the growth of the steps' CPU time between two reports over the
//     time between them) and the tasks' resident memory (their peaks).
//
// Memory is bounded: a series holds at most job_usage.points points of
// 36 bytes (64 by default, 2.3 KiB a job); when they are used up,
// neighbours merge pairwise and each point covers twice the time, so a
// series always spans the whole run. A finished job's series is kept
// job_usage.keep (1 h), and at most maxFinishedSeries of them. Series
// live in memory only: a restarted controller starts them afresh (sacct
// keeps the steps' totals and peaks).
//
// The API serves them (GET /api/v1/jobs/{id}/usage with the points, GET
// /api/v1/jobs/usage without), under the privacy rules of the job's
// usage; the per-job metrics (tide_job_gpu_utilization,
// tide_job_gpu_memory_bytes) show the running jobs' latest samples; and
// the idle-GPU flag judges each sample (idlegpu.go).

import (
	"cmp"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/config"
	"github.com/tide-hpc/tide/gres"
)

// sampleSlack is how early a sampling round may come.
const sampleSlack = 200 * time.Millisecond

// maxFinishedSeries bounds the finished jobs' series kept in memory:
// past it the oldest ends go first, whatever job_usage.keep says.
const maxFinishedSeries = 10000

func init() {
	// job_usage is reloadable (reconfigure.go): every sample reads it.
	reloaders["job_usage"] = func(d, s *config.Config) { d.JobUsage = s.JobUsage }
}

// seriesState is the controller's usage series; guarded by Server.mu.
type seriesState struct {
	jobs map[uint64]*jobSeries
	// last is the time of the last sampling round.
	last time.Time
	// procJobs is each node's pid → job map of its last GPU reading
	// (noteGPUReading), to charge shared GPUs' memory to their slices;
	// gpuAt is when each node's last reading arrived.
	procJobs map[string]map[int]uint64
	gpuAt    map[string]time.Time
	// flags counts the jobs flagged for idle GPUs since the start.
	flags uint64
	// hooks runs job_usage.idle_gpu_hook (idlegpu.go).
	hooks hookRunner
}

// jobSeries is one job incarnation's series.
type jobSeries struct {
	jobID   uint64
	restart int
	userID  uint32
	user    string
	queue   string
	gpus    int
	// start is where the first point begins (half an interval before
	// the first sample); points are stepSec apart from it. end is when
	// the job was seen no longer running.
	start, end time.Time
	stepSec    uint32
	pts        []seriesPoint
	last       api.UsageSample
	hasLast    bool
	// Whole-series figures.
	gpuSum            float64
	gpuN              int
	gpuMemMax, rssMax uint64
	// The CPU baseline: the steps' CPU time and report count at cpuAt,
	// and the rate they gave (cpuOK: a rate is known).
	cpuTotal   uint64
	cpuSamples int
	cpuAt      time.Time
	cpus       float64
	cpuOK      bool
	// idleSince and flagged are the idle-GPU state (idlegpu.go).
	idleSince, flagged time.Time
}

// seriesPoint is one point: the merged samples of stepSec seconds from
// the series' start + off. Means are kept as sums over their counts.
type seriesPoint struct {
	off             uint32
	n, gpuN, cpuN   uint32
	gpuUtil, cpus   float32
	gpuMemMB, rssMB uint32
	gpuMax          uint8
}

// sampleJobUsage samples every running job when job_usage.interval has
// passed since the last round, judges the idle-GPU flag, and ends and
// drops the series of jobs that stopped. Called with mu held, from the
// loop's housekeeping tick.
func (s *Server) sampleJobUsage(now time.Time) {
	cfg := s.cl.JobUsage
	ss := &s.series
	if cfg.Interval <= 0 {
		ss.jobs = nil // turned off (by a reload)
		return
	}
	// The loop's tick is a second: a round a little early (the tick's
	// jitter) is taken rather than put off by a whole tick.
	if !ss.last.IsZero() && now.Sub(ss.last) < cfg.Interval-sampleSlack && !now.Before(ss.last) {
		return
	}
	ss.last = now
	if ss.jobs == nil {
		ss.jobs = map[uint64]*jobSeries{}
	}
	live := s.liveUsageTotals()
	for _, j := range s.jobs {
		if j.State != api.StateRunning {
			continue
		}
		ser := ss.jobs[j.ID]
		if ser == nil || ser.restart != j.Restarts {
			ser = newJobSeries(j, now, cfg.Interval)
			ss.jobs[j.ID] = ser
		}
		ser.end = time.Time{} // running (again, after a suspension)
		smp := s.sampleJob(j, ser, live[j.ID], now)
		ser.add(smp, cfg.Points)
		s.judgeIdle(j, ser, smp, now) // idlegpu.go
	}
	var ended []*jobSeries
	for id, ser := range ss.jobs {
		if j := s.jobs[id]; ser.end.IsZero() && (j == nil || j.State != api.StateRunning || j.Restarts != ser.restart) {
			ser.end = now
		}
		if ser.end.IsZero() {
			continue
		}
		if now.Sub(ser.end) >= cfg.Keep {
			delete(ss.jobs, id)
			continue
		}
		ended = append(ended, ser)
	}
	if len(ended) > maxFinishedSeries {
		slices.SortFunc(ended, func(a, b *jobSeries) int { return a.end.Compare(b.end) })
		for _, ser := range ended[:len(ended)-maxFinishedSeries] {
			delete(ss.jobs, ser.jobID)
		}
	}
}

// newJobSeries starts j's series with its first sample now. Points
// begin half an interval before their first sample, so that a sample a
// little early or late (the loop's tick) still falls in its own point.
func newJobSeries(j *api.Job, now time.Time, interval time.Duration) *jobSeries {
	return &jobSeries{jobID: j.ID, restart: j.Restarts, userID: j.UserID, user: j.User, queue: j.Account,
		gpus: j.AllocGPUs(), start: now.Add(-interval / 2), stepSec: uint32(max(interval/time.Second, 1))}
}

// liveTotal is what tided's latest running reports say of one job's
// running steps.
type liveTotal struct {
	reports int
	// cpu is their CPU time (µs), samples their sample counts, rss the
	// tasks' resident memory (bytes).
	cpu     uint64
	samples int
	rss     uint64
}

// liveUsageTotals sums tided's running reports by job. Called with mu
// held.
func (s *Server) liveUsageTotals() map[uint64]liveTotal {
	out := map[uint64]liveTotal{}
	for k, u := range s.acct.live {
		t := out[k.job]
		t.reports++
		t.samples += u.Samples
		for _, task := range u.Tasks {
			t.cpu += task.UserUsec + task.SystemUsec
			t.rss += task.RSS
		}
		out[k.job] = t
	}
	return out
}

// sampleJob is running job j's sample now. Called with mu held.
func (s *Server) sampleJob(j *api.Job, ser *jobSeries, lt liveTotal, now time.Time) api.UsageSample {
	smp := api.UsageSample{Time: now}
	var util float64
	var read int
	var mem uint64
	for _, a := range j.Alloc {
		if len(a.GPUs) == 0 {
			continue
		}
		n := s.nodes[a.Node]
		if n == nil || !n.Responding || n.State == api.NodeDown {
			continue
		}
		if s.series.gpuAt[a.Node].Before(j.StartTime.Add(gpuReadingAge)) {
			// The reading may predate the job: it says nothing of it.
			continue
		}
		for _, g := range a.GPUs {
			st, ok := gpuStatusOf(n.GPUStatus, g)
			if !ok || st.Health == gres.Unhealthy || st.UtilPct < 0 || st.MemUsedMB < 0 {
				continue
			}
			read++
			util += float64(min(st.UtilPct, 100))
			mem += s.jobGPUMem(n, &a, st, j.ID)
		}
	}
	if read > 0 {
		smp.GPU, smp.GPUUtil, smp.GPUMem = true, util/float64(read), mem
	}
	if lt.reports > 0 {
		smp.RSS = lt.rss
		smp.CPUs, smp.CPU = ser.cpuRate(lt, now, j.StartTime)
	}
	return smp
}

// gpuStatusOf finds GPU index's reading in st (sorted by index as nodes
// send it; any order is searched).
func gpuStatusOf(st []gres.Status, index int) (gres.Status, bool) {
	if index >= 0 && index < len(st) && st[index].Index == index {
		return st[index], true
	}
	for _, g := range st {
		if g.Index == index {
			return g, true
		}
	}
	return gres.Status{}, false
}

// jobGPUMem is the memory job jobID holds on GPU st of node n (bytes):
// all the GPU's memory for a whole GPU, or a slice alone on its GPU;
// else what the job's processes hold, by the node's pid → job map.
// Called with mu held.
func (s *Server) jobGPUMem(n *nodeRec, a *api.NodeAlloc, st gres.Status, jobID uint64) uint64 {
	if !a.Sliced() || sliceAlone(n, st.Index) {
		return uint64(st.MemUsedMB) << 20
	}
	pj := s.series.procJobs[n.Name]
	var mb int64
	for _, p := range st.Processes {
		if p.MemMB > 0 && pj[p.PID] == jobID {
			mb += p.MemMB
		}
	}
	return uint64(mb) << 20
}

// sliceAlone reports whether at most one slice is on GPU index of n.
func sliceAlone(n *nodeRec, index int) bool {
	for _, sh := range n.SharedGPUs {
		if sh.Index == index {
			return sh.Slices <= 1
		}
	}
	return true
}

// gpuReadingAge is how old a node's GPU reading may be when it arrives:
// tided reads its GPUs at most every 5 s (noded's gpuStatusEvery) and
// sends the reading with its next sync, whose GPU status the controller
// applies when the sync arrives.
const gpuReadingAge = 5 * time.Second

// noteGPUReading records that node's sync brought a GPU reading now,
// with its pid → job map (nil: it attributes nothing). Called with mu
// held.
func (s *Server) noteGPUReading(node string, procJobs map[int]uint64) {
	if s.series.gpuAt == nil {
		s.series.gpuAt = map[string]time.Time{}
	}
	s.series.gpuAt[node] = s.now()
	if len(procJobs) == 0 {
		delete(s.series.procJobs, node)
		return
	}
	if s.series.procJobs == nil {
		s.series.procJobs = map[string]map[int]uint64{}
	}
	s.series.procJobs[node] = procJobs
}

// cpuRate is the CPUs the job kept busy, from tided's reports lt: the
// growth of its steps' CPU time since the last new report over the time
// since then. A report that left (its step ended) starts over; while
// no new report came the last rate stands. The first reading gives the
// mean since the job's start.
func (ser *jobSeries) cpuRate(lt liveTotal, now, jobStart time.Time) (float64, bool) {
	switch {
	case ser.cpuAt.IsZero() || lt.cpu < ser.cpuTotal || lt.samples < ser.cpuSamples:
		ser.cpuOK = false
		if ser.cpuAt.IsZero() && !jobStart.IsZero() && now.After(jobStart) {
			ser.cpus, ser.cpuOK = float64(lt.cpu)/1e6/now.Sub(jobStart).Seconds(), true
		}
	case lt.samples == ser.cpuSamples:
		return ser.cpus, ser.cpuOK
	default:
		if dt := now.Sub(ser.cpuAt).Seconds(); dt > 0 {
			ser.cpus, ser.cpuOK = float64(lt.cpu-ser.cpuTotal)/1e6/dt, true
		}
	}
	ser.cpuTotal, ser.cpuSamples, ser.cpuAt = lt.cpu, lt.samples, now
	return ser.cpus, ser.cpuOK
}

// add appends smp to the series, into the point of its time; when that
// point would pass maxPts, neighbours merge pairwise first.
func (ser *jobSeries) add(smp api.UsageSample, maxPts int) {
	off := uint32(max(smp.Time.Sub(ser.start), 0) / time.Second)
	for off/ser.stepSec >= uint32(maxPts) {
		ser.compact()
	}
	b := off / ser.stepSec * ser.stepSec
	if len(ser.pts) == 0 || ser.pts[len(ser.pts)-1].off != b {
		ser.pts = append(ser.pts, seriesPoint{off: b})
	}
	p := &ser.pts[len(ser.pts)-1]
	p.n++
	if smp.GPU {
		p.gpuN++
		p.gpuUtil += float32(smp.GPUUtil)
		p.gpuMax = max(p.gpuMax, uint8(math.Round(min(smp.GPUUtil, 100))))
		p.gpuMemMB = max(p.gpuMemMB, mib32(smp.GPUMem))
		ser.gpuSum += smp.GPUUtil
		ser.gpuN++
		ser.gpuMemMax = max(ser.gpuMemMax, smp.GPUMem)
	}
	if smp.CPU {
		p.cpuN++
		p.cpus += float32(smp.CPUs)
	}
	p.rssMB = max(p.rssMB, mib32(smp.RSS))
	ser.rssMax = max(ser.rssMax, smp.RSS)
	ser.last, ser.hasLast = smp, true
}

// mib32 is b in MiB, rounded up, saturated to 32 bits (4 PiB).
func mib32(b uint64) uint32 {
	return uint32(min((b+mib-1)/mib, math.MaxUint32))
}

// compact doubles the step and merges the points that fall into one.
func (ser *jobSeries) compact() {
	ser.stepSec *= 2
	out := ser.pts[:0]
	for _, p := range ser.pts {
		p.off = p.off / ser.stepSec * ser.stepSec
		if k := len(out) - 1; k >= 0 && out[k].off == p.off {
			q := &out[k]
			q.n += p.n
			q.gpuN += p.gpuN
			q.cpuN += p.cpuN
			q.gpuUtil += p.gpuUtil
			q.cpus += p.cpus
			q.gpuMemMB = max(q.gpuMemMB, p.gpuMemMB)
			q.rssMB = max(q.rssMB, p.rssMB)
			q.gpuMax = max(q.gpuMax, p.gpuMax)
			continue
		}
		out = append(out, p)
	}
	ser.pts = out
}

// export is the series as the API shows it, with its points or not.
func (ser *jobSeries) export(points bool) api.JobUsage {
	out := api.JobUsage{JobID: ser.jobID, Restart: ser.restart, UserID: ser.userID, User: ser.user, Queue: ser.queue,
		GPUs: ser.gpus, Start: ser.start, End: ser.end, StepSeconds: int64(ser.stepSec),
		GPUMemMax: ser.gpuMemMax, RSSMax: ser.rssMax, IdleSince: ser.idleSince, IdleFlagged: ser.flagged}
	if ser.gpuN > 0 {
		out.GPUUtilMean = ser.gpuSum / float64(ser.gpuN)
	}
	if ser.hasLast {
		last := ser.last
		out.Last = &last
	}
	if !points {
		return out
	}
	out.Points = make([]api.UsagePoint, 0, len(ser.pts))
	for _, p := range ser.pts {
		up := api.UsagePoint{Time: ser.start.Add(time.Duration(p.off) * time.Second), SpanSeconds: int64(ser.stepSec),
			Samples: int(p.n), GPUSamples: int(p.gpuN), CPUSamples: int(p.cpuN),
			GPUUtilMax: float64(p.gpuMax), GPUMem: uint64(p.gpuMemMB) << 20, RSS: uint64(p.rssMB) << 20}
		if p.gpuN > 0 {
			up.GPUUtil = float64(p.gpuUtil) / float64(p.gpuN)
		}
		if p.cpuN > 0 {
			up.CPUs = float64(p.cpus) / float64(p.cpuN)
		}
		out.Points = append(out.Points, up)
	}
	return out
}

// JobUsageSeries returns the usage series the controller keeps of job
// id (its latest incarnation), with its points, for the dashboard
// (ctld/ui) and tests; false when it keeps none (a job that has not run
// since the controller started, or whose series was dropped:
// job_usage.keep after its end). It applies no privacy rule: a caller
// that serves users must check, as GET /api/v1/jobs/{id}/usage does,
// that the user may see the usage of series' UserID (usageVisible). It
// takes the server's lock.
func (s *Server) JobUsageSeries(id uint64) (api.JobUsage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ser := s.series.jobs[id]
	if ser == nil {
		return api.JobUsage{}, false
	}
	return ser.export(true), true
}

// usageVisible reports whether c may see the usage of uid's jobs: the
// job must be in c's view of live jobs (private_data: jobs) and of
// accounting (jobs, usage), as sstat's live usage is.
func (s *Server) usageVisible(c caller, uid uint32) bool {
	j := api.Job{}
	j.UserID = uid
	return s.jobView(c).sees(&j) && s.accountingView(c).sees(&j)
}

// jobUsage is job id's series for c (GET /api/v1/jobs/{id}/usage): an
// empty one for a job in memory that has not been sampled (pending, or
// started since the last round); "Invalid job id specified" for a job
// the controller knows nothing of, or whose usage c may not see.
func (s *Server) jobUsage(c caller, id uint64) (api.JobUsage, error) {
	s.mu.Lock()
	var out api.JobUsage
	found := false
	if ser := s.series.jobs[id]; ser != nil {
		out, found = ser.export(true), true
	} else if j := s.jobs[id]; j != nil {
		out = api.JobUsage{JobID: j.ID, Restart: j.Restarts, UserID: j.UserID, User: j.User, Queue: j.Account,
			GPUs: j.AllocGPUs(), StepSeconds: int64(max(s.cl.JobUsage.Interval/time.Second, 1)), Points: []api.UsagePoint{}}
		found = true
	}
	s.mu.Unlock()
	if !found || !s.usageVisible(c, out.UserID) {
		return api.JobUsage{}, hiddenJob()
	}
	return out, nil
}

// jobUsages is the latest usage of the jobs ids (all the series when
// none) that c may see, without points, by job id.
func (s *Server) jobUsages(c caller, ids []uint64) []api.JobUsage {
	s.mu.Lock()
	out := []api.JobUsage{}
	if len(ids) == 0 {
		for _, ser := range s.series.jobs {
			out = append(out, ser.export(false))
		}
	} else {
		for _, id := range ids {
			if ser := s.series.jobs[id]; ser != nil {
				out = append(out, ser.export(false))
			}
		}
	}
	s.mu.Unlock()
	out = slices.DeleteFunc(out, func(u api.JobUsage) bool { return !s.usageVisible(c, u.UserID) })
	slices.SortFunc(out, func(a, b api.JobUsage) int { return cmp.Compare(a.JobID, b.JobID) })
	return slices.CompactFunc(out, func(a, b api.JobUsage) bool { return a.JobID == b.JobID })
}

// handleJobUsage answers GET /api/v1/jobs/{id}/usage with the job's
// usage series (api.JobUsage, with its points).
func (s *Server) handleJobUsage(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	u, err := s.jobUsage(s.callerOf(r), id)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, u)
}

// handleJobUsages answers GET /api/v1/jobs/usage?job=N&job=M with the
// latest usage of those jobs (every series without job=), without
// points (api.JobUsageList): scontrol show job -d.
func (s *Server) handleJobUsages(w http.ResponseWriter, r *http.Request) {
	var ids []uint64
	for _, v := range r.URL.Query()["job"] {
		id, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeErr(w, api.Invalid("Invalid job id specified: %s", v))
			return
		}
		ids = append(ids, id)
	}
	writeJSON(w, api.JobUsageList{Jobs: s.jobUsages(s.callerOf(r), ids)})
}

// The per-job and idle-GPU metrics (seriesCollector).
var (
	descJobGPUUtil = prometheus.NewDesc("tide_job_gpu_utilization",
		"Mean utilisation of a running job's GPUs at its latest sample, percent (0-100); only jobs whose GPUs were read.",
		[]string{"job_id", "user", "queue"}, nil)
	descJobGPUMem = prometheus.NewDesc("tide_job_gpu_memory_bytes",
		"GPU memory a running job held at its latest sample (its whole GPUs' memory in use, and its processes' on shared GPUs).",
		[]string{"job_id", "user", "queue"}, nil)
	descJobsIdleGPU = prometheus.NewDesc("tide_jobs_idle_gpu",
		"Running jobs flagged now for idle GPUs (under job_usage.idle_gpu_threshold for job_usage.idle_gpu_after).", nil, nil)
	descGPUsIdleReserved = prometheus.NewDesc("tide_gpus_idle_reserved",
		"GPUs held by the running jobs flagged for idle GPUs.", nil, nil)
	descIdleGPUFlags = prometheus.NewDesc("tide_idle_gpu_flags_total",
		"Jobs flagged for idle GPUs since the controller started.", nil, nil)
	descIdleGPUHooks = prometheus.NewDesc("tide_idle_gpu_hook_runs_total",
		"Runs of job_usage.idle_gpu_hook, by result: ok, failed (non-zero exit or could not start), timeout, refused (unsafe file), dropped (too many waiting).",
		[]string{"result"}, nil)
)

// seriesCollector reports the running jobs' latest samples and the
// idle-GPU flag at scrape time. Its series are bounded by the running
// jobs whose GPUs were read.
type seriesCollector struct{ s *Server }

func (c *seriesCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobGPUUtil, descJobGPUMem, descJobsIdleGPU, descGPUsIdleReserved,
		descIdleGPUFlags, descIdleGPUHooks} {
		ch <- d
	}
}

func (c *seriesCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	type row struct {
		id, user, queue string
		util            float64
		mem             uint64
	}
	var rows []row
	idleJobs, idleGPUs := 0, 0
	s.mu.Lock()
	for _, ser := range s.series.jobs {
		if !ser.end.IsZero() {
			continue
		}
		if !ser.flagged.IsZero() {
			idleJobs++
			idleGPUs += ser.gpus
		}
		if ser.hasLast && ser.last.GPU {
			rows = append(rows, row{strconv.FormatUint(ser.jobID, 10), s.metricUser(ser.user, ser.userID), ser.queue,
				ser.last.GPUUtil, ser.last.GPUMem})
		}
	}
	flags := s.series.flags
	s.mu.Unlock()
	for _, r := range rows {
		ch <- prometheus.MustNewConstMetric(descJobGPUUtil, prometheus.GaugeValue, r.util, r.id, r.user, r.queue)
		ch <- prometheus.MustNewConstMetric(descJobGPUMem, prometheus.GaugeValue, float64(r.mem), r.id, r.user, r.queue)
	}
	ch <- prometheus.MustNewConstMetric(descJobsIdleGPU, prometheus.GaugeValue, float64(idleJobs))
	ch <- prometheus.MustNewConstMetric(descGPUsIdleReserved, prometheus.GaugeValue, float64(idleGPUs))
	ch <- prometheus.MustNewConstMetric(descIdleGPUFlags, prometheus.CounterValue, float64(flags))
	for _, res := range hookResults {
		ch <- prometheus.MustNewConstMetric(descIdleGPUHooks, prometheus.CounterValue, float64(s.series.hooks.count(res)), res)
	}
}

var _ prometheus.Collector = (*seriesCollector)(nil)
