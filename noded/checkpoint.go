package noded

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Checkpoint acknowledgements. A job chosen as a preemption victim gets
// its checkpoint signal and a grace time; when it has saved its work it
// may say so at once by touching the file $TIDE_CHECKPOINT_ACK names
// (or with `tide checkpoint-done`, which asks the controller directly).
// tided gives every job a directory of its own for that file, owned by
// the job's user, under the job's state directory (mounted at the same
// path into a container job), and reports CheckpointAck for a running
// job whose file was touched after the last signal it delivered, so that
// the controller ends the grace time early.

// EnvCheckpointAck names the file a job touches to acknowledge a
// finished checkpoint.
const EnvCheckpointAck = "TIDE_CHECKPOINT_ACK"

// Names inside a job directory.
const (
	dirCheckpoint  = "checkpoint"
	fileCheckpoint = "ack"
)

// checkpointAckPath is the acknowledgement file of the job in jobDir.
func checkpointAckPath(jobDir string) string {
	return filepath.Join(jobDir, dirCheckpoint, fileCheckpoint)
}

// withEnv returns env with key set to value: an inherited value (a job
// submitted from inside another job carries its parent's) is replaced.
func withEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// prepareCheckpoint points the job at its acknowledgement file (and
// mounts its directory into a container job). Called before the job
// directory is written, so that launch.json and exec.json carry it.
func prepareCheckpoint(j *job) {
	ack := checkpointAckPath(j.dir)
	j.spec.Env = withEnv(j.spec.Env, EnvCheckpointAck, ack)
	if j.spec.ContainerImage != "" {
		dir := filepath.Dir(ack)
		j.spec.ContainerMounts = append(j.spec.ContainerMounts, api.ContainerMount{Source: dir, Destination: dir})
	}
}

// makeCheckpointDir creates the job's acknowledgement directory, owned
// by the job's user, after the job directory exists.
func (d *Daemon) makeCheckpointDir(j *job) error {
	dir := filepath.Dir(checkpointAckPath(j.dir))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if d.asRoot {
		if err := os.Chown(dir, int(j.spec.UserID), int(j.spec.GroupID)); err != nil {
			return err
		}
	}
	return nil
}

// checkpointAcked reports whether the running job j touched its
// acknowledgement file after the last signal tided delivered to it (any
// time, for a job found after a restart: the tided before may have
// signalled it). One stat, and none for a job never signalled.
func checkpointAcked(j *job) bool {
	if !mayHaveAcked(j) {
		return false
	}
	fi, err := os.Stat(checkpointAckPath(j.dir))
	if err != nil {
		return false
	}
	return !fi.ModTime().Before(j.signalledAt.Add(-time.Second))
}

// mayHaveAcked reports whether an acknowledgement of j could count: it
// was signalled, by this tided or (recovered) by the one before. A job
// never signalled has nothing to acknowledge, and every sync reports
// every running job, so the stat is spared for the thousands that never
// are.
func mayHaveAcked(j *job) bool {
	return !j.signalledAt.IsZero() || j.recovered
}

// newCheckpointAcksLocked looks for acknowledgements of the jobs that
// got a signal and have not acknowledged since (one stat each), so that
// tided syncs at once instead of at its next heartbeat. It reports
// whether it found one.
func (d *Daemon) newCheckpointAcksLocked() bool {
	found := false
	for _, j := range d.jobs {
		if j.ackWatch && !j.finished() && checkpointAcked(j) {
			j.ackWatch = false
			found = true
		}
	}
	return found
}
