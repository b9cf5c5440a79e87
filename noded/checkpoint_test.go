package noded

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestWithEnv(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{name: "added", in: []string{"PATH=/bin"}, want: []string{"PATH=/bin", "TIDE_CHECKPOINT_ACK=/x/ack"}},
		{name: "inherited replaced", in: []string{"TIDE_CHECKPOINT_ACK=/parent/ack", "HOME=/h"},
			want: []string{"HOME=/h", "TIDE_CHECKPOINT_ACK=/x/ack"}},
		{name: "prefix alone kept", in: []string{"TIDE_CHECKPOINT_ACKX=1"},
			want: []string{"TIDE_CHECKPOINT_ACKX=1", "TIDE_CHECKPOINT_ACK=/x/ack"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, withEnv(tt.in, EnvCheckpointAck, "/x/ack")); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrepareCheckpointMountsIntoContainers(t *testing.T) {
	j := &job{dir: "/state/jobs/7.1", spec: api.LaunchSpec{ContainerImage: "docker.io/library/alpine:3"}}
	prepareCheckpoint(j)
	want := []api.ContainerMount{{Source: "/state/jobs/7.1/checkpoint", Destination: "/state/jobs/7.1/checkpoint"}}
	if diff := cmp.Diff(want, j.spec.ContainerMounts); diff != "" {
		t.Fatalf("mounts (-want +got):\n%s", diff)
	}
	if j.spec.Env[len(j.spec.Env)-1] != "TIDE_CHECKPOINT_ACK=/state/jobs/7.1/checkpoint/ack" {
		t.Fatalf("env %v", j.spec.Env)
	}
}

// TestDaemonCheckpointAck runs a job that saves its work on SIGUSR1 and
// touches $TIDE_CHECKPOINT_ACK: tided reports the acknowledgement, and
// the restart count reaches the job.
func TestDaemonCheckpointAck(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.start(t)
	wd := t.TempDir()
	script := "#!/bin/sh\ntrap 'echo saved > ckpt; touch \"$TIDE_CHECKPOINT_ACK\"' USR1\n" +
		"echo \"restart=$SLURM_RESTART_COUNT ack=$TIDE_CHECKPOINT_ACK\" > env.tmp && mv env.tmp env.txt\n" +
		"while [ ! -e release ]; do sleep 0.05; done\n" +
		// The USR1 reaches the whole group: a sleep it kills ends with
		// 138, and a loop whose last body command was that sleep would
		// too.
		"exit 0\n"
	spec := n.spec(t, 301, script, wd)
	spec.Restart = 2
	n.launch(spec)
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobRunning)
	if r.CheckpointAck {
		t.Fatal("acknowledged before any signal")
	}
	// The script has set its trap once it wrote env.txt; tided finds
	// the job's processes once the supervisor wrote their pid file.
	waitUntil(t, "job started", func() bool {
		id, _ := readIdentity(filepath.Join(jobDir(n, spec.JobRef), filePID))
		return exists(filepath.Join(wd, "env.txt")) && id.Alive()
	})
	n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Signal: int(syscall.SIGUSR1)}}})
	n.fake.waitFor(t, "checkpoint acknowledgement", func() bool { return n.fake.reports[spec.JobRef].CheckpointAck })
	ack := filepath.Join(jobDir(n, spec.JobRef), dirCheckpoint, fileCheckpoint)
	env := readFile(t, filepath.Join(wd, "env.txt"))
	if want := "restart=2 ack=" + ack + "\n"; env != want {
		t.Fatalf("job environment %q, want %q", env, want)
	}
	if got := readFile(t, filepath.Join(wd, "ckpt")); got != "saved\n" {
		t.Fatalf("checkpoint %q", got)
	}
	fi, err := os.Stat(filepath.Dir(ack))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("checkpoint dir: %v %v", fi, err)
	}
	if err := os.WriteFile(filepath.Join(wd, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r = n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if r.CheckpointAck || !strings.HasPrefix(r.Exit.String(), "0:") {
		t.Fatalf("finished report %+v", r)
	}
}

// TestMayHaveAcked: an acknowledgement file counts only for a job that
// was signalled (by this tided, or by the one before a restart); the
// others are not even looked at.
func TestMayHaveAcked(t *testing.T) {
	tests := []struct {
		name      string
		signalled bool
		recovered bool
		want      bool
	}{
		{name: "never signalled", want: false},
		{name: "signalled", signalled: true, want: true},
		{name: "recovered after a restart", recovered: true, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &job{dir: t.TempDir(), recovered: tt.recovered}
			if tt.signalled {
				j.signalledAt = time.Now()
			}
			ack := checkpointAckPath(j.dir)
			if err := os.MkdirAll(filepath.Dir(ack), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ack, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if got := checkpointAcked(j); got != tt.want {
				t.Errorf("acknowledged = %v, want %v", got, tt.want)
			}
		})
	}
}
