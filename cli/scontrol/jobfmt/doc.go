// Package jobfmt holds how scontrol, sacct and the events commands
// describe a job in Slurm's terms, so that all of them show it the same
// way: ISO times with "Unknown", memory with exact units ("16000M",
// "64G"), time limits with "UNLIMITED"/"Partition_Limit", the CPUs and
// memory a request implies, and the expanded output paths. (Column
// layout lives elsewhere: scontrol prints Key=Value records and sacct
// Slurm's print_fields columns.)
package jobfmt
