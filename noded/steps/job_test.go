package steps

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestBatchJobAwaitsScriptPID: the supervisor records the batch
// script's pid only after the script started, and a step the script
// starts at once can come first; where the pid decides the step's
// cgroup, the step waits for the record (a step that went on without
// it took the job's own cgroup for a foreign one: "cgroup in use ...
// job_42 exists").
func TestBatchJobAwaitsScriptPID(t *testing.T) {
	type state struct {
		spec     *api.LaunchSpec
		pid      int
		recorded bool
	}
	running := state{spec: &api.LaunchSpec{JobRef: api.JobRef{JobID: 42}}}
	tests := []struct {
		name      string
		cgroups   bool
		container bool
		// meanwhile is what BatchJob says from the first pause on.
		meanwhile         *state
		wantSpec, wantPID bool
		wantPauses        bool
	}{
		{name: "pid recorded after the first look", cgroups: true,
			meanwhile: &state{spec: running.spec, pid: os.Getpid(), recorded: true}, wantSpec: true, wantPID: true, wantPauses: true},
		{name: "launch failed meanwhile", cgroups: true, meanwhile: &state{}, wantPauses: true},
		{name: "never recorded: gives up", cgroups: true, wantSpec: true, wantPauses: true},
		{name: "cgroups off: no wait", wantSpec: true},
		{name: "container job: no wait", cgroups: true, container: true, wantSpec: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHost()
			var mu sync.Mutex
			now := running
			if tt.container {
				spec := *running.spec
				spec.ContainerImage = "docker.io/library/busybox:1"
				now.spec = &spec
			}
			h.batch = func(id uint64) (*api.LaunchSpec, int, bool) {
				mu.Lock()
				defer mu.Unlock()
				if id != 42 {
					return nil, 0, false
				}
				return now.spec, now.pid, now.recorded
			}
			cfg := testConfig(t)
			cfg.Cgroups = tt.cgroups
			s := startServer(t, cfg, h)
			pauses := 0
			sleep := func(p time.Duration) {
				if pauses++; pauses == 1 && tt.meanwhile != nil {
					mu.Lock()
					now = *tt.meanwhile
					mu.Unlock()
				}
				time.Sleep(p)
			}
			spec, pid := s.batchJobAwait(42, 50*time.Millisecond, sleep)
			if (spec != nil) != tt.wantSpec || (pid == os.Getpid()) != tt.wantPID || (pid != 0 && pid != os.Getpid()) {
				t.Errorf("spec %v, pid %d; want spec %v, pid %v (ours: %d)", spec != nil, pid, tt.wantSpec, tt.wantPID, os.Getpid())
			}
			if (pauses > 0) != tt.wantPauses {
				t.Errorf("%d pauses, want some: %v", pauses, tt.wantPauses)
			}
		})
	}
}
