package integration

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// Table tests of the chaos test's checks: each must catch what it is
// there for, and pass a clean history.

func TestChaosConfigFrom(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    time.Duration
		seed    uint64
		wantErr string
	}{
		{name: "default one minute", want: time.Minute},
		{name: "duration", env: map[string]string{chaosDurationEnv: "10m"}, want: 10 * time.Minute},
		{name: "seconds", env: map[string]string{chaosDurationEnv: "90"}, want: 90 * time.Second},
		{name: "seed", env: map[string]string{chaosSeedEnv: "42"}, want: time.Minute, seed: 42},
		{name: "bad duration", env: map[string]string{chaosDurationEnv: "ten"}, wantErr: `TIDE_CHAOS_DURATION="ten": not a duration`},
		{name: "too short", env: map[string]string{chaosDurationEnv: "5s"}, wantErr: "at least 10s"},
		{name: "bad seed", env: map[string]string{chaosSeedEnv: "-1"}, wantErr: `TIDE_CHAOS_SEED="-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := chaosConfigFrom(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.duration != tt.want || (tt.seed != 0 && cfg.seed != tt.seed) {
				t.Errorf("duration %s seed %d, want %s seed %d", cfg.duration, cfg.seed, tt.want, tt.seed)
			}
		})
	}
}

func TestChaosParseStartAlloc(t *testing.T) {
	tests := []struct {
		name    string
		msg     string
		want    []chaosInterval
		wantErr string
	}{
		{name: "one node", msg: "best fit on gpu01: 4/8 GPUs free left [alloc gpu01 cpus=4 mem_mb=1024 gpus=0,3]",
			want: []chaosInterval{{node: "gpu01", cpus: 4, memMB: 1024, gpus: []int{0, 3}}}},
		{name: "two nodes, no GPUs on one", msg: "[alloc gpu01 cpus=8 mem_mb=0 gpus=1; gpu02 cpus=8 mem_mb=0]",
			want: []chaosInterval{{node: "gpu01", cpus: 8, gpus: []int{1}}, {node: "gpu02", cpus: 8}}},
		{name: "slice", msg: "x [alloc gpu03 cpus=1 mem_mb=0 gpus=2 gpu_mem_mb=100 gpu_pct=10]",
			want: []chaosInterval{{node: "gpu03", cpus: 1, gpus: []int{2}, sliced: true}}},
		{name: "no allocation", msg: "best fit on gpu01", wantErr: "without an allocation"},
		{name: "bad number", msg: "[alloc gpu01 cpus=x mem_mb=0]", wantErr: `"cpus=x"`},
		{name: "bad GPU list", msg: "[alloc gpu01 cpus=1 mem_mb=0 gpus=0,,1]", wantErr: `"gpus=0,,1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStartAlloc(tt.msg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(chaosInterval{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// at is second s of a fixed minute.
func at(s float64) time.Time {
	return time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC).Add(time.Duration(s * float64(time.Second)))
}

func TestChaosIntervals(t *testing.T) {
	start := func(s float64, alloc string) api.Event {
		return api.Event{Time: at(s), Kind: api.EventStart, Message: "best fit [alloc " + alloc + "]"}
	}
	ev := func(s float64, kind string) api.Event { return api.Event{Time: at(s), Kind: kind} }
	tests := []struct {
		name       string
		state      api.JobState
		end        time.Time
		evs        []api.Event
		want       []string
		violations []string
	}{
		{name: "requeued once then ended", state: api.StateCompleted, evs: []api.Event{
			ev(0, api.EventSubmit), start(1, "gpu01 cpus=2 mem_mb=0 gpus=0"), ev(3, api.EventRequeue),
			ev(3, api.EventPending), start(5, "gpu02 cpus=2 mem_mb=0 gpus=4"), ev(6, api.EventLaunch), ev(9, api.EventEnd)},
			want: []string{"gpu01 [0] 1-3", "gpu02 [4] 5-9"}},
		{name: "still running", state: api.StateRunning, evs: []api.Event{start(1, "gpu01 cpus=1 mem_mb=0")},
			want: []string{"gpu01 [] 1-now"}},
		{name: "cancelled while pending holds nothing", state: api.StateCancelled, evs: []api.Event{
			ev(0, api.EventSubmit), ev(1, api.EventCancel)}},
		{name: "two starts without an end", state: api.StateCompleted, evs: []api.Event{
			start(1, "gpu01 cpus=1 mem_mb=0 gpus=0"), start(2, "gpu01 cpus=1 mem_mb=0 gpus=1"), ev(4, api.EventEnd)},
			want: []string{"gpu01 [0] 1-2", "gpu01 [1] 2-4"}, violations: []string{"started again"}},
		{name: "ended without an end event", state: api.StateFailed, end: at(7), evs: []api.Event{
			start(1, "gpu01 cpus=1 mem_mb=0 gpus=0")},
			want: []string{"gpu01 [0] 1-7"}, violations: []string{"no end after its start"}},
		{name: "start without allocation", state: api.StateCompleted, evs: []api.Event{
			{Time: at(1), Kind: api.EventStart, Message: "best fit on gpu01"}, ev(2, api.EventEnd)},
			violations: []string{"without an allocation"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ivs, v := chaosIntervals(&api.Job{ID: 7, State: tt.state, EndTime: tt.end}, tt.evs)
			var got []string
			for _, iv := range ivs {
				got = append(got, shortInterval(iv))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("intervals (-want +got):\n%s", diff)
			}
			if len(v) != len(tt.violations) {
				t.Fatalf("violations %v, want %d containing %q", v, len(tt.violations), tt.violations)
			}
			for i := range v {
				if !strings.Contains(v[i].detail, tt.violations[i]) || v[i].job != 7 {
					t.Errorf("violation %v, want one of job 7 containing %q", v[i], tt.violations[i])
				}
			}
		})
	}
}

// shortInterval renders an interval as "gpu01 [0] 1-3" (seconds of at).
func shortInterval(iv chaosInterval) string {
	end := "now"
	if !iv.end.IsZero() {
		end = fmt.Sprint(iv.end.Sub(at(0)).Seconds())
	}
	gpus := iv.gpus
	if gpus == nil {
		gpus = []int{}
	}
	return fmt.Sprintf("%s %v %v-%s", iv.node, gpus, iv.start.Sub(at(0)).Seconds(), end)
}

func TestChaosCheckAllocations(t *testing.T) {
	gpus, _ := gres.Fake("n", gres.FakeConfig{Count: 8})
	nodes := []api.Node{{Name: "gpu01", CPUs: 64, MemoryMB: 1000, GPUs: gpus}, {Name: "gpu02", CPUs: 64, MemoryMB: 1000, GPUs: gpus}}
	iv := func(job uint64, node string, from, to float64, cpus int, mem int64, g ...int) chaosInterval {
		x := chaosInterval{job: job, node: node, cpus: cpus, memMB: mem, gpus: g, start: at(from)}
		if to >= 0 {
			x.end = at(to)
		}
		return x
	}
	tests := []struct {
		name string
		ivs  []chaosInterval
		want []string
	}{
		{name: "back to back on one GPU", ivs: []chaosInterval{iv(1, "gpu01", 0, 2, 4, 0, 0), iv(2, "gpu01", 2, 5, 4, 0, 0)}},
		{name: "same GPU on two nodes", ivs: []chaosInterval{iv(1, "gpu01", 0, 5, 4, 0, 3), iv(2, "gpu02", 1, 5, 4, 0, 3)}},
		{name: "GPU held twice", ivs: []chaosInterval{iv(1, "gpu01", 0, 5, 4, 0, 0, 1), iv(2, "gpu01", 1, 2, 4, 0, 1, 2)},
			want: []string{"3-alloc job=2: GPU [1] of gpu01 allocated twice"}},
		{name: "GPU held twice by a job still running", ivs: []chaosInterval{iv(1, "gpu01", 0, -1, 4, 0, 5), iv(2, "gpu01", 10, 11, 4, 0, 5)},
			want: []string{"3-alloc job=2: GPU [5] of gpu01 allocated twice"}},
		{name: "slices share a GPU", ivs: []chaosInterval{
			{job: 1, node: "gpu01", cpus: 1, gpus: []int{0}, sliced: true, start: at(0), end: at(5)},
			{job: 2, node: "gpu01", cpus: 1, gpus: []int{0}, sliced: true, start: at(1), end: at(5)}}},
		{name: "GPU outside the node", ivs: []chaosInterval{iv(1, "gpu01", 0, 1, 1, 0, 8)},
			want: []string{"3-alloc job=1: job 1 on gpu01 cpus=1 gpus=[8]"}},
		{name: "CPUs full but not over", ivs: []chaosInterval{iv(1, "gpu01", 0, 5, 32, 0), iv(2, "gpu01", 1, 5, 32, 0), iv(3, "gpu01", 5, 6, 64, 0)}},
		{name: "CPUs oversubscribed", ivs: []chaosInterval{iv(1, "gpu01", 0, 5, 32, 0), iv(2, "gpu01", 1, 5, 32, 0), iv(3, "gpu01", 4, 6, 8, 0)},
			want: []string{"3-alloc job=3: gpu01: 72 CPUs allocated"}},
		{name: "memory oversubscribed", ivs: []chaosInterval{iv(1, "gpu01", 0, 5, 1, 600), iv(2, "gpu01", 1, 5, 1, 600)},
			want: []string{"3-alloc job=2: gpu01: 1200 MB of memory"}},
		{name: "unknown node", ivs: []chaosInterval{iv(1, "gpu09", 0, 5, 1, 0)}, want: []string{"3-alloc job=1: holds node gpu09"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := checkAllocations(tt.ivs, nodes)
			if len(v) != len(tt.want) {
				t.Fatalf("violations %v, want %q", v, tt.want)
			}
			for i := range v {
				if !strings.HasPrefix(v[i].String(), tt.want[i]) {
					t.Errorf("violation %q, want it to begin %q", v[i], tt.want[i])
				}
			}
		})
	}
}

func TestChaosCheckAccounting(t *testing.T) {
	u := &chaosUser{name: "nobody", uid: 65534}
	sub := func(id uint64, name, kind string, tasks int) *chaosSub {
		return &chaosSub{id: id, name: name, kind: kind, user: u, tasks: tasks}
	}
	job := func(id uint64, name string) api.Job {
		return api.Job{ID: id, JobSpec: api.JobSpec{Name: name}, State: api.StateCompleted}
	}
	task := func(id, array uint64, task int) api.Job {
		j := job(id, "a")
		j.ArrayJobID, j.ArrayTaskID = array, task
		return j
	}
	meta := func(id uint64, pending ...int) api.Job {
		j := job(id, "a")
		j.ArrayJobID, j.ArrayPending, j.State = id, api.NewTaskSet(pending), api.StatePending
		return j
	}
	tests := []struct {
		name        string
		subs        []*chaosSub
		recs        []api.Job
		want        []string
		unexplained int
		withToken   int
	}{
		{name: "clean", subs: []*chaosSub{sub(1, "s1", chaosShort, 0), sub(2, "s2", chaosArray, 3), {name: "s3", user: u, failure: "exit 1"}},
			recs: []api.Job{job(1, "s1"), task(2, 2, 0), task(3, 2, 1), task(4, 2, 2)}},
		{name: "array with pending tasks on its meta record", subs: []*chaosSub{sub(2, "s2", chaosArray, 4)},
			recs: []api.Job{meta(2, 2, 3), task(3, 2, 0), task(4, 2, 1)}},
		{name: "acknowledged job missing", subs: []*chaosSub{sub(1, "s1", chaosShort, 0), sub(2, "s2", chaosShort, 0)},
			recs: []api.Job{job(1, "s1")}, want: []string{"1-accounting job=2: acknowledged to nobody (s2) but has 0 records"}},
		{name: "array task lost", subs: []*chaosSub{sub(2, "s2", chaosArray, 3)},
			recs: []api.Job{task(2, 2, 0), task(4, 2, 2)}, want: []string{"1-accounting job=2: array of 3 tasks has task records [0 2]"}},
		{name: "array task twice", subs: []*chaosSub{sub(2, "s2", chaosArray, 2)},
			recs: []api.Job{meta(2, 1), task(3, 2, 0), task(4, 2, 1)}, want: []string{"1-accounting job=2: array of 2 tasks has task records [0 1 1]"}},
		{name: "duplicate of a retried submission", subs: []*chaosSub{sub(1, "s1", chaosShort, 0)},
			recs:        []api.Job{job(1, "s1"), func() api.Job { j := job(2, "s1"); j.SubmitToken = "ab"; return j }()},
			want:        []string{"1-accounting job=2: s1 COMPLETED of uid 0 (token \"ab\") not acknowledged by any sbatch: its submission s1 was acknowledged as job 1"},
			unexplained: 1, withToken: 1},
		{name: "job of a failed sbatch", subs: []*chaosSub{{name: "s1", user: u, failure: "sbatch exited 1"}},
			recs: []api.Job{job(5, "s1")}, want: []string{"1-accounting job=5: s1 COMPLETED of uid 0 (token \"\") not acknowledged by any sbatch: its submission s1 failed (sbatch exited 1)"},
			unexplained: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, unexplained, withToken := checkAccounting(tt.subs, tt.recs)
			if len(v) != len(tt.want) || unexplained != tt.unexplained || withToken != tt.withToken {
				t.Fatalf("violations %v, unexplained %d, with token %d; want %q, %d, %d", v, unexplained, withToken, tt.want, tt.unexplained, tt.withToken)
			}
			for i := range v {
				if !strings.HasPrefix(v[i].String(), tt.want[i]) {
					t.Errorf("violation %q, want it to begin %q", v[i], tt.want[i])
				}
			}
		})
	}
}

