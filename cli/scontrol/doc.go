// Package scontrol implements `scontrol`, Slurm's view-and-modify tool:
// show job|node|partition|config|hostnames|hostlist, hold, uhold,
// release, requeue, update, reconfigure, ping and version. Commands and
// show entities are matched case-insensitively and may be abbreviated as
// long as the abbreviation is unambiguous, as Slurm allows; output keeps
// Slurm 22.05's Key=Value layout so that scripts written for Slurm keep
// parsing it.
package scontrol
