// Package cli holds Tide's command-line tools. Each Slurm-named command
// lives in its own package (cli/sbatch, cli/squeue, …); cli/root builds
// the multi-call `tide` binary that dispatches on its program name, and
// cli/cmdutil holds what they share.
package cli