func TestChaosCheckStates(t *testing.T) {
	recs := []api.Job{
		{ID: 1, State: api.StateCompleted},
		{ID: 2, State: api.StatePending, HoldKind: api.HoldUser, Reason: api.ReasonJobHeldUser},
		{ID: 3, State: api.StatePending, Reason: api.ReasonDependency},
		{ID: 4, State: api.StatePending, Reason: api.ReasonResources},
		{ID: 5, State: api.StateRunning},
		{ID: 6, State: api.StateCancelled},
	}
	v := checkStates(recs)
	if len(v) != 2 || v[0].job != 4 || v[1].job != 5 {
		t.Fatalf("violations %v, want jobs 4 (pending for resources) and 5 (running)", v)
	}
}

func TestChaosCompareSacct(t *testing.T) {
	recs := []api.Job{{ID: 1}, {ID: 2, ArrayJobID: 2, ArrayTaskID: 0}, {ID: 3, ArrayJobID: 2, ArrayTaskID: 1}}
	tests := []struct {
		name string
		out  string
		want []string
	}{
		{name: "agrees", out: "1|a|COMPLETED\n2_0|b|COMPLETED\n2_1|b|FAILED\n"},
		{name: "one missing, one twice, one unknown", out: "1|a|COMPLETED\n1|a|COMPLETED\n2_0|b|COMPLETED\n9|x|FAILED\n",
			want: []string{"1-accounting job=1: sacct lists 1 2 times", "1-accounting job=3: sacct lists 2_1 0 times", "1-accounting: sacct lists 9, which"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := compareSacct(tt.out, recs)
			if len(v) != len(tt.want) {
				t.Fatalf("violations %v, want %q", v, tt.want)
			}
			for i := range v {
				if !strings.HasPrefix(v[i].String(), tt.want[i]) {
					t.Errorf("violation %q, want it to begin %q", v[i], tt.want[i])
				}
			}
		})
	}
}

func TestChaosCheckDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); CREATE INDEX tv ON t(v)`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if _, err := tx.Exec(`INSERT INTO t (v) VALUES (?)`, strings.Repeat("x", i%50)+fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if v := checkDatabase(path); len(v) != 0 {
		t.Fatalf("intact database: %v", v)
	}
	// Overwrite part of a page in the middle of the file.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, 3000), 4096*5+100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	v := checkDatabase(path)
	if len(v) == 0 || v[0].invariant != "5-database" {
		t.Fatalf("corrupt database: violations %v, want a 5-database one", v)
	}
	t.Logf("corrupt database: %v", v[0])
}

func TestChaosScanJobProcs(t *testing.T) {
	marker := t.TempDir()
	cmd := exec.Command("sleep", "30")
	cmd.Env = append(os.Environ(), "TIDE_CHAOS_RUN="+marker, "SLURM_JOB_ID=4242")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "30") // another run's job
	other.Env = append(os.Environ(), "TIDE_CHAOS_RUN="+marker+"-other", "SLURM_JOB_ID=4242")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range []*exec.Cmd{cmd, other} {
			c.Process.Kill()
			c.Wait()
		}
	}()
	got := scanJobProcs(marker)
	if len(got) != 1 || got[0].pid != cmd.Process.Pid || got[0].job != 4242 || got[0].cmd != "sleep 30" {
		t.Fatalf("scan found %+v, want only pid %d of job 4242", got, cmd.Process.Pid)
	}
}

func TestChaosCheckSteps(t *testing.T) {
	recs := []api.Job{{ID: 1, State: api.StateCompleted}, {ID: 2, State: api.StateRunning},
		{ID: 3, ArrayJobID: 3, ArrayTaskID: 0, State: api.StateFailed}}
	out := "1|COMPLETED\n1.batch|COMPLETED\n1.0|COMPLETED\n1.1|RUNNING\n2|RUNNING\n2.0|RUNNING\n3_0|FAILED\n3_0.0|CANCELLED by 0\n3_0.1|PENDING\n"
	v := checkSteps(out, recs)
	want := []string{"2-state job=1: step 1.1 is RUNNING in sacct, but the job ended COMPLETED", "2-state job=3: step 3_0.1 is PENDING"}
	if len(v) != len(want) {
		t.Fatalf("violations %v, want %q", v, want)
	}
	for i := range v {
		if !strings.HasPrefix(v[i].String(), want[i]) {
			t.Errorf("violation %q, want it to begin %q", v[i], want[i])
		}
	}
}
