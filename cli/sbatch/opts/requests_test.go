package opts

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestParseRequests: the request options of issue 22 — Slurm's
// --tasks-per-node alias, --gpus-per-task with a task count from --gpus
// or -N, partition lists — as sbatch (and srun and salloc, which share
// the table) read them.
func TestParseRequests(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		directives []string
		want       func(*api.JobSpec)
	}{
		{name: "--tasks-per-node is --ntasks-per-node", args: []string{"--tasks-per-node=4", "job.sh"},
			want: func(s *api.JobSpec) { s.TasksPerNode = 4 }},
		{name: "--tasks-per-node in a directive", args: []string{"job.sh"}, directives: []string{"#SBATCH --tasks-per-node 2"},
			want: func(s *api.JobSpec) { s.TasksPerNode = 2 }},
		{name: "the later of the two spellings wins", args: []string{"--ntasks-per-node=3", "--tasks-per-node=5", "job.sh"},
			want: func(s *api.JobSpec) { s.TasksPerNode = 5 }},
		{name: "an abbreviation of the alias", args: []string{"--tasks-per=6", "job.sh"},
			want: func(s *api.JobSpec) { s.TasksPerNode = 6 }},
		{name: "--gpus-per-task with --gpus", args: []string{"--gpus=8", "--gpus-per-task=2", "job.sh"},
			want: func(s *api.JobSpec) { s.GPUs, s.GPUsPerTask = 8, 2 }},
		{name: "--gpus-per-task with -N", args: []string{"-N2", "--gpus-per-task=1", "job.sh"},
			want: func(s *api.JobSpec) { s.Nodes, s.GPUsPerTask = 2, 1 }},
		{name: "--gpus alone is a total", args: []string{"--gpus=16", "job.sh"},
			want: func(s *api.JobSpec) { s.GPUs = 16 }},
		{name: "a partition list is passed as given", args: []string{"-p", "a,b", "job.sh"},
			want: func(s *api.JobSpec) { s.Partition = "a,b" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := Parse(testInput(tt.args, tt.directives, nil, nil))
			if err != nil {
				t.Fatal(err)
			}
			want := baseSpec()
			want.Script = req.Spec.Script
			tt.want(&want)
			if diff := cmp.Diff(want, req.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}
	// The alias is Slurm's hidden spelling: not in --help.
	for _, o := range table() {
		if o.Long == "tasks-per-node" && !o.hidden {
			t.Error("--tasks-per-node is listed in --help")
		}
	}
}
