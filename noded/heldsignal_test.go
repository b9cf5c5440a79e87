package noded

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestSignalBeforeProcessStarts: a signal that comes with the launch,
// before the supervisor has started the script, is held and delivered
// once the script runs (a preemption's checkpoint signal right after a
// start used to be dropped, and the job then lost its whole grace time).
// The script stops by itself after 20 s: without the signal it exits 0
// and leaves no "sig" file.
func TestSignalBeforeProcessStarts(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.start(t)
	wd := t.TempDir()
	script := "#!/bin/sh\ntrap 'echo got > sig; exit 0' USR1\n" +
		"i=0; while [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done\n"
	spec := n.spec(t, 311, script, wd)
	n.fake.queue(api.NodeSyncResponse{Launch: []api.LaunchSpec{spec},
		Signals: []api.SignalCommand{{JobRef: spec.JobRef, Signal: int(syscall.SIGUSR1)}}})
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	_, err := os.Stat(filepath.Join(wd, "sig"))
	if err != nil && r.Exit.Signal != int(syscall.SIGUSR1) {
		t.Fatalf("the signal never reached the job: report %+v, no sig file (%v)", r, err)
	}
}
