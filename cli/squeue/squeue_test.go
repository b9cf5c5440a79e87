package squeue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
	"github.com/tide-hpc/tide/ctld/api"
)

func TestMain(m *testing.M) {
	// Golden files print times in UTC whatever the machine's zone.
	time.Local = time.UTC
	os.Exit(m.Run())
}

// exec runs squeue with args against fake and returns stdout, stderr and
// the command's error.
func exec(t testing.TB, fake *clitest.FakeAPI, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	f, bufs := clitest.Factory(fake, env)
	cmd := NewCmd(f)
	// A nil slice would make cobra read the test binary's os.Args.
	cmd.SetArgs(append([]string{}, args...))
	cmd.SetOut(bufs.Out)
	cmd.SetErr(bufs.Err)
	err := cmd.ExecuteContext(context.Background())
	return bufs.Out.String(), bufs.Err.String(), err
}

func golden(t testing.TB, name, got string) {
	t.Helper()
	goldenpkg.Check(t, name, got)
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{name: "default"},
		{name: "long", args: []string{"-l"}},
		{name: "start", args: []string{"--start"}},
		{name: "states-all", args: []string{"-t", "all"}},
		{name: "states-finished", args: []string{"--states=CD,F,CA,TO,NF,OOM"}},
		{name: "o-custom", args: []string{"-o", "%i|%j|%T|%r|%D|%C|%b|%N"}},
		{name: "o-gpu", args: []string{"-o", "%.6i %.8u %.4D %.5C %20b %R", "-t", "R"}},
		{name: "o-all-letters", args: []string{"-t", "all", "-o", "%all"}},
		{name: "o-prefix-percent", args: []string{"-h", "-o", "id=%i 100%% %.3j:%5u|"}},
		{name: "O-custom", args: []string{"-O", "JobID:10,Name:9,State:10,Reason:13,NumNodes:6,NumCPUs:5,tres-per-job:13,tres-per-node:14,tres-alloc:45,NodeList:10"}},
		{name: "O-default-width", args: []string{"-O", "JobID,UserName,TimeUsed,TimeLimit,TimeLeft"}},
		{name: "O-right-suffix", args: []string{"-O", "JobID:.6|,Name:.4|,Partition:.3|,ReasonList:.8"}},
		{name: "O-times", args: []string{"-t", "all", "-O", "JobID:5,SubmitTime:20,EligibleTime:20,StartTime:20,EndTime:20,PendingTime:8,exit_code:4"}},
		{name: "O-files", args: []string{"-O", "JobID:5,StdOut:40,StdErr:40,StdIn:12,WorkDir:20,Cluster:8,BatchHost:6"}},
		{name: "O-requests", args: []string{"-t", "all", "-O", "JobID:5,MinCPUs:4,MinMemory:8,NumTasks:3,cpus-per-task:4,NTPerNode:4,tres-per-task:16,ReqNodes:7,OverSubscribe:4,Priority:17,PriorityLong:6"}},
		{name: "user", args: []string{"-u", "alice"}},
		{name: "user-uid", args: []string{"--users=1001"}},
		{name: "me", args: []string{"--me"}},
		{name: "partition", args: []string{"-p", "debug"}},
		{name: "states-pd-r", args: []string{"-t", "PD,running"}},
		{name: "states-suspended", args: []string{"-t", "S"}},
		{name: "states-r-suspended", args: []string{"-t", "R,SUSPENDED"}},
		{name: "name", args: []string{"-n", "train,infer"}},
		{name: "account", args: []string{"-A", "ml"}},
		{name: "qos", args: []string{"-q", "normal"}},
		{name: "nodelist", args: []string{"-w", "gpu[02-03]"}},
		{name: "noheader", args: []string{"-h"}},
		{name: "sort-user-time", args: []string{"-S", "u,-M"}},
		{name: "jobs", args: []string{"-j", "108,101,111"}},
		{name: "job-finished", args: []string{"-j101"}},
		{name: "env-format", env: map[string]string{"SQUEUE_FORMAT": "%i %t", "SQUEUE_SORT": "-i"}},
		{name: "json", args: []string{"--json", "-t", "all"}},
		{name: "empty", args: []string{"-u", "nobody"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := exec(t, slurmfmttest.Cluster(), tt.env, tt.args...)
			if err != nil {
				t.Fatalf("squeue %v: %v (stderr %q)", tt.args, err, errOut)
			}
			if errOut != "" {
				t.Errorf("stderr = %q, want empty", errOut)
			}
			golden(t, tt.name, out)
		})
	}
}

