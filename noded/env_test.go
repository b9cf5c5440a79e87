package noded

import (
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

func golden(t testing.TB, name, got string) {
	t.Helper()
	goldenpkg.Check(t, name, got)
}

func baseSpec() api.LaunchSpec {
	return api.LaunchSpec{
		JobRef:     api.JobRef{JobID: 12},
		Name:       "envdump",
		UserID:     1000,
		GroupID:    1000,
		User:       "alice",
		Partition:  "batch",
		Cluster:    "bench",
		Script:     "#!/bin/sh\nenv\n",
		WorkDir:    "/home/alice/exp",
		SubmitDir:  "/home/alice/exp",
		SubmitHost: "vm",
		Env:        []string{"HOME=/home/alice", "PATH=/usr/bin:/bin", "SLURM_JOB_ID=999"},
		TimeLimit:  3600,
		StartTime:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Alloc:      []api.NodeAlloc{{Node: "n2", CPUs: 1, MemoryMB: 1024, Tasks: 1}},
	}
}

func TestBuildEnv(t *testing.T) {
	tests := []struct {
		name string
		node string
		edit func(*api.LaunchSpec)
	}{
		{name: "env-cpu", node: "n2"},
		{name: "env-gpu", node: "n1", edit: func(s *api.LaunchSpec) {
			s.JobID, s.Name = 5, "gpu2"
			s.Alloc = []api.NodeAlloc{{Node: "n1", CPUs: 1, GPUs: []int{0, 1}, Tasks: 1}}
			s.GPUUUIDs = []string{"GPU-aaaa", "GPU-bbbb"}
		}},
		{name: "env-multinode", node: "gpu01", edit: func(s *api.LaunchSpec) {
			s.JobID, s.Restart, s.Account = 77, 2, "physics"
			s.NumTasks, s.CPUsPerTask = 6, 2
			s.Alloc = []api.NodeAlloc{
				{Node: "gpu01", CPUs: 4, GPUs: []int{2, 3}, Tasks: 2},
				{Node: "gpu02", CPUs: 4, GPUs: []int{0, 1}, Tasks: 2},
				{Node: "gpu03", CPUs: 4, GPUs: []int{0, 1}, Tasks: 2},
				{Node: "gpu05", CPUs: 2, GPUs: []int{7}, Tasks: 1},
			}
		}},
		{name: "env-no-path", node: "n2", edit: func(s *api.LaunchSpec) {
			s.Env = nil
		}},
		{name: "env-gpu-slice", node: "n1", edit: func(s *api.LaunchSpec) {
			s.JobID, s.Name = 6, "infer"
			s.Alloc = []api.NodeAlloc{{Node: "n1", CPUs: 2, GPUs: []int{3}, GPUMemMB: 8192, GPUComputePct: 10, Tasks: 1}}
			s.GPUUUIDs = []string{"GPU-dddd"}
		}},
		{name: "env-array-task", node: "n2", edit: func(s *api.LaunchSpec) {
			s.JobID, s.Name = 14, "sweep"
			s.Array = &api.ArrayLaunch{JobID: 7, Task: 8, Count: 25, Min: 0, Max: 96, Step: 4}
		}},
		{name: "env-gpu-slices-mem-only", node: "n1", edit: func(s *api.LaunchSpec) {
			s.JobID, s.Name = 7, "infer2"
			s.Alloc = []api.NodeAlloc{{Node: "n1", CPUs: 2, GPUs: []int{1, 6}, GPUMemMB: 20480, Tasks: 1}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := baseSpec()
			if tt.edit != nil {
				tt.edit(&spec)
			}
			env := BuildEnv(&spec, tt.node)
			golden(t, tt.name, strings.Join(env, "\n")+"\n")
		})
	}
}

// TestBuildEnvMatchesSlurm checks every variable of Slurm's own sample
// environment that Tide sets has the same value.
func TestBuildEnvMatchesSlurm(t *testing.T) {
	tests := []struct {
		name   string
		sample string
		node   string
		edit   func(*api.LaunchSpec)
	}{
		{name: "cpu", sample: "job-env.txt", node: "n2", edit: func(s *api.LaunchSpec) {
			s.UserID, s.GroupID, s.User = 0, 0, "root"
		}},
		{name: "gpu", sample: "job-env-gpu.txt", node: "n1", edit: func(s *api.LaunchSpec) {
			s.JobID, s.Name, s.UserID, s.GroupID, s.User = 5, "gpu2", 0, 0, "root"
			s.Alloc = []api.NodeAlloc{{Node: "n1", CPUs: 1, GPUs: []int{0, 1}, Tasks: 1}}
			// sbatch --gpus=2 on a cluster without a default memory.
			s.Request = &api.EnvRequest{GPUs: 2}
		}},
	}
	// Set by slurmd from its own configuration or not modelled by Tide
	// (SLURM_TASK_PID is the exec child's).
	skip := map[string]bool{"SLURM_CONF": true, "SLURM_NODE_ALIASES": true, "SLURM_WORKING_CLUSTER": true,
		"SLURM_TASK_PID": true}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("/work/shared/slurm-reference/samples", tt.sample))
			if err != nil {
				t.Skipf("reference sample not available: %v", err)
			}
			spec := baseSpec()
			spec.Env = nil
			tt.edit(&spec)
			got := map[string]string{}
			for _, kv := range BuildEnv(&spec, tt.node) {
				k, v, _ := strings.Cut(kv, "=")
				got[k] = v
			}
			for _, line := range strings.Split(string(data), "\n") {
				k, v, ok := strings.Cut(line, "=")
				if !ok || skip[k] || strings.Contains(k, " ") {
					continue
				}
				if g, ok := got[k]; !ok {
					t.Errorf("%s missing (Slurm: %q)", k, v)
				} else if g != v {
					t.Errorf("%s = %q, Slurm has %q", k, g, v)
				}
				if twin, ok := tideTwin(k); ok && got[twin] != got[k] {
					t.Errorf("%s = %q, want twin of %s = %q", twin, got[twin], k, got[k])
				}
			}
			// And nothing Slurm would not set for the same job.
			for k := range got {
				if (strings.HasPrefix(k, "SLURM_") || k == "SLURMD_NODENAME") && !strings.Contains(string(data), "\n"+k+"=") && !strings.HasPrefix(string(data), k+"=") {
					t.Errorf("%s=%s set, Slurm's sample has no %s", k, got[k], k)
				}
			}
		})
	}
}

