package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/stepd"
)

// fakeJob is a job directory for the fake runtime (it reads only the
// markers and writes status.json).
func fakeTestJob(t *testing.T, id uint64) Job {
	return Job{Ref: api.JobRef{JobID: id}, Dir: t.TempDir()}
}

func TestFakeLifecycle(t *testing.T) {
	ctx := context.Background()
	f := NewFake("supervisor")
	j := fakeTestJob(t, 1)
	if got := f.State(j); got != Stopped {
		t.Errorf("State of an unknown job = %s", got)
	}
	exited, err := f.Start(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.State(j); got != Running || !f.Started(j.Ref) {
		t.Errorf("State after Start = %s", got)
	}
	if err := f.Exit(j.Ref, api.ExitStatus{Code: 4}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, exited, "the exit channel")
	st, err := stepd.ReadStatus(filepath.Join(j.Dir, stepd.FileStatus))
	if err != nil || st.Exit != (api.ExitStatus{Code: 4}) || st.StartTime.IsZero() || st.EndTime.IsZero() {
		t.Errorf("status %+v, %v; want exit 4 with its times", st, err)
	}
	if f.State(j) != Stopped || f.Started(j.Ref) {
		t.Error("the job still runs after its exit")
	}
	if err := f.Exit(j.Ref, api.ExitStatus{}); err == nil {
		t.Error("a second exit succeeded")
	}
	if _, err := f.Stats(ctx, j); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Stats of an ended job = %v", err)
	}
	if diff := cmp.Diff([]FakeCall{{Op: "start", Ref: j.Ref}, {Op: "stats", Ref: j.Ref}}, f.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestFakeSignals(t *testing.T) {
	tests := []struct {
		name      string
		trap      []syscall.Signal
		sig       syscall.Signal
		wantEnded bool
	}{
		{name: "TERM ends", sig: syscall.SIGTERM, wantEnded: true},
		{name: "trapped TERM does not", trap: []syscall.Signal{syscall.SIGTERM}, sig: syscall.SIGTERM},
		{name: "KILL cannot be trapped", trap: []syscall.Signal{syscall.SIGKILL}, sig: syscall.SIGKILL, wantEnded: true},
		{name: "WINCH is ignored by default", sig: syscall.SIGWINCH},
		{name: "USR1 ends", sig: syscall.SIGUSR1, wantEnded: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFake("supervisor")
			f.Trap(tt.trap...)
			j := fakeTestJob(t, uint64(10+i))
			exited, err := f.Start(context.Background(), j)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Signal(context.Background(), j, tt.sig, true); err != nil {
				t.Fatal(err)
			}
			if got := !f.Started(j.Ref); got != tt.wantEnded {
				t.Fatalf("ended %v, want %v", got, tt.wantEnded)
			}
			if !tt.wantEnded {
				return
			}
			waitClosed(t, exited, "the exit channel")
			st, err := stepd.ReadStatus(filepath.Join(j.Dir, stepd.FileStatus))
			if err != nil || st.Exit != (api.ExitStatus{Signal: int(tt.sig)}) {
				t.Errorf("status %+v, %v; want signal %d", st, err, tt.sig)
			}
			if err := f.Signal(context.Background(), j, tt.sig, false); !errors.Is(err, ErrNotRunning) {
				t.Errorf("signal after the end = %v", err)
			}
		})
	}
}

// TestFakeMarkers: the fake keeps the job directory's contract as the
// supervisor does: killed before the start ends the job unstarted, a
// kill marker found when the job runs is delivered.
func TestFakeMarkers(t *testing.T) {
	ctx := context.Background()
	write := func(t *testing.T, dir, name string, sig int) {
		t.Helper()
		m := stepd.KillMarker{Time: time.Now(), Signal: sig, KillAt: time.Now()}
		if err := stepd.WriteJSONAtomic(filepath.Join(dir, name), &m, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("killed before the start", func(t *testing.T) {
		f := NewFake("supervisor")
		j := fakeTestJob(t, 20)
		write(t, j.Dir, stepd.MarkKilled, int(syscall.SIGINT))
		exited, err := f.Start(ctx, j)
		if err != nil {
			t.Fatal(err)
		}
		waitClosed(t, exited, "the exit channel")
		st, err := stepd.ReadStatus(filepath.Join(j.Dir, stepd.FileStatus))
		if err != nil || st.Exit != (api.ExitStatus{Signal: int(syscall.SIGINT)}) || !st.StartTime.IsZero() {
			t.Errorf("status %+v, %v; want killed by SIGINT without a start", st, err)
		}
	})
	t.Run("time limit while starting", func(t *testing.T) {
		f := NewFake("supervisor")
		f.HoldStarts(true)
		j := fakeTestJob(t, 21)
		exited, err := f.Start(ctx, j)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.State(j); got != Starting {
			t.Fatalf("State = %s, want starting", got)
		}
		if err := f.Signal(ctx, j, syscall.SIGTERM, false); !errors.Is(err, ErrNotRunning) {
			t.Errorf("signal while starting = %v, want ErrNotRunning", err)
		}
		write(t, j.Dir, stepd.MarkTimedOut, 0)
		if err := f.Run(j.Ref); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, exited, "the exit channel")
		st, err := stepd.ReadStatus(filepath.Join(j.Dir, stepd.FileStatus))
		if err != nil || st.Exit != (api.ExitStatus{Signal: int(syscall.SIGTERM)}) {
			t.Errorf("status %+v, %v; want SIGTERM from the marker", st, err)
		}
		if err := f.Run(j.Ref); err == nil {
			t.Error("Run of an ended job succeeded")
		}
	})
}

func TestFakeFailuresAndCleanup(t *testing.T) {
	ctx := context.Background()
	f := NewFake("container")
	boom := JobFault(errors.New("no such image"))
	f.FailStarts(boom)
	j := fakeTestJob(t, 30)
	if _, err := f.Start(ctx, j); !errors.Is(err, boom) || !IsJobFault(err) {
		t.Errorf("Start = %v, want the job's fault", err)
	}
	f.FailStarts(nil)
	exited, err := f.Start(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	// Freeze and thaw.
	var marked string
	how, err := f.Freeze(ctx, j, func(h string) { marked = h })
	if err != nil || how != FakeFreeze || marked != FakeFreeze || f.Frozen(j.Ref) != FakeFreeze {
		t.Errorf("Freeze = %q, %v (marked %q)", how, err, marked)
	}
	if err := f.Thaw(ctx, j, how); err != nil || f.Frozen(j.Ref) != "" {
		t.Errorf("Thaw = %v, frozen %q", err, f.Frozen(j.Ref))
	}
	f.SetStats(j.Ref, Stats{Source: StatsCgroup, Pids: []int{7}})
	if st, err := f.Stats(ctx, j); err != nil || st.Source != StatsCgroup {
		t.Errorf("Stats = %+v, %v", st, err)
	}
	// A job the runtime loses ends without a status; Delete is recorded.
	if err := f.Lose(j.Ref); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, exited, "the exit channel")
	if _, err := os.Stat(filepath.Join(j.Dir, stepd.FileStatus)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("status.json after Lose: %v", err)
	}
	if _, _, err := f.Reattach(ctx, j); err == nil {
		t.Error("Reattach of a lost job succeeded")
	}
	if err := f.Delete(ctx, j); err != nil || !f.Deleted(j.Ref) {
		t.Errorf("Delete = %v, deleted %v", err, f.Deleted(j.Ref))
	}
	// Delete of a job still running ends it.
	k := fakeTestJob(t, 31)
	exitedK, err := f.Start(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, exitedK, "the deleted job's exit channel")
}

// TestFakeReattach: a second daemon of a test finds the jobs the first
// one started through the same fake; Close leaves them running.
func TestFakeReattach(t *testing.T) {
	ctx := context.Background()
	f := NewFake("supervisor")
	j := fakeTestJob(t, 40)
	if _, err := f.Start(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil || f.Closes() != 1 || !f.Started(j.Ref) {
		t.Fatalf("Close = %v, closes %d, job running %v", err, f.Closes(), f.Started(j.Ref))
	}
	exited, st, err := f.Reattach(ctx, j)
	if err != nil || st != nil {
		t.Fatalf("Reattach = %v, %v", st, err)
	}
	if err := f.Exit(j.Ref, api.ExitStatus{Code: 2}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, exited, "the reattached job's exit")
	if _, _, err := f.Reattach(ctx, fakeTestJob(t, 41)); err == nil {
		t.Error("Reattach of a job never started succeeded")
	}
}

// TestUnavailable: nothing of a job an unavailable runtime was given
// runs; its start and reattach fail with the reason.
func TestUnavailable(t *testing.T) {
	ctx := context.Background()
	why := errors.New("no container runtime on node n1")
	u := Unavailable{Kind: "container", Err: why}
	j := fakeTestJob(t, 50)
	if _, err := u.Start(ctx, j); !errors.Is(err, why) {
		t.Errorf("Start = %v", err)
	}
	if _, _, err := u.Reattach(ctx, j); !errors.Is(err, why) {
		t.Errorf("Reattach = %v", err)
	}
	if u.Name() != "container" || u.State(j) != Stopped {
		t.Errorf("Name %q, State %s", u.Name(), u.State(j))
	}
	if err := u.Signal(ctx, j, syscall.SIGTERM, false); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Signal = %v", err)
	}
}

func TestJobFault(t *testing.T) {
	if JobFault(nil) != nil {
		t.Error("JobFault(nil) is not nil")
	}
	base := errors.New("could not open stdout file")
	err := JobFault(base)
	if !IsJobFault(err) || !errors.Is(err, base) || err.Error() != base.Error() {
		t.Errorf("JobFault(%v) = %v", base, err)
	}
	if IsJobFault(base) {
		t.Error("a plain error is the job's fault")
	}
}
