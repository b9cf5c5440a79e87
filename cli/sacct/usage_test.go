package sacct

import (
	"context"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/scontroltest"
	"github.com/tide-hpc/tide/ctld/api"
)

// usageAPI adds the steps' usage to the canned cluster's steps.
type usageAPI struct {
	*stepAPI
	usage []api.StepUsage
}

func (u *usageAPI) Usage(_ context.Context, ids []uint64) ([]api.StepUsage, error) {
	var out []api.StepUsage
	for _, x := range u.usage {
		for _, id := range ids {
			if x.JobID == id {
				out = append(out, x)
			}
		}
	}
	return out, nil
}

// one is the statistic of a single task (rank 0) on node.
func one(v uint64, node string) api.UsageStat { return stat(v, v, node, 0, v, node, 0) }

func stat(tot, max uint64, maxNode string, maxTask int, min uint64, minNode string, minTask int) api.UsageStat {
	return api.UsageStat{Tot: tot, Max: max, MaxNode: maxNode, MaxTask: maxTask, Min: min, MinNode: minNode, MinTask: minTask}
}

// TestUsageGolden prints the usage fields of a finished job (its batch
// step), a running job (its batch step still running, an ended srun step
// on two nodes with GPU readings, one still running) and a job whose
// steps nothing measured.
func TestUsageGolden(t *testing.T) {
	fake := scontroltest.Cluster()
	var base api.Job
	for _, j := range fake.JobRecs {
		if j.ID == 101 {
			base = j
		}
	}
	start := base.StartTime
	sa := &stepAPI{FakeAPI: fake, steps: []api.StepRecord{
		{JobID: 101, StepID: 0, Name: "train", State: api.StateCompleted, Start: start.Add(time.Second),
			End: start.Add(91 * time.Second), Nodes: []string{"gpu01", "gpu02"}, NTasks: 4, CPUs: 8},
		{JobID: 101, StepID: 1, Name: "eval", State: api.StateRunning, Start: start.Add(100 * time.Second),
			Nodes: []string{"gpu01"}, NTasks: 1, CPUs: 2},
		{JobID: 101, StepID: 2, Name: "killed", State: api.StateFailed, Exit: api.ExitStatus{Signal: 9},
			Start: start.Add(100 * time.Second), End: start.Add(110 * time.Second), Nodes: []string{"gpu01"}, NTasks: 1, CPUs: 2},
	}}
	ua := &usageAPI{stepAPI: sa, usage: []api.StepUsage{
		{JobID: 90, StepID: api.BatchStepID, UserID: 1000, Nodes: 1, Tasks: 1, Final: true,
			UserUsec: 1_200_000, SystemUsec: 34_000,
			CPU:      stat(1_234_000, 1_234_000, "gpu02", 0, 1_234_000, "gpu02", 0),
			RSS:      stat(4886528, 4886528, "gpu02", 0, 4886528, "gpu02", 0),
			VMSize:   stat(110972928, 110972928, "gpu02", 0, 110972928, "gpu02", 0),
			Pages:    stat(3, 3, "gpu02", 0, 3, "gpu02", 0),
			DiskRead: stat(2332, 2332, "gpu02", 0, 2332, "gpu02", 0), DiskWrite: stat(5<<19, 5<<19, "gpu02", 0, 5<<19, "gpu02", 0)},
		{JobID: 101, StepID: api.BatchStepID, UserID: 1000, Nodes: 1, Tasks: 1, UserUsec: 500_000,
			CPU: one(500_000, "gpu01"), RSS: one(1<<20, "gpu01"), VMSize: one(3<<20, "gpu01"), Pages: one(0, "gpu01"),
			DiskRead: one(0, "gpu01"), DiskWrite: one(0, "gpu01")},
		{JobID: 101, StepID: 0, UserID: 1000, Nodes: 2, Tasks: 4, Final: true, GPU: true,
			UserUsec: 7200_000_000, SystemUsec: 61_500_000,
			CPU:       stat(7261_500_000, 1900_000_000, "gpu02", 3, 1700_000_000, "gpu01", 0),
			RSS:       stat(8<<30, 3<<30, "gpu02", 2, 1<<30, "gpu01", 1),
			VMSize:    stat(40<<30, 12<<30, "gpu02", 2, 8<<30, "gpu01", 0),
			Pages:     stat(12, 6, "gpu01", 0, 1, "gpu02", 3),
			DiskRead:  stat(4<<30, 2<<30, "gpu01", 1, 512<<20, "gpu02", 2),
			DiskWrite: stat(100<<20, 100<<20, "gpu01", 0, 0, "gpu01", 1),
			GPUMem:    stat(60<<30, 20<<30, "gpu01", 0, 10<<30, "gpu02", 3),
			GPUUtil:   stat(310, 95, "gpu01", 1, 60, "gpu02", 3)},
	}}
	tests := []struct {
		name   string
		args   []string
		golden string
	}{
		{name: "table", golden: "usage-table",
			args: []string{"-j", "90,101,91", "-o", "JobID,State,ExitCode,Elapsed,TotalCPU,UserCPU,SystemCPU,CPUTime,MaxRSS,MaxRSSNode,MaxRSSTask,AveRSS,MaxVMSize,AveCPU,MinCPU,MaxDiskRead,AveDiskWrite,ConsumedEnergy"}},
		{name: "TRES usage strings", golden: "usage-tres",
			args: []string{"-j", "90,101", "-P", "-o", "JobID,TRESUsageInTot,TRESUsageInMax,TRESUsageInMaxNode,TRESUsageInMaxTask,TRESUsageInAve,TRESUsageInMin,TRESUsageInMinNode,TRESUsageInMinTask,TRESUsageOutTot,TRESUsageOutMax,TRESUsageOutMaxNode"}},
		{name: "the rest, parsable", golden: "usage-parsable",
			args: []string{"-j", "101", "-p", "-o", "JobID,AvePages,MaxPages,MaxPagesNode,MaxPagesTask,MaxVMSizeNode,MaxVMSizeTask,AveVMSize,MinCPUNode,MinCPUTask,MaxDiskReadNode,MaxDiskReadTask,MaxDiskWrite,MaxDiskWriteNode,MaxDiskWriteTask,AveDiskRead,ConsumedEnergyRaw,TRESUsageOutAve,TRESUsageOutMin,TRESUsageOutMinNode,TRESUsageOutMinTask,TRESUsageOutMaxTask"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, buf := clitest.Factory(fake, nil)
			f.API = func() (cmdutil.API, error) { return ua, nil }
			f.UID = func() int { return 0 }
			out, errOut, code := clitest.Run(newCmd(f, time.UTC), buf, "sacct", tt.args)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden(t, tt.golden, out)
		})
	}
}

// TestExitCodesPerState: Slurm records no exit for a job it ended (a
// cancel, the time limit, a preemption, a lost node) while the batch
// step keeps the script's end, and a step ended by a signal is
// CANCELLED (src/slurmctld/job_mgr.c _job_complete,
// accounting_storage/mysql as_mysql_step_complete).
func TestExitCodesPerState(t *testing.T) {
	r := run(t, 0, nil, "-j", "92,93,95", "-P", "-n", "-o", "JobID,State,ExitCode")
	want := "92|TIMEOUT|0:0\n92.batch|CANCELLED|0:15\n" +
		"93|CANCELLED by 1000|0:0\n93.batch|CANCELLED|0:15\n" +
		"95|OUT_OF_MEMORY|0:125\n95.batch|OUT_OF_MEMORY|0:125\n"
	if r.code != 0 || r.out != want {
		t.Errorf("got %q (exit %d, %q), want %q", r.out, r.code, r.errOut, want)
	}
	if got := exitString(api.ExitStatus{Code: 137}); got != "9:0" {
		t.Errorf("exit code 137 prints %q, want Slurm's 9:0", got)
	}
}
