package squeue

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
)

// TestMinTmpDiskAndMinCPUs: %d prints --tmp as Slurm's convert_num_unit
// writes MB, %c (MIN_CPUS) and %C (CPUS) follow --mincpus and
// --overcommit, and --json carries both minimums.
func TestMinTmpDiskAndMinCPUs(t *testing.T) {
	pending := func(id uint64, edit func(s *api.JobSpec)) api.Job {
		j := api.Job{ID: id, State: api.StatePending, Reason: api.ReasonResources, User: "alice", UserID: 1000,
			JobSpec: api.JobSpec{Name: "j", Partition: "gpu"}}
		edit(&j.JobSpec)
		return j
	}
	fake := &clitest.FakeAPI{JobRecs: []api.Job{
		pending(1, func(*api.JobSpec) {}),
		pending(2, func(s *api.JobSpec) { s.TmpDiskMB, s.MinCPUs, s.Nodes = 10240, 8, 2 }),
		pending(3, func(s *api.JobSpec) { s.TmpDiskMB, s.Tasks, s.CPUsPerTask, s.Overcommit = 1500, 65, 2, true }),
		pending(4, func(s *api.JobSpec) { s.Tasks, s.CPUsPerTask, s.TasksPerNode = 8, 2, 4 }),
	}}
	out, errOut, err := exec(t, fake, nil, "-h", "-o", "%i %d %c %C")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	want := "1 0 1 1\n2 10G 8 16\n3 1500M 2 2\n4 0 8 16\n"
	if out != want {
		t.Errorf("squeue -o '%%i %%d %%c %%C':\n%s\nwant:\n%s", out, want)
	}

	out, errOut, err = exec(t, fake, nil, "--json")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var doc struct {
		Jobs []struct {
			ID      uint64 `json:"job_id"`
			MinTmp  int64  `json:"minimum_tmp_disk_per_node"`
			MinCPUs int64  `json:"minimum_cpus_per_node"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Jobs) != 4 {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	for _, j := range doc.Jobs {
		if j.ID == 2 && (j.MinTmp != 10240 || j.MinCPUs != 8) || j.ID == 1 && (j.MinTmp != 0 || j.MinCPUs != 1) {
			t.Errorf("--json job %d: minimum_tmp_disk_per_node %d, minimum_cpus_per_node %d", j.ID, j.MinTmp, j.MinCPUs)
		}
	}
	if !strings.Contains(out, `"minimum_tmp_disk_per_node": 1500`) {
		t.Errorf("--json lacks job 3's --tmp=1500:\n%s", out)
	}
}
