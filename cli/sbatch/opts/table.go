package opts

import (
	"strings"

	"github.com/tide-hpc/tide/cli/getopt"
	"github.com/tide-hpc/tide/ctld/api"
)

// group is a heading of the --help listing.
type group int

const (
	grpRun group = iota
	grpConstraint
	grpConsumable
	grpAffinity
	grpGPU
	grpHelp
	grpOther
)

var groupTitles = []string{
	grpRun:        "Parallel run options:",
	grpConstraint: "Constraint options:",
	grpConsumable: "Consumable resources related options:",
	grpAffinity:   "Affinity/Multi-core options:",
	grpGPU:        "GPU scheduling options:",
	grpHelp:       "Help options:",
	grpOther:      "Other options:",
}

// setFunc applies one occurrence of an option. v is the argument and
// has says whether one was given (it matters for optional arguments).
type setFunc func(st *state, v string, has bool) error

// checkFunc validates the argument of an option Tide accepts but does
// not act on yet; o is the option, for the checks several options share.
type checkFunc func(o *option, v string, has bool) error

// option is one entry of sbatch's option table: the getopt spec, the
// environment variables that set it, its --help line and what it does,
// which is one of: a handler (set), a JobSpec field its value fills
// (str, num, secs), or a check of an option Tide ignores (ignore).
type option struct {
	Spec
	env     []string
	group   group
	argName string
	help    string
	hidden  bool
	// early options (help, usage, version) act only on the command line.
	early bool
	set   setFunc
	// str, num and secs are the JobSpec field the value sets: as given,
	// as a positive count, or as a time limit in seconds.
	str  func(*api.JobSpec) *string
	num  func(*api.JobSpec) *int
	secs func(*api.JobSpec) *int64
	// ignore validates an option Tide accepts without acting on it yet
	// (it warns that the option was ignored). words are the values
	// checkEnum and checkList accept; positive makes checkInt refuse 0.
	ignore   checkFunc
	words    []string
	positive bool
}

// Action is what a parse asks the command to do.
type Action int

// Actions: submit the job, or print help, usage or version and stop.
const (
	ActionSubmit Action = iota
	ActionHelp
	ActionUsage
	ActionVersion
)

// The checks of ignored options that several options share.

func checkNonEmpty(o *option, v string, _ bool) error {
	if strings.TrimSpace(v) == "" {
		return errorf("Invalid --%s specification: empty value", o.Long)
	}
	return nil
}

func checkInt(o *option, v string, _ bool) error {
	_, err := parseInt("--"+o.Long, v, o.positive)
	return err
}

func checkEnum(o *option, v string, _ bool) error {
	_, err := oneOf(o.Long, v, o.words...)
	return err
}

func checkList(o *option, v string, _ bool) error { return listOf(o.Long, v, o.words...) }

func noCheck(*option, string, bool) error { return nil }

// table returns the complete option table of Slurm 22.05 sbatch, in
// --help order. Options with an ignore check are accepted and validated
// but have no effect yet.
func table() []option { return options[:] }