// readSample reads a Slurm 22.05 sample and drops the lines of the array
// job 7 (and its tasks 13 and 14), which Tide cannot express yet.
func readSample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "slurm", name))
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if strings.Contains(l, " arr ") || strings.Contains(l, "|arr|") || strings.Contains(l, " 7_") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "")
}

// TestMatchesSlurm rebuilds the reference cluster and compares with what
// Slurm 22.05 printed there, byte for byte.
func TestMatchesSlurm(t *testing.T) {
	tests := []struct {
		name        string
		sample      string
		args        []string
		afterCancel bool
		// skip drops sample lines Tide prints differently on purpose.
		skip func(line string) bool
	}{
		{name: "default", sample: "squeue.txt"},
		{name: "long", sample: "squeue-l.txt", args: []string{"-l"}},
		{name: "start", sample: "squeue-start.txt", args: []string{"--start"}},
		{name: "o-custom", sample: "squeue-o-custom.txt", args: []string{"-o", "%i|%j|%T|%r|%D|%C|%b|%N"}},
		{name: "states-all", sample: "squeue-t-all-after-cancel.txt", args: []string{"-t", "all"}, afterCancel: true},
		{
			name: "O-custom", sample: "squeue-O-custom.txt",
			args: []string{"-O", "JobID:10,Name:9,State:10,Reason:13,NumNodes:6,NumCPUs:5,tres-per-job:13,tres-per-node:14,tres-alloc:45,NodeList:10"},
			// Tide counts GPUs in TRES_ALLOC (gres/gpu=N); the reference
			// Slurm had no gres/gpu in AccountingStorageTRES.
			skip: func(l string) bool { return strings.Contains(l, "gres:gpu") },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := readSample(t, tt.sample)
			got, errOut, err := exec(t, slurmfmttest.Reference(tt.afterCancel), nil, tt.args...)
			if err != nil {
				t.Fatalf("squeue: %v (stderr %q)", err, errOut)
			}
			if tt.skip != nil {
				want, got = dropLines(want, tt.skip), dropLines(got, tt.skip)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("differs from Slurm's %s (-slurm +tide):\n%s", tt.sample, diff)
			}
		})
	}
}

func dropLines(s string, drop func(string) bool) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if !drop(l) {
			b.WriteString(l)
		}
	}
	return b.String()
}

