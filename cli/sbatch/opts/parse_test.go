package opts

import (
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tide-hpc/tide/ctld/api"
)

var testNow = time.Date(2026, 3, 10, 14, 30, 0, 0, time.UTC)

var testEnviron = []string{"HOME=/home/alice", "PATH=/usr/bin:/home/alice/bin", "SLURM_CONF=/etc/slurm.conf"}

// testInput builds an Input whose files are the given map (absolute
// paths) and whose job.sh holds the given directive lines.
func testInput(args []string, directives []string, env map[string]string, files map[string]string) Input {
	all := map[string]string{
		"/home/alice/exp/job.sh": "#!/bin/sh\n" + strings.Join(directives, "\n") + "\nsrun hostname\n",
		"/home/alice/exp/hosts":  "gpu[03-04]\n",
	}
	for k, v := range files {
		all[k] = v
	}
	return Input{
		Args:    args,
		Getenv:  func(k string) string { return env[k] },
		Environ: testEnviron,
		ReadFile: func(p string) ([]byte, error) {
			if v, ok := all[p]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		},
		Cwd:  "/home/alice/exp",
		Host: "login1",
		Now:  testNow,
	}
}

func baseSpec() api.JobSpec {
	return api.JobSpec{
		Name:        "job.sh",
		WorkDir:     "/home/alice/exp",
		SubmitDir:   "/home/alice/exp",
		SubmitHost:  "login1",
		Environment: testEnviron,
	}
}

func ptr[T any](v T) *T { return &v }