// options is the table. Every entry is constant (handlers are functions
// or closures that capture nothing), so the compiler lays it out and
// nothing is built at run time: every CLI command is this binary, and
// sbatch, run in loops by scripts, would otherwise build a hundred
// entries and their closures each time it starts.
var options = [...]option{
	// Parallel run options.
	{Spec: Spec{Long: "array", Short: 'a', Arg: RequiredArg}, env: []string{"SBATCH_ARRAY_INX"}, argName: "indexes", help: "job array index values", set: setArray},
	{Spec: Spec{Long: "account", Short: 'A', Arg: RequiredArg}, env: []string{"SBATCH_ACCOUNT"}, argName: "name", help: "charge job to specified account (in Tide: the job's queue)", str: func(s *api.JobSpec) *string { return &s.Account }},
	// --queue is Tide's name for a Slurm account: one option under
	// two names (the shared ID), so "--queue=a -A b" is the last one.
	{Spec: Spec{Long: "queue", Arg: RequiredArg, ID: "account"}, argName: "name", help: "queue to run the job in (Tide; same as --account)", str: func(s *api.JobSpec) *string { return &s.Account }},
	{Spec: Spec{Long: "acctg-freq", Arg: RequiredArg}, env: []string{"SBATCH_ACCTG_FREQ"}, argName: "<datatype>=<interval>", help: "job accounting and profiling sampling intervals", ignore: checkAcctgFreq},
	{Spec: Spec{Long: "batch", Arg: RequiredArg}, env: []string{"SBATCH_BATCH"}, argName: "list", help: "features the batch host must have", ignore: checkNonEmpty},
	{Spec: Spec{Long: "bb", Arg: RequiredArg}, env: []string{"SBATCH_BURST_BUFFER"}, argName: "<spec>", help: "burst buffer specifications", ignore: checkNonEmpty},
	{Spec: Spec{Long: "bbf", Arg: RequiredArg}, argName: "<file_name>", help: "burst buffer specification file", ignore: checkNonEmpty},
	{Spec: Spec{Long: "begin", Short: 'b', Arg: RequiredArg}, argName: "time", help: "defer job until HH:MM MM/DD/YY", set: setBegin},
	{Spec: Spec{Long: "comm", Arg: RequiredArg}, env: []string{"SBATCH_COMM"}, argName: "model|data", help: "parallelism (Tide): model keeps each node's GPUs in one NVLink domain", set: setComm},
	{Spec: Spec{Long: "comment", Arg: RequiredArg}, argName: "name", help: "arbitrary comment", str: func(s *api.JobSpec) *string { return &s.Comment }},
	{Spec: Spec{Long: "container", Arg: RequiredArg}, env: []string{"SBATCH_CONTAINER"}, argName: "path", help: "path to OCI container bundle", ignore: checkNonEmpty},
	{Spec: Spec{Long: "cpu-freq", Arg: RequiredArg}, env: []string{"SBATCH_CPU_FREQ_REQ"}, argName: "min[-max[:gov]]", help: "requested cpu frequency (and governor)", ignore: checkCPUFreq},
	{Spec: Spec{Long: "cpus-per-task", Short: 'c', Arg: RequiredArg}, argName: "ncpus", help: "number of cpus required per task", num: func(s *api.JobSpec) *int { return &s.CPUsPerTask }},
	{Spec: Spec{Long: "dependency", Short: 'd', Arg: RequiredArg}, argName: "type:jobid[:time]", help: "defer job until condition on jobid is satisfied", set: setDependency},
	{Spec: Spec{Long: "deadline", Arg: RequiredArg}, argName: "time", help: "remove the job if no ending possible before this deadline", set: setDeadline},
	{Spec: Spec{Long: "delay-boot", Arg: RequiredArg}, env: []string{"SBATCH_DELAY_BOOT"}, argName: "mins", help: "delay boot for desired node features", ignore: checkTime},
	{Spec: Spec{Long: "chdir", Short: 'D', Arg: RequiredArg}, argName: "directory", help: "set working directory for batch script", set: setChdir},
	{Spec: Spec{Long: "error", Short: 'e', Arg: RequiredArg}, env: []string{"SBATCH_ERROR"}, argName: "err", help: "file for batch script's standard error", str: func(s *api.JobSpec) *string { return &s.Stderr }},
	{Spec: Spec{Long: "export", Arg: RequiredArg}, env: []string{"SBATCH_EXPORT"}, argName: "names", help: "specify environment variables to export (ALL, NONE or a list)", set: setExport},
	{Spec: Spec{Long: "export-file", Arg: RequiredArg}, argName: "file|fd", help: "specify environment variables file or file descriptor to export", ignore: checkNonEmpty},
	{Spec: Spec{Long: "get-user-env", Arg: OptionalArg}, env: []string{"SBATCH_GET_USER_ENV"}, argName: "timeout][mode", help: "load environment from local cluster", ignore: checkGetUserEnv},
	{Spec: Spec{Long: "gid", Arg: RequiredArg}, argName: "group_id", help: "group ID to run job as (root and operators only)", set: setGID},
	{Spec: Spec{Long: "gres", Arg: RequiredArg}, env: []string{"SBATCH_GRES"}, argName: "list", help: "required generic resources (gpu[:type][:count], shard:n, mps:pct)", set: setGres},
	{Spec: Spec{Long: "gres-flags", Arg: RequiredArg}, env: []string{"SBATCH_GRES_FLAGS"}, argName: "opts", help: "flags related to GRES management", ignore: checkEnum, words: []string{"disable-binding", "enforce-binding"}},
	{Spec: Spec{Long: "hold", Short: 'H', Arg: NoArg}, help: "submit job in held state", set: func(st *state, _ string, _ bool) error { st.spec.Hold = true; return nil }},
	{Spec: Spec{Long: "ignore-pbs", Arg: NoArg}, env: []string{"SBATCH_IGNORE_PBS"}, help: "ignore #PBS and #BSUB options in the batch script", set: func(*state, string, bool) error { return nil }},
	{Spec: Spec{Long: "input", Short: 'i', Arg: RequiredArg}, env: []string{"SBATCH_INPUT"}, argName: "in", help: "file for batch script's standard input", str: func(s *api.JobSpec) *string { return &s.Stdin }},
	{Spec: Spec{Long: "job-name", Short: 'J', Arg: RequiredArg}, env: []string{"SBATCH_JOB_NAME"}, argName: "jobname", help: "name of job", str: func(s *api.JobSpec) *string { return &s.Name }},
	{Spec: Spec{Long: "no-kill", Short: 'k', Arg: OptionalArg}, env: []string{"SBATCH_NO_KILL"}, argName: "off", help: "do not kill job on node failure", set: setNoKill},
	{Spec: Spec{Long: "licenses", Short: 'L', Arg: RequiredArg}, argName: "names", help: "required license, comma separated", ignore: checkLicenses},
	{Spec: Spec{Long: "clusters", Short: 'M', Arg: RequiredArg, ID: "clusters"}, env: []string{"SBATCH_CLUSTERS", "SLURM_CLUSTERS"}, argName: "names", help: "comma separated list of clusters to issue commands to", ignore: checkNonEmpty},
	{Spec: Spec{Long: "cluster", Arg: RequiredArg, ID: "clusters"}, hidden: true, ignore: checkNonEmpty},
	{Spec: Spec{Long: "distribution", Short: 'm', Arg: RequiredArg}, env: []string{"SBATCH_DISTRIBUTION"}, argName: "type", help: "distribution method for processes to nodes (type = block|cyclic|arbitrary)", set: setDistribution},
	{Spec: Spec{Long: "mail-type", Arg: RequiredArg}, argName: "type", help: "notify on state change: BEGIN, END, FAIL or ALL", set: setMailType},
	{Spec: Spec{Long: "mail-user", Arg: RequiredArg}, argName: "user", help: "who to send email notification for job state changes", str: func(s *api.JobSpec) *string { return &s.MailUser }},
	{Spec: Spec{Long: "mcs-label", Arg: RequiredArg}, argName: "mcs", help: "mcs label if mcs plugin mcs/group is used", ignore: checkNonEmpty},
	{Spec: Spec{Long: "ntasks", Short: 'n', Arg: RequiredArg}, argName: "ntasks", help: "number of tasks to run", num: func(s *api.JobSpec) *int { return &s.Tasks }},
	{Spec: Spec{Long: "nice", Arg: OptionalArg}, argName: "value", help: "decrease scheduling priority by value", set: setNice},
	{Spec: Spec{Long: "no-requeue", Arg: NoArg}, env: []string{"SBATCH_NO_REQUEUE"}, help: "if set, do not permit the job to be requeued", set: setNoRequeue},
	{Spec: Spec{Long: "ntasks-per-node", Arg: RequiredArg}, argName: "n", help: "number of tasks to invoke on each node", num: func(s *api.JobSpec) *int { return &s.TasksPerNode }},
	// Slurm's deprecated spelling of --ntasks-per-node, still accepted.
	{Spec: Spec{Long: "tasks-per-node", Arg: RequiredArg, ID: "ntasks-per-node"}, hidden: true, num: func(s *api.JobSpec) *int { return &s.TasksPerNode }},
	{Spec: Spec{Long: "nodes", Short: 'N', Arg: RequiredArg}, argName: "N", help: "number of nodes on which to run (N = min[-max])", set: setNodes},
	{Spec: Spec{Long: "output", Short: 'o', Arg: RequiredArg}, env: []string{"SBATCH_OUTPUT"}, argName: "out", help: "file for batch script's standard output", str: func(s *api.JobSpec) *string { return &s.Stdout }},
	{Spec: Spec{Long: "overcommit", Short: 'O', Arg: NoArg}, env: []string{"SBATCH_OVERCOMMIT"}, help: "overcommit resources", set: func(st *state, _ string, _ bool) error { st.spec.Overcommit = true; return nil }},
	{Spec: Spec{Long: "partition", Short: 'p', Arg: RequiredArg}, env: []string{"SBATCH_PARTITION"}, argName: "partition", help: "partition requested", str: func(s *api.JobSpec) *string { return &s.Partition }},
	{Spec: Spec{Long: "parsable", Arg: NoArg}, help: "outputs only the jobid on successful submission", set: func(st *state, _ string, _ bool) error { st.req.Parsable = true; return nil }},
	{Spec: Spec{Long: "power", Arg: RequiredArg}, env: []string{"SBATCH_POWER"}, argName: "flags", help: "power management options", ignore: checkList, words: []string{"level"}},
	{Spec: Spec{Long: "prefer", Arg: RequiredArg}, argName: "list", help: "features desired but not required by the job", ignore: checkNonEmpty},
	{Spec: Spec{Long: "priority", Arg: RequiredArg}, argName: "value", help: "priority level of the job, 1 (lowest) to 10; users may only lower theirs", set: setPriority},
	{Spec: Spec{Long: "profile", Arg: RequiredArg}, env: []string{"SBATCH_PROFILE"}, argName: "value", help: "enable acct_gather_profile for detailed data (all, none, or energy,lustre,network,task)", ignore: checkProfile},
	{Spec: Spec{Long: "propagate", Arg: OptionalArg}, argName: "rlimits", help: "propagate all [or specific list of] rlimits", set: func(_ *state, v string, has bool) error { return checkPropagate(nil, v, has) }},
	{Spec: Spec{Long: "qos", Short: 'q', Arg: RequiredArg}, env: []string{"SBATCH_QOS"}, argName: "qos", help: "quality of service", str: func(s *api.JobSpec) *string { return &s.QOS }},
	{Spec: Spec{Long: "quiet", Short: 'Q', Arg: NoArg}, help: "quiet mode (suppress informational messages)", set: func(st *state, _ string, _ bool) error { st.req.Quiet = true; return nil }},
	{Spec: Spec{Long: "reboot", Arg: NoArg}, help: "reboot compute nodes before starting job", ignore: noCheck},
	{Spec: Spec{Long: "requeue", Arg: NoArg}, env: []string{"SBATCH_REQUEUE"}, help: "if set, permit the job to be requeued", set: setRequeue},
	{Spec: Spec{Long: "oversubscribe", Short: 's', Arg: NoArg}, help: "over subscribe resources with other jobs", set: setOversubscribe},
	{Spec: Spec{Long: "core-spec", Short: 'S', Arg: RequiredArg}, env: []string{"SBATCH_CORE_SPEC"}, argName: "cores", help: "count of reserved cores", ignore: checkInt},
	{Spec: Spec{Long: "signal", Arg: RequiredArg}, env: []string{"SBATCH_SIGNAL"}, argName: "[{R|B}:]num[@time]", help: "send signal when time limit within time seconds", set: setSignal},
	{Spec: Spec{Long: "spread-job", Arg: NoArg}, env: []string{"SBATCH_SPREAD_JOB"}, help: "spread job across as many nodes as possible", ignore: noCheck},
	{Spec: Spec{Long: "switches", Arg: RequiredArg}, env: []string{"SBATCH_REQ_SWITCH"}, argName: "max-switches{@max-time-to-wait}", help: "optimum switches and max time to wait for optimum", set: setSwitches},
	{Spec: Spec{Long: "thread-spec", Arg: RequiredArg}, env: []string{"SBATCH_THREAD_SPEC"}, argName: "threads", help: "count of reserved threads", ignore: checkInt},
	{Spec: Spec{Long: "time", Short: 't', Arg: RequiredArg}, env: []string{"SBATCH_TIMELIMIT"}, argName: "minutes", help: "time limit", secs: func(s *api.JobSpec) *int64 { return &s.TimeLimit }},
	{Spec: Spec{Long: "time-min", Arg: RequiredArg}, argName: "minutes", help: "minimum time limit (if distinct)", secs: func(s *api.JobSpec) *int64 { return &s.TimeMin }},
	{Spec: Spec{Long: "uid", Arg: RequiredArg}, argName: "user_id", help: "user ID to run job as (root and operators only)", set: setUID},
	{Spec: Spec{Long: "use-min-nodes", Arg: NoArg}, env: []string{"SBATCH_USE_MIN_NODES"}, help: "if a range of node counts is given, prefer the smaller count", ignore: noCheck},
	{Spec: Spec{Long: "verbose", Short: 'v', Arg: NoArg}, env: []string{"SBATCH_DEBUG"}, help: "verbose mode (multiple -v's increase verbosity)", set: func(st *state, _ string, _ bool) error { st.req.Verbose++; return nil }},
	{Spec: Spec{Long: "wait", Short: 'W', Arg: NoArg}, env: []string{"SBATCH_WAIT"}, help: "wait for completion of submitted job", set: func(st *state, _ string, _ bool) error { st.req.Wait = true; return nil }},
	{Spec: Spec{Long: "wait-all-nodes", Arg: RequiredArg}, env: []string{"SBATCH_WAIT_ALL_NODES"}, argName: "0|1", help: "wait for all nodes to be booted before starting", ignore: checkEnum, words: []string{"0", "1"}},
	{Spec: Spec{Long: "wckey", Arg: RequiredArg}, env: []string{"SBATCH_WCKEY"}, argName: "wckey", help: "wckey to run job under", ignore: checkNonEmpty},
	{Spec: Spec{Long: "wrap", Arg: RequiredArg}, argName: "command string", help: "wrap command string in a sh script and submit", set: setWrap},

	// Constraint options.
	{Spec: Spec{Long: "cluster-constraint", Arg: RequiredArg}, env: []string{"SBATCH_CLUSTER_CONSTRAINT"}, group: grpConstraint, argName: "[!]list", help: "specify a list of cluster constraints", ignore: checkNonEmpty},
	{Spec: Spec{Long: "contiguous", Arg: NoArg}, group: grpConstraint, help: "demand a contiguous range of nodes", ignore: noCheck},
	{Spec: Spec{Long: "constraint", Short: 'C', Arg: RequiredArg}, env: []string{"SBATCH_CONSTRAINT"}, group: grpConstraint, argName: "list", help: "specify a list of constraints", str: func(s *api.JobSpec) *string { return &s.Constraint }},
	{Spec: Spec{Long: "nodefile", Short: 'F', Arg: RequiredArg}, group: grpConstraint, argName: "filename", help: "request a specific list of hosts from a file", set: setNodeFile},
	{Spec: Spec{Long: "mem", Arg: RequiredArg}, env: []string{"SBATCH_MEM_PER_NODE"}, group: grpConstraint, argName: "MB", help: "minimum amount of real memory (0 = all of each node)", set: setMemNode},
	{Spec: Spec{Long: "mincpus", Arg: RequiredArg}, group: grpConstraint, argName: "n", help: "minimum number of logical processors (threads) per node", num: func(s *api.JobSpec) *int { return &s.MinCPUs }},
	{Spec: Spec{Long: "reservation", Arg: RequiredArg}, env: []string{"SBATCH_RESERVATION"}, group: grpConstraint, argName: "name", help: "allocate resources from named reservation", ignore: checkNonEmpty},
	{Spec: Spec{Long: "tmp", Arg: RequiredArg}, group: grpConstraint, argName: "MB", help: "minimum amount of temporary disk", set: setTmp},
	{Spec: Spec{Long: "nodelist", Short: 'w', Arg: RequiredArg}, group: grpConstraint, argName: "hosts...", help: "request a specific list of hosts", set: setNodeList},
	{Spec: Spec{Long: "exclude", Short: 'x', Arg: RequiredArg}, group: grpConstraint, argName: "hosts...", help: "exclude a specific list of hosts", set: setExclude},

	// Consumable resources related options.
	{Spec: Spec{Long: "exclusive", Arg: OptionalArg}, env: []string{"SBATCH_EXCLUSIVE"}, group: grpConsumable, argName: "user|mcs", help: "allocate nodes in exclusive mode", set: setExclusive},
	{Spec: Spec{Long: "mem-per-cpu", Arg: RequiredArg}, env: []string{"SBATCH_MEM_PER_CPU"}, group: grpConsumable, argName: "MB", help: "maximum amount of real memory per allocated cpu required by the job", set: setMemCPU},

	// Affinity/Multi-core options.
	{Spec: Spec{Long: "sockets-per-node", Arg: RequiredArg}, group: grpAffinity, argName: "S", help: "number of sockets per node to allocate", ignore: checkInt, positive: true},
	{Spec: Spec{Long: "cores-per-socket", Arg: RequiredArg}, group: grpAffinity, argName: "C", help: "number of cores per socket to allocate", ignore: checkInt, positive: true},
	{Spec: Spec{Long: "threads-per-core", Arg: RequiredArg}, env: []string{"SBATCH_THREADS_PER_CORE"}, group: grpAffinity, argName: "T", help: "number of threads per core to allocate", ignore: checkInt, positive: true},
	{Spec: Spec{Long: "extra-node-info", Short: 'B', Arg: RequiredArg}, group: grpAffinity, argName: "S[:C[:T]]", help: "combine request of sockets per node, cores per socket and threads per core", ignore: checkExtraNodeInfo},
	{Spec: Spec{Long: "ntasks-per-core", Arg: RequiredArg}, group: grpAffinity, argName: "n", help: "number of tasks to invoke on each core", ignore: checkInt, positive: true},
	{Spec: Spec{Long: "ntasks-per-socket", Arg: RequiredArg}, group: grpAffinity, argName: "n", help: "number of tasks to invoke on each socket", ignore: checkInt, positive: true},
	{Spec: Spec{Long: "hint", Arg: RequiredArg}, env: []string{"SLURM_HINT", "SBATCH_HINT"}, group: grpAffinity, argName: "hint", help: "bind tasks according to application hints", ignore: checkList, words: []string{"compute_bound", "memory_bound", "multithread", "nomultithread"}},
	{Spec: Spec{Long: "mem-bind", Arg: RequiredArg}, env: []string{"SBATCH_MEM_BIND"}, group: grpAffinity, argName: "type", help: "bind memory to locality domains (ldom)", ignore: checkMemBind},

	// GPU scheduling options.
	{Spec: Spec{Long: "cpus-per-gpu", Arg: RequiredArg}, env: []string{"SBATCH_CPUS_PER_GPU"}, group: grpGPU, argName: "n", help: "number of CPUs required per allocated GPU", num: func(s *api.JobSpec) *int { return &s.CPUsPerGPU }},
	{Spec: Spec{Long: "gpus", Short: 'G', Arg: RequiredArg}, env: []string{"SBATCH_GPUS"}, group: grpGPU, argName: "n", help: "count of GPUs required for the job ([type:]n)", set: setGPUs},
	{Spec: Spec{Long: "gpu-bind", Arg: RequiredArg}, env: []string{"SBATCH_GPU_BIND"}, group: grpGPU, argName: "...", help: "task to gpu binding options", ignore: checkGPUBind},
	{Spec: Spec{Long: "gpu-compute", Arg: RequiredArg}, env: []string{"SBATCH_GPU_COMPUTE"}, group: grpGPU, argName: "pct", help: "GPU slice (Tide): percent of a GPU's compute per slice", set: setGPUCompute},
	{Spec: Spec{Long: "gpu-mem", Arg: RequiredArg}, env: []string{"SBATCH_GPU_MEM"}, group: grpGPU, argName: "size", help: "GPU slice (Tide): GPU memory per slice ([K|M|G|T])", set: setGPUMem},
	{Spec: Spec{Long: "gpu-freq", Arg: RequiredArg}, env: []string{"SBATCH_GPU_FREQ"}, group: grpGPU, argName: "...", help: "frequency and voltage of GPUs", ignore: checkGPUFreq},
	{Spec: Spec{Long: "gpus-per-node", Arg: RequiredArg}, env: []string{"SBATCH_GPUS_PER_NODE"}, group: grpGPU, argName: "n", help: "number of GPUs required per allocated node ([type:]n)", set: setGPUsPerNode},
	{Spec: Spec{Long: "gpus-per-socket", Arg: RequiredArg}, env: []string{"SBATCH_GPUS_PER_SOCKET"}, group: grpGPU, argName: "n", help: "number of GPUs required per allocated socket", ignore: func(_ *option, v string, _ bool) error { _, err := parseGPUCount("gpus-per-socket", v); return err }},
	{Spec: Spec{Long: "gpus-per-task", Arg: RequiredArg}, env: []string{"SBATCH_GPUS_PER_TASK"}, group: grpGPU, argName: "n", help: "number of GPUs required per spawned task ([type:]n)", set: setGPUsPerTask},
	{Spec: Spec{Long: "mem-per-gpu", Arg: RequiredArg}, env: []string{"SBATCH_MEM_PER_GPU"}, group: grpGPU, argName: "n", help: "real memory required per allocated GPU", set: setMemGPU},
	{Spec: Spec{Long: "ntasks-per-gpu", Arg: RequiredArg}, group: grpGPU, argName: "n", help: "number of tasks to invoke for each GPU", ignore: checkInt, positive: true},

	// Help options.
	{Spec: Spec{Long: "help", Short: 'h', Arg: NoArg}, group: grpHelp, help: "show this help message", early: true},
	{Spec: Spec{Long: "usage", Arg: NoArg}, group: grpHelp, help: "display brief usage message", early: true},

	// Other options.
	{Spec: Spec{Long: "kill-on-invalid-dep", Arg: RequiredArg}, group: grpOther, argName: "yes|no", help: "cancel the job if a dependency can never be satisfied", set: setKillOnInvalidDep},
	{Spec: Spec{Long: "network", Arg: RequiredArg}, env: []string{"SBATCH_NETWORK"}, group: grpOther, argName: "type", help: "specify information pertaining to the switch or network", ignore: checkNonEmpty},
	{Spec: Spec{Long: "open-mode", Arg: RequiredArg}, env: []string{"SBATCH_OPEN_MODE"}, group: grpOther, argName: "append|truncate", help: "open the output and error files in append or truncate mode", set: setOpenMode},
	{Spec: Spec{Long: "test-only", Arg: NoArg}, group: grpOther, help: "validate the job and estimate when it would start; submit nothing", set: func(st *state, _ string, _ bool) error { st.req.TestOnly = true; return nil }},
	{Spec: Spec{Long: "version", Short: 'V', Arg: NoArg}, group: grpOther, help: "output version information and exit", early: true},
	{Spec: Spec{Long: "container-image", Arg: RequiredArg}, env: []string{"SBATCH_CONTAINER_IMAGE"}, group: grpOther, argName: "image", help: "run the batch script in this container image (Pyxis-style)", set: setContainerImage},
	{Spec: Spec{Long: "container-mounts", Arg: RequiredArg}, env: []string{"SBATCH_CONTAINER_MOUNTS"}, group: grpOther, argName: "SRC:DST[:ro],...", help: "bind host paths into the job's container", set: setContainerMounts},
}

// newTableGetopt returns a getopt parser over the table, read in place,
// that behaves as one over Slurm's own table, which is sorted by long
// name: getopt_long lists ambiguous candidates in that order. Match
// indices are table indices. Nothing is copied or sorted up front, which
// every sbatch run would pay for: the parser puts the few candidates of
// a prefix in name order when it finds them.
func newTableGetopt() *Getopt {
	t := table()
	g := getopt.NewFunc(len(t), func(i int) *Spec { return &t[i].Spec })
	g.NameOrder = true
	return g
}

// parseArgs runs g over args; match indices are table indices.
func parseArgs(g *Getopt, args []string) ([]Match, []string, error) {
	return g.Parse(args)
}
