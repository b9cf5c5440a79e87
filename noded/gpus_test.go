package noded

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

func TestParseSession(t *testing.T) {
	tests := []struct {
		name string
		line string
		want int
		bad  bool
	}{
		{name: "plain", line: "4242 (python) S 1 4242 4200 0 -1 4194560", want: 4200},
		{name: "parens-in-name", line: "77 (a) b (c)) R 1 77 77 0 -1", want: 77},
		{name: "truncated", line: "77 (x) R 1", bad: true},
		{name: "no-name", line: "77 x R 1 2 3", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSession([]byte(tt.line))
			if tt.bad {
				if err == nil {
					t.Fatalf("parsed %q as session %d", tt.line, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("session %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// TestGPUProcJobs maps a real process in a job's session, a fake one
// the usage file names, and leaves a process of no job out.
func TestGPUProcJobs(t *testing.T) {
	dir := t.TempDir()
	leader := exec.Command("sh", "-c", "sleep 60 & wait")
	leader.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-leader.Process.Pid, syscall.SIGKILL)
		leader.Wait()
	})
	jobDir := filepath.Join(dir, "jobs", "41.0")
	if err := os.MkdirAll(jobDir, 0o755); err != nil {
		t.Fatal(err)
	}
	id, err := identityOf(leader.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeJSONAtomic(filepath.Join(jobDir, filePID), id, 0o644); err != nil {
		t.Fatal(err)
	}
	usage := `{"gpus": [{"index": 0, "processes": [{"pid": 999999, "mem_mb": 100, "job_id": 7}]}]}`
	if err := os.WriteFile(filepath.Join(dir, gres.FakeUsageFile), []byte(usage), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := gres.NewFake(gres.FakeConfig{Count: 2})
	fake.SetUsageFile(filepath.Join(dir, gres.FakeUsageFile))
	d := &Daemon{gpuSrc: fake, jobs: map[api.JobRef]*job{{JobID: 41}: {ref: api.JobRef{JobID: 41}, dir: jobDir}}}
	st, err := fake.Status()
	if err != nil {
		t.Fatal(err)
	}
	st[1].Processes = []gres.ProcUsage{{PID: leader.Process.Pid, MemMB: 2000}, {PID: os.Getpid(), MemMB: 10}}
	want := map[int]uint64{999999: 7, leader.Process.Pid: 41}
	if diff := cmp.Diff(want, d.gpuProcJobs(st)); diff != "" {
		t.Errorf("pid → job (-want +got):\n%s", diff)
	}
}
