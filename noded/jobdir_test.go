package noded

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestParseDirName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want api.JobRef
		ok   bool
	}{
		{name: "plain", in: "42.0", want: api.JobRef{JobID: 42}, ok: true},
		{name: "requeued", in: "7.3", want: api.JobRef{JobID: 7, Restart: 3}, ok: true},
		{name: "no dot", in: "42", ok: false},
		{name: "leading zero", in: "042.0", ok: false},
		{name: "negative restart", in: "1.-1", ok: false},
		{name: "temp file", in: ".status.json.tmp1", ok: false},
		{name: "words", in: "a.b", ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseDirName(tt.in)
			if ok != tt.ok || got != tt.want {
				t.Errorf("parseDirName(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
			}
			if ok && dirName(got) != tt.in {
				t.Errorf("dirName(%v) = %q, want %q", got, dirName(got), tt.in)
			}
		})
	}
}

func TestParseProcStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "4242 (my (odd) prog) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615\n"
	got, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := (procStat{State: 'S', StartTime: 987654}); got != want {
		t.Errorf("parseProcStat = %+v, want %+v", got, want)
	}
	if _, err := parseProcStat([]byte("4242 (x) S 1")); err == nil {
		t.Error("short stat line parsed without error")
	}
}

func TestProcIdentity(t *testing.T) {
	self, err := selfIdentity()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		id   procIdentity
		want bool
	}{
		{name: "self", id: self, want: true},
		{name: "reused pid", id: procIdentity{PID: self.PID, StartTime: self.StartTime + 1}, want: false},
		{name: "no pid", id: procIdentity{}, want: false},
		{name: "gone", id: procIdentity{PID: 1 << 30, StartTime: 1}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.id.Alive(); got != tt.want {
				t.Errorf("alive() = %v, want %v", got, tt.want)
			}
		})
	}
}

// jobFixture writes a job directory the way tided and stepd leave it.
type jobFixture struct {
	ref    api.JobRef
	spec   bool
	status *jobStatus
	stepd  *procIdentity
	marks  []string
	// uncommitted leaves exec.json out (a launch interrupted before
	// its directory was complete); pid writes the script's pid file.
	uncommitted bool
	pid         *procIdentity
}

