package srun

import (
	"fmt"
	"io"
	"strings"

	"github.com/tide-hpc/tide/cli/getopt"
)

// The option tables of srun and salloc (Slurm 22.05's, with Tide's own
// additions). Each command line is read with getopt_long over its
// command's table, as Slurm reads it: abbreviations, bundled short
// options, "--opt=v" and "--opt v". An option srun shares with sbatch
// (shared) is then handed to sbatch's parser under its full name, which
// validates it and fills the JobSpec, so that both commands take it the
// same way; an option of srun's or salloc's own has its handler here
// (ownOptions).

// cmdSet says which commands have an option.
type cmdSet uint8

const (
	forSrun cmdSet = 1 << iota
	forSalloc
	forBoth = forSrun | forSalloc
)

// Help groups, in --help order.
const (
	grpRun = iota
	grpConstraint
	grpConsumable
	grpAffinity
	grpGPU
	grpHelp
	grpOther
)

var groupTitles = []string{"Parallel run options:", "Constraint options:", "Consumable resources related options:",
	"Affinity/Multi-core options:", "GPU scheduling options:", "Help options:", "Other options:"}

// sharedOption is an option sbatch's table has too: its getopt entry
// for srun's or salloc's table, the commands that take it, and its
// --help line.
type sharedOption struct {
	long  string
	short byte
	arg   getopt.ArgKind
	cmds  cmdSet
	group int
	arg0  string // the argument's name in --help
	help  string
	// hidden keeps it out of --help (aliases).
	hidden bool
	// acts: srun carries the option out itself (from the parsed
	// request), so sbatch's "no effect yet" warning does not apply.
	acts bool
}