func TestWithTaskPID(t *testing.T) {
	got := withTaskPID([]string{"A=1"}, 4242)
	want := []string{"A=1", "SLURM_TASK_PID=4242", "TIDE_TASK_PID=4242"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCompressCounts(t *testing.T) {
	tests := []struct {
		name string
		in   []int
		want string
	}{
		{name: "one", in: []int{4}, want: "4"},
		{name: "run", in: []int{4, 4, 4}, want: "4(x3)"},
		{name: "mixed", in: []int{4, 4, 2, 1, 1}, want: "4(x2),2,1(x2)"},
		{name: "alternating", in: []int{1, 2, 1}, want: "1,2,1"},
		{name: "empty", in: nil, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := compressCounts(tt.in); got != tt.want {
				t.Errorf("compressCounts(%v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestResolveFiles(t *testing.T) {
	tests := []struct {
		name string
		edit func(*api.LaunchSpec)
		want JobFiles
	}{
		{name: "defaults", want: JobFiles{Stdin: "/dev/null", Stdout: "/home/alice/exp/slurm-12.out"}},
		{name: "patterns", edit: func(s *api.LaunchSpec) {
			s.Stdout, s.Stderr, s.Stdin = "logs/%x-%j.%N.out", "/scratch/%u/%5j-%A_%a.err", "in/%j.txt"
		}, want: JobFiles{
			Stdin:  "/home/alice/exp/in/12.txt",
			Stdout: "/home/alice/exp/logs/envdump-12.n2.out",
			Stderr: "/scratch/alice/00012-12_4294967294.err",
		}},
		{name: "stderr same as stdout shares the descriptor", edit: func(s *api.LaunchSpec) {
			s.Stdout, s.Stderr = "out-%j", "/home/alice/exp/out-12"
		}, want: JobFiles{Stdin: "/dev/null", Stdout: "/home/alice/exp/out-12"}},
		{name: "percent literal and unknown letter", edit: func(s *api.LaunchSpec) {
			s.Stdout = "100%%-%q.out"
		}, want: JobFiles{Stdin: "/dev/null", Stdout: "/home/alice/exp/100%-%q.out"}},
		{name: "no work dir falls back to submit dir", edit: func(s *api.LaunchSpec) {
			s.WorkDir, s.SubmitDir = "", "/srv/sub"
		}, want: JobFiles{Stdin: "/dev/null", Stdout: "/srv/sub/slurm-12.out"}},
		{name: "array task", edit: func(s *api.LaunchSpec) {
			s.JobID, s.Array = 14, &api.ArrayLaunch{JobID: 7, Task: 3, Count: 4, Max: 3, Step: 1}
			s.Stdout, s.Stderr = api.ArrayDefaultStdout, "err-%A_%3a-%j"
		}, want: JobFiles{Stdin: "/dev/null", Stdout: "/home/alice/exp/slurm-7_3.out", Stderr: "/home/alice/exp/err-7_003-14"}},
		{name: "dot segments are cleaned", edit: func(s *api.LaunchSpec) {
			s.Stdout = "../x/./o.%j"
		}, want: JobFiles{Stdin: "/dev/null", Stdout: "/home/alice/x/o.12"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := baseSpec()
			if tt.edit != nil {
				tt.edit(&spec)
			}
			if diff := cmp.Diff(tt.want, ResolveFiles(&spec, "n2")); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestUmaskFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want int
	}{
		{name: "absent", env: []string{"A=1"}, want: -1},
		{name: "octal", env: []string{"SLURM_UMASK=0027"}, want: 0o027},
		{name: "malformed", env: []string{"SLURM_UMASK=9x"}, want: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := umaskFromEnv(tt.env); got != tt.want {
				t.Errorf("umaskFromEnv = %o, want %o", got, tt.want)
			}
		})
	}
}