func TestParseSpec(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		directives []string
		env        map[string]string
		want       func(s *api.JobSpec)
		warnings   []string
	}{
		{name: "defaults", args: []string{"job.sh"}, want: func(*api.JobSpec) {}},
		{name: "directive only", args: []string{"job.sh"}, directives: []string{"#SBATCH -p dir"},
			want: func(s *api.JobSpec) { s.Partition = "dir" }},
		{name: "environment beats directive", args: []string{"job.sh"}, directives: []string{"#SBATCH -p dir"},
			env: map[string]string{"SBATCH_PARTITION": "env"}, want: func(s *api.JobSpec) { s.Partition = "env" }},
		{name: "command line beats environment", args: []string{"-p", "cli", "job.sh"}, directives: []string{"#SBATCH -p dir"},
			env: map[string]string{"SBATCH_PARTITION": "env"}, want: func(s *api.JobSpec) { s.Partition = "cli" }},
		{name: "environment variables of several options", args: []string{"job.sh"},
			env: map[string]string{"SBATCH_ACCOUNT": "proj", "SBATCH_TIMELIMIT": "2:00:00", "SBATCH_JOB_NAME": "envname",
				"SBATCH_GPUS": "h100:2", "SBATCH_QOS": "high", "SBATCH_EXPORT": "HOME", "SBATCH_REQUEUE": "1"},
			want: func(s *api.JobSpec) {
				s.Account, s.TimeLimit, s.Name, s.GPUs, s.GPUType, s.QOS = "proj", 7200, "envname", 2, "h100", "high"
				s.Environment = []string{"HOME=/home/alice", "SLURM_CONF=/etc/slurm.conf"}
				s.Requeue = ptr(true)
			}},
		{name: "several directives per line with quotes", args: []string{"job.sh"},
			directives: []string{`#SBATCH --job-name="my job" -N 2-4 # two to four nodes`, `#SBATCH -o 'out %j.txt' --ntasks=8`},
			want: func(s *api.JobSpec) {
				s.Name, s.Nodes, s.MaxNodes, s.Stdout, s.Tasks = "my job", 2, 4, "out %j.txt", 8
			}},
		{name: "resources", args: []string{"-N2", "-n", "8", "--ntasks-per-node=4", "-c", "2", "--cpus-per-gpu=4", "job.sh"},
			want: func(s *api.JobSpec) { s.Nodes, s.Tasks, s.TasksPerNode, s.CPUsPerTask, s.CPUsPerGPU = 2, 8, 4, 2, 4 }},
		{name: "nodes more than tasks is fine", args: []string{"-N", "4", "-n", "2", "job.sh"},
			want: func(s *api.JobSpec) { s.Nodes, s.Tasks = 4, 2 }},
		{name: "mem in gigabytes", args: []string{"--mem=4G", "job.sh"}, want: func(s *api.JobSpec) { s.MemPerNodeMB = 4096 }},
		{name: "mem zero is the whole node", args: []string{"--mem=0", "job.sh"}, want: func(s *api.JobSpec) { s.MemPerNodeMB = MemWholeNode }},
		{name: "mem per cpu", args: []string{"--mem-per-cpu=1500", "job.sh"}, want: func(s *api.JobSpec) { s.MemPerCPUMB = 1500 }},
		{name: "mem per gpu", args: []string{"--mem-per-gpu=10G", "job.sh"}, want: func(s *api.JobSpec) { s.MemPerGPUMB = 10240 }},
		{name: "command-line mem-per-cpu replaces directive mem", args: []string{"--mem-per-cpu=1G", "job.sh"},
			directives: []string{"#SBATCH --mem=8G"}, want: func(s *api.JobSpec) { s.MemPerCPUMB = 1024 }},
		{name: "environment mem-per-gpu replaces directive mem", args: []string{"job.sh"}, directives: []string{"#SBATCH --mem=8G"},
			env: map[string]string{"SBATCH_MEM_PER_GPU": "2G"}, want: func(s *api.JobSpec) { s.MemPerGPUMB = 2048 }},
		{name: "gpus with type", args: []string{"-G", "a100:4", "job.sh"}, want: func(s *api.JobSpec) { s.GPUs, s.GPUType = 4, "a100" }},
		{name: "gpus per node", args: []string{"--gpus-per-node=2", "job.sh"}, want: func(s *api.JobSpec) { s.GPUsPerNode = 2 }},
		{name: "gres gpu is per node", args: []string{"--gres=gpu:h100:2", "job.sh"},
			want: func(s *api.JobSpec) { s.GPUsPerNode, s.GPUType = 2, "h100" }},
		{name: "later gpus-per-node replaces gres", args: []string{"--gres=gpu:2", "--gpus-per-node=4", "job.sh"},
			want: func(s *api.JobSpec) { s.GPUsPerNode = 4 }},
		{name: "gres none clears a directive", args: []string{"--gres=none", "job.sh"}, directives: []string{"#SBATCH --gres=gpu:a100:1"},
			want: func(*api.JobSpec) {}},
		{name: "same type on two options", args: []string{"-G", "a100:2", "--gpus-per-node=a100:1", "job.sh"},
			want: func(s *api.JobSpec) { s.GPUs, s.GPUsPerNode, s.GPUType = 2, 1, "a100" }},
		{name: "gpus per task with tasks", args: []string{"-n", "2", "--gpus-per-task=1", "job.sh"},
			want: func(s *api.JobSpec) { s.Tasks, s.GPUsPerTask = 2, 1 }},
		{name: "gpu slice", args: []string{"--gpu-mem=8G", "--gpu-compute=10", "job.sh"},
			want: func(s *api.JobSpec) { s.GPUMemMB, s.GPUComputePct = 8192, 10 }},
		{name: "gpu slice in megabytes with a percent sign", args: []string{"--gpu-mem=500", "--gpu-compute=25%", "job.sh"},
			want: func(s *api.JobSpec) { s.GPUMemMB, s.GPUComputePct = 500, 25 }},
		{name: "two slices", args: []string{"--gpus=2", "--gpu-mem=8G", "job.sh"},
			want: func(s *api.JobSpec) { s.GPUs, s.GPUMemMB = 2, 8192 }},
		{name: "gpu slice from the environment", args: []string{"job.sh"},
			env:  map[string]string{"SBATCH_GPU_MEM": "4G", "SBATCH_GPU_COMPUTE": "5"},
			want: func(s *api.JobSpec) { s.GPUMemMB, s.GPUComputePct = 4096, 5 }},
		{name: "gres shard", args: []string{"--gres=shard:2", "job.sh"}, want: func(s *api.JobSpec) { s.GPUShards = 2 }},
		{name: "gres mps", args: []string{"--gres=mps:50", "job.sh"}, want: func(s *api.JobSpec) { s.GPUComputePct = 50 }},
		{name: "gpu-compute beats gres mps", args: []string{"--gres=mps:50", "--gpu-compute=20", "job.sh"},
			want: func(s *api.JobSpec) { s.GPUComputePct = 20 }},
		{name: "gres shard with gpus", args: []string{"--gpus-per-node=2", "--gres=shard:1", "job.sh"},
			want: func(s *api.JobSpec) { s.GPUsPerNode, s.GPUShards = 2, 1 }},
		{name: "command-line gres replaces a directive's shard", args: []string{"--gres=gpu:1", "job.sh"},
			directives: []string{"#SBATCH --gres=shard:4"}, want: func(s *api.JobSpec) { s.GPUsPerNode = 1 }},
		{name: "nodelist and exclude", args: []string{"-w", "gpu[01-02]", "-x", "gpu07", "job.sh"},
			want: func(s *api.JobSpec) { s.NodeList, s.Exclude = []string{"gpu01", "gpu02"}, []string{"gpu07"} }},
		{name: "nodelist from a file", args: []string{"-w", "./hosts", "job.sh"},
			want: func(s *api.JobSpec) { s.NodeList = []string{"gpu03", "gpu04"} }},
		{name: "nodefile", args: []string{"-F", "hosts", "job.sh"}, want: func(s *api.JobSpec) { s.NodeList = []string{"gpu03", "gpu04"} }},
		{name: "exclusive", args: []string{"--exclusive", "job.sh"}, want: func(s *api.JobSpec) { s.Exclusive = true }},
		{name: "oversubscribe undoes directive exclusive", args: []string{"-s", "job.sh"}, directives: []string{"#SBATCH --exclusive"},
			want: func(*api.JobSpec) {}, warnings: []string{"--oversubscribe has no effect yet in Tide; ignored"}},
		{name: "exclusive user is ignored", args: []string{"--exclusive=user", "job.sh"},
			want: func(*api.JobSpec) {}, warnings: []string{"--exclusive=user has no effect yet in Tide; ignored"}},
		{name: "requeue", args: []string{"--requeue", "job.sh"}, want: func(s *api.JobSpec) { s.Requeue = ptr(true) }},
		{name: "no-requeue beats directive requeue", args: []string{"--no-requeue", "job.sh"}, directives: []string{"#SBATCH --requeue"},
			want: func(s *api.JobSpec) { s.Requeue = ptr(false) }},
		{name: "open mode prefix", args: []string{"--open-mode=a", "job.sh"}, want: func(s *api.JobSpec) { s.OpenMode = "append" }},
		{name: "open mode truncate", args: []string{"--open-mode=truncate", "job.sh"}, want: func(s *api.JobSpec) { s.OpenMode = "truncate" }},
		{name: "signal", args: []string{"--signal=B:USR1@90", "job.sh"},
			want: func(s *api.JobSpec) { s.Signal = &api.SignalSpec{Signal: 10, Seconds: 90, BatchOnly: true} }},
		{name: "signal with reservation overlap is accepted quietly", args: []string{"--signal=R:USR2", "job.sh"},
			want: func(s *api.JobSpec) { s.Signal = &api.SignalSpec{Signal: 12, Seconds: 60} }},
		{name: "begin", args: []string{"--begin=now+1hour", "job.sh"}, want: func(s *api.JobSpec) { s.BeginTime = testNow.Add(time.Hour) }},
		{name: "times", args: []string{"-t", "1-00:00:00", "--time-min=12:00:00", "job.sh"},
			want: func(s *api.JobSpec) { s.TimeLimit, s.TimeMin = 86400, 43200 }},
		{name: "unlimited time", args: []string{"--time=UNLIMITED", "job.sh"}, want: func(s *api.JobSpec) { s.TimeLimit = api.Infinite }},
		{name: "nice default", args: []string{"--nice", "job.sh"}, want: func(s *api.JobSpec) { s.Nice = 100 }},
		{name: "nice value", args: []string{"--nice=-5", "job.sh"}, want: func(s *api.JobSpec) { s.Nice = -5 }},
		{name: "priority", args: []string{"--priority=10", "job.sh"}, want: func(s *api.JobSpec) { s.Priority = 10 }},
		{name: "priority lowest level", args: []string{"--priority=1", "job.sh"}, want: func(s *api.JobSpec) { s.Priority = 1 }},
		{name: "priority top is the highest level", args: []string{"--priority=top", "job.sh"}, want: func(s *api.JobSpec) { s.Priority = 10 }},
		{name: "priority from a directive", args: []string{"job.sh"}, directives: []string{"#SBATCH --priority=4"},
			want: func(s *api.JobSpec) { s.Priority = 4 }},
		{name: "queue is the account", args: []string{"--queue=moba", "job.sh"}, want: func(s *api.JobSpec) { s.Account = "moba" }},
		{name: "queue from a directive", args: []string{"job.sh"}, directives: []string{"#SBATCH --queue=fps"},
			want: func(s *api.JobSpec) { s.Account = "fps" }},
		{name: "command-line account beats directive queue", args: []string{"-A", "prod", "job.sh"}, directives: []string{"#SBATCH --queue=fps"},
			want: func(s *api.JobSpec) { s.Account = "prod" }},
		{name: "last of queue and account wins", args: []string{"-A", "prod", "--queue", "moba", "job.sh"},
			want: func(s *api.JobSpec) { s.Account = "moba" }},
		{name: "qos requeue and checkpoint signal reach the spec",
			args: []string{"--qos=training", "--requeue", "--signal=B:USR1@120", "--priority=3", "--queue=moba", "job.sh"},
			want: func(s *api.JobSpec) {
				s.QOS, s.Requeue, s.Priority, s.Account = "training", ptr(true), 3, "moba"
				s.Signal = &api.SignalSpec{Signal: 10, Seconds: 120, BatchOnly: true}
			}},
		{name: "qos from the environment", args: []string{"job.sh"}, env: map[string]string{"SBATCH_QOS": "debug"},
			want: func(s *api.JobSpec) { s.QOS = "debug" }},
		{name: "no-requeue from a directive", args: []string{"job.sh"}, directives: []string{"#SBATCH --no-requeue"},
			want: func(s *api.JobSpec) { s.Requeue = ptr(false) }},
		{name: "no signal leaves the controller's default", args: []string{"--qos=training", "job.sh"},
			want: func(s *api.JobSpec) { s.QOS = "training" }},
		{name: "strings", args: []string{"-A", "proj", "-q", "low", "--comment=hello", "-C", "a100&ib", "-H", "-e", "err.%j", "-i", "in.txt",
			"-d", "afterok:12:13", "--mail-type=end,FAIL", "--mail-user=a@b", "job.sh"},
			want: func(s *api.JobSpec) {
				s.Account, s.QOS, s.Comment, s.Constraint, s.Hold = "proj", "low", "hello", "a100&ib", true
				s.Stderr, s.Stdin, s.Dependency, s.MailType, s.MailUser = "err.%j", "in.txt", "afterok:12:13", "END,FAIL", "a@b"
			}},
		{name: "dependency any-of and singleton", args: []string{"--dependency=after:5+10?afterany:6_*?singleton", "job.sh"},
			want: func(s *api.JobSpec) { s.Dependency = "after:5+10?afterany:6_*?singleton" }},
		{name: "array with step and throttle", args: []string{"--array=0-99:4%8", "job.sh"},
			want: func(s *api.JobSpec) { s.Array = "0-99:4%8" }},
		{name: "array from a directive", args: []string{"job.sh"}, directives: []string{"#SBATCH --array=1,3,5-9"},
			want: func(s *api.JobSpec) { s.Array = "1,3,5-9" }},
		{name: "kill on invalid dependency", args: []string{"-d", "afterok:4", "--kill-on-invalid-dep=YES", "job.sh"},
			want: func(s *api.JobSpec) { s.Dependency, s.KillInvalidDep = "afterok:4", true }},
		{name: "relative chdir", args: []string{"-D", "../run", "job.sh"}, want: func(s *api.JobSpec) { s.WorkDir = "/home/alice/run" }},
		{name: "absolute chdir", args: []string{"--chdir=/scratch/a", "job.sh"}, want: func(s *api.JobSpec) { s.WorkDir = "/scratch/a" }},
		{name: "export none", args: []string{"--export=NONE", "job.sh"},
			want: func(s *api.JobSpec) { s.Environment = []string{"SLURM_CONF=/etc/slurm.conf"} }},
		{name: "command-line export beats directive", args: []string{"--export=ALL", "job.sh"}, directives: []string{"#SBATCH --export=NONE"},
			want: func(*api.JobSpec) {}},
		{name: "ignored options warn once each", args: []string{"--hint=nomultithread", "--hint=compute_bound", "-k", "--contiguous", "job.sh"},
			want: func(*api.JobSpec) {}, warnings: []string{"--hint has no effect yet in Tide; ignored",
				"--no-kill has no effect yet in Tide; ignored", "--contiguous has no effect yet in Tide; ignored"}},
		{name: "overcommit", args: []string{"-O", "-n", "65", "job.sh"},
			want: func(s *api.JobSpec) { s.Overcommit, s.Tasks = true, 65 }},
		{name: "overcommit from the environment", args: []string{"job.sh"}, env: map[string]string{"SBATCH_OVERCOMMIT": "1"},
			want: func(s *api.JobSpec) { s.Overcommit = true }},
		{name: "SBATCH_OVERCOMMIT=0 undoes a directive", args: []string{"job.sh"}, directives: []string{"#SBATCH --overcommit"},
			env: map[string]string{"SBATCH_OVERCOMMIT": "0"}, want: func(*api.JobSpec) {}},
		{name: "mincpus", args: []string{"--mincpus=16", "job.sh"}, want: func(s *api.JobSpec) { s.MinCPUs = 16 }},
		{name: "tmp in megabytes by default", args: []string{"--tmp=999999", "job.sh"}, want: func(s *api.JobSpec) { s.TmpDiskMB = 999999 }},
		{name: "tmp zero", args: []string{"--tmp=0", "job.sh"}, want: func(*api.JobSpec) {}},
		{name: "tmp with a suffix", args: []string{"job.sh"}, directives: []string{"#SBATCH --tmp=10G"},
			want: func(s *api.JobSpec) { s.TmpDiskMB = 10240 }},
		{name: "tmp in kilobytes rounds up", args: []string{"--tmp=1500K", "job.sh"}, want: func(s *api.JobSpec) { s.TmpDiskMB = 2 }},
		{name: "tmp in terabytes", args: []string{"--tmp=2T", "job.sh"}, want: func(s *api.JobSpec) { s.TmpDiskMB = 2 << 20 }},
		{name: "no-kill off is the default and silent", args: []string{"--no-kill=off", "job.sh"}, want: func(*api.JobSpec) {}},
		{name: "ignore-pbs is silent", args: []string{"--ignore-pbs", "job.sh"}, want: func(*api.JobSpec) {}},
		{name: "wrap in a directive is ignored", args: []string{"job.sh"}, directives: []string{"#SBATCH --wrap=true"},
			want: func(*api.JobSpec) {}, warnings: []string{"--wrap is only honoured on the command line; ignored"}},
		{name: "double dash before the script", args: []string{"-J", "x", "--", "job.sh"}, want: func(s *api.JobSpec) { s.Name = "x" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := Parse(testInput(tt.args, tt.directives, tt.env, nil))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := baseSpec()
			tt.want(&want)
			if diff := cmp.Diff(want, req.Spec, cmpopts.IgnoreFields(api.JobSpec{}, "Script"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.warnings, req.Warnings, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		directives []string
		env        map[string]string
		want       string
		usage      bool
		notFound   bool
	}{
		{name: "unknown option", args: []string{"--foo", "job.sh"}, want: "unrecognized option '--foo'", usage: true},
		{name: "ambiguous option", args: []string{"--ntasks-per=2", "job.sh"},
			want: "option '--ntasks-per=2' is ambiguous; possibilities: '--ntasks-per-core' '--ntasks-per-gpu' '--ntasks-per-node' '--ntasks-per-socket'", usage: true},
		{name: "bad number", args: []string{"-n", "four", "job.sh"}, want: `Invalid numeric value "four" for --ntasks.`},
		{name: "negative cpus", args: []string{"-c", "-1", "job.sh"}, want: `Invalid numeric value "-1" for --cpus-per-task.`},
		{name: "bad node count", args: []string{"-N", "4-2", "job.sh"}, want: "invalid node count `4-2'"},
		{name: "bad size", args: []string{"--mem=lots", "job.sh"}, want: "Invalid --mem specification"},
		{name: "bad mem per cpu", args: []string{"--mem-per-cpu=1.5G", "job.sh"}, want: "Invalid --mem-per-cpu specification"},
		{name: "bad time", args: []string{"-t", "forever", "job.sh"}, want: "Invalid --time specification"},
		{name: "bad time-min", args: []string{"--time-min=x", "job.sh"}, want: "Invalid --time-min specification"},
		{name: "time-min above time", args: []string{"-t", "10", "--time-min=20", "job.sh"}, want: "Invalid --time-min specification: longer than --time"},
		{name: "bad begin", args: []string{"--begin=someday", "job.sh"}, want: "Invalid --begin specification"},
		{name: "bad hostlist", args: []string{"-w", "gpu[01-", "job.sh"}, want: `Invalid --nodelist specification: hostlist "gpu[01-": missing ']'`},
		{name: "missing node file", args: []string{"-F", "nope", "job.sh"}, want: "Invalid --nodefile specification: unable to read nope: file does not exist"},
		{name: "mem and mem-per-cpu", args: []string{"--mem=1G", "--mem-per-cpu=1G", "job.sh"}, want: "--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive."},
		{name: "mem and mem-per-gpu in directives", args: []string{"job.sh"}, directives: []string{"#SBATCH --mem=1G --mem-per-gpu=1G"},
			want: "--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive."},
		{name: "mem and mem-per-cpu in the environment", args: []string{"job.sh"},
			env:  map[string]string{"SBATCH_MEM_PER_NODE": "1G", "SBATCH_MEM_PER_CPU": "1G"},
			want: "--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive."},
		{name: "gpus per task without tasks", args: []string{"--gpus-per-task=1", "job.sh"}, want: "--gpus-per-task requires --ntasks, --ntasks-per-node, --gpus or --nodes"},
		{name: "conflicting gpu types", args: []string{"-G", "a100:1", "--gres=gpu:h100:1", "job.sh"},
			want: `conflicting GPU types "a100" and "h100": Tide supports one GPU type per job`},
		{name: "non-gpu gres", args: []string{"--gres=license:1", "job.sh"}, want: "Invalid generic resource (gres) specification"},
		{name: "gpu-mem zero", args: []string{"--gpu-mem=0", "job.sh"}, want: "Invalid --gpu-mem specification: 0"},
		{name: "gpu-mem garbage", args: []string{"--gpu-mem=lots", "job.sh"}, want: "Invalid --gpu-mem specification: lots"},
		{name: "gpu-compute over 100", args: []string{"--gpu-compute=101", "job.sh"},
			want: "Invalid --gpu-compute specification: 101: a percentage of one GPU from 1 to 100"},
		{name: "gpu-mem and shard", args: []string{"--gpu-mem=8G", "--gres=shard:1", "job.sh"},
			want: "--gpu-mem and --gres=shard are mutually exclusive: give the slice's memory one way"},
		{name: "gres gpu and shard", args: []string{"--gres=gpu:1,shard:2", "job.sh"},
			want: "Invalid generic resource (gres) specification: gpu:1,shard:2: gpu cannot be combined with shard or mps; use --gpus=N with --gres=shard:N or --gres=mps:PCT for N slices"},
		{name: "bad gpus", args: []string{"--gpus=-2", "job.sh"}, want: "Invalid --gpus specification: -2"},
		{name: "bad open mode", args: []string{"--open-mode=overwrite", "job.sh"}, want: "Invalid --open-mode argument: overwrite."},
		{name: "bad signal", args: []string{"--signal=NOPE", "job.sh"}, want: "Invalid --signal specification"},
		{name: "bad nice", args: []string{"--nice=3000000000", "job.sh"}, want: "Nice value out of range (+/- 2147483645)"},
		{name: "negative priority", args: []string{"--priority=-1", "job.sh"}, want: "Invalid --priority specification: -1 (a level from 1 to 10)"},
		{name: "priority zero", args: []string{"--priority=0", "job.sh"}, want: "Invalid --priority specification: 0 (a level from 1 to 10)"},
		{name: "priority above ten", args: []string{"--priority=11", "job.sh"}, want: "Invalid --priority specification: 11 (a level from 1 to 10)"},
		{name: "slurm-sized priority", args: []string{"--priority=4294901750", "job.sh"},
			want: "Invalid --priority specification: 4294901750 (a level from 1 to 10)"},
		{name: "priority garbage", args: []string{"--priority=high", "job.sh"}, want: "Invalid --priority specification: high (a level from 1 to 10)"},
		{name: "queue without a value", args: []string{"job.sh"}, directives: []string{"#SBATCH --queue"}, want: "job.sh: line 2: option '--queue' requires an argument"},
		{name: "bad dependency", args: []string{"-d", "afterok:abc", "job.sh"}, want: "Invalid --dependency specification: afterok:abc"},
		{name: "bad mail type", args: []string{"--mail-type=SOMETIMES", "job.sh"}, want: "--mail-type=SOMETIMES invalid"},
		{name: "bad exclusive", args: []string{"--exclusive=all", "job.sh"}, want: "Invalid --exclusive specification"},
		{name: "bad export", args: []string{"--export=NONE,HOME", "job.sh"}, want: "Invalid --export specification: NONE cannot be combined with variables"},
		{name: "bad array", args: []string{"--array=3-1", "job.sh"}, want: "Invalid --array specification"},
		{name: "bad array throttle", args: []string{"--array=0-3%x", "job.sh"}, want: "Invalid --array specification"},
		{name: "ignored option still validated", args: []string{"--hint=fast", "job.sh"},
			want: `Invalid --hint specification: "fast" (expected one of compute_bound, memory_bound, multithread, nomultithread)`},
		{name: "bad mincpus", args: []string{"--mincpus=x", "job.sh"}, want: `Invalid numeric value "x" for --mincpus.`},
		{name: "mincpus zero", args: []string{"--mincpus=0", "job.sh"}, want: `Invalid numeric value "0" for --mincpus.`},
		{name: "negative mincpus", args: []string{"--mincpus=-4", "job.sh"}, want: `Invalid numeric value "-4" for --mincpus.`},
		{name: "huge mincpus", args: []string{"--mincpus=99999999999", "job.sh"}, want: `Numeric argument (99999999999) too big for --mincpus.`},
		{name: "bad tmp", args: []string{"--tmp=lots", "job.sh"}, want: "Invalid --tmp specification"},
		{name: "negative tmp", args: []string{"--tmp=-1", "job.sh"}, want: "Invalid --tmp specification"},
		{name: "tmp past int64", args: []string{"--tmp=99999999999999999999", "job.sh"}, want: "Invalid --tmp specification"},
		{name: "ignored enum option", args: []string{"--kill-on-invalid-dep=maybe", "job.sh"},
			want: `Invalid --kill-on-invalid-dep specification: "maybe" (expected one of yes, no)`},
		{name: "ignored time option", args: []string{"--deadline=whenever", "job.sh"}, want: "Invalid --deadline specification"},
		{name: "unknown option in a directive", args: []string{"job.sh"}, directives: []string{"#SBATCH -N 1", "#SBATCH --foo=1"},
			want: "job.sh: line 3: unrecognized option '--foo=1'"},
		{name: "bad value in a directive", args: []string{"job.sh"}, directives: []string{"", "#SBATCH -t soon"},
			want: "job.sh: line 3: Invalid --time specification"},
		{name: "missing argument in a directive", args: []string{"job.sh"}, directives: []string{"#SBATCH -J"},
			want: "job.sh: line 2: option requires an argument -- 'J'"},
		{name: "stray word in a directive", args: []string{"job.sh"}, directives: []string{"#SBATCH -N 1 two"},
			want: "job.sh: line 2: Invalid directive found in batch script: two"},
		{name: "bad environment value", args: []string{"job.sh"}, env: map[string]string{"SBATCH_TIMELIMIT": "abc"},
			want: "Invalid --time specification (from SBATCH_TIMELIMIT=abc)"},
		{name: "wrap with a script", args: []string{"--wrap=hostname", "job.sh"}, want: "Script arguments not permitted with --wrap option"},
		{name: "script not found", args: []string{"nope.sh"}, want: "Unable to open file nope.sh", notFound: true},
		{name: "heterogeneous job", args: []string{"-N1", ":", "-N2", "job.sh"},
			want: `heterogeneous jobs (":" between option groups) are not supported yet`},
		{name: "not a batch script", args: []string{"notbatch.sh"},
			want: "This does not look like a batch script.  The first line must start with #! followed by the path to an interpreter. For instance: #!/bin/sh"},
		{name: "no script at all", args: []string{"-N", "1"},
			want: "no batch script: name a script file, use --wrap, or pipe a script into sbatch", usage: true},
	}
	files := map[string]string{"/home/alice/exp/notbatch.sh": "echo hi\n"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := testInput(tt.args, tt.directives, tt.env, files)
			_, err := Parse(in)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse error = %v (%T), want *Error", err, err)
			}
			if pe.Error() != tt.want || pe.Usage != tt.usage {
				t.Errorf("error = %q (usage %v), want %q (usage %v)", pe.Error(), pe.Usage, tt.want, tt.usage)
			}
			if errors.Is(err, api.ErrNotFound) != tt.notFound {
				t.Errorf("errors.Is(err, ErrNotFound) = %v, want %v", !tt.notFound, tt.notFound)
			}
			if !tt.notFound && !errors.Is(err, api.ErrInvalidArgument) {
				t.Errorf("error is not ErrInvalidArgument")
			}
		})
	}
}

