// Package getopt is the option engine of Tide's Slurm-named commands
// (sbatch, srun, salloc, squeue, sinfo, sacct, scancel, sprio,
// scontrol). It reads command lines as glibc's getopt_long reads them
// for Slurm: long options by any unambiguous prefix, bundled short
// options ("-hv", "-j12"), "--opt=v" and "--opt v", optional arguments
// only after '=' or inside a short-option cluster, "--" ending the
// options, and glibc's own error texts. Parser is the scanner; Command
// adds what each command shares on top of it: an option table with the
// --help and --usage texts generated from it in Slurm's layouts, and
// the order in which Slurm acts on --help, --usage and --version.
//
// The package is pure: it prints only to the writers it is given and
// reads nothing from the process.
package getopt
