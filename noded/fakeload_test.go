package noded

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// TestFakeGPUUsage samples a batch job that holds two fake GPUs: the
// fake simulates a load on them, lists the job's script as their
// process, and the node charges both GPUs' memory and utilisation to
// the batch task (what sstat and sacct show on the local cluster). A
// usage file that lists the job's GPUs idle (the test knob) makes its
// next reading idle; a static GPU list measures nothing.
func TestFakeGPUUsage(t *testing.T) {
	proc := useFakeProc(t)
	writeFakeProc(t, proc, fakeProc{pid: 300, ppid: 1, sid: 300, comm: "bash", utime: 10, rssPages: 10})
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Name, cfg.StateDir, cfg.Cgroups = "gpu01", dir, CgroupsOff
	cfg.GPUs = GPUConfig{Source: GPUSourceFake, Fake: gres.FakeConfig{Count: 4, MemoryMB: 81920}}
	ref := api.JobRef{JobID: 12}
	spec := api.LaunchSpec{JobRef: ref, Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 2, GPUs: []int{1, 2}}}}
	j := &job{ref: ref, hasSpec: true, spec: spec, pid: procIdentity{PID: 300}}
	d := &Daemon{cfg: cfg, log: slog.New(slog.DiscardHandler), jobs: map[api.JobRef]*job{ref: j}}
	if err := d.openGPUs(); err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	d.sampleDue(t0, time.Second) // meets the job
	d.sampleDue(t0.Add(time.Second), time.Second)
	var req api.NodeSyncRequest
	d.addUsage(&req)
	if len(req.Usage) != 1 || !req.Usage[0].GPU || len(req.Usage[0].Tasks) != 1 {
		t.Fatalf("running usage %+v, want the batch step with GPU readings", req.Usage)
	}
	task := req.Usage[0].Tasks[0]
	// Two GPUs of 49-96 % each (summed, as Slurm's gpuutil), 35-79 % of
	// 80 GiB each.
	if task.GPUUtil < 2*49 || task.GPUUtil > 2*96 {
		t.Errorf("gpu util %d, want the two GPUs' sum within 98-192", task.GPUUtil)
	}
	if lo, hi := uint64(2*81920*35/100)<<20, uint64(2*81920*79/100)<<20; task.GPUMem < lo || task.GPUMem > hi {
		t.Errorf("gpu memory %d, want %d-%d", task.GPUMem, lo, hi)
	}
	st := d.gpuHeartbeat(false)
	for _, g := range st {
		busy := g.Index == 1 || g.Index == 2
		if busy != (g.UtilPct > 0) || busy != (len(g.Processes) == 1 && g.Processes[0].PID == 300) {
			t.Errorf("gpu %d status %+v: only GPUs 1 and 2 should carry the job's load", g.Index, g)
		}
	}
	if got := d.gpuProcJobs(st); got[300] != 12 {
		t.Errorf("pid → job %v, want 300 → 12", got)
	}

	// The knob: the usage file lists the job's GPUs idle.
	idle := `{"gpus": [{"index": 1}, {"index": 2}]}`
	if err := os.WriteFile(filepath.Join(dir, gres.FakeUsageFile), []byte(idle), 0o644); err != nil {
		t.Fatal(err)
	}
	st = d.gpuHeartbeat(true)
	for _, g := range st {
		if g.UtilPct != 0 || g.MemUsedMB != 0 {
			t.Errorf("gpu %d with the idle usage file: %+v", g.Index, g)
		}
	}

	static := &Daemon{gpuSrc: mustStatic(t)}
	if _, ok := static.gpuUse(nil); ok {
		t.Error("a static GPU list claims to measure GPU use")
	}
}

func mustStatic(t *testing.T) gres.Source {
	t.Helper()
	src, err := gres.NewStatic([]gres.StaticGPU{{Index: 0, UUID: "GPU-a", Model: "h100", MemoryMB: 81920}})
	if err != nil {
		t.Fatal(err)
	}
	return src
}
