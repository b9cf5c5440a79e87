package api

import "strings"

// Bounds on what one submission may carry. Every value of a JobSpec
// comes from a user and is checked against them in the controller (at
// submit, and at update for the fields an update may change) before
// anything else looks at it: a 7 MB job name costs every squeue of every
// user, a billion-node request a billion-slot allocation in the next
// scheduling pass, a negative time limit no limit at all.
//
// The string bounds are Slurm's (slurmctld's _test_job_desc_fields):
// 1024 bytes for names and the like, PATH_MAX for paths, 128 KiB for a
// dependency, 4 KiB for an array expression, 64 KiB for node lists. The
// counts are Slurm's field widths where it has them (16 bits for per-task
// and per-node counts), and otherwise small enough that no product the
// scheduler forms (tasks × CPUs per task × memory per CPU) can overflow.
const (
	MaxStringLen     = 1024
	MaxPathLen       = 4096
	MaxDependencyLen = 128 << 10
	MaxArrayExprLen  = 4 << 10
	MaxNodeListLen   = 64 << 10
	// MaxDependencyItems bounds the jobs one dependency names: each is
	// evaluated at every scheduling pass while the job waits.
	MaxDependencyItems = 1024
	// MaxCount bounds job-wide counts (nodes, tasks, GPUs, and the
	// CPUs and GPUs they multiply to).
	MaxCount = 1 << 24
	// MaxPerCount bounds per-node and per-task counts (Slurm's 16 bits).
	MaxPerCount = 1<<16 - 1
	// MaxMemMB bounds memory per node, MaxMemPerUnitMB memory per CPU or
	// GPU and a GPU slice's memory (4 TiB).
	MaxMemMB        = 1 << 40
	MaxMemPerUnitMB = 1 << 22
	// MaxNice is Slurm's bound of --nice either way.
	MaxNice = 2147483645
	// MaxSignal is the highest signal number (Linux's SIGRTMAX).
	MaxSignal = 64
	// MaxSignalSeconds is Slurm's bound of --signal's @time.
	MaxSignalSeconds = 1<<16 - 1
	// MaxContainerMounts bounds --container-mounts.
	MaxContainerMounts = 256
)

// ErrTooLong is Slurm's message for a string over its bound.
const ErrTooLong = "Pathname of a file, directory or other parameter too long"

// SpecLimits are the configurable bounds (submit.max_script_size,
// submit.max_env_size, submit.max_env_vars in the controller's config).
type SpecLimits struct {
	MaxScriptSize int `json:"max_script_size"`
	MaxEnvSize    int `json:"max_env_size"`
	MaxEnvVars    int `json:"max_env_vars"`
}

// Defaults and ceilings of the configurable bounds.
const (
	// DefaultMaxScriptSize is Slurm's default max_script_size, 4 MiB;
	// MaxMaxScriptSize its ceiling, 512 MiB.
	DefaultMaxScriptSize = 4 << 20
	MaxMaxScriptSize     = 512 << 20
	// DefaultMaxEnvSize is 1 MiB of environment: far more than a login
	// shell's, well under what the kernel takes for a new process
	// (ARG_MAX is commonly 2 MiB for arguments and environment
	// together, MaxMaxEnvSize).
	DefaultMaxEnvSize = 1 << 20
	MaxMaxEnvSize     = 2 << 20
	// DefaultMaxEnvVars bounds the number of variables.
	DefaultMaxEnvVars = 8192
)

// DefaultSpecLimits are the bounds of a controller configured with
// none: what a client can check before it sends anything.
func DefaultSpecLimits() SpecLimits {
	return SpecLimits{MaxScriptSize: DefaultMaxScriptSize, MaxEnvSize: DefaultMaxEnvSize, MaxEnvVars: DefaultMaxEnvVars}
}

