package runtime

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/stepd"
)

func TestEmulatedDuration(t *testing.T) {
	const def = 7 * time.Second
	tests := []struct {
		name    string
		env     []string
		script  string
		want    time.Duration
		forever bool
		wantErr string
	}{
		{name: "nothing: the default", script: "#!/bin/sh\nsleep 5\n", want: def},
		{name: "environment", env: []string{"PATH=/bin", "TIDE_EMULATE=90s"}, want: 90 * time.Second},
		{name: "last assignment wins", env: []string{"TIDE_EMULATE=1s", "TIDE_EMULATE=2m"}, want: 2 * time.Minute},
		{name: "bare seconds", env: []string{"TIDE_EMULATE=2.5"}, want: 2500 * time.Millisecond},
		{name: "script directive", script: "#!/bin/sh\n#SBATCH --comment=tide-emulate:1m30s\nsrun x\n", want: 90 * time.Second},
		{name: "script token in quotes", script: "#!/bin/sh\n# 'tide-emulate:3s'\n", want: 3 * time.Second},
		{name: "environment before script", env: []string{"TIDE_EMULATE=4s"}, script: "# tide-emulate:9s\n", want: 4 * time.Second},
		{name: "until cancelled", env: []string{"TIDE_EMULATE=inf"}, forever: true},
		{name: "unlimited in the script", script: "#SBATCH --comment=tide-emulate:UNLIMITED", forever: true},
		{name: "zero", env: []string{"TIDE_EMULATE=0"}, want: 0},
		{name: "not a duration", env: []string{"TIDE_EMULATE=soon"}, wantErr: `TIDE_EMULATE) "soon": not a duration`},
		{name: "negative", script: "# tide-emulate:-5s", wantErr: "negative"},
		{name: "empty", env: []string{"TIDE_EMULATE="}, wantErr: "empty"},
		{name: "too many seconds", env: []string{"TIDE_EMULATE=1e12"}, wantErr: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &api.LaunchSpec{Env: tt.env, Script: tt.script}
			got, forever, err := EmulatedDuration(spec, def)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want || forever != tt.forever {
				t.Errorf("= %v, forever %v, %v; want %v, forever %v", got, forever, err, tt.want, tt.forever)
			}
		})
	}
}

// emuJob is a job directory and launch for the emulated runtime with
// the given TIDE_EMULATE value.
func emuTestJob(t *testing.T, id uint64, dur string) Job {
	spec := &api.LaunchSpec{JobRef: api.JobRef{JobID: id}, Env: []string{EmulateEnv + "=" + dur}}
	return Job{Ref: spec.JobRef, Dir: t.TempDir(), Spec: spec}
}

func readEmuStatus(t *testing.T, j Job) stepd.Status {
	t.Helper()
	st, err := stepd.ReadStatus(filepath.Join(j.Dir, stepd.FileStatus))
	if err != nil {
		t.Fatalf("status.json of job %d: %v", j.Ref.JobID, err)
	}
	return st
}

func TestEmulatedRunsItsDurationThenExitsZero(t *testing.T) {
	ctx := context.Background()
	e := NewEmulated(time.Hour)
	j := emuTestJob(t, 1, "200ms")
	begin := time.Now()
	exited, err := e.Start(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.State(j); got != Running {
		t.Errorf("State after Start = %s", got)
	}
	if _, err := e.Stats(ctx, j); err != nil {
		t.Errorf("Stats of a running job: %v", err)
	}
	waitClosed(t, exited, "the job's end")
	if ran := time.Since(begin); ran < 200*time.Millisecond {
		t.Errorf("the job ended after %v, before its 200ms", ran)
	}
	st := readEmuStatus(t, j)
	if st.Exit != (api.ExitStatus{}) || st.Error != "" || st.EndTime.Before(st.StartTime) || st.StartTime.IsZero() {
		t.Errorf("status = %+v, want exit 0:0 with its times", st)
	}
	if e.State(j) != Stopped || e.Running() != 0 {
		t.Errorf("after its end: State %s, %d running", e.State(j), e.Running())
	}
	if err := e.Signal(ctx, j, syscall.SIGTERM, false); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Signal after the end = %v, want ErrNotRunning", err)
	}
}

