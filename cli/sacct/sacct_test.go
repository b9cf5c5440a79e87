package sacct

import (
	"context"
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/scontroltest"
	"github.com/tide-hpc/tide/ctld/api"
)

// recorder remembers the filter sacct sent.
type recorder struct {
	*clitest.FakeAPI
	filters []api.JobFilter
}

func (r *recorder) Accounting(ctx context.Context, f api.JobFilter) (api.JobList, error) {
	r.filters = append(r.filters, f)
	return r.FakeAPI.Accounting(ctx, f)
}

type result struct {
	out, errOut string
	code        int
	filters     []api.JobFilter
}

// run executes sacct against the canned cluster as uid (1000 = alice).
func run(t *testing.T, uid int, env map[string]string, args ...string) result {
	t.Helper()
	rec := &recorder{FakeAPI: scontroltest.Cluster()}
	f, buf := clitest.Factory(rec.FakeAPI, env)
	f.API = func() (cmdutil.API, error) { return rec, nil }
	f.UID = func() int { return uid }
	cmd := newCmd(f, time.UTC)
	out, errOut, code := clitest.Run(cmd, buf, "sacct", args)
	return result{out: out, errOut: errOut, code: code, filters: rec.filters}
}

func golden(t testing.TB, name, got string) {
	t.Helper()
	goldenpkg.Check(t, name, got)
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name   string
		uid    int
		env    map[string]string
		args   []string
		golden string
	}{
		{name: "default: own jobs since midnight", uid: 1000, golden: "default"},
		{name: "root sees everyone", uid: 0, golden: "root"},
		{name: "all users, allocations only", uid: 1000, args: []string{"-a", "-X"}, golden: "allusers-X"},
		{name: "custom widths and truncation", uid: 1000,
			args:   []string{"-a", "-X", "-o", "jobid%-8,jobname%-20,user,state%12,exitcode,elapsed,alloctres%-45,nodelist,start,end"},
			golden: "format-widths"},
		{name: "abbreviated fields", uid: 1000,
			args:   []string{"-o", "jobidr,ncpus,nnodes,reqcpus,reqmem,reqn,timelimitr,cputimer,elapsedr,derived", "-a"},
			golden: "format-abbrev"},
		{name: "parsable with trailing bar", uid: 1000, args: []string{"-a", "-p", "-b"}, golden: "parsable-brief"},
		{name: "parsable2 every supported field", uid: 0,
			args: []string{"-j", "101,94,96", "-P", "-o", "Account,AllocCPUS,AllocNodes,AllocTRES,Comment,Constraints," +
				"CPUTime,CPUTimeRAW,DerivedExitCode,Elapsed,ElapsedRaw,Eligible,End,ExitCode,GID,Group,JobID,JobIDRaw," +
				"JobName,NCPUS,NNodes,NodeList,NTasks,Partition,Priority,Reason,ReqCPUS,ReqMem,ReqNodes,ReqTRES,Restarts," +
				"Start,State,StdErr,StdIn,StdOut,Submit,Suspended,Timelimit,TimelimitRaw,UID,User,WorkDir,Cluster"},
			golden: "parsable2-all-fields"},
		{name: "custom delimiter", uid: 1000, args: []string{"-a", "-X", "-P", "--delimiter=;", "-o", "jobid,state,exitcode"},
			golden: "delimiter"},
		{name: "long", uid: 1000, args: []string{"-l", "-j", "101"}, golden: "long"},
		{name: "window from yesterday", uid: 1000, args: []string{"-S", "yesterday", "-X", "-o", "jobid,jobname,submit,end"},
			golden: "since-yesterday"},
		{name: "window closes early", uid: 1000, args: []string{"-a", "-S", "2026-11-29T18:00", "-E", "18:30", "-X"},
			golden: "window"},
		{name: "running now", uid: 1000, args: []string{"-a", "-s", "R,CG"}, golden: "state-running"},
		{name: "one user", uid: 1000, args: []string{"-u", "bob"}, golden: "user-bob"},
		{name: "account, partition and name filters", uid: 0,
			args: []string{"-A", "ml,physics", "-r", "gpu", "--name", "train,dist,prep"}, golden: "filters"},
		{name: "batch step only", uid: 1000, args: []string{"-j", "101.batch,102.batch"}, golden: "batch-only"},
		{name: "SACCT_FORMAT", uid: 1000, env: map[string]string{"SACCT_FORMAT": "jobid,user,state"}, args: []string{"-X"},
			golden: "sacct-format-env"},
		{name: "no header", uid: 1000, args: []string{"-n", "-X"}, golden: "noheader"},
		{name: "json", uid: 1000, args: []string{"--json", "-j", "101,91,103"}, golden: "json"},
		{name: "help format", uid: 1000, args: []string{"-e"}, golden: "helpformat"},
		{name: "all fields by prefix of ALL", uid: 0, args: []string{"-o", "al", "-X", "-j", "90"}, golden: "all-fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tt.uid, tt.env, tt.args...)
			if r.code != 0 || r.errOut != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.errOut)
			}
			golden(t, tt.golden, r.out)
		})
	}
}

