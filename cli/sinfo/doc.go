// Package sinfo implements the sinfo command: partitions and nodes in
// Slurm 22.05's formats (default, -l, -N, -N -l, -s, -R, -o, -O, --json),
// plus Tide's --gpus view with a GPUS(A/I/T) column.
//
// Like Slurm, sinfo groups the nodes of each partition into records that
// share every per-node value the format shows (state, reason, GRES, …),
// prints one line per record with its nodes compressed into a hostlist,
// and with -N prints one line per node and partition.
package sinfo