// sharedOptions are srun's and salloc's options that sbatch's parser
// reads.
var sharedOptions = []sharedOption{
	{long: "account", short: 'A', arg: getopt.RequiredArg, cmds: forBoth, arg0: "name", help: "charge job to specified account"},
	{long: "queue", arg: getopt.RequiredArg, cmds: forBoth, arg0: "name", help: "queue to run in (Tide; same as --account)"},
	{long: "acctg-freq", arg: getopt.RequiredArg, cmds: forBoth, arg0: "<datatype>=<interval>", help: "accounting and profiling sampling intervals"},
	{long: "bb", arg: getopt.RequiredArg, cmds: forBoth, arg0: "<spec>", help: "burst buffer specifications"},
	{long: "bbf", arg: getopt.RequiredArg, cmds: forBoth, arg0: "<file_name>", help: "burst buffer specification file"},
	{long: "begin", short: 'b', arg: getopt.RequiredArg, cmds: forBoth, arg0: "time", help: "defer job until HH:MM MM/DD/YY"},
	{long: "cpus-per-task", short: 'c', arg: getopt.RequiredArg, cmds: forBoth, arg0: "ncpus", help: "number of cpus required per task", acts: true},
	{long: "comm", arg: getopt.RequiredArg, cmds: forBoth, arg0: "model|data", help: "parallelism (Tide): model keeps each node's GPUs in one NVLink domain"},
	{long: "comment", arg: getopt.RequiredArg, cmds: forBoth, arg0: "name", help: "arbitrary comment"},
	{long: "container", arg: getopt.RequiredArg, cmds: forBoth, arg0: "path", help: "path to OCI container bundle"},
	{long: "container-image", arg: getopt.RequiredArg, cmds: forBoth, arg0: "image", help: "run in this container image (Tide, Pyxis-style)"},
	{long: "container-mounts", arg: getopt.RequiredArg, cmds: forBoth, arg0: "SRC:DST[:ro],...", help: "bind host paths into the container (Tide)"},
	{long: "cpu-freq", arg: getopt.RequiredArg, cmds: forBoth, arg0: "min[-max[:gov]]", help: "requested cpu frequency (and governor)"},
	{long: "dependency", short: 'd', arg: getopt.RequiredArg, cmds: forBoth, arg0: "type:jobid[:time]", help: "defer job until condition on jobid is satisfied"},
	{long: "deadline", arg: getopt.RequiredArg, cmds: forBoth, arg0: "time", help: "remove the job if no ending possible before this deadline"},
	{long: "delay-boot", arg: getopt.RequiredArg, cmds: forBoth, arg0: "mins", help: "delay boot for desired node features"},
	{long: "chdir", short: 'D', arg: getopt.RequiredArg, cmds: forBoth, arg0: "path", help: "working directory of the tasks (salloc: of the command)", acts: true},
	{long: "export", arg: getopt.RequiredArg, cmds: forSrun, arg0: "env_vars|NONE", help: "environment variables passed to the tasks (ALL, NONE or a list)"},
	{long: "error", short: 'e', arg: getopt.RequiredArg, cmds: forSrun, arg0: "err", help: "where the tasks' stderr goes: file pattern, task number or none", acts: true},
	{long: "get-user-env", arg: getopt.OptionalArg, cmds: forSalloc, arg0: "timeout][mode", help: "load environment from local cluster"},
	{long: "gres", arg: getopt.RequiredArg, cmds: forBoth, arg0: "list", help: "required generic resources"},
	{long: "gres-flags", arg: getopt.RequiredArg, cmds: forBoth, arg0: "opts", help: "flags related to GRES management"},
	{long: "hold", short: 'H', arg: getopt.NoArg, cmds: forBoth, help: "submit job in held state"},
	{long: "input", short: 'i', arg: getopt.RequiredArg, cmds: forSrun, arg0: "in", help: "where the tasks' stdin comes from: all, none, a task number or a file", acts: true},
	{long: "job-name", short: 'J', arg: getopt.RequiredArg, cmds: forBoth, arg0: "jobname", help: "name of job (and step)", acts: true},
	{long: "no-kill", short: 'k', arg: getopt.OptionalArg, cmds: forBoth, arg0: "off", help: "do not kill job on node failure"},
	{long: "licenses", short: 'L', arg: getopt.RequiredArg, cmds: forBoth, arg0: "names", help: "required license, comma separated"},
	{long: "clusters", short: 'M', arg: getopt.RequiredArg, cmds: forBoth, arg0: "names", help: "comma separated list of clusters to issue commands to"},
	{long: "cluster", arg: getopt.RequiredArg, cmds: forBoth, hidden: true},
	{long: "distribution", short: 'm', arg: getopt.RequiredArg, cmds: forBoth, arg0: "type", help: "distribution of tasks to nodes (block|cyclic|plane=N|arbitrary)", acts: true},
	{long: "mail-type", arg: getopt.RequiredArg, cmds: forBoth, arg0: "type", help: "notify on state change: BEGIN, END, FAIL or ALL"},
	{long: "mail-user", arg: getopt.RequiredArg, cmds: forBoth, arg0: "user", help: "who to send email notification for job state changes"},
	{long: "mcs-label", arg: getopt.RequiredArg, cmds: forBoth, arg0: "mcs", help: "mcs label if mcs plugin mcs/group is used"},
	{long: "ntasks", short: 'n', arg: getopt.RequiredArg, cmds: forBoth, arg0: "ntasks", help: "number of tasks to run", acts: true},
	{long: "nice", arg: getopt.OptionalArg, cmds: forBoth, arg0: "value", help: "decrease scheduling priority by value"},
	{long: "ntasks-per-node", arg: getopt.RequiredArg, cmds: forBoth, arg0: "n", help: "number of tasks to invoke on each node", acts: true},
	{long: "tasks-per-node", arg: getopt.RequiredArg, cmds: forBoth, hidden: true},
	{long: "nodes", short: 'N', arg: getopt.RequiredArg, cmds: forBoth, arg0: "N", help: "number of nodes on which to run (N = min[-max])", acts: true},
	{long: "output", short: 'o', arg: getopt.RequiredArg, cmds: forSrun, arg0: "out", help: "where the tasks' stdout goes: file pattern, task number or none", acts: true},
	{long: "open-mode", arg: getopt.RequiredArg, cmds: forSrun, arg0: "append|truncate", help: "open the output and error files in append or truncate mode", acts: true},
	{long: "overcommit", short: 'O', arg: getopt.NoArg, cmds: forBoth, help: "overcommit resources: more tasks than CPUs", acts: true},
	{long: "partition", short: 'p', arg: getopt.RequiredArg, cmds: forBoth, arg0: "partition", help: "partition requested"},
	{long: "power", arg: getopt.RequiredArg, cmds: forBoth, arg0: "flags", help: "power management options"},
	{long: "prefer", arg: getopt.RequiredArg, cmds: forBoth, arg0: "list", help: "features desired but not required by the job"},
	{long: "priority", arg: getopt.RequiredArg, cmds: forBoth, arg0: "value", help: "set the priority of the job to value"},
	{long: "profile", arg: getopt.RequiredArg, cmds: forBoth, arg0: "value", help: "enable acct_gather_profile for detailed data"},
	{long: "propagate", arg: getopt.OptionalArg, cmds: forSrun, arg0: "rlimits", help: "propagate all [or specific list of] rlimits"},
	{long: "qos", short: 'q', arg: getopt.RequiredArg, cmds: forBoth, arg0: "qos", help: "quality of service"},
	{long: "quiet", short: 'Q', arg: getopt.NoArg, cmds: forBoth, help: "quiet mode (suppress informational messages)", acts: true},
	{long: "reboot", arg: getopt.NoArg, cmds: forBoth, help: "reboot compute nodes before starting job"},
	{long: "oversubscribe", short: 's', arg: getopt.NoArg, cmds: forBoth, help: "over-subscribe resources with other jobs"},
	{long: "core-spec", short: 'S', arg: getopt.RequiredArg, cmds: forBoth, arg0: "cores", help: "count of reserved cores"},
	{long: "signal", arg: getopt.RequiredArg, cmds: forBoth, arg0: "[R:]num[@time]", help: "send signal when time limit within time seconds"},
	{long: "spread-job", arg: getopt.NoArg, cmds: forBoth, help: "spread job across as many nodes as possible"},
	{long: "switches", arg: getopt.RequiredArg, cmds: forBoth, arg0: "max-switches{@max-time-to-wait}", help: "optimum switches and max time to wait for optimum"},
	{long: "thread-spec", arg: getopt.RequiredArg, cmds: forBoth, arg0: "threads", help: "count of reserved threads"},
	{long: "time", short: 't', arg: getopt.RequiredArg, cmds: forBoth, arg0: "minutes", help: "time limit (of a step inside an allocation: its own)", acts: true},
	{long: "time-min", arg: getopt.RequiredArg, cmds: forBoth, arg0: "minutes", help: "minimum time limit (if distinct)"},
	{long: "uid", arg: getopt.RequiredArg, cmds: forBoth, arg0: "user_id", help: "user ID to run job as (root and operators only)"},
	{long: "use-min-nodes", arg: getopt.NoArg, cmds: forBoth, help: "if a range of node counts is given, prefer the smaller count"},
	{long: "gid", arg: getopt.RequiredArg, cmds: forBoth, arg0: "group_id", help: "group ID to run job as (root and operators only)"},
	{long: "verbose", short: 'v', arg: getopt.NoArg, cmds: forBoth, help: "verbose mode (multiple -v's increase verbosity)", acts: true},
	{long: "wait-all-nodes", arg: getopt.RequiredArg, cmds: forSalloc, arg0: "0|1", help: "wait for all nodes to be booted before starting"},
	{long: "wckey", arg: getopt.RequiredArg, cmds: forBoth, arg0: "wckey", help: "wckey to run job under"},
	{long: "test-only", arg: getopt.NoArg, cmds: forSrun, help: "validate the job and estimate when it would start; run nothing", acts: true},

	{long: "cluster-constraint", arg: getopt.RequiredArg, cmds: forBoth, group: grpConstraint, arg0: "list", help: "specify a list of cluster constraints"},
	{long: "contiguous", arg: getopt.NoArg, cmds: forBoth, group: grpConstraint, help: "demand a contiguous range of nodes"},
	{long: "constraint", short: 'C', arg: getopt.RequiredArg, cmds: forBoth, group: grpConstraint, arg0: "list", help: "specify a list of constraints"},
	{long: "nodefile", short: 'F', arg: getopt.RequiredArg, cmds: forBoth, group: grpConstraint, arg0: "filename", help: "request a specific list of hosts from a file"},
	{long: "mem", arg: getopt.RequiredArg, cmds: forBoth, group: grpConstraint, arg0: "MB", help: "minimum amount of real memory (of a step: what it holds of the job's)", acts: true},
	{long: "mincpus", arg: getopt.RequiredArg, cmds: forBoth, group: grpConstraint, arg0: "n", help: "minimum number of logical processors (threads) per node"},
	{long: "reservation", arg: getopt.RequiredArg, cmds: forBoth, group: grpConstraint, arg0: "name", help: "allocate resources from named reservation"},
	{long: "tmp", arg: getopt.RequiredArg, cmds: forBoth, group: grpConstraint, arg0: "MB", help: "minimum amount of temporary disk"},
	{long: "nodelist", short: 'w', arg: getopt.RequiredArg, cmds: forBoth, group: grpConstraint, arg0: "hosts...", help: "request a specific list of hosts", acts: true},
	{long: "exclude", short: 'x', arg: getopt.RequiredArg, cmds: forBoth, group: grpConstraint, arg0: "hosts...", help: "exclude a specific list of hosts", acts: true},

	{long: "exclusive", arg: getopt.OptionalArg, cmds: forBoth, group: grpConsumable, arg0: "user|mcs", help: "allocate nodes in exclusive mode; for a step, same as --exact", acts: true},
	{long: "mem-per-cpu", arg: getopt.RequiredArg, cmds: forBoth, group: grpConsumable, arg0: "MB", help: "real memory required per allocated cpu", acts: true},

	{long: "sockets-per-node", arg: getopt.RequiredArg, cmds: forBoth, group: grpAffinity, arg0: "S", help: "number of sockets per node to allocate"},
	{long: "cores-per-socket", arg: getopt.RequiredArg, cmds: forBoth, group: grpAffinity, arg0: "C", help: "number of cores per socket to allocate"},
	{long: "threads-per-core", arg: getopt.RequiredArg, cmds: forBoth, group: grpAffinity, arg0: "T", help: "number of threads per core to allocate"},
	{long: "extra-node-info", short: 'B', arg: getopt.RequiredArg, cmds: forBoth, group: grpAffinity, arg0: "S[:C[:T]]", help: "combine request of sockets, cores and threads"},
	{long: "ntasks-per-core", arg: getopt.RequiredArg, cmds: forBoth, group: grpAffinity, arg0: "n", help: "number of tasks to invoke on each core"},
	{long: "ntasks-per-socket", arg: getopt.RequiredArg, cmds: forBoth, group: grpAffinity, arg0: "n", help: "number of tasks to invoke on each socket"},
	{long: "hint", arg: getopt.RequiredArg, cmds: forBoth, group: grpAffinity, arg0: "hint", help: "bind tasks according to application hints"},
	{long: "mem-bind", arg: getopt.RequiredArg, cmds: forBoth, group: grpAffinity, arg0: "type", help: "bind memory to locality domains (ldom)"},

	{long: "cpus-per-gpu", arg: getopt.RequiredArg, cmds: forBoth, group: grpGPU, arg0: "n", help: "number of CPUs required per allocated GPU"},
	{long: "gpus", short: 'G', arg: getopt.RequiredArg, cmds: forBoth, group: grpGPU, arg0: "n", help: "count of GPUs required for the job (of a step: what it holds)", acts: true},
	{long: "gpu-bind", arg: getopt.RequiredArg, cmds: forSalloc, group: grpGPU, arg0: "...", help: "task to gpu binding options"},
	{long: "gpu-compute", arg: getopt.RequiredArg, cmds: forBoth, group: grpGPU, arg0: "pct", help: "GPU slice (Tide): percent of a GPU's compute per slice"},
	{long: "gpu-mem", arg: getopt.RequiredArg, cmds: forBoth, group: grpGPU, arg0: "size", help: "GPU slice (Tide): GPU memory per slice"},
	{long: "gpu-freq", arg: getopt.RequiredArg, cmds: forBoth, group: grpGPU, arg0: "...", help: "frequency and voltage of GPUs"},
	{long: "gpus-per-node", arg: getopt.RequiredArg, cmds: forBoth, group: grpGPU, arg0: "n", help: "number of GPUs required per allocated node", acts: true},
	{long: "gpus-per-socket", arg: getopt.RequiredArg, cmds: forBoth, group: grpGPU, arg0: "n", help: "number of GPUs required per allocated socket"},
	{long: "gpus-per-task", arg: getopt.RequiredArg, cmds: forBoth, group: grpGPU, arg0: "n", help: "number of GPUs required per spawned task (each task's own)", acts: true},
	{long: "mem-per-gpu", arg: getopt.RequiredArg, cmds: forBoth, group: grpGPU, arg0: "n", help: "real memory required per allocated GPU"},
	{long: "ntasks-per-gpu", arg: getopt.RequiredArg, cmds: forBoth, group: grpGPU, arg0: "n", help: "number of tasks to invoke for each GPU"},

	{long: "network", arg: getopt.RequiredArg, cmds: forBoth, group: grpOther, arg0: "type", help: "specify information pertaining to the switch or network"},
}

