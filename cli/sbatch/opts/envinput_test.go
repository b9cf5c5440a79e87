package opts

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// slurmSbatchEnv is every variable of man sbatch's INPUT ENVIRONMENT
// VARIABLES (Slurm 22.05) that sets an option, plus the four sbatch
// reads without listing them (SBATCH_BURST_BUFFER,
// SBATCH_CLUSTER_CONSTRAINT, SBATCH_CPU_FREQ_REQ,
// SBATCH_GPUS_PER_SOCKET), with a valid value each.
var slurmSbatchEnv = map[string]string{
	"SBATCH_ACCOUNT": "physics", "SBATCH_ACCTG_FREQ": "task=30", "SBATCH_ARRAY_INX": "0-3",
	"SBATCH_BATCH": "fast", "SBATCH_CLUSTERS": "tide", "SLURM_CLUSTERS": "tide", "SBATCH_CONSTRAINT": "h100",
	"SBATCH_CONTAINER": "/srv/bundle", "SBATCH_CORE_SPEC": "2", "SBATCH_CPUS_PER_GPU": "4", "SBATCH_DEBUG": "1",
	"SBATCH_DELAY_BOOT": "10", "SBATCH_DISTRIBUTION": "block", "SBATCH_ERROR": "err-%j", "SBATCH_EXCLUSIVE": "",
	"SBATCH_EXPORT": "NONE", "SBATCH_GET_USER_ENV": "", "SBATCH_GPU_BIND": "closest", "SBATCH_GPU_FREQ": "high",
	"SBATCH_GPUS": "2", "SBATCH_GPUS_PER_NODE": "2", "SBATCH_GPUS_PER_TASK": "1", "SBATCH_GRES": "gpu:1",
	"SBATCH_GRES_FLAGS": "enforce-binding", "SBATCH_HINT": "nomultithread", "SLURM_HINT": "compute_bound",
	"SBATCH_IGNORE_PBS": "", "SBATCH_INPUT": "in.txt", "SBATCH_JOB_NAME": "fromenv", "SBATCH_MEM_BIND": "local",
	"SBATCH_MEM_PER_CPU": "1G", "SBATCH_MEM_PER_GPU": "8G", "SBATCH_MEM_PER_NODE": "4G", "SBATCH_NETWORK": "ib",
	"SBATCH_NO_KILL": "", "SBATCH_NO_REQUEUE": "", "SBATCH_OPEN_MODE": "append", "SBATCH_OUTPUT": "out-%j",
	"SBATCH_OVERCOMMIT": "", "SBATCH_PARTITION": "gpu", "SBATCH_POWER": "level", "SBATCH_PROFILE": "task",
	"SBATCH_QOS": "high", "SBATCH_REQ_SWITCH": "2", "SBATCH_REQUEUE": "", "SBATCH_RESERVATION": "maint",
	"SBATCH_SIGNAL": "USR1@60", "SBATCH_SPREAD_JOB": "", "SBATCH_THREAD_SPEC": "1", "SBATCH_THREADS_PER_CORE": "1",
	"SBATCH_TIMELIMIT": "10", "SBATCH_USE_MIN_NODES": "", "SBATCH_WAIT": "", "SBATCH_WAIT_ALL_NODES": "1",
	"SBATCH_WAIT4SWITCH": "5:00", "SBATCH_WCKEY": "w1",
	"SBATCH_BURST_BUFFER": "spec", "SBATCH_CLUSTER_CONSTRAINT": "x", "SBATCH_CPU_FREQ_REQ": "high",
	"SBATCH_GPUS_PER_SOCKET": "1",
}

// TestSbatchEnvVarsCoverSlurm checks that sbatch reads every variable
// Slurm's sbatch reads, each into an option.
func TestSbatchEnvVarsCoverSlurm(t *testing.T) {
	have := map[string]string{}
	for _, ev := range SbatchEnvVars() {
		have[ev.Name] = ev.Option
		if ev.Option != EnvSwitchWait && optionIndex(ev.Option) < 0 {
			t.Errorf("%s names unknown option --%s", ev.Name, ev.Option)
		}
	}
	for k := range slurmSbatchEnv {
		if _, ok := have[k]; !ok {
			t.Errorf("%s is not read", k)
		}
	}
}

