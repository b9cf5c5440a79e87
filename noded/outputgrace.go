package noded

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// stepOutputDir is the launch step that waits for a missing output
// directory (the launch timeout's reason names it).
const stepOutputDir = "waiting for the output directory"

// Polling of a missing output directory: the first look after
// outputPollMin, doubling up to outputPollMax.
const (
	outputPollMin = 25 * time.Millisecond
	outputPollMax = 250 * time.Millisecond
)

// awaitOutputDirs gives a job whose output or error file lies in a
// directory that does not exist yet up to cfg.OutputGrace for it to
// appear (at most half of launch_timeout, which the wait counts
// towards): workflow engines create it just after sbatch returns, and
// Slurm's slower launch gives them that time by accident. Creating the
// directory is not Slurm's behaviour and not ours. The wait runs in the
// launch's goroutine, beside the sync loop, before the commit: a kill
// meanwhile ends the job unstarted, and the deadline fails it with this
// step. When the grace runs out the launch goes on and the file's open
// fails as it would have at once. It reports whether the launch may go
// on.
//
// The check is tided's stat of the directories (as root where tided
// runs as root); the files themselves are still opened with the user's
// rights, so the wait reveals nothing the open's error does not.
func (d *Daemon) awaitOutputDirs(j *job, l *launchState) bool {
	grace := min(d.cfg.OutputGrace, d.cfg.LaunchTimeout/2)
	if grace <= 0 {
		return true
	}
	files := ResolveFiles(&j.spec, d.cfg.Name)
	missing := missingDirs(files)
	if missing == "" {
		return true
	}
	if !d.launchStep(j, l, stepOutputDir, false) {
		return false
	}
	log := d.log.With("job_id", j.ref.JobID, "restart", j.ref.Restart)
	log.Info("output directory missing: waiting for it", "dir", missing, "output_grace", grace)
	deadline := time.Now().Add(grace)
	poll := outputPollMin
	for {
		t := time.NewTimer(min(poll, time.Until(deadline)))
		select {
		case <-l.ctx.Done():
			t.Stop()
		case <-t.C:
		}
		d.mu.Lock()
		ok := d.launchGoOnLocked(j, l)
		d.mu.Unlock()
		if !ok {
			return false
		}
		if missing = missingDirs(files); missing == "" {
			log.Info("output directory appeared")
			return true
		}
		if !time.Now().Before(deadline) {
			log.Warn("output directory still missing after output_grace", "dir", missing)
			return true
		}
		poll = min(2*poll, outputPollMax)
	}
}

// missingDirs returns the first directory of files' stdout and stderr
// that does not exist ("" when none is missing). A path whose parent
// exists, or that fails for another reason (a file where a directory
// should be, no permission), is not waited for.
func missingDirs(files JobFiles) string {
	for _, p := range []string{files.Stdout, files.Stderr} {
		if p == "" {
			continue
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return dir
		}
	}
	return ""
}
