// Package sbatch is Tide's sbatch: it parses a Slurm 22.05 sbatch command
// line, the script's #SBATCH directives and the SBATCH_* environment
// (package opts does that without side effects), submits the job to the
// controller and prints what sbatch prints.
package sbatch
