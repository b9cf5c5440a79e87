package noded

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestJobHereAwaitsScriptPID: the supervisor records the batch script's
// pid only after the script started, and a step the script starts at
// once can come first; where the pid decides the step's cgroup, the
// step waits for the record (a step that went on without it took the
// job's own cgroup for a foreign one: "cgroup in use ... job_42
// exists").
func TestJobHereAwaitsScriptPID(t *testing.T) {
	tests := []struct {
		name      string
		cgroups   string
		container bool
		// meanwhile runs at the first pause.
		meanwhile         func(t *testing.T, d *Daemon, j *job)
		wantSpec, wantPID bool
		wantPauses        bool
	}{
		{name: "pid recorded after the first look", cgroups: "v2 (cpu,memory,pids)",
			meanwhile: func(t *testing.T, d *Daemon, j *job) {
				id, err := selfIdentity()
				if err != nil {
					t.Fatal(err)
				}
				if err := writeJSONNew(filepath.Join(j.dir, filePID), &id, 0o644); err != nil {
					t.Fatal(err)
				}
			}, wantSpec: true, wantPID: true, wantPauses: true},
		{name: "launch failed meanwhile", cgroups: "v2 (cpu,memory,pids)",
			meanwhile: func(t *testing.T, d *Daemon, j *job) {
				d.mu.Lock()
				j.status = &jobStatus{}
				d.mu.Unlock()
			}, wantPauses: true},
		{name: "never recorded: gives up", cgroups: "v2 (cpu,memory,pids)", wantSpec: true, wantPauses: true},
		{name: "cgroups off: no wait", cgroups: "off", wantSpec: true},
		{name: "container job: no wait", cgroups: "v2 (cpu,memory,pids)", container: true, wantSpec: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := fenceDaemon(t, tt.cgroups, nil, nil)
			addBatchJob(t, d, api.NodeAlloc{Node: "n1", CPUs: 2}, 0)
			d.mu.Lock()
			j := d.jobs[api.JobRef{JobID: 42}]
			if tt.container {
				j.spec.ContainerImage = "docker.io/library/busybox:1"
			}
			d.mu.Unlock()
			pauses := 0
			sleep := func(p time.Duration) {
				if pauses++; pauses == 1 && tt.meanwhile != nil {
					tt.meanwhile(t, d, j)
				}
				time.Sleep(p)
			}
			spec, pid := d.jobHereAwait(42, 50*time.Millisecond, sleep)
			if (spec != nil) != tt.wantSpec || (pid == os.Getpid()) != tt.wantPID || (pid != 0 && pid != os.Getpid()) {
				t.Errorf("spec %v, pid %d; want spec %v, pid %v (ours: %d)", spec != nil, pid, tt.wantSpec, tt.wantPID, os.Getpid())
			}
			if (pauses > 0) != tt.wantPauses {
				t.Errorf("%d pauses, want some: %v", pauses, tt.wantPauses)
			}
		})
	}
}
