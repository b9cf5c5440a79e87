package noded

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestJobHere: what the daemon tells the step server of a job's batch
// script (steps.Host.BatchJob): nothing for a job it does not run the
// script of, the launch without a pid until the supervisor recorded
// one, the pid while the script runs, no pid (but recorded) once it
// ended, nothing once the job finished.
func TestJobHere(t *testing.T) {
	d := fenceDaemon(t, "off", nil, nil)
	check := func(what string, wantSpec bool, wantPID int, wantRecorded bool) {
		t.Helper()
		spec, pid, recorded := stepHost{d}.BatchJob(42)
		if (spec != nil) != wantSpec || pid != wantPID || recorded != wantRecorded {
			t.Errorf("%s: spec %v, pid %d, recorded %v; want %v, %d, %v", what, spec != nil, pid, recorded, wantSpec, wantPID, wantRecorded)
		}
		if spec != nil && (spec.JobID != 42 || spec.UserID != uint32(os.Getuid())) {
			t.Errorf("%s: launch %+v", what, spec)
		}
	}
	check("no such job", false, 0, false)
	addBatchJob(t, d, api.NodeAlloc{Node: "n1", CPUs: 2}, 0)
	check("pid not recorded yet", true, 0, false)
	id, err := selfIdentity()
	if err != nil {
		t.Fatal(err)
	}
	if err := writeJSONNew(filepath.Join(d.jobs[api.JobRef{JobID: 42}].dir, filePID), &id, 0o644); err != nil {
		t.Fatal(err)
	}
	check("script running", true, os.Getpid(), true)
	d.mu.Lock()
	d.jobs[api.JobRef{JobID: 42}].pid = procIdentity{PID: id.PID, StartTime: id.StartTime + 1} // a pid reused since
	d.mu.Unlock()
	check("script ended", true, 0, true)
	d.mu.Lock()
	d.jobs[api.JobRef{JobID: 42}].status = &jobStatus{}
	d.mu.Unlock()
	check("job finished", false, 0, false)
}
