package root

import (
	"strings"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/manpage"
	"github.com/tide-hpc/tide/cli/sacct"
	"github.com/tide-hpc/tide/cli/sbatch/opts"
	"github.com/tide-hpc/tide/cli/scancel"
	"github.com/tide-hpc/tide/cli/scontrol"
	"github.com/tide-hpc/tide/cli/sinfo"
	"github.com/tide-hpc/tide/cli/sprio"
	"github.com/tide-hpc/tide/cli/squeue"
	"github.com/tide-hpc/tide/cli/srun"
	"github.com/tide-hpc/tide/cli/sstat"
	"github.com/tide-hpc/tide/ctld/api"
)

// What each command completes. The options come from the tables the
// commands' parsers read (ManualOptions); what an option's argument
// names is decided here by the option's identity (its Key), the same
// for every command unless the command says otherwise.

// depKinds are --dependency's item kinds, as sbatch's parser knows them.
func depKinds() []string { return opts.DependencyTypes() }

// slurmSpec returns the completion of a Slurm-named command, or nil for
// another name. It is built when asked for (not at start: every command
// is this binary).
func slurmSpec(name string) *compSpec {
	switch name {
	case "sbatch":
		return &compSpec{options: opts.ManualOptions(), value: valueBy(submitKind), operand: filesOperand}
	case "srun":
		return &compSpec{options: srun.ManualOptions(false), value: valueBy(submitKind), operand: commandOperand}
	case "salloc":
		return &compSpec{options: srun.ManualOptions(true), value: valueBy(submitKind), operand: commandOperand}
	case "squeue":
		return &compSpec{options: squeue.ManualOptions(), permute: true, value: valueBy(commonKind)}
	case "sinfo":
		return &compSpec{options: sinfo.ManualOptions(), permute: true, value: valueBy(sinfoKind)}
	case "sacct":
		return &compSpec{options: sacct.ManualOptions(), permute: true, value: valueBy(commonKind)}
	case "sprio":
		return &compSpec{options: sprio.ManualOptions(), permute: true, value: valueBy(commonKind),
			operand: jobsOperand(api.StatePending)}
	case "sstat":
		return &compSpec{options: sstat.ManualOptions(), permute: true, value: valueBy(sstatKind)}
	case "scancel":
		return &compSpec{options: scancel.ManualOptions(), permute: true, value: valueBy(scancelKind),
			operand: jobsOperand(api.StatePending, api.StateRunning, api.StateSuspended)}
	case "scontrol":
		return &compSpec{options: scontrol.ManualOptions(), permute: true, value: valueBy(commonKind), operand: scontrolOperand}
	}
	return nil
}

// tideSpec returns the completion of a tide subcommand built on cobra's
// flags (events, queues, ...), or nil when it has none of its own.
func tideSpec(c command, f *cmdutil.Factory) *compSpec {
	var operand func(*completer, []string, string) compResult
	switch c.tide {
	case "events":
		operand = jobsOperand()
	case "checkpoint-done":
		operand = jobsOperand(api.StateRunning)
	case "queues":
		operand = func(c *completer, _ []string, cur string) compResult {
			return listOfCands(c.queueNames(), cur, false)
		}
	case "audit", "token", "ui":
	default:
		return nil
	}
	cmd := c.build(f)
	return &compSpec{options: manpage.FromFlags(cmd.Flags()), permute: true, operand: operand}
}

// valueBy completes option arguments by their kind, then by the option's
// fixed words.
func valueBy(kind func(key string) valueKind) func(*completer, *manpage.Option, string) compResult {
	return func(c *completer, o *manpage.Option, cur string) compResult {
		return c.optionValue(kind(o.Key), cur)
	}
}

// commonKind is what an option's argument names in every Slurm command.
func commonKind(key string) valueKind {
	switch key {
	case "partition", "partitions":
		return valPartitions
	case "account", "accounts", "queue":
		return valQueues
	case "qos":
		return valQOS
	case "nodelist", "exclude", "node":
		return valNodes
	case "cluster", "clusters":
		return valCluster
	case "user", "users":
		return valUsers
	case "jobs":
		return valJobs
	case "states", "state":
		return valJobStates
	case "file", "nodefile", "export-file", "bbf":
		return valFile
	case "chdir":
		return valDir
	}
	return valNone
}

// submitKind is commonKind for sbatch, srun and salloc: GPU requests,
// dependencies, output files, and --uid by user name.
func submitKind(key string) valueKind {
	switch key {
	case "gpus", "gpus-per-node", "gpus-per-task", "gpus-per-socket":
		return valGPUs
	case "gres":
		return valGres
	case "dependency":
		return valDependency
	case "output", "error", "input", "container":
		return valFile
	case "uid":
		return valUsers
	}
	return commonKind(key)
}

