package ctld

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// testGPUs is a node's GPU status with utilisation util and memory mem
// (MiB) on the GPUs listed, the others idle; procs lists, per GPU, the
// processes (pid → MiB) whose jobs pids maps.
type testGPUs struct {
	util  map[int]int
	mem   map[int]int64
	procs map[int]map[int]int64
}

// gpuStatusSync sends node's GPU status r (8 GPUs) with a pid → job
// map, and tided's running reports us.
func (h *harness) gpuStatusSync(node string, r testGPUs, pids map[int]uint64, us ...api.NodeUsage) {
	h.t.Helper()
	st := make([]gres.Status, 8)
	for i := range st {
		st[i] = gres.Status{Index: i, Health: gres.Healthy, UtilPct: r.util[i], MemUsedMB: r.mem[i]}
		for pid, mb := range r.procs[i] {
			st[i].Processes = append(st[i].Processes, gres.ProcUsage{PID: pid, MemMB: mb})
		}
	}
	if _, err := h.s.sync(context.Background(), api.NodeSyncRequest{Name: node, GPUStatus: st, GPUProcJobs: pids, Usage: us}); err != nil {
		h.t.Fatal(err)
	}
}

// sampleNow runs the controller's sampling round at the harness clock.
func (h *harness) sampleNow() {
	h.s.mu.Lock()
	h.s.sampleJobUsage(h.clock.now())
	h.s.flushAll()
	h.s.mu.Unlock()
}

// batchUsage is tided's running report of job id's batch step: cpu µs
// of CPU time and rss bytes after samples samples.
func batchUsage(id uint64, samples int, cpu, rss uint64) api.NodeUsage {
	return api.NodeUsage{JobID: id, StepID: api.BatchStepID, Samples: samples,
		Tasks: []api.TaskUsage{{Task: 0, UserUsec: cpu, RSS: rss}}}
}

