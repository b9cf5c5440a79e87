package noded

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepio"
)

// fakeProc is one process of a fake /proc.
type fakeProc struct {
	pid, ppid, sid              int
	comm                        string
	utime, stime, cutime, cstim uint64
	majflt, cmajflt             uint64
	vsize, rssPages             uint64
	readBytes, writeBytes       uint64
	// hwmKB and peakKB, when set, are written as /proc/<pid>/status's
	// VmHWM and VmPeak.
	hwmKB, peakKB uint64
}

// writeFakeProc lays the processes out under root as /proc shows them.
func writeFakeProc(t *testing.T, root string, procs ...fakeProc) {
	t.Helper()
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(p.pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// Fields 3–24 of proc(5): state ppid pgrp session tty tpgid
		// flags minflt cminflt majflt cmajflt utime stime cutime cstime
		// priority nice threads itrealvalue starttime vsize rss.
		stat := fmt.Sprintf("%d (%s) S %d %d %d 0 -1 4194304 100 0 %d %d %d %d %d %d 20 0 1 0 12345 %d %d 18446744073709551615\n",
			p.pid, p.comm, p.ppid, p.sid, p.sid, p.majflt, p.cmajflt, p.utime, p.stime, p.cutime, p.cstim, p.vsize, p.rssPages)
		io := fmt.Sprintf("rchar: 99\nwchar: 99\nsyscr: 1\nsyscw: 1\nread_bytes: %d\nwrite_bytes: %d\ncancelled_write_bytes: 0\n", p.readBytes, p.writeBytes)
		files := map[string]string{"stat": stat, "io": io}
		if p.hwmKB > 0 || p.peakKB > 0 {
			files["status"] = fmt.Sprintf("Name:\t%s\nVmPeak:\t%8d kB\nVmSize:\t   12 kB\nVmHWM:\t%8d kB\nVmRSS:\t   4 kB\nThreads:\t1\n", p.comm, p.peakKB, p.hwmKB)
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func useFakeProc(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "proc")
	old := procRoot
	procRoot = root
	t.Cleanup(func() { procRoot = old })
	return root
}

func TestParseProcInfo(t *testing.T) {
	line := []byte("4242 (a b) (c)) R 1 4242 4242 0 -1 0 5 0 7 8 150 50 20 10 20 0 3 0 99 123456789 300 0\n")
	p, ok := parseProcInfo(line, 4096)
	want := &procInfo{ppid: 1, sid: 4242, faults: 15, user: 170, sys: 60, vsize: 123456789, rss: 300 * 4096}
	if !ok {
		t.Fatal("refused a valid line")
	}
	if diff := cmp.Diff(want, p, cmp.AllowUnexported(procInfo{})); diff != "" {
		t.Errorf("parseProcInfo (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "1 (x) R 1", "1 x R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22"} {
		if _, ok := parseProcInfo([]byte(bad), 4096); ok {
			t.Errorf("took %q", bad)
		}
	}
}

// TestAttribute charges processes to the nearest task root: an srun
// task started inside the batch job's cgroup is its step's, the batch
// script's children are the script's, a process that left the script's
// tree is the script's through its session or the job's cgroup, and
// anything else is nobody's.
func TestAttribute(t *testing.T) {
	procs := map[int]*procInfo{
		100: {pid: 100, ppid: 50, sid: 100, user: 10, sys: 2, rss: 1000, vsize: 5000, faults: 1, read: 7, write: 8},
		101: {pid: 101, ppid: 100, sid: 100, user: 20, rss: 2000, vsize: 6000}, // the script's child
		102: {pid: 102, ppid: 101, sid: 100, user: 1, rss: 10},                 // grandchild
		150: {pid: 150, ppid: 1, sid: 100, user: 3, rss: 30},                   // left the tree, kept the session
		160: {pid: 160, ppid: 1, sid: 160, user: 4, rss: 40},                   // left both, still in the cgroup
		200: {pid: 200, ppid: 60, sid: 200, user: 5, rss: 500},                 // srun task rank 3
		201: {pid: 201, ppid: 200, sid: 200, user: 6, rss: 600},                // its child
		210: {pid: 210, ppid: 60, sid: 210, user: 7, rss: 700},                 // srun task rank 4
		300: {pid: 300, ppid: 1, sid: 300, user: 99, rss: 9999},                // someone else's
	}
	batch := usageUnit{job: 7, step: api.BatchStepID}
	step := usageUnit{job: 7, step: 0}
	units := []unitSpec{
		{key: batch, roots: map[int]int{100: 0}, session: 100, cgroupPids: []int{100, 101, 160, 200, 201}},
		{key: step, roots: map[int]int{200: 3, 210: 4}},
	}
	got := attribute(procs, units, nil)
	tick := uint64(1e6 / userHZ)
	want := map[usageUnit]map[int]*api.TaskUsage{
		batch: {0: {Task: 0, UserUsec: (10 + 20 + 1 + 3 + 4) * tick, SystemUsec: 2 * tick, RSS: 1000 + 2000 + 10 + 30 + 40,
			VMSize: 11000, Pages: 1, ReadBytes: 7, WriteBytes: 8}},
		step: {3: {Task: 3, UserUsec: 11 * tick, RSS: 1100}, 4: {Task: 4, UserUsec: 7 * tick, RSS: 700}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attribute (-want +got):\n%s", diff)
	}
}

// TestSampleBatchJob samples a running batch job from a fake /proc and
// a fake job cgroup: peaks are kept when memory falls again, totals
// only grow, the running values go out once per sample, and the job's
// end merges the supervisor's rusage and cgroup totals (dropped when
// srun steps ran in that cgroup).
func TestSampleBatchJob(t *testing.T) {
	proc := useFakeProc(t)
	cgRoot := t.TempDir()
	for f, content := range map[string]string{
		"cgroup.controllers": "cpu memory pids\n", "tide/cgroup.procs": "",
		"tide/job_7/cgroup.procs": "100\n101\n160\n",
	} {
		p := filepath.Join(cgRoot, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := cgroupRoot
	cgroupRoot = cgRoot
	t.Cleanup(func() { cgroupRoot = old })

	cfg := DefaultConfig()
	cfg.CgroupParent = "tide"
	ref := api.JobRef{JobID: 7}
	j := &job{ref: ref, hasSpec: true, pid: procIdentity{PID: 100}}
	d := &Daemon{cfg: cfg, log: slog.New(slog.DiscardHandler), cgroups: "v2 (cpu,memory,pids)", jobs: map[api.JobRef]*job{ref: j}}
	page := uint64(os.Getpagesize())

	writeFakeProc(t, proc,
		fakeProc{pid: 100, ppid: 50, sid: 100, comm: "bash", utime: 10, vsize: 1 << 20, rssPages: 100},
		fakeProc{pid: 101, ppid: 100, sid: 100, comm: "python (x)", utime: 50, stime: 5, vsize: 8 << 20, rssPages: 1000, readBytes: 4096,
			hwmKB: 64 << 10, peakKB: 96 << 10}, // the kernel's peaks are above the sizes of the moment
		fakeProc{pid: 160, ppid: 1, sid: 160, comm: "daemon", utime: 1, rssPages: 10},
		fakeProc{pid: 999, ppid: 1, sid: 999, comm: "other", utime: 500, rssPages: 5000})
	t0 := time.Now()
	freq := 30 * time.Second
	d.sampleDue(t0, freq) // meets the job
	var req api.NodeSyncRequest
	if d.addUsage(&req); len(req.Usage) != 0 {
		t.Fatalf("running values before any sample: %+v", req.Usage)
	}
	d.sampleDue(t0.Add(time.Second), freq) // its first sample
	req = api.NodeSyncRequest{}
	d.addUsage(&req)
	tick := uint64(1e6 / userHZ)
	first := api.TaskUsage{Task: 0, UserUsec: 61 * tick, SystemUsec: 5 * tick, RSS: 110*page + 64<<20, VMSize: 1<<20 + 96<<20, ReadBytes: 4096}
	wantRunning := []api.NodeUsage{{JobID: 7, StepID: api.BatchStepID, Samples: 1, Tasks: []api.TaskUsage{first}}}
	if diff := cmp.Diff(wantRunning, req.Usage); diff != "" {
		t.Fatalf("running values (-want +got):\n%s", diff)
	}
	req = api.NodeSyncRequest{}
	if d.addUsage(&req); len(req.Usage) != 0 {
		t.Fatalf("running values sent twice: %+v", req.Usage)
	}

	// Memory falls, CPU grows; not due again before freq.
	writeFakeProc(t, proc,
		fakeProc{pid: 100, ppid: 50, sid: 100, comm: "bash", utime: 10, cutime: 70, cstim: 6, vsize: 1 << 20, rssPages: 100, readBytes: 8192},
		fakeProc{pid: 160, ppid: 1, sid: 160, comm: "daemon", utime: 2, rssPages: 10})
	d.sampleDue(t0.Add(2*time.Second), freq)
	req = api.NodeSyncRequest{}
	if d.addUsage(&req); len(req.Usage) != 0 {
		t.Fatalf("sampled before its time: %+v", req.Usage)
	}
	d.sampleDue(t0.Add(time.Second+freq), freq)
	second := first
	second.UserUsec, second.SystemUsec, second.ReadBytes = 82*tick, 6*tick, 8192
	req = api.NodeSyncRequest{}
	d.addUsage(&req)
	if len(req.Usage) != 1 || req.Usage[0].Samples != 2 || req.Usage[0].Tasks[0] != second {
		t.Fatalf("second sample: %+v, want %+v", req.Usage, second)
	}

	// The end: the supervisor's rusage and cgroup totals.
	d.mu.Lock()
	j.status = &jobStatus{Usage: &api.NodeUsage{Final: true, Cgroup: &api.CgroupTotals{UserUsec: 2_000_000, SystemUsec: 70_000},
		Tasks: []api.TaskUsage{{Task: 0, UserUsec: 900_000, SystemUsec: 60_000, Pages: 4, WriteBytes: 512}}}}
	d.mu.Unlock()
	reports := []api.NodeJobReport{{JobID: 7, State: api.NodeJobFinished}, {JobID: 8, State: api.NodeJobRunning}}
	got := d.withJobUsage(reports)
	if reports[0].Usage != nil {
		t.Fatal("withJobUsage changed its caller's reports")
	}
	end := api.TaskUsage{Task: 0, UserUsec: 900_000, SystemUsec: 60_000, RSS: first.RSS, VMSize: first.VMSize, Pages: 4, ReadBytes: 8192, WriteBytes: 512}
	wantEnd := &api.NodeUsage{JobID: 7, StepID: api.BatchStepID, Final: true, Samples: 2,
		Cgroup: &api.CgroupTotals{UserUsec: 2_000_000, SystemUsec: 70_000}, Tasks: []api.TaskUsage{end}}
	if diff := cmp.Diff(wantEnd, got[0].Usage); diff != "" {
		t.Errorf("finished report's usage (-want +got):\n%s", diff)
	}
	if got[1].Usage != nil {
		t.Errorf("a running report got usage: %+v", got[1].Usage)
	}
	// An srun step ran in the job's cgroup: its totals are not the
	// script's.
	d.usage.mu.Lock()
	d.usage.joined = map[uint64]bool{7: true}
	d.usage.mu.Unlock()
	if u := d.withJobUsage(reports)[0].Usage; u == nil || u.Cgroup != nil {
		t.Errorf("cgroup totals kept though steps shared the cgroup: %+v", u)
	}
	// Acknowledged and dropped: the samples go too.
	d.mu.Lock()
	delete(d.jobs, ref)
	d.mu.Unlock()
	d.sampleDue(t0.Add(time.Hour), freq)
	d.usage.mu.Lock()
	n, joined := len(d.usage.units), len(d.usage.joined)
	d.usage.mu.Unlock()
	if n != 0 || joined != 0 {
		t.Errorf("%d units and %d joined marks left after the job went", n, joined)
	}
}

// TestStepUsageEnd runs a real step of two tasks while the sampler
// samples it: the tasks' samples go out as running values, and their
// final usage (samples and rusage) waits for the next sync, which sends
// it until a sync carrying it is answered.
func TestStepUsageEnd(t *testing.T) {
	s := testStepServer(t)
	d := s.d
	// The shell holds its 4 MB for 1.5 s: long enough for a sampler
	// slowed down by a loaded machine to see it.
	sg := testGrant(t, s.advertised, time.Now().Add(time.Hour), "/bin/sh", "-c",
		`i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; x=$(head -c 4000000 /dev/zero | tr '\0' a); sleep 1.5`)
	c, f := dialStep(t, s, sg, stepio.StdinNone)
	if f.Type != stepio.Ready {
		t.Fatalf("first frame %s %q", f.Type, f.Payload)
	}
	stop := make(chan struct{})
	sampled := make(chan []api.NodeUsage, 1)
	go func() {
		var running []api.NodeUsage
		defer func() { sampled <- running }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			d.sampleDue(time.Now(), 10*time.Millisecond)
			var req api.NodeSyncRequest
			d.addUsage(&req)
			for _, u := range req.Usage {
				if !u.Final {
					running = append(running, u)
				}
			}
		}
	}()
	for {
		if _, err := stepio.ReadFrame(c); err != nil {
			break
		}
	}
	close(stop)
	running := <-sampled
	if len(running) == 0 || running[len(running)-1].JobID != 42 || running[len(running)-1].StepID != 3 {
		t.Fatalf("running values while the step ran: %+v", running)
	}
	deadline := time.Now().Add(10 * time.Second)
	var req api.NodeSyncRequest
	var tok usageSentToken
	for time.Now().Before(deadline) {
		req = api.NodeSyncRequest{}
		if tok = d.addUsage(&req); len(tok) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(req.Usage) != 1 {
		t.Fatalf("usage reports after the step: %+v", req.Usage)
	}
	u := req.Usage[0]
	if u.JobID != 42 || u.StepID != 3 || !u.Final || len(u.Tasks) != 2 || u.Tasks[0].Task != 0 || u.Tasks[1].Task != 1 {
		t.Fatalf("final report %+v", u)
	}
	for _, task := range u.Tasks {
		if task.UserUsec+task.SystemUsec == 0 || task.RSS < 4e6 || task.VMSize < task.RSS {
			t.Errorf("task %d: want CPU time and the 4 MB the shell held in %+v", task.Task, task)
		}
	}
	if u.Samples == 0 {
		t.Errorf("final report from %d samples", u.Samples)
	}
	// Not answered yet: sent again; answered: forgotten.
	req = api.NodeSyncRequest{}
	if tok2 := d.addUsage(&req); len(tok2) != 1 {
		t.Fatalf("the final report is not resent before an answer: %+v", req.Usage)
	}
	d.usageSent(tok)
	req = api.NodeSyncRequest{}
	if tok3 := d.addUsage(&req); len(tok3) != 0 || len(req.Usage) != 0 {
		t.Errorf("the final report is sent again after an answer: %+v", req.Usage)
	}
}