// The acceptance scripts' exact query and answers.
func TestAcceptanceQuery(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want string
	}{
		{name: "completed", id: "90", want: "90|COMPLETED|0:0\n"},
		{name: "failed", id: "91", want: "91|FAILED|3:0\n"},
		// Slurm records no exit for a job it ended itself (the batch
		// step keeps the signal, see TestExitCodesPerState), and an OOM
		// kill as SIG_OOM.
		{name: "timeout", id: "92", want: "92|TIMEOUT|0:0\n"},
		{name: "cancelled by a known uid", id: "93", want: "93|CANCELLED by 1000|0:0\n"},
		{name: "cancelled by an unknown uid", id: "96", want: "96|CANCELLED|0:0\n"},
		{name: "node fail", id: "94", want: "94|NODE_FAIL|0:0\n"},
		{name: "out of memory", id: "95", want: "95|OUT_OF_MEMORY|0:125\n"},
		{name: "running", id: "101", want: "101|RUNNING|0:0\n"},
		{name: "pending", id: "103", want: "103|PENDING|0:0\n"},
		{name: "yesterday's job by id", id: "80", want: "80|COMPLETED|0:0\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, 1000, nil, "-X", "-j", tt.id, "-P", "-n", "--format=JobID,State,ExitCode")
			if r.code != 0 || r.out != tt.want {
				t.Errorf("got %q (exit %d, stderr %q), want %q", r.out, r.code, r.errOut, tt.want)
			}
		})
	}
}

func TestFilterSent(t *testing.T) {
	midnight := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		uid  int
		args []string
		want api.JobFilter
	}{
		{name: "non-root default", uid: 1000,
			want: api.JobFilter{Users: []string{"1000"}, Since: midnight, All: true}},
		{name: "root default", uid: 0, want: api.JobFilter{Since: midnight, All: true}},
		{name: "jobs lift the user and time defaults", uid: 1000, args: []string{"-j", "5,6.batch"},
			want: api.JobFilter{IDs: []uint64{5, 6}, All: true}},
		{name: "array tasks", uid: 1000, args: []string{"-j", "7_3,7_[5,8],9", "-j", "7_4.batch"},
			want: api.JobFilter{IDs: []uint64{9}, Tasks: []api.TaskRef{{JobID: 7, Task: 3}, {JobID: 7, Task: 5},
				{JobID: 7, Task: 8}, {JobID: 7, Task: 4}}, All: true}},
		{name: "users", uid: 1000, args: []string{"-u", "bob,1002"},
			want: api.JobFilter{Users: []string{"bob", "1002"}, Since: midnight, All: true}},
		{name: "all users", uid: 1000, args: []string{"-a"}, want: api.JobFilter{Since: midnight, All: true}},
		{name: "user -1 means all", uid: 1000, args: []string{"-u", "-1"}, want: api.JobFilter{Since: midnight, All: true}},
		{name: "states start now", uid: 0, args: []string{"-s", "cd,F,timeout"},
			want: api.JobFilter{States: []api.JobState{api.StateCompleted, api.StateFailed, api.StateTimeout},
				Since: scontroltest.Now, All: true}},
		{name: "window", uid: 0, args: []string{"-S", "now-2hours", "-E", "now"},
			want: api.JobFilter{Since: scontroltest.Now.Add(-2 * time.Hour), Until: scontroltest.Now, All: true}},
		{name: "accounts partitions names", uid: 0, args: []string{"-A", "ml", "-r", "gpu,debug", "--name", "x"},
			want: api.JobFilter{Accounts: []string{"ml"}, Partitions: []string{"gpu", "debug"}, Names: []string{"x"},
				Since: midnight, All: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tt.uid, nil, tt.args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.errOut)
			}
			if len(r.filters) != 1 {
				t.Fatalf("sent %d requests, want 1", len(r.filters))
			}
			if diff := cmp.Diff(tt.want, r.filters[0]); diff != "" {
				t.Errorf("filter (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "unknown field", args: []string{"-o", "jobid,frob"}, wantCode: 1,
			wantErr: "sacct: error: Invalid field requested: \"frob\"\n"},
		{name: "bad width", args: []string{"-o", "jobid%x"}, wantCode: 1,
			wantErr: "sacct: error: invalid field width in \"jobid%x\"\n"},
		{name: "bad start time", args: []string{"-S", "soonish"}, wantCode: 1,
			wantErr: "sacct: error: invalid time specification: soonish\n"},
		{name: "start after end", args: []string{"-S", "2026-11-29", "-E", "2026-11-28"}, wantCode: 1,
			wantErr: "sacct: error: start time (2026-11-29T00:00:00) is after end time (2026-11-28T00:00:00)\n"},
		{name: "bad state", args: []string{"-s", "sleeping"}, wantCode: 1,
			wantErr: "sacct: error: unrecognized job state value sleeping\n"},
		{name: "bad job id", args: []string{"-j", "12a"}, wantCode: 1,
			wantErr: "sacct: error: invalid job id or step specified: 12a\n"},
		{name: "unknown step", args: []string{"-j", "12.extern"}, wantCode: 1,
			wantErr: "sacct: error: invalid job id or step specified: 12.extern\n"},
		{name: "stray argument", args: []string{"101"}, wantCode: 2,
			wantErr: "sacct: error: Unknown arguments: 101\n"},
		{name: "unknown flag", args: []string{"--frob"}, wantCode: 1,
			wantErr: "sacct: unrecognized option '--frob'\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, 1000, nil, tt.args...)
			if r.code != tt.wantCode || r.errOut != tt.wantErr {
				t.Errorf("exit %d stderr %q, want exit %d stderr %q", r.code, r.errOut, tt.wantCode, tt.wantErr)
			}
			if len(r.filters) != 0 {
				t.Errorf("a request was sent despite the error: %+v", r.filters)
			}
		})
	}
}

