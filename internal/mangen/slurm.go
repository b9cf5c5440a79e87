package mangen

import (
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
)

// slurmCommand is what a Slurm-named command's page says besides its
// options: the prose is written here, the options come from the
// command's own table.
type slurmCommand struct {
	name, summary string
	synopsis      []string
	description   []string
	options       func() []manpage.Option
	// capture lists command lines whose output becomes a section of its
	// own (scontrol's command list, sacct's fields), run as the user
	// would run them: the page shows what the command prints.
	capture []captured
	seeAlso []string
}

// captured is a section made of a command's output.
type captured struct {
	title, intro string
	args         []string
	// from keeps the output from the first line that starts with it.
	from string
}

// slurmCommands are the Slurm-named commands, in SlurmNames' order.
func slurmCommands() []slurmCommand {
	return []slurmCommand{
		{
			name: "sacct", summary: "show accounting data of finished and running jobs",
			synopsis: []string{"sacct [OPTIONS]"},
			description: []string{
				"**sacct** prints the accounting records of jobs and their steps from the controller's " +
					"database, in Slurm 22.05's layouts (`-P` and `-p` for parsable output, `-o` to choose " +
					"fields, `--json` for programs). Without `-S` it shows the jobs eligible or running since " +
					"midnight; without `-a`, `-u` or `-j`, a caller other than root sees only their own.",
			},
			options: sacct.ManualOptions,
			capture: []captured{{title: "FIELDS", intro: "The fields `-o`/`--format` accepts (`sacct --helpformat`):",
				args: []string{"sacct", "--helpformat"}}},
			seeAlso: []string{"sstat(1)", "squeue(1)"},
		},
		{
			name: "salloc", summary: "obtain a job allocation and run a command in it",
			synopsis: []string{"salloc [OPTIONS...] [command [args...]]"},
			description: []string{
				"**salloc** submits a job, waits until it starts, then runs the command (default: the " +
					"user's shell) on the submit host with the job's environment (`SLURM_JOB_ID`, " +
					"`SLURM_JOB_NODELIST`, ...); `srun` inside it starts steps on the allocated nodes. When " +
					"the command exits, the allocation is released.",
				"The resource options are sbatch's, read by the same parser.",
			},
			options: func() []manpage.Option { return srun.ManualOptions(true) },
			seeAlso: []string{"srun(1)", "sbatch(1)", "scancel(1)"},
		},
		{
			name: "sbatch", summary: "submit a batch script to Tide",
			synopsis: []string{"sbatch [OPTIONS...] script [args...]", "sbatch [OPTIONS...] --wrap=command"},
			description: []string{
				"**sbatch** submits a batch script to the controller and prints `Submitted batch job N` " +
					"(only N with `--parsable`). Options are read, in increasing precedence, from `#SBATCH` " +
					"lines at the top of the script, from `SBATCH_*` environment variables (each option's " +
					"entry names its variable), and from the command line. The script runs on the first node " +
					"of the allocation, as the submitting user, with the environment of the submission " +
					"(`--export`).",
				"Options marked as accepted for compatibility are checked and ignored with a warning, so " +
					"that scripts written for Slurm run unchanged.",
			},
			options: opts.ManualOptions,
			seeAlso: []string{"squeue(1)", "scancel(1)", "srun(1)", "salloc(1)", "sacct(1)", "tide(1)"},
		},
		{
			name: "scancel", summary: "cancel or signal jobs",
			synopsis: []string{"scancel [OPTIONS] [job_id[_array_id][.step_id]...]"},
			description: []string{
				"**scancel** cancels the jobs given by id and those the filters select (`-u`, `-p`, " +
					"`-t`, `-n`, ...); filters given together select the jobs that match all of them. A " +
					"pending job is cancelled at once; a running one is sent SIGTERM and, after the " +
					"controller's `kill_wait`, SIGKILL. With `-s`, the signal is sent instead and the job " +
					"keeps running.",
			},
			options: scancel.ManualOptions,
			seeAlso: []string{"squeue(1)", "sbatch(1)", "scontrol(1)"},
		},
		{
			name: "scontrol", summary: "view and modify Tide jobs, nodes and partitions",
			synopsis: []string{"scontrol [OPTIONS] COMMAND [ARGS...]"},
			description: []string{
				"**scontrol** shows the controller's records (`show job`, `show node`, `show partition`, " +
					"...) in Slurm's `Key=Value` layout and changes them: hold, release and requeue jobs, " +
					"update a job's fields or a node's state, re-read the controller's configuration. " +
					"Commands and entities may be abbreviated.",
			},
			options: scontrol.ManualOptions,
			capture: []captured{{title: "COMMANDS", intro: "What `scontrol --help` lists:",
				args: []string{"scontrol", "--help"}, from: "  Valid <COMMAND> values"}},
			seeAlso: []string{"squeue(1)", "sinfo(1)", "tide.yaml(5)"},
		},
		{
			name: "sinfo", summary: "view information about Tide nodes and partitions",
			synopsis: []string{"sinfo [OPTIONS]"},
			description: []string{
				"**sinfo** lists partitions and their nodes grouped by state, in Slurm's layouts (`-N` one " +
					"line per node, `-l` long, `-o`/`-O` chosen fields, `-R` drain and down reasons). With " +
					"`--gpus`, Tide adds a column of allocated, idle and total GPUs.",
			},
			options: sinfo.ManualOptions,
			seeAlso: []string{"squeue(1)", "scontrol(1)"},
		},
		{
			name: "sprio", summary: "view the factors of pending jobs' priority",
			synopsis: []string{"sprio [OPTIONS] [JOBID...]"},
			description: []string{
				"**sprio** prints the factors the scheduler orders pending jobs by: the job's level, " +
					"its aging and its queue's share, and the resulting priority.",
			},
			options: sprio.ManualOptions,
			seeAlso: []string{"squeue(1)", "tide(1)"},
		},
		{
			name: "squeue", summary: "view the jobs in Tide's queue",
			synopsis: []string{"squeue [OPTIONS]"},
			description: []string{
				"**squeue** lists pending, running and completing jobs, sorted and formatted as Slurm " +
					"22.05's squeue sorts and formats them (`-o`, `-O`, `-l`, `--start`). A pending job's " +
					"REASON says why it waits; `tide events JOBID` shows the whole trail of decisions.",
			},
			options: squeue.ManualOptions,
			seeAlso: []string{"sinfo(1)", "scancel(1)", "sacct(1)", "sprio(1)", "tide(1)"},
		},
		{
			name: "srun", summary: "run a parallel job step",
			synopsis: []string{"srun [OPTIONS...] executable [args...]"},
			description: []string{
				"**srun** runs a command as a job step: inside an allocation (a batch script, `salloc`) on " +
					"the allocation's nodes, else in a new allocation it obtains and releases itself. Each " +
					"task's output is forwarded to srun's (`-l` labels it); signals sent to srun are passed " +
					"to the tasks.",
				"The resource options are sbatch's, read by the same parser; inside an allocation they " +
					"ask for a part of it.",
			},
			options: func() []manpage.Option { return srun.ManualOptions(false) },
			seeAlso: []string{"salloc(1)", "sbatch(1)", "sstat(1)"},
		},
		{
			name: "sstat", summary: "show what running job steps use",
			synopsis: []string{"sstat [OPTIONS] -j job[.step]"},
			description: []string{
				"**sstat** prints what the running steps of running jobs have used so far (CPU time, " +
					"memory, I/O), as the nodes last reported it.",
			},
			options: sstat.ManualOptions,
			capture: []captured{{title: "FIELDS", intro: "The fields `-o`/`--format` accepts (`sstat --helpformat`):",
				args: []string{"sstat", "--helpformat"}}},
			seeAlso: []string{"sacct(1)", "squeue(1)"},
		},
	}
}