func writeFixture(t *testing.T, jobsDir string, f jobFixture) string {
	t.Helper()
	dir := filepath.Join(jobsDir, dirName(f.ref))
	if err := os.MkdirAll(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if f.spec {
		spec := api.LaunchSpec{JobRef: f.ref, Name: "fx", StartTime: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), TimeLimit: api.Infinite}
		if err := writeJSONAtomic(filepath.Join(dir, fileLaunch), &spec, 0o600); err != nil {
			t.Fatal(err)
		}
		if !f.uncommitted {
			if err := writeJSONAtomic(filepath.Join(dir, fileExec), &execPlan{JobID: f.ref.JobID}, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if f.pid != nil {
		if err := writeJSONAtomic(filepath.Join(dir, filePID), f.pid, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if f.status != nil {
		if err := writeJSONAtomic(filepath.Join(dir, fileStatus), f.status, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if f.stepd != nil {
		if err := writeJSONAtomic(filepath.Join(dir, fileStepdPID), f.stepd, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range f.marks {
		k := killMarker{Time: time.Now(), Signal: 15, KillAt: time.Now().Add(time.Hour)}
		if err := writeJSONAtomic(filepath.Join(dir, m), &k, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestScanJobDirs(t *testing.T) {
	jobsDir := t.TempDir()
	self, err := selfIdentity()
	if err != nil {
		t.Fatal(err)
	}
	dead := procIdentity{PID: self.PID, StartTime: self.StartTime + 99}
	end := time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC)
	fixtures := []jobFixture{
		{ref: api.JobRef{JobID: 1}, spec: true, status: &jobStatus{Exit: api.ExitStatus{Code: 3}, EndTime: end}, stepd: &dead},
		{ref: api.JobRef{JobID: 2}, spec: true, stepd: &self},
		{ref: api.JobRef{JobID: 3}, spec: true, stepd: &dead},
		{ref: api.JobRef{JobID: 4}, spec: true},
		{ref: api.JobRef{JobID: 5, Restart: 1}}, // crashed before launch.json
		{ref: api.JobRef{JobID: 6}, spec: true, status: &jobStatus{EndTime: end}, marks: []string{markKilled, markForgotten}},
	}
	for _, f := range fixtures {
		writeFixture(t, jobsDir, f)
	}
	if err := os.Mkdir(filepath.Join(jobsDir, "not-a-job"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := scanJobDirs(jobsDir)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Ref       api.JobRef
		Class     string
		Killed    bool
		Forgotten bool
	}
	var rows []row
	for _, s := range got {
		rows = append(rows, row{s.Ref, s.Class.String(), s.Markers.Killed != nil, s.Markers.Forgotten})
	}
	want := []row{
		{api.JobRef{JobID: 1}, "finished", false, false},
		{api.JobRef{JobID: 2}, "running", false, false},
		{api.JobRef{JobID: 3}, "lost", false, false},
		{api.JobRef{JobID: 4}, "lost", false, false},
		{api.JobRef{JobID: 5, Restart: 1}, "lost", false, false},
		{api.JobRef{JobID: 6}, "finished", true, true},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("scan (-want +got):\n%s", diff)
	}
}

// nopAPI is a controller that is never called (Setup only).
type nopAPI struct{}

func (nopAPI) Register(context.Context, api.NodeRegistration) (api.NodeSyncResponse, error) {
	return api.NodeSyncResponse{}, nil
}
func (nopAPI) Sync(context.Context, api.NodeSyncRequest) (api.NodeSyncResponse, error) {
	return api.NodeSyncResponse{}, nil
}

// TestRecover checks what a restarted tided reports from its state
// directory, and that the lost job's status is persisted.
func TestRecover(t *testing.T) {
	cfg := validConfig(t)
	jobsDir := filepath.Join(cfg.StateDir, "jobs")
	self, err := selfIdentity()
	if err != nil {
		t.Fatal(err)
	}
	dead := procIdentity{PID: self.PID, StartTime: self.StartTime + 99}
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(time.Hour)
	writeFixture(t, jobsDir, jobFixture{ref: api.JobRef{JobID: 10}, spec: true,
		status: &jobStatus{Exit: api.ExitStatus{Signal: 15}, EndTime: end}, marks: []string{markTimedOut}})
	writeFixture(t, jobsDir, jobFixture{ref: api.JobRef{JobID: 11}, spec: true, stepd: &self})
	lostDir := writeFixture(t, jobsDir, jobFixture{ref: api.JobRef{JobID: 12}, spec: true, stepd: &dead, pid: &dead})
	goneDir := writeFixture(t, jobsDir, jobFixture{ref: api.JobRef{JobID: 13}, spec: true,
		status: &jobStatus{EndTime: end}, marks: []string{markForgotten}})
	// Committed, but the script never started (no pid file): a failed
	// launch. Not committed: dropped, the controller repeats the launch.
	writeFixture(t, jobsDir, jobFixture{ref: api.JobRef{JobID: 14}, spec: true, stepd: &dead})
	halfDir := writeFixture(t, jobsDir, jobFixture{ref: api.JobRef{JobID: 15}, spec: true, uncommitted: true})

	d, err := Setup(context.Background(), cfg, Options{Logger: testLogger(), API: nopAPI{}, Executable: testExe})
	if err != nil {
		t.Fatal(err)
	}
	got := d.Jobs()
	for i := range got {
		if got[i].JobID == 12 || got[i].JobID == 14 {
			if got[i].EndTime.IsZero() {
				t.Error("lost job has no end time")
			}
			got[i].EndTime = time.Time{}
		}
	}
	want := []api.NodeJobReport{
		{JobID: 10, State: api.NodeJobFinished, StartTime: start, EndTime: end, Exit: api.ExitStatus{Signal: 15}, TimedOut: true},
		{JobID: 11, State: api.NodeJobRunning, StartTime: start},
		{JobID: 12, State: api.NodeJobFinished, StartTime: start, Exit: api.ExitStatus{Signal: 9}, Error: lostError},
		{JobID: 14, State: api.NodeJobFinished, StartTime: start, Exit: api.ExitStatus{Signal: 9}, LaunchFailed: true,
			Error: "launch interrupted: tided stopped before the job's script started"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
	var st jobStatus
	if err := readJSON(filepath.Join(lostDir, fileStatus), &st); err != nil || st.Error != lostError {
		t.Errorf("lost job status on disk = %+v, %v; want %q persisted", st, err, lostError)
	}
	if _, err := os.Stat(halfDir); !os.IsNotExist(err) {
		t.Errorf("the directory of an uncommitted launch is still there (%v)", err)
	}
	if _, err := os.Stat(goneDir); !os.IsNotExist(err) {
		t.Errorf("finished forgotten job directory still exists (%v)", err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "status.json")
	for _, content := range []string{"first", "second"} {
		if err := writeFileAtomic(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("read back %q, %v; want %q", got, err, content)
		}
	}
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o640 {
		t.Errorf("mode %o, want 640", info.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
}