// CheckSpecLimits refuses a submission that carries more than the
// bounds allow, naming the field, its size and the bound; errors are
// ErrInvalidArgument, worded for sbatch to print after "Batch job
// submission failed: ". It checks sizes and ranges only: what the values
// mean (a known partition, a parsable constraint) is checked after it,
// on values known to be small.
func CheckSpecLimits(s *JobSpec, lim SpecLimits) error {
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"job name", s.Name, MaxStringLen}, {"account", s.Account, MaxStringLen},
		{"partition", s.Partition, MaxStringLen}, {"qos", s.QOS, MaxStringLen},
		{"comment", s.Comment, MaxStringLen}, {"gpu type", s.GPUType, MaxStringLen},
		{"constraint", s.Constraint, MaxStringLen}, {"comm", s.Comm, MaxStringLen},
		{"mail type", s.MailType, MaxStringLen}, {"mail user", s.MailUser, MaxStringLen},
		{"open mode", s.OpenMode, MaxStringLen}, {"submit host", s.SubmitHost, MaxStringLen},
		{"container image", s.ContainerImage, MaxStringLen},
		{"working directory", s.WorkDir, MaxPathLen}, {"submit directory", s.SubmitDir, MaxPathLen},
		{"output", s.Stdout, MaxPathLen}, {"error", s.Stderr, MaxPathLen}, {"input", s.Stdin, MaxPathLen},
		{"dependency", s.Dependency, MaxDependencyLen}, {"array", s.Array, MaxArrayExprLen},
	} {
		if len(f.v) > f.max {
			return Invalid("%s (%s is %d bytes, at most %d)", ErrTooLong, f.name, len(f.v), f.max)
		}
	}
	for _, f := range []struct{ name, v string }{
		{"working directory", s.WorkDir}, {"submit directory", s.SubmitDir}, {"output", s.Stdout},
		{"error", s.Stderr}, {"input", s.Stdin},
	} {
		if strings.IndexByte(f.v, 0) >= 0 {
			return Invalid("%s contains a NUL byte", f.name)
		}
	}
	if err := checkNodeNames("node list", s.NodeList); err != nil {
		return err
	}
	if err := checkNodeNames("excluded node list", s.Exclude); err != nil {
		return err
	}
	if len(s.Script) > lim.MaxScriptSize {
		return Invalid("batch script is %d bytes, more than the %d allowed (max_script_size)", len(s.Script), lim.MaxScriptSize)
	}
	if n := len(s.Environment) + len(s.ScriptArgs); n > lim.MaxEnvVars {
		return Invalid("the environment has %d variables and arguments, more than the %d allowed (max_env_vars)", n, lim.MaxEnvVars)
	}
	size := 0
	for _, e := range s.Environment {
		size += len(e) + 1
		if strings.IndexByte(e, 0) >= 0 {
			return Invalid("environment variable %.40q contains a NUL byte", e)
		}
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return Invalid("environment entry %.40q is not NAME=VALUE", e)
		}
	}
	for _, a := range s.ScriptArgs {
		size += len(a) + 1
		if strings.IndexByte(a, 0) >= 0 {
			return Invalid("script argument %.40q contains a NUL byte", a)
		}
	}
	if size > lim.MaxEnvSize {
		return Invalid("environment and script arguments are %d bytes, more than the %d allowed (max_env_size)", size, lim.MaxEnvSize)
	}
	if len(s.ContainerMounts) > MaxContainerMounts {
		return Invalid("%d container mounts, at most %d", len(s.ContainerMounts), MaxContainerMounts)
	}
	for _, m := range s.ContainerMounts {
		if len(m.Source) > MaxPathLen || len(m.Destination) > MaxPathLen {
			return Invalid("%s (a container mount path is longer than %d bytes)", ErrTooLong, MaxPathLen)
		}
		if strings.IndexByte(m.Source, 0) >= 0 || strings.IndexByte(m.Destination, 0) >= 0 {
			return Invalid("a container mount path contains a NUL byte")
		}
	}
	if err := checkCounts(s); err != nil {
		return err
	}
	if err := CheckTimeLimit(s.TimeLimit); err != nil {
		return err
	}
	if s.TimeMin < 0 || s.TimeMin > MaxTimeLimit {
		return Invalid("%s: --time-min of %d seconds", ErrTimeLimit, s.TimeMin)
	}
	if s.SwitchWait < 0 || s.SwitchWait > MaxTimeLimit {
		return Invalid("--switches wait of %d seconds is not between 0 and %d", s.SwitchWait, MaxTimeLimit)
	}
	if s.Nice < -MaxNice || s.Nice > MaxNice {
		return Invalid("--nice %d is not between %d and %d", s.Nice, -MaxNice, MaxNice)
	}
	if sg := s.Signal; sg != nil && (sg.Signal < 1 || sg.Signal > MaxSignal || sg.Seconds < 0 || sg.Seconds > MaxSignalSeconds) {
		return Invalid("--signal %d@%d: the signal must be 1 to %d and the time 0 to %d seconds", sg.Signal, sg.Seconds, MaxSignal, MaxSignalSeconds)
	}
	return nil
}

