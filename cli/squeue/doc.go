// Package squeue implements the squeue command: the job queue in Slurm
// 22.05's formats (default, -l, --start, -o, -O, --json), with Slurm's
// filters and sort order, so that scripts written against Slurm's squeue
// keep parsing Tide's. With -s/--steps it lists the running job steps
// instead, in Slurm's step formats (steps.go).
//
// Rendering is built for long queues: the format is compiled once into a
// slurmfmt.Table and every row is appended into one buffer without
// per-row parsing or fmt calls.
package squeue
