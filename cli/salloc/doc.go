// Package salloc is Tide's salloc: it asks for an allocation with
// sbatch's resource options, runs a command (by default the user's
// shell) on the local machine with the allocation's SLURM_* variables
// set, so that srun inside it runs steps there, and gives the allocation
// back when the command exits.
package salloc