func TestEmulatedSignals(t *testing.T) {
	ctx := context.Background()
	e := NewEmulated(0)
	j := emuTestJob(t, 2, "inf")
	exited, err := e.Start(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	// Signals that end no process leave it running.
	for _, sig := range []syscall.Signal{syscall.SIGCONT, syscall.SIGWINCH} {
		if err := e.Signal(ctx, j, sig, false); err != nil {
			t.Fatalf("Signal %v: %v", sig, err)
		}
	}
	select {
	case <-exited:
		t.Fatal("SIGCONT or SIGWINCH ended the job")
	default:
	}
	if err := e.Signal(ctx, j, syscall.SIGUSR1, true); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, exited, "the end by SIGUSR1")
	if st := readEmuStatus(t, j); st.Exit != (api.ExitStatus{Signal: int(syscall.SIGUSR1)}) {
		t.Errorf("status = %+v, want signal %d", st, syscall.SIGUSR1)
	}
}

func TestEmulatedHonoursKillMarkers(t *testing.T) {
	ctx := context.Background()
	e := NewEmulated(time.Hour)
	for _, tt := range []struct {
		marker string
		sig    syscall.Signal
	}{{stepd.MarkKilled, syscall.SIGKILL}, {stepd.MarkTimedOut, syscall.SIGTERM}} {
		t.Run(tt.marker, func(t *testing.T) {
			j := emuTestJob(t, 3, "1h")
			m := stepd.KillMarker{Time: time.Now(), Signal: int(tt.sig), KillAt: time.Now()}
			if err := stepd.WriteJSONAtomic(filepath.Join(j.Dir, tt.marker), &m, 0o644); err != nil {
				t.Fatal(err)
			}
			exited, err := e.Start(ctx, j)
			if err != nil {
				t.Fatal(err)
			}
			waitClosed(t, exited, "the end by the marker")
			if st := readEmuStatus(t, j); st.Exit.Signal != int(tt.sig) {
				t.Errorf("status = %+v, want signal %d", st, tt.sig)
			}
		})
	}
}

func TestEmulatedFreezeStopsTheClock(t *testing.T) {
	ctx := context.Background()
	e := NewEmulated(0)
	j := emuTestJob(t, 4, "1s")
	exited, err := e.Start(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	var marked string
	how, err := e.Freeze(ctx, j, func(h string) { marked = h })
	if err != nil || how != EmulateFreeze || marked != EmulateFreeze {
		t.Fatalf("Freeze = %q, %v (marked %q)", how, err, marked)
	}
	select {
	case <-exited:
		t.Fatal("a frozen job ended at its duration")
	case <-time.After(1500 * time.Millisecond):
	}
	if err := e.Thaw(ctx, j, how); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, exited, "the end after the thaw")
	if st := readEmuStatus(t, j); st.Exit != (api.ExitStatus{}) {
		t.Errorf("status = %+v, want exit 0", st)
	}
}

func TestEmulatedFailures(t *testing.T) {
	ctx := context.Background()
	e := NewEmulated(time.Hour)
	bad := emuTestJob(t, 5, "soon")
	if _, err := e.Start(ctx, bad); err == nil || !IsJobFault(err) || !strings.Contains(err.Error(), `"soon"`) {
		t.Errorf("Start with a bad duration = %v, want a job fault naming it", err)
	}
	j := emuTestJob(t, 6, "1h")
	exited, err := e.Start(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(ctx, j); err == nil {
		t.Error("a second Start of a running job succeeded")
	}
	if _, _, err := e.Reattach(ctx, j); err == nil {
		t.Error("Reattach found an emulated job")
	}
	if err := e.Delete(ctx, j); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, exited, "the end by Delete")
	if _, err := stepd.ReadStatus(filepath.Join(j.Dir, stepd.FileStatus)); err == nil {
		t.Error("Delete wrote a status: the job must read as lost")
	}
	if err := e.Delete(ctx, j); err != nil {
		t.Errorf("second Delete: %v", err)
	}
}