// specFor is the getopt entry of a shared option.
func (o *sharedOption) spec() getopt.Spec {
	s := getopt.Spec{Long: o.long, Short: o.short, Arg: o.arg}
	switch o.long {
	case "queue":
		s.ID = "account"
	case "cluster":
		s.ID = "clusters"
	case "tasks-per-node":
		s.ID = "ntasks-per-node"
	}
	return s
}

// entry is one option of a command's getopt table: a shared one or one
// of the command's own.
type entry struct {
	shared *sharedOption
	own    *ownOption
}

func (e entry) spec() getopt.Spec {
	if e.shared != nil {
		return e.shared.spec()
	}
	k := getopt.NoArg
	switch e.own.arg {
	case 1:
		k = getopt.RequiredArg
	case 2:
		k = getopt.OptionalArg
	}
	return getopt.Spec{Long: e.own.long, Short: e.own.short, Arg: k, ID: e.own.id}
}

// tableOf returns command c's getopt table, sorted by long name as
// Slurm's is (getopt_long lists ambiguous candidates in that order).
func tableOf(c cmdSet) []entry {
	var out []entry
	for i := range sharedOptions {
		if sharedOptions[i].cmds&c != 0 {
			out = append(out, entry{shared: &sharedOptions[i]})
		}
	}
	for i := range ownOptions {
		if ownOptions[i].cmds&c != 0 {
			out = append(out, entry{own: &ownOptions[i]})
		}
	}
	sortEntries(out)
	return out
}

