// Package sstat implements `sstat`: what the running steps of running
// jobs use so far (CPU time, resident and virtual memory, page faults,
// disk I/O, GPU use), as Slurm 22.05's sstat prints it. The values are
// the nodes' latest samples (every acct_gather_frequency seconds) that
// the controller keeps for each running step (GET
// /api/v1/accounting/usage?live=1), summed over the step's nodes and
// tasks; they are formatted as sacct formats a finished step's
// (cli/slurmfmt), and laid out in Slurm's fixed-width or parsable
// (-p/-P) columns, so that scripts written for Slurm, such as
// `sstat -n -P -j 42.0 -o MaxRSS,AveCPU`, read the same answer.
package sstat