// checkNodeNames bounds a -w or -x list.
func checkNodeNames(what string, names []string) error {
	size := 0
	for _, n := range names {
		size += len(n) + 1
	}
	if size > MaxNodeListLen {
		return Invalid("%s (%s is %d bytes, at most %d)", ErrTooLong, what, size, MaxNodeListLen)
	}
	return nil
}

// checkCounts bounds the resource counts, each and as the products the
// scheduler forms.
func checkCounts(s *JobSpec) error {
	for _, v := range []struct {
		name string
		n    int64
		max  int64
	}{
		{"nodes", int64(s.Nodes), MaxCount}, {"nodes (maximum)", int64(s.MaxNodes), MaxCount},
		{"ntasks", int64(s.Tasks), MaxCount}, {"gpus", int64(s.GPUs), MaxCount},
		{"ntasks-per-node", int64(s.TasksPerNode), MaxPerCount}, {"cpus-per-task", int64(s.CPUsPerTask), MaxPerCount},
		{"gpus-per-node", int64(s.GPUsPerNode), MaxPerCount}, {"gpus-per-task", int64(s.GPUsPerTask), MaxPerCount},
		{"cpus-per-gpu", int64(s.CPUsPerGPU), MaxPerCount}, {"switches", int64(s.Switches), MaxPerCount},
		{"gres shard", int64(s.GPUShards), MaxPerCount},
		{"mem-per-cpu", s.MemPerCPUMB, MaxMemPerUnitMB}, {"mem-per-gpu", s.MemPerGPUMB, MaxMemPerUnitMB},
		{"gpu-mem", s.GPUMemMB, MaxMemPerUnitMB},
		// Per node, but bounded like a job-wide count: Slurm reads
		// --mincpus=999999 as a node nobody has, and so does Tide (the
		// request is then refused as impossible, not as malformed).
		{"mincpus", int64(s.MinCPUs), MaxCount},
	} {
		if v.n < 0 || v.n > v.max {
			return Invalid("--%s=%d is not between 0 and %d", v.name, v.n, v.max)
		}
	}
	if m := s.MemPerNodeMB; m != MemWholeNode && (m < 0 || m > MaxMemMB) {
		return Invalid("--mem=%dM is not between 0 and %dM", m, int64(MaxMemMB))
	}
	if m := s.TmpDiskMB; m < 0 || m > MaxMemMB {
		return Invalid("--tmp=%dM is not between 0 and %dM", m, int64(MaxMemMB))
	}
	// The CPUs and GPUs a job may multiply up to, on one node or all.
	tasks := max(int64(s.Tasks), int64(s.TasksPerNode), 1)
	if c := tasks * int64(max(s.CPUsPerTask, 1)); c > MaxCount {
		return Invalid("%d tasks of %d CPUs each is more than %d CPUs", tasks, max(s.CPUsPerTask, 1), MaxCount)
	}
	if g := tasks * int64(s.GPUsPerTask); g > MaxCount {
		return Invalid("%d tasks of %d GPUs each is more than %d GPUs", tasks, s.GPUsPerTask, MaxCount)
	}
	return nil
}

// CheckUpdateString bounds a string an update sets (scontrol update
// JobName=…, Comment=…, Account=…).
func CheckUpdateString(what, v string) error {
	if len(v) > MaxStringLen {
		return Invalid("%s (%s is %d bytes, at most %d)", ErrTooLong, what, len(v), MaxStringLen)
	}
	return nil
}