func sortEntries(es []entry) {
	name := func(e entry) string { return e.spec().Long }
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && name(es[j]) < name(es[j-1]); j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// WriteHelp prints srun's --help (salloc's when salloc is true).
func WriteHelp(w io.Writer, salloc bool) {
	if salloc {
		writeHelp(w, forSalloc)
		return
	}
	writeHelp(w, forSrun)
}

// WriteUsage prints srun's --usage (salloc's when salloc is true).
func WriteUsage(w io.Writer, salloc bool) {
	if salloc {
		writeUsage(w, forSalloc)
		return
	}
	writeUsage(w, forSrun)
}

// writeHelp prints command c's --help listing.
func writeHelp(w io.Writer, c cmdSet) {
	if c == forSalloc {
		fmt.Fprintln(w, "Usage: salloc [OPTIONS(0)...] [ : [OPTIONS(N)...]] [command(0) [args(0)...]]")
	} else {
		fmt.Fprintln(w, "Usage: srun [OPTIONS(0)... [executable(0) [args(0)...]]] [ : [OPTIONS(N)...]] executable(N) [args(N)...]")
	}
	type line struct{ head, text string }
	groups := make([][]line, len(groupTitles))
	for _, e := range tableOf(c) {
		var hidden bool
		var short byte
		var long, arg0, text string
		var kind getopt.ArgKind
		var g int
		if s := e.shared; s != nil {
			hidden, short, long, arg0, text, kind, g = s.hidden, s.short, s.long, s.arg0, s.help, s.arg, s.group
		} else {
			o := e.own
			hidden, short, long, arg0, text, g = o.hidden || o.help == "", o.short, o.long, o.arg0, o.help, o.group
			kind = e.spec().Arg
		}
		if hidden {
			continue
		}
		head := "      --" + long
		if short != 0 {
			head = fmt.Sprintf("  -%c, --%s", short, long)
		}
		switch kind {
		case getopt.RequiredArg:
			head += "=" + arg0
		case getopt.OptionalArg:
			if arg0 != "" {
				head += "[=" + arg0 + "]"
			}
		}
		groups[g] = append(groups[g], line{head, text})
	}
	for g, lines := range groups {
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", groupTitles[g])
		for _, l := range lines {
			if len(l.head) >= 30 {
				fmt.Fprintf(w, "%s\n%30s%s\n", l.head, "", l.text)
				continue
			}
			fmt.Fprintf(w, "%-30s%s\n", l.head, l.text)
		}
	}
}

// writeUsage prints command c's --usage: every option in brackets, then
// the command.
func writeUsage(w io.Writer, c cmdSet) {
	prefix := "Usage: srun "
	tail := "executable [args...]"
	if c == forSalloc {
		prefix, tail = "Usage: salloc ", "[command [args...]]"
	}
	var items []string
	for _, e := range tableOf(c) {
		s := e.spec()
		if (e.shared != nil && e.shared.hidden) || (e.own != nil && (e.own.hidden || e.own.help == "")) {
			continue
		}
		item := "--" + s.Long
		if s.Short != 0 {
			item = "-" + string(s.Short)
		}
		switch {
		case s.Arg == getopt.RequiredArg && s.Short != 0:
			item += " " + argName(e)
		case s.Arg == getopt.RequiredArg:
			item += "=" + argName(e)
		case s.Arg == getopt.OptionalArg && argName(e) != "":
			item += "[=" + argName(e) + "]"
		}
		items = append(items, "["+item+"]")
	}
	items = append(items, tail)
	pad := strings.Repeat(" ", len(prefix))
	line := prefix
	for i, it := range items {
		if i > 0 && len(line)+1+len(it) > 79 {
			fmt.Fprintln(w, strings.TrimRight(line, " "))
			line = pad
		} else if i > 0 {
			line += " "
		}
		line += it
	}
	fmt.Fprintln(w, line)
}

func argName(e entry) string {
	if e.shared != nil {
		return e.shared.arg0
	}
	return e.own.arg0
}