// TestSbatchEnvVarEach sets each variable alone and checks that it
// defines its option (sbatch -v lists it), or for SBATCH_WAIT4SWITCH
// the switch wait.
func TestSbatchEnvVarEach(t *testing.T) {
	for _, ev := range SbatchEnvVars() {
		t.Run(ev.Name, func(t *testing.T) {
			v, ok := slurmSbatchEnv[ev.Name]
			if !ok {
				v = map[string]string{"SBATCH_COMM": "model", "SBATCH_GPU_COMPUTE": "10", "SBATCH_GPU_MEM": "8G",
					"SBATCH_CONTAINER_IMAGE": "ubuntu", "SBATCH_CONTAINER_MOUNTS": "/a:/b"}[ev.Name]
			}
			in := testInput([]string{"-N1", "-n2", "job.sh"}, nil, nil, nil)
			in.LookupEnv = func(k string) (string, bool) {
				if k == ev.Name {
					return v, true
				}
				return "", false
			}
			req, err := Parse(in)
			if err != nil {
				t.Fatalf("%s=%s: %v", ev.Name, v, err)
			}
			if ev.Option == EnvSwitchWait {
				if req.Spec.SwitchWait != 300 {
					t.Errorf("SwitchWait = %d, want 300", req.Spec.SwitchWait)
				}
				return
			}
			id := options[optionIndex(ev.Option)].id()
			found := slices.ContainsFunc(req.Defined, func(d [2]string) bool { return d[0] == id })
			if !found {
				t.Errorf("%s=%q did not define --%s (defined: %v)", ev.Name, v, id, req.Defined)
			}
		})
	}
}

// TestSbatchEnvRules checks Slurm's rules for option variables: their
// precedence between the script's directives and the command line, and
// how flags and optional arguments read their values.
func TestSbatchEnvRules(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		directives []string
		env        map[string]string
		check      func(t *testing.T, r *Request)
	}{
		{name: "environment over directive", directives: []string{"#SBATCH -p batch"}, env: map[string]string{"SBATCH_PARTITION": "gpu"},
			check: func(t *testing.T, r *Request) { wantStr(t, "partition", r.Spec.Partition, "gpu") }},
		{name: "command line over environment", args: []string{"-p", "debug"}, env: map[string]string{"SBATCH_PARTITION": "gpu"},
			check: func(t *testing.T, r *Request) { wantStr(t, "partition", r.Spec.Partition, "debug") }},
		{name: "time limit", env: map[string]string{"SBATCH_TIMELIMIT": "1:30:00"},
			check: func(t *testing.T, r *Request) { wantInt(t, "time limit", r.Spec.TimeLimit, 5400) }},
		{name: "output and error", env: map[string]string{"SBATCH_OUTPUT": "o-%j", "SBATCH_ERROR": "e-%j", "SBATCH_INPUT": "in"},
			check: func(t *testing.T, r *Request) {
				wantStr(t, "stdout", r.Spec.Stdout, "o-%j")
				wantStr(t, "stderr", r.Spec.Stderr, "e-%j")
				wantStr(t, "stdin", r.Spec.Stdin, "in")
			}},
		{name: "gpus", env: map[string]string{"SBATCH_GPUS": "h100:4"},
			check: func(t *testing.T, r *Request) {
				wantInt(t, "gpus", int64(r.Spec.GPUs), 4)
				wantStr(t, "gpu type", r.Spec.GPUType, "h100")
			}},
		{name: "empty flag sets it", env: map[string]string{"SBATCH_REQUEUE": ""},
			check: func(t *testing.T, r *Request) { wantBool(t, "requeue", r.Spec.Requeue, ptr(true)) }},
		{name: "yes sets a flag", env: map[string]string{"SBATCH_NO_REQUEUE": "YES"},
			check: func(t *testing.T, r *Request) { wantBool(t, "requeue", r.Spec.Requeue, ptr(false)) }},
		{name: "a non-zero number sets a flag", env: map[string]string{"SBATCH_WAIT": "2"},
			check: func(t *testing.T, r *Request) {
				if !r.Wait {
					t.Error("SBATCH_WAIT=2 did not set --wait")
				}
			}},
		{name: "0 unsets the directive's flag", directives: []string{"#SBATCH --requeue"}, env: map[string]string{"SBATCH_REQUEUE": "0"},
			check: func(t *testing.T, r *Request) { wantBool(t, "requeue", r.Spec.Requeue, nil) }},
		{name: "other words unset a flag", directives: []string{"#SBATCH -W"}, env: map[string]string{"SBATCH_WAIT": "no"},
			check: func(t *testing.T, r *Request) {
				if r.Wait {
					t.Error("SBATCH_WAIT=no left --wait set")
				}
			}},
		{name: "SBATCH_DEBUG=0 and 1", directives: []string{"#SBATCH -v"}, env: map[string]string{"SBATCH_DEBUG": "0"},
			check: func(t *testing.T, r *Request) { wantInt(t, "verbose", int64(r.Verbose), 0) }},
		{name: "empty optional argument", env: map[string]string{"SBATCH_EXCLUSIVE": ""},
			check: func(t *testing.T, r *Request) {
				if !r.Spec.Exclusive {
					t.Error("SBATCH_EXCLUSIVE= did not set --exclusive")
				}
			}},
		{name: "empty required argument is ignored", directives: []string{"#SBATCH -p batch"}, env: map[string]string{"SBATCH_PARTITION": ""},
			check: func(t *testing.T, r *Request) { wantStr(t, "partition", r.Spec.Partition, "batch") }},
		{name: "SBATCH_HINT wins over SLURM_HINT", env: map[string]string{"SLURM_HINT": "compute_bound", "SBATCH_HINT": "nomultithread"},
			check: func(t *testing.T, r *Request) { wantDefined(t, r, "hint", "nomultithread") }},
		{name: "SLURM_CLUSTERS wins over SBATCH_CLUSTERS", env: map[string]string{"SBATCH_CLUSTERS": "a", "SLURM_CLUSTERS": "b"},
			check: func(t *testing.T, r *Request) { wantDefined(t, r, "clusters", "b") }},
		{name: "wait for switches", env: map[string]string{"SBATCH_REQ_SWITCH": "2", "SBATCH_WAIT4SWITCH": "10:00"},
			check: func(t *testing.T, r *Request) {
				wantInt(t, "switches", int64(r.Spec.Switches), 2)
				wantInt(t, "switch wait", r.Spec.SwitchWait, 600)
			}},
		{name: "export", env: map[string]string{"SBATCH_EXPORT": "NONE"},
			check: func(t *testing.T, r *Request) {
				if diff := cmp.Diff([]string{"SLURM_CONF=/etc/slurm.conf"}, r.Spec.Environment); diff != "" {
					t.Errorf("environment (-want +got):\n%s", diff)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := testInput(append(tt.args, "job.sh"), tt.directives, nil, nil)
			in.LookupEnv = func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			r, err := Parse(in)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, r)
		})
	}
}

func TestSbatchEnvErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{name: "bad time", env: map[string]string{"SBATCH_TIMELIMIT": "soon"}, want: "Invalid --time specification (from SBATCH_TIMELIMIT=soon)"},
		{name: "bad wait for switches", env: map[string]string{"SBATCH_WAIT4SWITCH": "later"},
			want: "Invalid --switches specification (from SBATCH_WAIT4SWITCH=later)"},
		{name: "memory options together", env: map[string]string{"SBATCH_MEM_PER_NODE": "1G", "SBATCH_MEM_PER_CPU": "1G"},
			want: "--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := testInput([]string{"job.sh"}, nil, nil, nil)
			in.LookupEnv = func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			_, err := Parse(in)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// TestParseEnvVars checks srun's and salloc's way in: their own list of
// variables instead of SBATCH_*, which are then not read.
func TestParseEnvVars(t *testing.T) {
	env := map[string]string{"SLURM_NTASKS": "5", "SLURM_NPROCS": "3", "SBATCH_PARTITION": "gpu", "SLURM_PARTITION": "debug"}
	in := testInput([]string{"job.sh"}, nil, nil, nil)
	in.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	in.EnvVars = []EnvVar{{"SLURM_NPROCS", "ntasks"}, {"SLURM_NTASKS", "ntasks"}, {"SLURM_PARTITION", "partition"}}
	r, err := Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	wantInt(t, "tasks (SLURM_NTASKS after SLURM_NPROCS)", int64(r.Spec.Tasks), 5)
	wantStr(t, "partition", r.Spec.Partition, "debug")
	in.EnvVars = []EnvVar{}
	if r, err = Parse(in); err != nil {
		t.Fatal(err)
	}
	if r.Spec.Partition != "" || r.Spec.Tasks != 0 {
		t.Errorf("an empty list read variables: partition %q, tasks %d", r.Spec.Partition, r.Spec.Tasks)
	}
	in.EnvVars = []EnvVar{{"SLURM_X", "no-such-option"}}
	in.LookupEnv = func(string) (string, bool) { return "1", true }
	if _, err := Parse(in); err == nil {
		t.Error("a variable naming no option was accepted")
	}
}

func TestEnvFlagOn(t *testing.T) {
	for v, want := range map[string]bool{"": true, "yes": true, "Yes": true, "1": true, "-1": true, "42": true,
		"0": false, "no": false, "true": false, "00": false, "1x": false} {
		if got := envFlagOn(v); got != want {
			t.Errorf("envFlagOn(%q) = %v, want %v", v, got, want)
		}
	}
}

func wantStr(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func wantInt(t *testing.T, what string, got, want int64) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %d, want %d", what, got, want)
	}
}

func wantBool(t *testing.T, what string, got, want *bool) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

func wantDefined(t *testing.T, r *Request, id, want string) {
	t.Helper()
	for _, d := range r.Defined {
		if d[0] == id {
			if d[1] != want {
				t.Errorf("--%s = %q, want %q", id, d[1], want)
			}
			return
		}
	}
	t.Errorf("--%s not defined", id)
}
