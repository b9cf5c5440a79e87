package ctld

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// idleConfig samples every 10 s and flags GPUs under 5 % for a minute.
const idleConfig = testConfig + "job_usage: {interval: 10s, idle_gpu_after: 1m, idle_gpu_threshold: 5}\n"

// idleTrail is job id's idle_gpu events' messages.
func (h *harness) idleTrail(id uint64) []string {
	h.t.Helper()
	ev, err := h.s.store.Events(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range ev {
		if e.Kind == api.EventIdleGPU {
			out = append(out, e.Message)
		}
	}
	return out
}

// gauge is the value of an unlabelled metric.
func (h *harness) gauge(name string) float64 {
	h.t.Helper()
	mfs, err := h.s.metrics.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	mf := family(mfs, name)
	if mf == nil || len(mf.Metric) != 1 {
		h.t.Fatalf("metric %s: %v", name, mf)
	}
	if g := mf.Metric[0].GetGauge(); g != nil {
		return g.GetValue()
	}
	return mf.Metric[0].GetCounter().GetValue()
}

// TestIdleGPUFlag runs a 2-GPU job through busy, idle, busy and idle
// again: it is flagged once per idle stretch, at the first sample a
// minute after the stretch's first idle one, with an event naming its
// GPUs and counted by the metrics; using its GPUs again clears the flag
// with an event. Jobs whose GPUs read nothing (a static GPU list, a
// node that stopped responding) and CPU-only jobs are never flagged.
func TestIdleGPUFlag(t *testing.T) {
	h := newHarnessWith(t, idleConfig)
	h.register("gpu01")
	h.register("gpu02")
	id := h.submit(api.JobSpec{GPUs: 2, NodeList: []string{"gpu01"}})
	blind := h.submit(api.JobSpec{GPUs: 1, NodeList: []string{"gpu02"}})
	cpu := h.submit(api.JobSpec{NodeList: []string{"gpu01"}})
	h.s.schedulePass()
	g := h.job(id).Alloc[0].GPUs
	unknown := make([]gres.Status, 8)
	for i := range unknown {
		unknown[i] = gres.Status{Index: i, Health: gres.Healthy, UtilPct: gres.UsageUnknown, MemUsedMB: gres.UsageUnknown}
	}
	if _, err := h.s.sync(context.Background(), api.NodeSyncRequest{Name: "gpu02", GPUStatus: unknown}); err != nil {
		t.Fatal(err)
	}
	use := func(util int) {
		h.gpuStatusSync("gpu01", testGPUs{util: map[int]int{g[0]: util, g[1]: util}}, nil)
	}
	// round advances the clock 10 s and samples; it returns the idle
	// events so far.
	round := func() []string {
		h.clock.add(10 * time.Second)
		// gpu02 keeps responding.
		if _, err := h.s.sync(context.Background(), api.NodeSyncRequest{Name: "gpu02"}); err != nil {
			t.Fatal(err)
		}
		h.sampleNow()
		return h.idleTrail(id)
	}

	use(50)
	round()
	use(3) // first idle sample: the stretch starts here
	idleFrom := h.clock.now().Add(10 * time.Second)
	for k := range 6 {
		if ev := round(); len(ev) != 0 {
			t.Fatalf("idle round %d (%s idle): flagged already: %q", k, h.clock.now().Sub(idleFrom), ev)
		}
	}
	ev := round()
	if len(ev) != 1 {
		t.Fatalf("a minute idle: events %q, want one flag", ev)
	}
	want := "GPUs idle: 2 GPU(s) on gpu01 GPUs " + gpuRanges(g) + " at 3.0% utilisation, under 5% for 1m0s (since " + idleFrom.UTC().Format(time.RFC3339) + ")"
	if ev[0] != want {
		t.Errorf("flag event %q, want %q", ev[0], want)
	}
	u, _ := h.s.JobUsageSeries(id)
	if !u.IdleSince.Equal(idleFrom) || !u.IdleFlagged.Equal(h.clock.now()) {
		t.Errorf("series idle since %s flagged %s", u.IdleSince, u.IdleFlagged)
	}
	for name, want := range map[string]float64{"tide_jobs_idle_gpu": 1, "tide_gpus_idle_reserved": 2, "tide_idle_gpu_flags_total": 1} {
		if got := h.gauge(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// Still idle: no second flag.
	if ev := round(); len(ev) != 1 {
		t.Fatalf("still idle: events %q", ev)
	}
	// Used again: an event, the flag cleared.
	use(70)
	if ev := round(); len(ev) != 2 || !strings.HasPrefix(ev[1], "GPUs in use again: 70.0% utilisation, after being idle since ") {
		t.Fatalf("used again: events %q", ev)
	}
	if got := h.gauge("tide_jobs_idle_gpu"); got != 0 {
		t.Errorf("tide_jobs_idle_gpu = %v after the GPUs were used again", got)
	}
	// Idle again: flagged again a minute later.
	use(0)
	for range 7 {
		round()
	}
	if ev := h.idleTrail(id); len(ev) != 3 || !strings.HasPrefix(ev[2], "GPUs idle: ") {
		t.Fatalf("second idle stretch: events %q", ev)
	}
	if got := h.gauge("tide_idle_gpu_flags_total"); got != 2 {
		t.Errorf("tide_idle_gpu_flags_total = %v, want 2", got)
	}
	// A node that stops responding: its readings are not judged, and
	// the idle stretch is neither ended nor extended into a new flag.
	h.s.mu.Lock()
	h.s.nodes["gpu01"].Responding = false
	h.s.mu.Unlock()
	use(90)
	h.s.mu.Lock()
	h.s.nodes["gpu01"].Responding = false
	h.s.mu.Unlock()
	round()
	if u, _ := h.s.JobUsageSeries(id); u.IdleFlagged.IsZero() || u.Last.GPU {
		t.Errorf("an unread sample changed the idle state: flagged %s, last %+v", u.IdleFlagged, u.Last)
	}
	for _, other := range []uint64{blind, cpu} {
		if ev := h.idleTrail(other); len(ev) != 0 {
			t.Errorf("job %d without GPU readings flagged: %q", other, ev)
		}
	}
}

// TestIdleGPUHook flags a job whose name is a shell attack: the hook
// runs with the job's facts in its environment and nothing else, no
// arguments, in /; the name reaches it as data.
func TestIdleGPUHook(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	hook := filepath.Join(dir, "hook.sh")
	script := "#!/bin/sh\n{ echo \"args=$#\"; echo \"pwd=$(pwd)\"; env | sort; } > " + out + "\necho hook ran\n"
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, strings.Replace(idleConfig, "idle_gpu_threshold: 5}", "idle_gpu_threshold: 5, idle_gpu_hook: "+hook+"}", 1))
	done := make(chan string, 4)
	h.s.series.hooks.done = func(res string) { done <- res }
	h.register("gpu01")
	name := `$(touch ` + dir + `/pwned); x"; rm -rf /`
	id := h.submit(api.JobSpec{Name: name, GPUs: 1, NodeList: []string{"gpu01"}})
	h.s.schedulePass()
	g := h.job(id).Alloc[0].GPUs[0]
	h.gpuStatusSync("gpu01", testGPUs{util: map[int]int{g: 1}, mem: map[int]int64{g: 512}}, nil)
	for range 8 {
		h.clock.add(10 * time.Second)
		h.gpuStatusSync("gpu01", testGPUs{util: map[int]int{g: 1}, mem: map[int]int64{g: 512}}, nil)
		h.sampleNow()
	}
	select {
	case res := <-done:
		if res != hookOK {
			t.Fatalf("hook result %s", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the hook did not run")
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(b)), "\n")
	idleSince := h.job(id).StartTime.Add(10 * time.Second).UTC().Format(time.RFC3339)
	jid := strconv.FormatUint(id, 10)
	want := []string{"args=0", "pwd=/", "PATH=" + hookPath, "SLURM_JOB_ACCOUNT=", "SLURM_JOB_ID=" + jid,
		"SLURM_JOB_PARTITION=gpu", "SLURM_JOB_UID=1000", "SLURM_JOB_USER=alice", "TIDE_CLUSTER=t",
		"TIDE_GPU_MEM_BYTES=536870912", "TIDE_GPU_UTIL=1.0", "TIDE_HOOK=idle_gpu", "TIDE_IDLE_SECONDS=60",
		"TIDE_IDLE_SINCE=" + idleSince, "TIDE_IDLE_THRESHOLD=5", "TIDE_JOB_GPUS=1",
		"TIDE_JOB_GPU_PLACES=gpu01 GPU " + strconv.Itoa(g), "TIDE_JOB_ID=" + jid, "TIDE_JOB_NAME=" + name,
		"TIDE_JOB_NODES=gpu01", "TIDE_JOB_PARTITION=gpu", "TIDE_JOB_QUEUE=", "TIDE_JOB_RESTART=0", "TIDE_JOB_UID=1000",
		"TIDE_JOB_USER=alice"}
	// env may add PWD and SHLVL of the shell itself.
	got = slices.DeleteFunc(got, func(l string) bool {
		return strings.HasPrefix(l, "PWD=") || strings.HasPrefix(l, "SHLVL=") || l == "_=/usr/bin/env"
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hook's arguments and environment (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("the job name ran as code")
	}
	if got := h.s.series.hooks.count(hookOK); got != 1 {
		t.Errorf("ok runs %d, want 1", got)
	}
}

// TestRunHook: a hook that overstays is killed with its children; one
// that others may change is refused unrun; a failing one fails.
func TestRunHook(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	marker := filepath.Join(dir, "child-survived")
	slow := write("slow.sh", "#!/bin/sh\n(sleep 2; touch "+marker+") &\nsleep 30\n", 0o755)
	start := time.Now()
	_, err := runHook(slow, 300*time.Millisecond, nil)
	if err == nil || !strings.Contains(err.Error(), "killed after 300ms") {
		t.Errorf("slow hook: %v, want killed", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("slow hook returned after %s", d)
	}
	writable := write("writable.sh", "#!/bin/sh\ntouch "+filepath.Join(dir, "ran")+"\n", 0o777)
	if _, err := runHook(writable, time.Second, nil); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("group-writable hook: %v, want refused", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("a refused hook ran")
	}
	if _, err := runHook(write("plain", "x", 0o644), time.Second, nil); err == nil || !strings.Contains(err.Error(), "not an executable file") {
		t.Errorf("non-executable hook: %v", err)
	}
	out, err := runHook(write("fail.sh", "#!/bin/sh\necho oops >&2\nexit 3\n", 0o755), time.Second, nil)
	if err == nil || string(out) != "oops" {
		t.Errorf("failing hook: %v, output %q", err, out)
	}
	time.Sleep(2500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Error("the slow hook's child outlived the kill")
	}
}