// TestJSONMatchesSlurm checks that --json carries Slurm's key names and
// values for the fields Tide prints.
func TestJSONMatchesSlurm(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "slurm", "squeue.json"))
	if err != nil {
		t.Fatal(err)
	}
	var slurm struct{ Jobs []map[string]any }
	if err := json.Unmarshal(raw, &slurm); err != nil {
		t.Fatal(err)
	}
	out, _, err := exec(t, slurmfmttest.Reference(false), nil, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var tide struct{ Jobs []map[string]any }
	if err := json.Unmarshal([]byte(out), &tide); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	byID := map[float64]map[string]any{}
	for _, j := range slurm.Jobs {
		byID[j["job_id"].(float64)] = j
	}
	keys := []string{"job_id", "name", "user_name", "partition", "job_state", "state_reason", "nodes",
		"node_count", "cpus", "tasks", "priority", "tres_per_job", "tres_per_node", "batch_host",
		"start_time", "current_working_directory", "dependency", "exit_code", "cluster", "user_id", "group_name"}
	if len(tide.Jobs) != 8 {
		t.Fatalf("got %d jobs, want the 8 active non-array jobs", len(tide.Jobs))
	}
	for _, tj := range tide.Jobs {
		sj := byID[tj["job_id"].(float64)]
		if sj == nil {
			t.Fatalf("job %v not in the Slurm sample", tj["job_id"])
		}
		for _, k := range keys {
			if k == "dependency" && sj[k] != "" {
				continue // Slurm appends "(unfulfilled)" to the stored text
			}
			if k == "start_time" && sj["job_state"] == "PENDING" && sj[k] == 0.0 && tj[k] != 0.0 {
				continue
			}
			if diff := cmp.Diff(sj[k], tj[k]); diff != "" {
				t.Errorf("job %v key %s (-slurm +tide):\n%s", tj["job_id"], k, diff)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		fakeErr    error
		wantErr    string
		wantStderr string
		wantCode   int
	}{
		{name: "bad state", args: []string{"-t", "PD,XX"}, wantErr: "Invalid job state specified: XX", wantCode: 1},
		{name: "bad letter", args: []string{"-o", "%i %!"}, wantErr: "Invalid job format specification: !", wantCode: 1},
		{name: "bad long field", args: []string{"-O", "JobID,Bogus:5"}, wantErr: "Invalid job format specification: Bogus", wantCode: 1},
		{name: "format ends in field", args: []string{"-o", "%i %.5"}, wantErr: "ends inside a field specification", wantCode: 1},
		{name: "bad sort", args: []string{"-S", "P,-X"}, wantErr: "Invalid sort specification: X", wantCode: 1},
		{name: "bad job id", args: []string{"-j", "12,abc"}, wantErr: "Invalid job id: abc", wantCode: 1},
		{name: "unknown job", args: []string{"-j", "999999"}, wantStderr: ErrInvalidJobID + "\n", wantCode: 1},
		{name: "bad nodelist", args: []string{"-w", "gpu[01"}, wantErr: "invalid entry for --nodelist", wantCode: 1},
		{name: "format and Format", args: []string{"-o", "%i", "-O", "JobID"}, wantErr: "incompatible", wantCode: 1},
		{name: "zero iterate", args: []string{"-i", "0"}, wantErr: "--iterate", wantCode: 1},
		{name: "controller down", fakeErr: api.Errorf(api.ErrUnavailable, "connect: no such file"), wantErr: "slurm_load_jobs error: connect: no such file", wantCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := slurmfmttest.Cluster()
			fake.Err = tt.fakeErr
			out, errOut, err := exec(t, fake, nil, tt.args...)
			if err == nil {
				t.Fatalf("squeue %v succeeded, printed %q", tt.args, out)
			}
			if tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %q, want it to contain %q", err, tt.wantErr)
			}
			if errOut != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", errOut, tt.wantStderr)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			if code := cmdutil.ExitCode(err); code != tt.wantCode {
				t.Errorf("exit code = %d, want %d", code, tt.wantCode)
			}
			if tt.fakeErr != nil && !errors.Is(err, api.ErrUnavailable) {
				t.Errorf("error %v does not wrap the controller's error", err)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want api.JobFilter
		// anyState: only active jobs are kept.
		anyState bool
		format   string
	}{
		{name: "defaults", anyState: true, format: DefaultFormat},
		{name: "jobs list", args: []string{"-j", "12,13"}, want: api.JobFilter{IDs: []uint64{12, 13}, All: true}, format: DefaultFormat},
		{name: "jobs attached", args: []string{"-j12"}, want: api.JobFilter{IDs: []uint64{12}, All: true}, format: DefaultFormat},
		{name: "jobs long", args: []string{"--jobs=7,8"}, want: api.JobFilter{IDs: []uint64{7, 8}, All: true}, format: DefaultFormat},
		{name: "users alias and me", args: []string{"--users=bob,1002", "--me"}, want: api.JobFilter{Users: []string{"bob", "1002", "1000"}}, anyState: true, format: DefaultFormat},
		{name: "partitions alias", args: []string{"--partitions=a,b", "-n", "x", "--accounts=ml"},
			want: api.JobFilter{Partitions: []string{"a", "b"}, Names: []string{"x"}, Accounts: []string{"ml"}}, anyState: true, format: DefaultFormat},
		{name: "active states", args: []string{"-t", "pd,R"}, want: api.JobFilter{States: []api.JobState{api.StatePending, api.StateRunning}}, format: DefaultFormat},
		{name: "finished state sets all", args: []string{"--state=CD"}, want: api.JobFilter{States: []api.JobState{api.StateCompleted}, All: true}, format: DefaultFormat},
		{name: "all states", args: []string{"-t", "all"}, want: api.JobFilter{All: true}, format: DefaultFormat},
		{name: "start", args: []string{"--start"}, want: api.JobFilter{States: []api.JobState{api.StatePending}}, format: StartFormat},
		{name: "long", args: []string{"-l"}, anyState: true, format: LongFormat},
		{name: "env", env: map[string]string{"SQUEUE_USERS": "carol", "SQUEUE_FORMAT": "%i"}, want: api.JobFilter{Users: []string{"carol"}}, anyState: true, format: "%i"},
		{name: "flag beats env", args: []string{"-o", "%j"}, env: map[string]string{"SQUEUE_FORMAT": "%i"}, anyState: true, format: "%j"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := clitest.Factory(slurmfmttest.Cluster(), tt.env)
			var got *query
			cmd := newCmd(f, func(_ context.Context, o *Options) error {
				q, err := o.compile()
				got = q
				return err
			})
			cmd.SetArgs(append([]string{}, tt.args...))
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.filter); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
			if got.anyState != tt.anyState {
				t.Errorf("anyState = %v, want %v", got.anyState, tt.anyState)
			}
			if got.format != tt.format {
				t.Errorf("format = %q, want %q", got.format, tt.format)
			}
		})
	}
}