// TestJobUsageSeries follows a 2-GPU job, a slice sharing a GPU with
// another slice, and a CPU-only job through three sampling rounds: GPU
// figures from the heartbeats' readings of the GPUs each job holds (a
// slice charged with its own processes' memory), CPU from the growth of
// tided's reports, the series and its latest sample as the API answers
// them, and the end of the series when the job ends.
func TestJobUsageSeries(t *testing.T) {
	h := newHarnessWith(t, testConfig+"job_usage: {interval: 30s}\n")
	h.register("gpu01")
	h.register("gpu02")
	gpuJob := h.submit(api.JobSpec{GPUs: 2, NodeList: []string{"gpu01"}})
	slice := h.submit(api.JobSpec{GPUMemMB: 8192, NodeList: []string{"gpu02"}})
	other := h.submit(api.JobSpec{GPUMemMB: 8192, NodeList: []string{"gpu02"}})
	cpuJob := h.submit(api.JobSpec{NodeList: []string{"gpu02"}})
	h.s.schedulePass()
	for _, id := range []uint64{gpuJob, slice, other, cpuJob} {
		if j := h.job(id); j.State != api.StateRunning {
			t.Fatalf("job %d %s %s", id, j.State, j.ReasonDetail)
		}
	}
	g := h.job(gpuJob).Alloc[0].GPUs
	sg := h.job(slice).Alloc[0].GPUs[0]
	if og := h.job(other).Alloc[0].GPUs[0]; og != sg {
		t.Fatalf("the slices are on GPUs %d and %d, want one GPU", sg, og)
	}

	h.clock.add(10 * time.Second)
	h.gpuStatusSync("gpu01", testGPUs{util: map[int]int{g[0]: 80, g[1]: 60}, mem: map[int]int64{g[0]: 10000, g[1]: 20000}},
		nil, batchUsage(gpuJob, 1, 5_000_000, 1<<30))
	h.gpuStatusSync("gpu02", testGPUs{util: map[int]int{sg: 40}, mem: map[int]int64{sg: 7000},
		procs: map[int]map[int]int64{sg: {501: 3000, 502: 4000}}}, map[int]uint64{501: slice, 502: other},
		batchUsage(cpuJob, 1, 20_000_000, 2<<30))
	h.sampleNow()

	h.clock.add(30 * time.Second)
	h.gpuStatusSync("gpu01", testGPUs{util: map[int]int{g[0]: 100, g[1]: 90}, mem: map[int]int64{g[0]: 12000, g[1]: 20000}},
		nil, batchUsage(gpuJob, 2, 20_000_000, 1<<30+512<<20))
	h.sampleNow()

	// No new report of the CPU job's: its rate stands. The GPU job's
	// CPU grows by 6 s over the 30 s.
	h.clock.add(30 * time.Second)
	h.gpuStatusSync("gpu01", testGPUs{util: map[int]int{g[0]: 0, g[1]: 0}}, nil, batchUsage(gpuJob, 3, 26_000_000, 1<<30))
	h.sampleNow()

	u, ok := h.s.JobUsageSeries(gpuJob)
	if !ok {
		t.Fatal("no series of the GPU job")
	}
	// Points begin half an interval before their samples.
	start := h.job(gpuJob).StartTime.Add(10*time.Second - 15*time.Second)
	wantPoints := []api.UsagePoint{
		{Time: start, SpanSeconds: 30, Samples: 1, GPUSamples: 1, CPUSamples: 1, GPUUtil: 70, GPUUtilMax: 70, GPUMem: 30000 << 20, CPUs: 0.5, RSS: 1 << 30},
		{Time: start.Add(30 * time.Second), SpanSeconds: 30, Samples: 1, GPUSamples: 1, CPUSamples: 1, GPUUtil: 95, GPUUtilMax: 95, GPUMem: 32000 << 20, CPUs: 0.5, RSS: 1<<30 + 512<<20},
		{Time: start.Add(60 * time.Second), SpanSeconds: 30, Samples: 1, GPUSamples: 1, CPUSamples: 1, GPUUtil: 0, GPUUtilMax: 0, GPUMem: 0, CPUs: 0.2, RSS: 1 << 30},
	}
	if diff := cmp.Diff(wantPoints, u.Points, cmpFloat()); diff != "" {
		t.Errorf("GPU job's points (-want +got):\n%s", diff)
	}
	if u.GPUs != 2 || u.StepSeconds != 30 || math.Abs(u.GPUUtilMean-55) > 1e-9 || u.GPUMemMax != 32000<<20 || u.RSSMax != 1<<30+512<<20 {
		t.Errorf("GPU job's series %+v", u)
	}
	if u.Last == nil || !u.Last.GPU || u.Last.GPUUtil != 0 || !u.Last.CPU || math.Abs(u.Last.CPUs-0.2) > 1e-9 {
		t.Errorf("GPU job's last sample %+v", u.Last)
	}

	// gpu02's reading stands (no new one came): three equal points.
	su, _ := h.s.JobUsageSeries(slice)
	for i, p := range su.Points {
		if p.GPUMem != 3000<<20 || p.GPUUtil != 40 {
			t.Errorf("slice's point %d %+v, want its own process's 3000 MiB on a GPU at 40%%", i, p)
		}
	}
	if len(su.Points) != 3 {
		t.Errorf("slice has %d points, want 3", len(su.Points))
	}
	cu, _ := h.s.JobUsageSeries(cpuJob)
	if cu.Last == nil || cu.Last.GPU || !cu.Last.CPU || cu.Last.RSS != 2<<30 || len(cu.Points) != 3 {
		t.Fatalf("CPU job's series %+v (last %+v)", cu, cu.Last)
	}
	// 20 s of CPU over the 10 s since its start: 2 CPUs, kept while
	// no new report comes.
	for i, p := range cu.Points {
		if p.GPUSamples != 0 || math.Abs(p.CPUs-2) > 1e-9 {
			t.Errorf("CPU job's point %d: %+v, want 2 CPUs and no GPU reading", i, p)
		}
	}

	// A job that starts now: the nodes' last readings arrived before
	// it (and one arriving within 5 s may have been taken before it).
	late := h.submit(api.JobSpec{GPUs: 1, NodeList: []string{"gpu01"}})
	h.s.schedulePass()
	h.clock.add(3 * time.Second)
	h.gpuStatusSync("gpu01", testGPUs{}, nil)
	h.clock.add(27 * time.Second)
	h.sampleNow()
	if lu, _ := h.s.JobUsageSeries(late); lu.Last == nil || lu.Last.GPU {
		t.Errorf("a job's first sample used a reading from its start: %+v", lu.Last)
	}

	// The API: the owner sees the series with its points; the list
	// without them.
	w := h.get(uidAlice, "/api/v1/jobs/"+strconv.FormatUint(gpuJob, 10)+"/usage", "")
	var got api.JobUsage
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &got) != nil || len(got.Points) != 4 || got.JobID != gpuJob {
		t.Fatalf("GET usage: %d %s", w.Code, w.Body)
	}
	w = h.get(uidAlice, "/api/v1/jobs/usage?job="+strconv.FormatUint(gpuJob, 10)+"&job="+strconv.FormatUint(cpuJob, 10)+"&job=999", "")
	var list api.JobUsageList
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &list) != nil || len(list.Jobs) != 2 ||
		list.Jobs[0].JobID != gpuJob || list.Jobs[1].JobID != cpuJob || list.Jobs[0].Points != nil || list.Jobs[0].Last == nil {
		t.Fatalf("GET usage list: %d %s", w.Code, w.Body)
	}
	if w := h.get(uidAlice, "/api/v1/jobs/usage?job=x", ""); w.Code != http.StatusBadRequest {
		t.Errorf("GET usage list with a bad id: %d %s", w.Code, w.Body)
	}
	// A job the controller knows nothing of.
	if w := h.get(uidAlice, "/api/v1/jobs/999/usage", ""); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "Invalid job id specified") {
		t.Errorf("GET usage of an unknown job: %d %s", w.Code, w.Body)
	}
	// A pending job: an empty series.
	pending := h.submit(api.JobSpec{GPUs: 8, NodeList: []string{"gpu01"}})
	w = h.get(uidAlice, "/api/v1/jobs/"+strconv.FormatUint(pending, 10)+"/usage", "")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"points":[]`) {
		t.Errorf("GET usage of a pending job: %d %s", w.Code, w.Body)
	}

	// The job ends: its series ends and stays job_usage.keep.
	h.sync("gpu01", finished(gpuJob, 0))
	h.clock.add(30 * time.Second)
	h.sampleNow()
	if u, ok := h.s.JobUsageSeries(gpuJob); !ok || u.End.IsZero() || len(u.Points) != 4 {
		t.Fatalf("series after the end: %v %+v", ok, u)
	}
	h.clock.add(time.Hour)
	h.sampleNow()
	if _, ok := h.s.JobUsageSeries(gpuJob); ok {
		t.Error("series kept past job_usage.keep")
	}
}

// cmpFloat compares floats to 1e-6, for means of float32 sums.
func cmpFloat() cmp.Option {
	return cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-6 })
}

// TestJobUsagePrivacy: under private_data usage (or jobs) another
// user's series is answered as a job that does not exist, and left out
// of the list; operators see it; without private data everyone does.
func TestJobUsagePrivacy(t *testing.T) {
	for _, tt := range []struct {
		words string
		// bobSees: bob sees alice's job 1's usage.
		bobSees bool
	}{{"", true}, {"usage", false}, {"jobs", false}, {"events,nodes", true}} {
		t.Run("private_data="+tt.words, func(t *testing.T) {
			h := newPrivateHarness(t, privateConfig(tt.words))
			h.sampleNow()
			for _, c := range []struct {
				uid  uint32
				sees bool
			}{{uidAlice, true}, {uidBob, tt.bobSees}, {uidCarol, true}, {uidRoot, true}} {
				w := h.get(c.uid, "/api/v1/jobs/1/usage", "")
				if (w.Code == http.StatusOK) != c.sees || !c.sees && (w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "Invalid job id specified")) {
					t.Errorf("uid %d GET /api/v1/jobs/1/usage: %d %s; want seen %v", c.uid, w.Code, w.Body, c.sees)
				}
				w = h.get(c.uid, "/api/v1/jobs/usage", "")
				var list api.JobUsageList
				if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
					t.Fatal(err)
				}
				found := false
				for _, u := range list.Jobs {
					found = found || u.JobID == 1
				}
				if found != c.sees {
					t.Errorf("uid %d: job 1 in the usage list %v, want %v (%s)", c.uid, found, c.sees, w.Body)
				}
			}
		})
	}
}

// TestSeriesCompaction feeds a series 1000 samples a second apart with
// room for 8 points: the points never pass 8, the step doubles to cover
// the whole run, no sample is lost, and means and peaks survive the
// merges.
func TestSeriesCompaction(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ser := &jobSeries{start: start, stepSec: 1}
	var sum float64
	for k := range 1000 {
		util := float64(k % 100)
		sum += util
		ser.add(api.UsageSample{Time: start.Add(time.Duration(k) * time.Second), GPU: true, GPUUtil: util,
			GPUMem: uint64(k) << 20, CPU: k%2 == 0, CPUs: 2, RSS: uint64(1000-k) << 20}, 8)
		if len(ser.pts) > 8 {
			t.Fatalf("sample %d: %d points", k, len(ser.pts))
		}
	}
	u := ser.export(true)
	if u.StepSeconds != 128 || len(u.Points) != 8 {
		t.Fatalf("step %d s with %d points, want 128 s and 8 points (1000 s in 8 points of at most 128 s)", u.StepSeconds, len(u.Points))
	}
	n, gpu := 0, 0.0
	for i, p := range u.Points {
		if want := start.Add(time.Duration(i*128) * time.Second); !p.Time.Equal(want) {
			t.Errorf("point %d at %s, want %s", i, p.Time, want)
		}
		n += p.Samples
		gpu += p.GPUUtil * float64(p.GPUSamples)
		if p.CPUSamples*2 != p.Samples || p.CPUs != 2 {
			t.Errorf("point %d: %d CPU samples of %d at %v CPUs", i, p.CPUSamples, p.Samples, p.CPUs)
		}
	}
	if n != 1000 || math.Abs(gpu-sum) > 1e-3*sum {
		t.Errorf("%d samples, utilisation sum %v; want 1000 and %v", n, gpu, sum)
	}
	if last := u.Points[7]; last.GPUMem != 999<<20 || last.GPUUtilMax != 99 {
		t.Errorf("last point's peaks: %+v", last)
	}
	if first := u.Points[0]; first.RSS != 1000<<20 {
		t.Errorf("first point's RSS %d, want the first sample's 1000 MiB", first.RSS)
	}
	if math.Abs(u.GPUUtilMean-sum/1000) > 1e-9 || u.GPUMemMax != 999<<20 || u.RSSMax != 1000<<20 {
		t.Errorf("whole-series figures %+v", u)
	}
}

// TestJobGPUMetrics scrapes the per-job metrics: the running GPU job's
// latest sample with its user and queue (the user hidden under
// private_data), a job whose GPUs read nothing (a static GPU list) not
// listed.
func TestJobGPUMetrics(t *testing.T) {
	for _, private := range []bool{false, true} {
		cfg := testConfig
		if private {
			cfg += "private_data: [usage]\n"
		}
		h := newHarnessWith(t, cfg)
		h.register("gpu01")
		h.register("gpu02")
		id := h.submit(api.JobSpec{GPUs: 2, NodeList: []string{"gpu01"}})
		blind := h.submit(api.JobSpec{GPUs: 1, NodeList: []string{"gpu02"}})
		h.s.schedulePass()
		g := h.job(id).Alloc[0].GPUs
		// A reading within 5 s of the start may predate the job.
		h.clock.add(10 * time.Second)
		h.gpuStatusSync("gpu01", testGPUs{util: map[int]int{g[0]: 30, g[1]: 50}, mem: map[int]int64{g[0]: 1024, g[1]: 1024}}, nil)
		unknown := make([]gres.Status, 8)
		for i := range unknown {
			unknown[i] = gres.Status{Index: i, Health: gres.Healthy, UtilPct: gres.UsageUnknown, MemUsedMB: gres.UsageUnknown}
		}
		if _, err := h.s.sync(context.Background(), api.NodeSyncRequest{Name: "gpu02", GPUStatus: unknown}); err != nil {
			t.Fatal(err)
		}
		h.sampleNow()
		mfs, err := h.s.metrics.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		wantUser := "alice"
		if private {
			wantUser = ""
		}
		util := family(mfs, "tide_job_gpu_utilization")
		if util == nil || len(util.Metric) != 1 {
			t.Fatalf("private %v: tide_job_gpu_utilization %v, want one series (job %d; not job %d)", private, util, id, blind)
		}
		labels := map[string]string{}
		for _, l := range util.Metric[0].Label {
			labels[l.GetName()] = l.GetValue()
		}
		if diff := cmp.Diff(map[string]string{"job_id": strconv.FormatUint(id, 10), "user": wantUser, "queue": ""}, labels); diff != "" {
			t.Errorf("private %v: labels (-want +got):\n%s", private, diff)
		}
		if v := util.Metric[0].GetGauge().GetValue(); v != 40 {
			t.Errorf("utilisation %v, want 40", v)
		}
		if mem := family(mfs, "tide_job_gpu_memory_bytes"); mem == nil || mem.Metric[0].GetGauge().GetValue() != 2048<<20 {
			t.Errorf("memory %v, want 2 GiB", mem)
		}
		// The cluster's mean: 30 and 50 on gpu01's allocated GPUs, 6
		// idle ones; gpu02 reads nothing.
		for label, want := range map[string]float64{"all": 10, "allocated": 40} {
			if v, ok := gaugeWith(mfs, "tide_gpu_utilization_mean", "gpus", label); !ok || v != want {
				t.Errorf("tide_gpu_utilization_mean{gpus=%q} = %v (%v), want %v", label, v, ok, want)
			}
		}
	}
}

// family finds the metric family name in mfs.
func family(mfs []*dto.MetricFamily, name string) *dto.MetricFamily {
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

// gaugeWith is the value of name's series with label key=value.
func gaugeWith(mfs []*dto.MetricFamily, name, key, value string) (float64, bool) {
	mf := family(mfs, name)
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.Metric {
		for _, l := range m.Label {
			if l.GetName() == key && l.GetValue() == value {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// BenchmarkSampleJobUsage times one sampling round of 10,000 running
// jobs (8,000 one-GPU jobs and 2,000 CPU jobs) on 1,000 nodes × 8 GPUs,
// every job with a running report and every node a GPU reading, and
// reports the memory of a full series (job_usage.points points).
func BenchmarkSampleJobUsage(b *testing.B) {
	s := scaleServer(b, 1000)
	alice := caller{uid: 1000, gid: 1000, user: "alice", known: true}
	for k := range 10000 {
		spec := api.JobSpec{GPUs: 1, CPUsPerTask: 4, Script: "#!/bin/sh\n", WorkDir: "/w"}
		if k%5 == 4 {
			spec.GPUs = 0
		}
		if _, err := s.submit(context.Background(), alice, api.SubmitRequest{Spec: spec}); err != nil {
			b.Fatal(err)
		}
	}
	s.schedulePass()
	now := time.Now().Add(time.Minute)
	s.mu.Lock()
	s.acct.live = map[usageKey]api.NodeUsage{}
	s.series.gpuAt = map[string]time.Time{}
	running := 0
	for _, j := range s.jobs {
		if j.State == api.StateRunning {
			running++
			s.acct.live[usageKey{j.ID, api.BatchStepID, j.BatchHost()}] = batchUsage(j.ID, 1, 1e6, 1<<30)
		}
	}
	for name, n := range s.nodes {
		n.Responding = true
		st := make([]gres.Status, 8)
		for i := range st {
			st[i] = gres.Status{Index: i, Health: gres.Healthy, UtilPct: 50 + i, MemUsedMB: 1000}
		}
		n.GPUStatus = st
		s.series.gpuAt[name] = now
	}
	s.mu.Unlock()
	if running != 10000 {
		b.Fatalf("%d jobs running, want 10000", running)
	}
	interval := s.cl.JobUsage.Interval
	round := func(k int) {
		s.mu.Lock()
		s.sampleJobUsage(now.Add(time.Duration(k) * interval))
		s.mu.Unlock()
	}
	for k := range s.cl.JobUsage.Points + 1 {
		round(k)
	}
	s.mu.Lock()
	ser := s.series.jobs[1]
	size := int(unsafe.Sizeof(*ser)) + cap(ser.pts)*int(unsafe.Sizeof(seriesPoint{}))
	ok := len(s.series.jobs) == 10000 && ser.hasLast && ser.last.GPU
	s.mu.Unlock()
	if !ok {
		b.Fatal("the rounds did not sample every job with its GPUs")
	}
	k := s.cl.JobUsage.Points + 1
	for b.Loop() {
		round(k)
		k++
	}
	b.ReportMetric(float64(size), "B/series")
}