func TestControllerError(t *testing.T) {
	fake := scontroltest.Cluster()
	fake.Err = api.Errorf(api.ErrUnavailable, "controller unreachable")
	f, buf := clitest.Factory(fake, nil)
	cmd := newCmd(f, time.UTC)
	cmd.SetArgs([]string{"-a"})
	err := cmd.Execute()
	if cmdutil.ExitCode(err) != 1 || !strings.Contains(err.Error(), "controller unreachable") {
		t.Fatalf("err = %v (exit %d), want the controller's error and exit 1", err, cmdutil.ExitCode(err))
	}
	if buf.Out.Len() != 0 {
		t.Errorf("printed %q before failing", buf.Out.String())
	}
}

func TestParseFormat(t *testing.T) {
	tests := []struct {
		name      string
		list      string
		wantNames []string
		wantWidth []int
	}{
		{name: "defaults", list: "jobid,state", wantNames: []string{"JobID", "State"}, wantWidth: []int{-12, 10}},
		{name: "width right-justifies", list: "jobid%20", wantNames: []string{"JobID"}, wantWidth: []int{20}},
		{name: "negative width left-justifies", list: "JobName%-30", wantNames: []string{"JobName"}, wantWidth: []int{-30}},
		{name: "zero width keeps default", list: "state%0", wantNames: []string{"State"}, wantWidth: []int{10}},
		{name: "prefixes pick Slurm's first match", list: "start,node,e,user,cputime,res",
			wantNames: []string{"Start", "NodeList", "Elapsed", "User", "CPUTime", "Reservation"},
			wantWidth: []int{19, 15, 10, 9, 10, 20}},
		{name: "case and blanks", list: " ExitCode , ELAPSEDRAW ,,", wantNames: []string{"ExitCode", "ElapsedRaw"},
			wantWidth: []int{8, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cols, err := parseFormat(tt.list)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			var widths []int
			for _, c := range cols {
				names = append(names, c.def.name)
				widths = append(widths, c.width)
			}
			if diff := cmp.Diff(tt.wantNames, names); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWidth, widths); diff != "" {
				t.Errorf("widths (-want +got):\n%s", diff)
			}
		})
	}
	if cols, err := parseFormat("ALL"); err != nil || len(cols) != len(fieldDefs()) {
		t.Errorf("ALL gave %d columns (%v), want %d", len(cols), err, len(fieldDefs()))
	}
}

func TestFixedCell(t *testing.T) {
	str := &fieldDef{name: "S", kind: kStr}
	date := &fieldDef{name: "D", kind: kDate}
	num := &fieldDef{name: "N", kind: kNum}
	tests := []struct {
		name  string
		col   column
		value string
		want  string
	}{
		{name: "right-justified", col: column{str, 6}, value: "ab", want: "    ab "},
		{name: "left-justified", col: column{str, -6}, value: "ab", want: "ab     "},
		{name: "exact fit", col: column{str, 3}, value: "abc", want: "abc "},
		{name: "text truncates with plus", col: column{str, 5}, value: "CANCELLED", want: "CANC+ "},
		{name: "date truncates plainly", col: column{date, 10}, value: "2026-11-29T19:31:17", want: "2026-11-29 "},
		{name: "numbers never truncate", col: column{num, 3}, value: "123456", want: "123456 "},
		{name: "blank", col: column{str, 4}, value: "", want: "     "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fixedCell(tt.col, tt.value); got != tt.want {
				t.Errorf("fixedCell = %q, want %q", got, tt.want)
			}
		})
	}
}