func TestParseScriptSources(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		stdin    io.Reader
		files    map[string]string
		env      map[string]string
		script   string
		jobName  string
		path     string
		argsWant []string
	}{
		{name: "file and its arguments", args: []string{"-N1", "job.sh", "-N", "2", "--x"},
			script: "#!/bin/sh\n\nsrun hostname\n", jobName: "job.sh", path: "job.sh", argsWant: []string{"-N", "2", "--x"}},
		{name: "wrap", args: []string{"--wrap=hostname; date"},
			script: "#!/bin/sh\n# This script was created by sbatch --wrap.\n\nhostname; date\n", jobName: "wrap"},
		{name: "stdin", args: []string{"-N", "1"}, stdin: strings.NewReader("#!/bin/bash\n#SBATCH -J piped\ntrue\n"),
			script: "#!/bin/bash\n#SBATCH -J piped\ntrue\n", jobName: "piped"},
		{name: "stdin without a name", args: nil, stdin: strings.NewReader("#!/bin/bash\ntrue\n"),
			script: "#!/bin/bash\ntrue\n", jobName: "sbatch"},
		{name: "script found on PATH", args: []string{"tool.sh"}, env: map[string]string{"PATH": "/usr/bin:/home/alice/bin"},
			files:  map[string]string{"/home/alice/bin/tool.sh": "#!/bin/sh\ntool\n"},
			script: "#!/bin/sh\ntool\n", jobName: "tool.sh", path: "tool.sh"},
		{name: "relative path with a directory", args: []string{"sub/run.sh"},
			files:  map[string]string{"/home/alice/exp/sub/run.sh": "#!/bin/sh\nrun\n"},
			script: "#!/bin/sh\nrun\n", jobName: "run.sh", path: "sub/run.sh"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := testInput(tt.args, nil, tt.env, tt.files)
			in.Stdin = tt.stdin
			req, err := Parse(in)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if req.Spec.Script != tt.script || req.Spec.Name != tt.jobName || req.ScriptPath != tt.path {
				t.Errorf("script %q name %q path %q; want %q %q %q", req.Spec.Script, req.Spec.Name, req.ScriptPath, tt.script, tt.jobName, tt.path)
			}
			if diff := cmp.Diff(tt.argsWant, req.ScriptArgs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("script args (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseActionsAndFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		action  Action
		flags   [4]bool // parsable, test-only, wait, quiet
		verbose int
		err     string
	}{
		{name: "help", args: []string{"--help", "--bogus"}, action: ActionHelp},
		{name: "short help wins over a bad value", args: []string{"-N", "x", "-h"}, action: ActionHelp},
		{name: "error before help", args: []string{"--bogus", "--help"}, err: "unrecognized option '--bogus'"},
		{name: "usage", args: []string{"--usage"}, action: ActionUsage},
		{name: "version", args: []string{"-V"}, action: ActionVersion},
		{name: "client flags", args: []string{"--parsable", "--test-only", "-W", "-Q", "-vv", "job.sh"}, flags: [4]bool{true, true, true, true}, verbose: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := Parse(testInput(tt.args, nil, nil, nil))
			if tt.err != "" {
				if errText(err) != tt.err {
					t.Fatalf("error = %q, want %q", errText(err), tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := [4]bool{req.Parsable, req.TestOnly, req.Wait, req.Quiet}
			if req.Action != tt.action || got != tt.flags || req.Verbose != tt.verbose {
				t.Errorf("action %v flags %v verbose %d; want %v %v %d", req.Action, got, req.Verbose, tt.action, tt.flags, tt.verbose)
			}
		})
	}
}

func TestParseDefined(t *testing.T) {
	req, err := Parse(testInput([]string{"-N", "2", "--mem-per-cpu=1G", "--exclusive", "job.sh"},
		[]string{"#SBATCH -J named --mem=4G"}, map[string]string{"SBATCH_PARTITION": "gpu"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"exclusive", "set"}, {"job-name", "named"}, {"mem-per-cpu", "1G"}, {"nodes", "2"}, {"partition", "gpu"}}
	if diff := cmp.Diff(want, req.Defined); diff != "" {
		t.Errorf("defined (-want +got):\n%s", diff)
	}
	lines := DefinedLines(req.Defined[:1])
	wantLines := []string{"defined options", "-------------------- --------------------",
		"exclusive           : set", "-------------------- --------------------", "end of defined options"}
	if diff := cmp.Diff(wantLines, lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func TestSwitchesOption(t *testing.T) {
	tests := []struct {
		arg     string
		n       int
		wait    int64
		wantErr bool
	}{
		{"--switches=1", 1, 0, false},
		{"--switches=2@10:00", 2, 600, false},
		{"--switches=1@1-0", 1, 86400, false},
		{"--switches=x", 0, 0, true},
		{"--switches=1@soon", 0, 0, true},
	}
	for _, tt := range tests {
		req, err := Parse(Input{Args: []string{tt.arg, "--wrap", "true"}, Getenv: func(string) string { return "" },
			Cwd: "/w", Host: "h"})
		if (err != nil) != tt.wantErr {
			t.Fatalf("%s: err = %v", tt.arg, err)
		}
		if err == nil && (req.Spec.Switches != tt.n || req.Spec.SwitchWait != tt.wait) {
			t.Errorf("%s: switches %d@%d, want %d@%d", tt.arg, req.Spec.Switches, req.Spec.SwitchWait, tt.n, tt.wait)
		}
	}
}
