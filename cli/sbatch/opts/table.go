package opts

import (
	"slices"
	"strings"
	"sync"

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

// option is one entry of sbatch's option table: the getopt spec, the
// environment variables that set it, its --help line and its handler.
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

func str(field func(*api.JobSpec) *string) setFunc {
	return func(st *state, v string, _ bool) error {
		*field(&st.spec) = v
		return nil
	}
}

func nonEmpty(opt string) func(string, bool) error {
	return func(v string, _ bool) error {
		if strings.TrimSpace(v) == "" {
			return errorf("Invalid --%s specification: empty value", opt)
		}
		return nil
	}
}

func intCheck(opt string, positive bool) func(string, bool) error {
	return func(v string, _ bool) error {
		_, err := parseInt("--"+opt, v, positive)
		return err
	}
}

func enumCheck(opt string, allowed ...string) func(string, bool) error {
	return func(v string, _ bool) error {
		_, err := oneOf(opt, v, allowed...)
		return err
	}
}

func listCheck(opt string, allowed ...string) func(string, bool) error {
	return func(v string, _ bool) error { return listOf(opt, v, allowed...) }
}

func noCheck(string, bool) error { return nil }

// ignore validates an option Tide does not act on yet and warns, once,
// that it was ignored.
func ignore(name string, check func(string, bool) error) setFunc {
	noEffect[name] = true
	return func(st *state, v string, has bool) error {
		if err := check(v, has); err != nil {
			return err
		}
		st.warnIgnored(name)
		return nil
	}
}

// table is the complete option table of Slurm 22.05 sbatch. Options
// whose handler is ignore(...) are accepted and validated but have no
// effect yet. It is built on first use: every CLI command is this
// binary, and squeue should not build sbatch's table each time it starts.
var table = sync.OnceValue(buildTable)

func buildTable() []option {
	t := []option{
		// Parallel run options.
		{Spec: Spec{Long: "array", Short: 'a', Arg: RequiredArg}, env: []string{"SBATCH_ARRAY_INX"}, argName: "indexes", help: "job array index values", set: setArray},
		{Spec: Spec{Long: "account", Short: 'A', Arg: RequiredArg}, env: []string{"SBATCH_ACCOUNT"}, argName: "name", help: "charge job to specified account (in Tide: the job's queue)", set: str(func(s *api.JobSpec) *string { return &s.Account })},
		// --queue is Tide's name for a Slurm account: one option under
		// two names (the shared ID), so "--queue=a -A b" is the last one.
		{Spec: Spec{Long: "queue", Arg: RequiredArg, ID: "account"}, argName: "name", help: "queue to run the job in (Tide; same as --account)", set: str(func(s *api.JobSpec) *string { return &s.Account })},
		{Spec: Spec{Long: "acctg-freq", Arg: RequiredArg}, env: []string{"SBATCH_ACCTG_FREQ"}, argName: "<datatype>=<interval>", help: "job accounting and profiling sampling intervals", set: ignore("acctg-freq", checkAcctgFreq)},
		{Spec: Spec{Long: "batch", Arg: RequiredArg}, env: []string{"SBATCH_BATCH"}, argName: "list", help: "features the batch host must have", set: ignore("batch", nonEmpty("batch"))},
		{Spec: Spec{Long: "bb", Arg: RequiredArg}, argName: "<spec>", help: "burst buffer specifications", set: ignore("bb", nonEmpty("bb"))},
		{Spec: Spec{Long: "bbf", Arg: RequiredArg}, argName: "<file_name>", help: "burst buffer specification file", set: ignore("bbf", nonEmpty("bbf"))},
		{Spec: Spec{Long: "begin", Short: 'b', Arg: RequiredArg}, argName: "time", help: "defer job until HH:MM MM/DD/YY", set: setBegin},
		{Spec: Spec{Long: "comm", Arg: RequiredArg}, env: []string{"SBATCH_COMM"}, argName: "model|data", help: "parallelism (Tide): model keeps each node's GPUs in one NVLink domain", set: setComm},
		{Spec: Spec{Long: "comment", Arg: RequiredArg}, argName: "name", help: "arbitrary comment", set: str(func(s *api.JobSpec) *string { return &s.Comment })},
		{Spec: Spec{Long: "container", Arg: RequiredArg}, env: []string{"SBATCH_CONTAINER"}, argName: "path", help: "path to OCI container bundle", set: ignore("container", nonEmpty("container"))},
		{Spec: Spec{Long: "cpu-freq", Arg: RequiredArg}, env: []string{"SBATCH_CPU_FREQ_REQ"}, argName: "min[-max[:gov]]", help: "requested cpu frequency (and governor)", set: ignore("cpu-freq", checkCPUFreq)},
		{Spec: Spec{Long: "cpus-per-task", Short: 'c', Arg: RequiredArg}, argName: "ncpus", help: "number of cpus required per task", set: setInt("cpus-per-task", func(s *api.JobSpec) *int { return &s.CPUsPerTask })},
		{Spec: Spec{Long: "dependency", Short: 'd', Arg: RequiredArg}, argName: "type:jobid[:time]", help: "defer job until condition on jobid is satisfied", set: setDependency},
		{Spec: Spec{Long: "deadline", Arg: RequiredArg}, argName: "time", help: "remove the job if no ending possible before this deadline", set: setDeadline},
		{Spec: Spec{Long: "delay-boot", Arg: RequiredArg}, env: []string{"SBATCH_DELAY_BOOT"}, argName: "mins", help: "delay boot for desired node features", set: ignore("delay-boot", checkTime("delay-boot"))},
		{Spec: Spec{Long: "chdir", Short: 'D', Arg: RequiredArg}, argName: "directory", help: "set working directory for batch script", set: setChdir},
		{Spec: Spec{Long: "error", Short: 'e', Arg: RequiredArg}, argName: "err", help: "file for batch script's standard error", set: str(func(s *api.JobSpec) *string { return &s.Stderr })},
		{Spec: Spec{Long: "export", Arg: RequiredArg}, env: []string{"SBATCH_EXPORT"}, argName: "names", help: "specify environment variables to export (ALL, NONE or a list)", set: setExport},
		{Spec: Spec{Long: "export-file", Arg: RequiredArg}, argName: "file|fd", help: "specify environment variables file or file descriptor to export", set: ignore("export-file", nonEmpty("export-file"))},
		{Spec: Spec{Long: "get-user-env", Arg: OptionalArg}, env: []string{"SBATCH_GET_USER_ENV"}, argName: "timeout][mode", help: "load environment from local cluster", set: ignore("get-user-env", checkGetUserEnv)},
		{Spec: Spec{Long: "gid", Arg: RequiredArg}, argName: "group_id", help: "group ID to run job as (user root only)", set: ignore("gid", nonEmpty("gid"))},
		{Spec: Spec{Long: "gres", Arg: RequiredArg}, env: []string{"SBATCH_GRES"}, argName: "list", help: "required generic resources (gpu[:type][:count], shard:n, mps:pct)", set: setGres},
		{Spec: Spec{Long: "gres-flags", Arg: RequiredArg}, env: []string{"SBATCH_GRES_FLAGS"}, argName: "opts", help: "flags related to GRES management", set: ignore("gres-flags", enumCheck("gres-flags", "disable-binding", "enforce-binding"))},
		{Spec: Spec{Long: "hold", Short: 'H', Arg: NoArg}, help: "submit job in held state", set: func(st *state, _ string, _ bool) error { st.spec.Hold = true; return nil }},
		{Spec: Spec{Long: "ignore-pbs", Arg: NoArg}, env: []string{"SBATCH_IGNORE_PBS"}, help: "ignore #PBS and #BSUB options in the batch script", set: func(*state, string, bool) error { return nil }},
		{Spec: Spec{Long: "input", Short: 'i', Arg: RequiredArg}, argName: "in", help: "file for batch script's standard input", set: str(func(s *api.JobSpec) *string { return &s.Stdin })},
		{Spec: Spec{Long: "job-name", Short: 'J', Arg: RequiredArg}, env: []string{"SBATCH_JOB_NAME"}, argName: "jobname", help: "name of job", set: str(func(s *api.JobSpec) *string { return &s.Name })},
		{Spec: Spec{Long: "no-kill", Short: 'k', Arg: OptionalArg}, env: []string{"SBATCH_NO_KILL"}, argName: "off", help: "do not kill job on node failure", set: setNoKill},
		{Spec: Spec{Long: "licenses", Short: 'L', Arg: RequiredArg}, argName: "names", help: "required license, comma separated", set: ignore("licenses", checkLicenses)},
		{Spec: Spec{Long: "clusters", Short: 'M', Arg: RequiredArg, ID: "clusters"}, env: []string{"SBATCH_CLUSTERS", "SLURM_CLUSTERS"}, argName: "names", help: "comma separated list of clusters to issue commands to", set: ignore("clusters", nonEmpty("clusters"))},
		{Spec: Spec{Long: "cluster", Arg: RequiredArg, ID: "clusters"}, hidden: true, set: ignore("clusters", nonEmpty("cluster"))},
		{Spec: Spec{Long: "distribution", Short: 'm', Arg: RequiredArg}, env: []string{"SBATCH_DISTRIBUTION"}, argName: "type", help: "distribution method for processes to nodes (type = block|cyclic|arbitrary)", set: ignore("distribution", checkDistribution)},
		{Spec: Spec{Long: "mail-type", Arg: RequiredArg}, argName: "type", help: "notify on state change: BEGIN, END, FAIL or ALL", set: setMailType},
		{Spec: Spec{Long: "mail-user", Arg: RequiredArg}, argName: "user", help: "who to send email notification for job state changes", set: str(func(s *api.JobSpec) *string { return &s.MailUser })},
		{Spec: Spec{Long: "mcs-label", Arg: RequiredArg}, argName: "mcs", help: "mcs label if mcs plugin mcs/group is used", set: ignore("mcs-label", nonEmpty("mcs-label"))},
		{Spec: Spec{Long: "ntasks", Short: 'n', Arg: RequiredArg}, argName: "ntasks", help: "number of tasks to run", set: setInt("ntasks", func(s *api.JobSpec) *int { return &s.Tasks })},
		{Spec: Spec{Long: "nice", Arg: OptionalArg}, argName: "value", help: "decrease scheduling priority by value", set: setNice},
		{Spec: Spec{Long: "no-requeue", Arg: NoArg}, env: []string{"SBATCH_NO_REQUEUE"}, help: "if set, do not permit the job to be requeued", set: setRequeue(false)},
		{Spec: Spec{Long: "ntasks-per-node", Arg: RequiredArg}, argName: "n", help: "number of tasks to invoke on each node", set: setInt("ntasks-per-node", func(s *api.JobSpec) *int { return &s.TasksPerNode })},
		{Spec: Spec{Long: "nodes", Short: 'N', Arg: RequiredArg}, argName: "N", help: "number of nodes on which to run (N = min[-max])", set: setNodes},
		{Spec: Spec{Long: "output", Short: 'o', Arg: RequiredArg}, argName: "out", help: "file for batch script's standard output", set: str(func(s *api.JobSpec) *string { return &s.Stdout })},
		{Spec: Spec{Long: "overcommit", Short: 'O', Arg: NoArg}, env: []string{"SBATCH_OVERCOMMIT"}, help: "overcommit resources", set: ignore("overcommit", noCheck)},
		{Spec: Spec{Long: "partition", Short: 'p', Arg: RequiredArg}, env: []string{"SBATCH_PARTITION"}, argName: "partition", help: "partition requested", set: str(func(s *api.JobSpec) *string { return &s.Partition })},
		{Spec: Spec{Long: "parsable", Arg: NoArg}, help: "outputs only the jobid on successful submission", set: func(st *state, _ string, _ bool) error { st.req.Parsable = true; return nil }},
		{Spec: Spec{Long: "power", Arg: RequiredArg}, env: []string{"SBATCH_POWER"}, argName: "flags", help: "power management options", set: ignore("power", listCheck("power", "level"))},
		{Spec: Spec{Long: "prefer", Arg: RequiredArg}, argName: "list", help: "features desired but not required by the job", set: ignore("prefer", nonEmpty("prefer"))},
		{Spec: Spec{Long: "priority", Arg: RequiredArg}, argName: "value", help: "priority level of the job, 1 (lowest) to 10; users may only lower theirs", set: setPriority},
		{Spec: Spec{Long: "profile", Arg: RequiredArg}, env: []string{"SBATCH_PROFILE"}, argName: "value", help: "enable acct_gather_profile for detailed data (all, none, or energy,lustre,network,task)", set: ignore("profile", checkProfile)},
		{Spec: Spec{Long: "propagate", Arg: OptionalArg}, argName: "rlimits", help: "propagate all [or specific list of] rlimits", set: ignore("propagate", checkPropagate)},
		{Spec: Spec{Long: "qos", Short: 'q', Arg: RequiredArg}, env: []string{"SBATCH_QOS"}, argName: "qos", help: "quality of service", set: str(func(s *api.JobSpec) *string { return &s.QOS })},
		{Spec: Spec{Long: "quiet", Short: 'Q', Arg: NoArg}, help: "quiet mode (suppress informational messages)", set: func(st *state, _ string, _ bool) error { st.req.Quiet = true; return nil }},
		{Spec: Spec{Long: "reboot", Arg: NoArg}, help: "reboot compute nodes before starting job", set: ignore("reboot", noCheck)},
		{Spec: Spec{Long: "requeue", Arg: NoArg}, env: []string{"SBATCH_REQUEUE"}, help: "if set, permit the job to be requeued", set: setRequeue(true)},
		{Spec: Spec{Long: "oversubscribe", Short: 's', Arg: NoArg}, help: "over subscribe resources with other jobs", set: setOversubscribe},
		{Spec: Spec{Long: "core-spec", Short: 'S', Arg: RequiredArg}, env: []string{"SBATCH_CORE_SPEC"}, argName: "cores", help: "count of reserved cores", set: ignore("core-spec", intCheck("core-spec", false))},
		{Spec: Spec{Long: "signal", Arg: RequiredArg}, env: []string{"SBATCH_SIGNAL"}, argName: "[{R|B}:]num[@time]", help: "send signal when time limit within time seconds", set: setSignal},
		{Spec: Spec{Long: "spread-job", Arg: NoArg}, env: []string{"SBATCH_SPREAD_JOB"}, help: "spread job across as many nodes as possible", set: ignore("spread-job", noCheck)},
		{Spec: Spec{Long: "switches", Arg: RequiredArg}, env: []string{"SBATCH_REQ_SWITCH"}, argName: "max-switches{@max-time-to-wait}", help: "optimum switches and max time to wait for optimum", set: setSwitches},
		{Spec: Spec{Long: "thread-spec", Arg: RequiredArg}, env: []string{"SBATCH_THREAD_SPEC"}, argName: "threads", help: "count of reserved threads", set: ignore("thread-spec", intCheck("thread-spec", false))},
		{Spec: Spec{Long: "time", Short: 't', Arg: RequiredArg}, env: []string{"SBATCH_TIMELIMIT"}, argName: "minutes", help: "time limit", set: setTime("time", func(s *api.JobSpec) *int64 { return &s.TimeLimit })},
		{Spec: Spec{Long: "time-min", Arg: RequiredArg}, argName: "minutes", help: "minimum time limit (if distinct)", set: setTime("time-min", func(s *api.JobSpec) *int64 { return &s.TimeMin })},
		{Spec: Spec{Long: "uid", Arg: RequiredArg}, argName: "user_id", help: "user ID to run job as (user root only)", set: ignore("uid", nonEmpty("uid"))},
		{Spec: Spec{Long: "use-min-nodes", Arg: NoArg}, env: []string{"SBATCH_USE_MIN_NODES"}, help: "if a range of node counts is given, prefer the smaller count", set: ignore("use-min-nodes", noCheck)},
		{Spec: Spec{Long: "verbose", Short: 'v', Arg: NoArg}, env: []string{"SBATCH_DEBUG"}, help: "verbose mode (multiple -v's increase verbosity)", set: func(st *state, _ string, _ bool) error { st.req.Verbose++; return nil }},
		{Spec: Spec{Long: "wait", Short: 'W', Arg: NoArg}, env: []string{"SBATCH_WAIT"}, help: "wait for completion of submitted job", set: func(st *state, _ string, _ bool) error { st.req.Wait = true; return nil }},
		{Spec: Spec{Long: "wait-all-nodes", Arg: RequiredArg}, env: []string{"SBATCH_WAIT_ALL_NODES"}, argName: "0|1", help: "wait for all nodes to be booted before starting", set: ignore("wait-all-nodes", enumCheck("wait-all-nodes", "0", "1"))},
		{Spec: Spec{Long: "wckey", Arg: RequiredArg}, env: []string{"SBATCH_WCKEY"}, argName: "wckey", help: "wckey to run job under", set: ignore("wckey", nonEmpty("wckey"))},
		{Spec: Spec{Long: "wrap", Arg: RequiredArg}, argName: "command string", help: "wrap command string in a sh script and submit", set: setWrap},

		// Constraint options.
		{Spec: Spec{Long: "cluster-constraint", Arg: RequiredArg}, env: []string{"SBATCH_CLUSTER_CONSTRAINT"}, group: grpConstraint, argName: "[!]list", help: "specify a list of cluster constraints", set: ignore("cluster-constraint", nonEmpty("cluster-constraint"))},
		{Spec: Spec{Long: "contiguous", Arg: NoArg}, group: grpConstraint, help: "demand a contiguous range of nodes", set: ignore("contiguous", noCheck)},
		{Spec: Spec{Long: "constraint", Short: 'C', Arg: RequiredArg}, env: []string{"SBATCH_CONSTRAINT"}, group: grpConstraint, argName: "list", help: "specify a list of constraints", set: str(func(s *api.JobSpec) *string { return &s.Constraint })},
		{Spec: Spec{Long: "nodefile", Short: 'F', Arg: RequiredArg}, group: grpConstraint, argName: "filename", help: "request a specific list of hosts from a file", set: setNodeFile},
		{Spec: Spec{Long: "mem", Arg: RequiredArg}, env: []string{"SBATCH_MEM_PER_NODE"}, group: grpConstraint, argName: "MB", help: "minimum amount of real memory (0 = all of each node)", set: setMem(memNode)},
		{Spec: Spec{Long: "mincpus", Arg: RequiredArg}, group: grpConstraint, argName: "n", help: "minimum number of logical processors (threads) per node", set: ignore("mincpus", intCheck("mincpus", true))},
		{Spec: Spec{Long: "reservation", Arg: RequiredArg}, env: []string{"SBATCH_RESERVATION"}, group: grpConstraint, argName: "name", help: "allocate resources from named reservation", set: ignore("reservation", nonEmpty("reservation"))},
		{Spec: Spec{Long: "tmp", Arg: RequiredArg}, group: grpConstraint, argName: "MB", help: "minimum amount of temporary disk", set: ignore("tmp", checkSize("tmp"))},
		{Spec: Spec{Long: "nodelist", Short: 'w', Arg: RequiredArg}, group: grpConstraint, argName: "hosts...", help: "request a specific list of hosts", set: setNodeList},
		{Spec: Spec{Long: "exclude", Short: 'x', Arg: RequiredArg}, group: grpConstraint, argName: "hosts...", help: "exclude a specific list of hosts", set: setExclude},

		// Consumable resources related options.
		{Spec: Spec{Long: "exclusive", Arg: OptionalArg}, env: []string{"SBATCH_EXCLUSIVE"}, group: grpConsumable, argName: "user|mcs", help: "allocate nodes in exclusive mode", set: setExclusive},
		{Spec: Spec{Long: "mem-per-cpu", Arg: RequiredArg}, env: []string{"SBATCH_MEM_PER_CPU"}, group: grpConsumable, argName: "MB", help: "maximum amount of real memory per allocated cpu required by the job", set: setMem(memCPU)},

		// Affinity/Multi-core options.
		{Spec: Spec{Long: "sockets-per-node", Arg: RequiredArg}, group: grpAffinity, argName: "S", help: "number of sockets per node to allocate", set: ignore("sockets-per-node", intCheck("sockets-per-node", true))},
		{Spec: Spec{Long: "cores-per-socket", Arg: RequiredArg}, group: grpAffinity, argName: "C", help: "number of cores per socket to allocate", set: ignore("cores-per-socket", intCheck("cores-per-socket", true))},
		{Spec: Spec{Long: "threads-per-core", Arg: RequiredArg}, env: []string{"SBATCH_THREADS_PER_CORE"}, group: grpAffinity, argName: "T", help: "number of threads per core to allocate", set: ignore("threads-per-core", intCheck("threads-per-core", true))},
		{Spec: Spec{Long: "extra-node-info", Short: 'B', Arg: RequiredArg}, group: grpAffinity, argName: "S[:C[:T]]", help: "combine request of sockets per node, cores per socket and threads per core", set: ignore("extra-node-info", checkExtraNodeInfo)},
		{Spec: Spec{Long: "ntasks-per-core", Arg: RequiredArg}, group: grpAffinity, argName: "n", help: "number of tasks to invoke on each core", set: ignore("ntasks-per-core", intCheck("ntasks-per-core", true))},
		{Spec: Spec{Long: "ntasks-per-socket", Arg: RequiredArg}, group: grpAffinity, argName: "n", help: "number of tasks to invoke on each socket", set: ignore("ntasks-per-socket", intCheck("ntasks-per-socket", true))},
		{Spec: Spec{Long: "hint", Arg: RequiredArg}, env: []string{"SBATCH_HINT", "SLURM_HINT"}, group: grpAffinity, argName: "hint", help: "bind tasks according to application hints", set: ignore("hint", listCheck("hint", "compute_bound", "memory_bound", "multithread", "nomultithread"))},
		{Spec: Spec{Long: "mem-bind", Arg: RequiredArg}, env: []string{"SBATCH_MEM_BIND"}, group: grpAffinity, argName: "type", help: "bind memory to locality domains (ldom)", set: ignore("mem-bind", checkMemBind)},

		// GPU scheduling options.
		{Spec: Spec{Long: "cpus-per-gpu", Arg: RequiredArg}, env: []string{"SBATCH_CPUS_PER_GPU"}, group: grpGPU, argName: "n", help: "number of CPUs required per allocated GPU", set: setInt("cpus-per-gpu", func(s *api.JobSpec) *int { return &s.CPUsPerGPU })},
		{Spec: Spec{Long: "gpus", Short: 'G', Arg: RequiredArg}, env: []string{"SBATCH_GPUS"}, group: grpGPU, argName: "n", help: "count of GPUs required for the job ([type:]n)", set: setGPU(gpuJob)},
		{Spec: Spec{Long: "gpu-bind", Arg: RequiredArg}, env: []string{"SBATCH_GPU_BIND"}, group: grpGPU, argName: "...", help: "task to gpu binding options", set: ignore("gpu-bind", checkGPUBind)},
		{Spec: Spec{Long: "gpu-compute", Arg: RequiredArg}, env: []string{"SBATCH_GPU_COMPUTE"}, group: grpGPU, argName: "pct", help: "GPU slice (Tide): percent of a GPU's compute per slice", set: setGPUCompute},
		{Spec: Spec{Long: "gpu-mem", Arg: RequiredArg}, env: []string{"SBATCH_GPU_MEM"}, group: grpGPU, argName: "size", help: "GPU slice (Tide): GPU memory per slice ([K|M|G|T])", set: setGPUMem},
		{Spec: Spec{Long: "gpu-freq", Arg: RequiredArg}, env: []string{"SBATCH_GPU_FREQ"}, group: grpGPU, argName: "...", help: "frequency and voltage of GPUs", set: ignore("gpu-freq", checkGPUFreq)},
		{Spec: Spec{Long: "gpus-per-node", Arg: RequiredArg}, env: []string{"SBATCH_GPUS_PER_NODE"}, group: grpGPU, argName: "n", help: "number of GPUs required per allocated node ([type:]n)", set: setGPU(gpuNode)},
		{Spec: Spec{Long: "gpus-per-socket", Arg: RequiredArg}, group: grpGPU, argName: "n", help: "number of GPUs required per allocated socket", set: ignore("gpus-per-socket", func(v string, _ bool) error { _, err := parseGPUCount("gpus-per-socket", v); return err })},
		{Spec: Spec{Long: "gpus-per-task", Arg: RequiredArg}, env: []string{"SBATCH_GPUS_PER_TASK"}, group: grpGPU, argName: "n", help: "number of GPUs required per spawned task ([type:]n)", set: setGPU(gpuTask)},
		{Spec: Spec{Long: "mem-per-gpu", Arg: RequiredArg}, env: []string{"SBATCH_MEM_PER_GPU"}, group: grpGPU, argName: "n", help: "real memory required per allocated GPU", set: setMem(memGPU)},
		{Spec: Spec{Long: "ntasks-per-gpu", Arg: RequiredArg}, group: grpGPU, argName: "n", help: "number of tasks to invoke for each GPU", set: ignore("ntasks-per-gpu", intCheck("ntasks-per-gpu", true))},

		// Help options.
		{Spec: Spec{Long: "help", Short: 'h', Arg: NoArg}, group: grpHelp, help: "show this help message", early: true},
		{Spec: Spec{Long: "usage", Arg: NoArg}, group: grpHelp, help: "display brief usage message", early: true},

		// Other options.
		{Spec: Spec{Long: "kill-on-invalid-dep", Arg: RequiredArg}, group: grpOther, argName: "yes|no", help: "cancel the job if a dependency can never be satisfied", set: setKillOnInvalidDep},
		{Spec: Spec{Long: "network", Arg: RequiredArg}, env: []string{"SBATCH_NETWORK"}, group: grpOther, argName: "type", help: "specify information pertaining to the switch or network", set: ignore("network", nonEmpty("network"))},
		{Spec: Spec{Long: "open-mode", Arg: RequiredArg}, env: []string{"SBATCH_OPEN_MODE"}, group: grpOther, argName: "append|truncate", help: "open the output and error files in append or truncate mode", set: setOpenMode},
		{Spec: Spec{Long: "test-only", Arg: NoArg}, group: grpOther, help: "validate the job and estimate when it would start; submit nothing", set: func(st *state, _ string, _ bool) error { st.req.TestOnly = true; return nil }},
		{Spec: Spec{Long: "version", Short: 'V', Arg: NoArg}, group: grpOther, help: "output version information and exit", early: true},
		{Spec: Spec{Long: "container-image", Arg: RequiredArg}, env: []string{"SBATCH_CONTAINER_IMAGE"}, group: grpOther, argName: "image", help: "run the batch script in this container image (Pyxis-style)", set: setContainerImage},
		{Spec: Spec{Long: "container-mounts", Arg: RequiredArg}, env: []string{"SBATCH_CONTAINER_MOUNTS"}, group: grpOther, argName: "SRC:DST[:ro],...", help: "bind host paths into the job's container", set: setContainerMounts},
	}
	for _, o := range t {
		if o.set == nil && !o.early {
			panic("sbatch option table: --" + o.Long + " has no handler")
		}
	}
	for _, name := range []string{"deadline", "no-kill", "oversubscribe"} {
		noEffect[name] = true
	}
	return t
}

// byName lists table indices alphabetically by long name, the order of
// Slurm's own option table: getopt_long lists ambiguous candidates in
// that order, and sbatch -v lists defined options in it.
var byName = sync.OnceValue(func() []int {
	idx := make([]int, len(table()))
	for i := range idx {
		idx[i] = i
	}
	t := table()
	slices.SortStableFunc(idx, func(a, b int) int { return strings.Compare(t[a].Long, t[b].Long) })
	return idx
})

// newTableGetopt returns a getopt parser over the table in Slurm's order.
func newTableGetopt() *Getopt {
	sp := make([]Spec, len(byName()))
	for i, ti := range byName() {
		sp[i] = table()[ti].Spec
	}
	return NewGetopt(sp)
}

// parseArgs runs g over args and turns match indices back into table
// indices.
func parseArgs(g *Getopt, args []string) ([]Match, []string, error) {
	ms, rest, err := g.Parse(args)
	for i := range ms {
		ms[i].Index = byName()[ms[i].Index]
	}
	return ms, rest, err
}
