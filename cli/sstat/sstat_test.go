package sstat

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
	"github.com/tide-hpc/tide/ctld/api"
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
)

func TestMain(m *testing.M) {
	time.Local = time.UTC
	os.Exit(m.Run())
}

// liveAPI serves the canned cluster with step records and the running
// steps' usage.
type liveAPI struct {
	*clitest.FakeAPI
	recs  []api.StepRecord
	usage []api.StepUsage
	// usageCalls records the job ids of each LiveUsage call.
	usageCalls [][]uint64
}

func (l *liveAPI) Steps(_ context.Context, ids []uint64) ([]api.StepRecord, error) {
	var out []api.StepRecord
	for _, r := range l.recs {
		for _, id := range ids {
			if r.JobID == id {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func (l *liveAPI) LiveUsage(_ context.Context, ids []uint64) ([]api.StepUsage, error) {
	l.usageCalls = append(l.usageCalls, ids)
	var out []api.StepUsage
	for _, u := range l.usage {
		for _, id := range ids {
			if u.JobID == id {
				out = append(out, u)
			}
		}
	}
	return out, nil
}

func at(h, m, s int) time.Time { return time.Date(2026, 11, 29, h, m, s, 0, time.UTC) }

func stat(tot, max uint64, maxNode string, maxTask int, min uint64, minNode string, minTask int) api.UsageStat {
	return api.UsageStat{Tot: tot, Max: max, MaxNode: maxNode, MaxTask: maxTask, Min: min, MinNode: minNode, MinTask: minTask}
}

func one(v uint64, node string) api.UsageStat { return stat(v, v, node, 0, v, node, 0) }

// cluster is the canned cluster (running jobs 108, 109, 110) with
// steps: 108 runs steps 0 (eight tasks on gpu[01-02], GPU readings) and
// 1 (not sampled yet) and ran step 2; 109 runs step 0; 110 runs its
// batch script only. The nodes sampled 108's batch step and steps 108.0
// and 109.0.
func cluster() *liveAPI {
	return &liveAPI{FakeAPI: slurmfmttest.Cluster(),
		recs: []api.StepRecord{
			{JobID: 108, StepID: 0, Name: "torchrun", State: api.StateRunning, UserID: 1000, Start: at(18, 31, 20),
				Nodes: []string{"gpu01", "gpu02"}, NTasks: 8, CPUs: 64, GPUs: 8},
			{JobID: 108, StepID: 1, Name: "eval", State: api.StateRunning, UserID: 1000, Start: at(19, 30, 0),
				Nodes: []string{"gpu02"}, NTasks: 1, CPUs: 8},
			{JobID: 108, StepID: 2, Name: "warmup", State: api.StateCompleted, UserID: 1000, Start: at(18, 31, 18),
				End: at(18, 31, 19), Nodes: []string{"gpu01"}, NTasks: 1, CPUs: 1},
			{JobID: 109, StepID: 0, Name: "infer", State: api.StateRunning, UserID: 1001, Start: at(19, 26, 5),
				Nodes: []string{"gpu03"}, NTasks: 2, CPUs: 8, GPUs: 2},
		},
		usage: []api.StepUsage{
			{JobID: 108, StepID: api.BatchStepID, UserID: 1000, Nodes: 1, Tasks: 1, UserUsec: 2_500_000, SystemUsec: 500_000,
				CPU: one(3_000_000, "gpu01"), RSS: one(5<<20, "gpu01"), VMSize: one(12<<20, "gpu01"),
				Pages: one(0, "gpu01"), DiskRead: one(4096, "gpu01"), DiskWrite: one(0, "gpu01")},
			{JobID: 108, StepID: 0, UserID: 1000, Nodes: 2, Tasks: 8, GPU: true,
				UserUsec: 28_000_000_000, SystemUsec: 760_000_000,
				CPU:       stat(28_760_000_000, 3_600_500_000, "gpu02", 5, 3_590_000_000, "gpu01", 2),
				RSS:       stat(24<<30, 3<<30+512<<20, "gpu02", 6, 2<<30+512<<20, "gpu01", 0),
				VMSize:    stat(96<<30, 12<<30, "gpu01", 1, 12<<30, "gpu01", 0),
				Pages:     stat(40, 9, "gpu02", 4, 2, "gpu01", 3),
				DiskRead:  stat(8<<30, 1<<30+256<<20, "gpu01", 0, 1<<30-256<<20, "gpu02", 7),
				DiskWrite: stat(512<<20, 512<<20, "gpu01", 0, 0, "gpu01", 1),
				GPUMem:    stat(480<<30, 62<<30, "gpu02", 5, 58<<30, "gpu01", 0),
				GPUUtil:   stat(760, 99, "gpu02", 6, 90, "gpu01", 1)},
			{JobID: 109, StepID: 0, UserID: 1001, Nodes: 1, Tasks: 2, UserUsec: 600_000_000, SystemUsec: 12_000_000,
				CPU: stat(612_000_000, 311_000_000, "gpu03", 1, 301_000_000, "gpu03", 0), RSS: stat(3<<30, 2<<30, "gpu03", 1, 1<<30, "gpu03", 0),
				VMSize: stat(10<<30, 5<<30, "gpu03", 0, 5<<30, "gpu03", 1), Pages: one(0, "gpu03"),
				DiskRead: stat(1, 1, "gpu03", 0, 0, "gpu03", 1), DiskWrite: one(0, "gpu03")},
		}}
}

// execSstat runs sstat as root against c.
func execSstat(t testing.TB, c cmdutil.API, args ...string) (string, string, int) {
	t.Helper()
	return execSstatAs(t, c, 0, args...)
}

func execSstatAs(t testing.TB, c cmdutil.API, uid int, args ...string) (string, string, int) {
	t.Helper()
	f, bufs := clitest.Factory(nil, nil)
	f.API = func() (cmdutil.API, error) { return c, nil }
	f.UID = func() int { return uid }
	return clitest.Run(NewCmd(f), bufs, "sstat", append([]string{}, args...))
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "default", args: []string{"-j", "108.0"}},
		{name: "default-parsable", args: []string{"-p", "-j", "108.0,109.0"}},
		{name: "job-lowest-step", args: []string{"-P", "-o", "JobID,NTasks,Nodelist,AveCPU,MinCPU,MaxRSS,MaxRSSNode,MaxRSSTask,AveRSS", "108"}},
		{name: "allsteps", args: []string{"-a", "-P", "-o", "jobid,ntasks,nodelist,maxrss,averss,avecpu,tresusageintot", "-j", "108"}},
		{name: "batch-step", args: []string{"-n", "-P", "-o", "jobid,avecpu,maxrss,maxvmsize,avediskread,ntasks", "-j108.batch"}},
		{name: "not-sampled", args: []string{"-o", "jobid,ntasks,nodelist,avecpu,maxrss,maxrsstask,consumedenergy,reqcpufreqmin", "-j", "108.1"}},
		{name: "abbrev-widths", args: []string{"--format=jobid%-8,maxr%8,maxrssn,ave%12", "-o", "tresusageinmaxn%40", "-j", "108.0,109.0"}},
		{name: "tres", args: []string{"-P", "-o", "tresusageinave,tresusageinmax,tresusageinmaxnode,tresusageinmaxtask,tresusageinmin,tresusageinminn,tresusageinmint,tresusageintot", "-j", "108.0"}},
		{name: "tres-out", args: []string{"-P", "-o", "tresusageoutave,tresusageoutmax,tresusageoutmaxn,tresusageoutmaxt,tresusageouttot,maxdiskwrite,maxdiskwritenode,avediskwrite", "-j", "108.0"}},
		{name: "disk", args: []string{"-P", "-o", "jobid,avediskread,maxdiskread,maxdiskreadnode,maxdiskreadtask,avepages,maxpages,maxpagesnode,maxpagestask", "-j", "108.0,109.0"}},
		{name: "noconvert", args: []string{"--noconvert", "-P", "-o", "jobid,maxrss,averss,maxvmsize,avediskread,tresusageinmax", "-j", "108.0"}},
		{name: "helpformat", args: []string{"-e"}},
		{name: "help", args: []string{"--help"}},
		{name: "usage", args: []string{"--usage"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := execSstat(t, cluster(), tt.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("sstat %v: exit %d, stderr %q", tt.args, code, errOut)
			}
			goldenpkg.Check(t, tt.name, out)
		})
	}
}

// TestSlurmErrors checks the answers of Slurm's sstat where a job or
// step does not run: an error on stderr, the other items still printed,
// exit 0; and its fatal mistakes (exit 1).
func TestSlurmErrors(t *testing.T) {
	const head = "JobID|NTasks\n"
	tests := []struct {
		name              string
		args              []string
		code              int
		wantOut, wantErr  string
		wantNoUsageLookup bool
	}{
		{name: "no jobs", args: []string{"-P"}, code: 1, wantErr: "sstat: error: You didn't give me any jobs to stat.\n"},
		{name: "unknown job", args: []string{"-P", "-o", "jobid,ntasks", "-j", "999,109.0"}, wantOut: head + "109.0|2\n",
			wantErr: "sstat: error: couldn't get steps for job 999\n"},
		{name: "pending job", args: []string{"-P", "-o", "jobid,ntasks", "-j", "111"}, wantOut: head,
			wantErr: "sstat: error: No steps running for job 111\n"},
		{name: "finished job's step", args: []string{"-P", "-o", "jobid,ntasks", "-j", "101.0"}, wantOut: head,
			wantErr: "sstat: error: StepId=101.0 not found running.\n"},
		{name: "ended step", args: []string{"-P", "-o", "jobid,ntasks", "-j", "108.2"}, wantOut: head,
			wantErr: "sstat: error: StepId=108.2 not found running.\n"},
		{name: "extern step", args: []string{"-P", "-o", "jobid,ntasks", "-j", "108.extern"}, wantOut: head,
			wantErr: "sstat: error: StepId=108.extern not found running.\n"},
		{name: "batch only without -a", args: []string{"-P", "-o", "jobid,ntasks", "-j", "110"}, wantOut: head},
		{name: "batch only with -a", args: []string{"-a", "-P", "-o", "jobid,ntasks", "-j", "110"}, wantOut: head + "110.batch|1\n"},
		{name: "repeats dropped", args: []string{"-P", "-o", "jobid,ntasks", "-j", "109.0,109.0", "-j", "109.0"}, wantOut: head + "109.0|2\n"},
		{name: "first operand only", args: []string{"-P", "-o", "jobid,ntasks", "109.0", "108.0"}, wantOut: head + "109.0|2\n"},
		{name: "invalid field", args: []string{"-o", "jobid,bogus%5", "-j", "108"}, code: 1, wantErr: "sstat: error: Invalid field requested: \"bogus\"\n"},
		{name: "bad job", args: []string{"-j", "x1"}, code: 1, wantErr: "sstat: fatal: Bad job/step specified: x1\n"},
		{name: "bad step", args: []string{"-j", "108.first"}, code: 1, wantErr: "sstat: fatal: Bad step specified: 108\n"},
		{name: "bad array task", args: []string{"-j", "108_x.0"}, code: 1, wantErr: "sstat: fatal: Bad job array element specified: 108\n"},
		{name: "pidformat", args: []string{"-i", "-j", "108"}, code: 1,
			wantErr: "sstat: error: -i/--pidformat is not supported by Tide: its nodes do not report the steps' process ids\n"},
		{name: "unknown option", args: []string{"-h", "--bogus"}, code: 1,
			wantErr: "sstat: unrecognized option '--bogus'\nTry \"sstat --help\" for more information\n"},
		{name: "help is -h, not noheader", args: []string{"-j", "108", "-h"}, wantOut: "sstat [<OPTION>]"},
		{name: "version first", args: []string{"-V", "--bogus"}, wantOut: "slurm 22.05.8\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := execSstat(t, cluster(), tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errOut)
			}
			if strings.HasSuffix(tt.wantOut, "]") {
				if !strings.HasPrefix(out, tt.wantOut) {
					t.Errorf("stdout = %q, want it to start with %q", out, tt.wantOut)
				}
			} else if out != tt.wantOut {
				t.Errorf("stdout = %q, want %q", out, tt.wantOut)
			}
			if errOut != tt.wantErr {
				t.Errorf("stderr = %q, want %q", errOut, tt.wantErr)
			}
		})
	}
}

