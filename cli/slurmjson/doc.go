// Package slurmjson holds what the JSON outputs of the Slurm-named
// commands share: the envelope Slurm wraps every answer in (meta,
// errors, warnings, then the objects) and the value shapes of Slurm's
// two layouts.
//
// Two layouts exist because Slurm changed its own. squeue, sinfo and
// sacct --json print Slurm 22.05's (openapi/v0.0.38 and dbv0.0.38):
// plain numbers, states as words. scontrol --json did not exist in
// 22.05; it came with Slurm's data_parser plugins, so Tide prints it in
// the data_parser/v0.0.40 layout that tools reading scontrol --json
// expect: numbers that may be unset as {"set","infinite","number"},
// states and flags as lists.
package slurmjson