// sinfoKind: sinfo's -n lists nodes and -t node states.
func sinfoKind(key string) valueKind {
	switch key {
	case "nodes":
		return valNodes
	case "states":
		return valNodeStates
	}
	return commonKind(key)
}

// sstatKind: sstat's -j takes running jobs (steps of them).
func sstatKind(key string) valueKind {
	if key == "jobs" {
		return valRunningJobs
	}
	return commonKind(key)
}

// scancelKind: scancel's -s takes a signal.
func scancelKind(key string) valueKind {
	if key == "signal" {
		return valSignal
	}
	return commonKind(key)
}

// filesOperand: sbatch's script, then the script's arguments.
func filesOperand(_ *completer, _ []string, cur string) compResult {
	return compResult{Kind: compFiles, Partial: cur}
}

// commandOperand: srun's and salloc's command, then its arguments.
func commandOperand(_ *completer, prev []string, cur string) compResult {
	if len(prev) == 0 {
		return compResult{Kind: compCommands, Partial: cur}
	}
	return compResult{Kind: compFiles, Partial: cur}
}

// jobsOperand: the caller's jobs in the given states (all when none).
func jobsOperand(states ...api.JobState) func(*completer, []string, string) compResult {
	return func(c *completer, prev []string, cur string) compResult {
		var r compResult
		for _, j := range filter(c.myJobs(states...), cur) {
			if !containsWord(prev, j.Word) {
				r.Cands = append(r.Cands, j)
			}
		}
		return r
	}
}

func containsWord(ws []string, w string) bool {
	for _, x := range ws {
		if x == w {
			return true
		}
	}
	return false
}

// scontrol's words: a command, then what it acts on.
var (
	scontrolCommands = []string{"show", "hold", "uhold", "release", "requeue", "update", "ping", "version",
		"help", "reconfigure"}
	scontrolEntities = []string{"job", "node", "partition", "step", "config", "hostnames", "hostlist",
		"hostlistsorted", "licenses", "reservation"}
	scontrolJobKeys = []string{"TimeLimit=", "Name=", "Comment=", "Partition=", "Priority=", "Nice=",
		"Account=", "Dependency=", "ArrayTaskThrottle="}
	scontrolNodeStates = []string{"DRAIN", "DOWN", "RESUME", "UNDRAIN"}
)

// scontrolOperand completes scontrol's command words.
func scontrolOperand(c *completer, prev []string, cur string) compResult {
	if len(prev) == 0 {
		return listOf(scontrolCommands, cur, false)
	}
	cmd := strings.ToLower(prev[0])
	switch {
	case strings.HasPrefix("show", cmd):
		if len(prev) == 1 {
			return listOf(scontrolEntities, cur, false)
		}
		if len(prev) > 2 {
			return compResult{}
		}
		ent := strings.ToLower(prev[1])
		switch {
		case strings.HasPrefix(ent, "job") || strings.HasPrefix(ent, "step"):
			return listOfCands(c.myJobs(), cur, false)
		case strings.HasPrefix(ent, "node"):
			return listOfCands(c.nodeNames(), cur, false)
		case strings.HasPrefix(ent, "part"):
			return listOfCands(c.partitions(), cur, false)
		}
	case cmd == "hold" || cmd == "uhold" || cmd == "release":
		return jobsOperand(api.StatePending)(c, prev[1:], cur)
	case cmd == "requeue":
		return jobsOperand(api.StateRunning, api.StatePending)(c, prev[1:], cur)
	case strings.HasPrefix("update", cmd) && len(cmd) >= 2:
		return scontrolUpdate(c, prev[1:], cur)
	}
	return compResult{}
}

// scontrolUpdate completes "scontrol update JobId=... Key=value" and
// "NodeName=... State=...".
func scontrolUpdate(c *completer, prev []string, cur string) compResult {
	key, val, hasEq := strings.Cut(cur, "=")
	k := strings.ToLower(key)
	var r compResult
	switch {
	case hasEq && (k == "jobid" || k == "job"):
		r = listOfCands(c.myJobs(), val, true)
	case hasEq && (k == "nodename" || k == "node"):
		r = listOfCands(c.nodeNames(), val, true)
	case hasEq && k == "partition":
		r = listOfCands(c.partitions(), val, true)
	case hasEq && k == "account":
		r = listOfCands(c.queueNames(), val, false)
	case hasEq && k == "state":
		r = listOf(scontrolNodeStates, val, false)
	case hasEq:
		return compResult{}
	default:
		var words []string
		switch {
		case len(prev) == 0:
			words = []string{"JobId=", "NodeName="}
		case strings.HasPrefix(strings.ToLower(prev[0]), "nodename="):
			words = []string{"State=", "Reason="}
		default:
			words = scontrolJobKeys
		}
		r = listOf(words, cur, false)
		r.NoSpace = true
		return r
	}
	return r.withPrefix(key + "=")
}