// TestArrayTask reads "N_T" as the array's task, and prints the task's
// own job id as Slurm does.
func TestArrayTask(t *testing.T) {
	c := cluster()
	j := c.JobRecs[8] // 109
	j.ID, j.ArrayJobID, j.ArrayTaskID = 130, 125, 4
	c.JobRecs = append(c.JobRecs, j)
	c.recs = append(c.recs, api.StepRecord{JobID: 130, StepID: 0, Name: "sweep", State: api.StateRunning, UserID: 1001,
		Start: at(19, 27, 0), Nodes: []string{"gpu03"}, NTasks: 3, CPUs: 3})
	out, errOut, code := execSstat(t, c, "-n", "-P", "-o", "jobid,ntasks", "-j", "125_4.0,125_5.0")
	if code != 0 || out != "130.0|3\n" || errOut != "sstat: error: couldn't get steps for job 125\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestWithoutUsage prints the steps with blank usage fields when the
// controller reports no usage, and asks for the usage of running jobs
// with steps only.
func TestWithoutUsage(t *testing.T) {
	c := cluster()
	c.usage = nil
	out, _, code := execSstat(t, c, "-n", "-P", "-o", "jobid,avecpu,maxrss,ntasks", "-j", "108.0,111")
	if code != 0 || out != "108.0|||8\n" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	if len(c.usageCalls) != 1 || len(c.usageCalls[0]) != 1 || c.usageCalls[0][0] != 108 {
		t.Errorf("LiveUsage calls = %v, want one for job 108", c.usageCalls)
	}
	// A client without step records or usage: the batch step only.
	out, _, code = execSstat(t, slurmfmttest.Cluster(), "-a", "-n", "-P", "-o", "jobid,avecpu,ntasks", "-j", "108")
	if code != 0 || out != "108.batch||1\n" {
		t.Errorf("plain client: exit %d, stdout %q", code, out)
	}
}

// TestOtherUsersSteps refuses another user's steps to a user who is not
// root, as Slurm's slurmd does, and shows the caller's own.
func TestOtherUsersSteps(t *testing.T) {
	out, errOut, code := execSstatAs(t, cluster(), 1000, "-n", "-P", "-o", "jobid,ntasks", "-j", "108.0,109.0")
	wantErr := "sstat: error: slurm_job_step_stat: there was an error with the request to gpu03 rc = Invalid user id\n" +
		"sstat: error: problem getting step_layout for StepId=109.0: Invalid user id\n"
	if code != 0 || out != "108.0|8\n" || errOut != wantErr {
		t.Errorf("alice: exit %d, stdout %q, stderr %q; want 108.0 only and stderr %q", code, out, errOut, wantErr)
	}
}