func TestIterate(t *testing.T) {
	fake := slurmfmttest.Cluster()
	f, bufs := clitest.Factory(fake, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rounds := 0
	cmd := newCmd(f, func(ctx context.Context, o *Options) error {
		o.Sleep = func(ctx context.Context, d time.Duration) error {
			if d != 5*time.Second {
				t.Errorf("sleep %v, want 5s", d)
			}
			rounds++
			if rounds == 2 {
				cancel()
				return ctx.Err()
			}
			return nil
		}
		return run(ctx, o)
	})
	cmd.SetArgs([]string{"-i", "5", "-t", "R", "-o", "%i"})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	round := "Sun Nov 29 19:31:17 2026\nJOBID\n110\n108\n109\n\n"
	if want := round + round; bufs.Out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", bufs.Out.String(), want)
	}
}

func TestVerbose(t *testing.T) {
	out, errOut, err := exec(t, slurmfmttest.Cluster(), nil, "-v", "-t", "R", "-o", "%i")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "Sun Nov 29 19:31:17 2026\nJOBID\n") {
		t.Errorf("stdout = %q, want the date line then the table", out)
	}
	for _, want := range []string{"format      = %i\n", "states      = RUNNING\n", "verbose     = 1\n"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// TestRenderNoAlloc checks that rendering a row allocates nothing beyond
// what the fields need, so long queues stay cheap.
func TestRenderNoAlloc(t *testing.T) {
	jobs := slurmfmttest.PendingJobs(100)
	e := &env{loc: time.UTC}
	e.setNow(slurmfmttest.Now, nil)
	tbl, err := compileFormat(DefaultFormat, false, e)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		for i := range jobs {
			buf = tbl.AppendRow(buf[:0], &jobs[i])
		}
	})
	if allocs != 0 {
		t.Errorf("rendering 100 pending rows allocates %v times, want 0", allocs)
	}
}

func BenchmarkSqueue10k(b *testing.B) {
	fake := &clitest.FakeAPI{Now: slurmfmttest.Now, JobRecs: slurmfmttest.PendingJobs(10000)}
	f, _ := clitest.Factory(fake, nil)
	f.IO.Out = discard{}
	ctx := context.Background()
	for b.Loop() {
		cmd := NewCmd(f)
		cmd.SetArgs([]string{})
		if err := cmd.ExecuteContext(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSqueue10kRender measures what squeue itself adds once the
// jobs are decoded: filter, sort and print 10,000 pending jobs.
func BenchmarkSqueue10kRender(b *testing.B) {
	list := slurmfmttest.PendingJobs(10000)
	e := &env{loc: time.UTC}
	e.setNow(slurmfmttest.Now, nil)
	o := &Options{}
	q, err := o.compile()
	if err != nil {
		b.Fatal(err)
	}
	tbl, err := compileFormat(q.format, false, e)
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	for b.Loop() {
		out.Reset()
		jobs := make([]*api.Job, 0, len(list))
		for i := range list {
			if q.keep(&list[i]) {
				jobs = append(jobs, &list[i])
			}
		}
		sortJobs(jobs, q.sort, e)
		if err := render(&out, tbl, jobs, true); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(out.Len()))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
