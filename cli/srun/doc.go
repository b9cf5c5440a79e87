// Package srun is Tide's srun: it runs a job step, one command in many
// tasks over the nodes of an allocation. Inside an allocation (a batch
// job, salloc, SLURM_JOB_ID or --jobid) it asks the controller for a step
// of that job; outside one it first asks for an allocation of its own,
// runs the step in it and gives it back. The tasks' standard streams,
// signals and exits travel between srun and the node daemons directly
// (internal/stepio); the controller only grants and records steps.
package srun
