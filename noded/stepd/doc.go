// Package stepd is the per-job supervisor tided starts (like Slurm's
// slurmstepd), and the job-directory format it shares with tided. It
// runs in a session of its own so that it outlives a restart of tided,
// starts the batch script as the job's user, waits for it, and leaves
// status.json. It imports only the standard library and ctld/api so the
// small tide-stepd binary built from it starts in about a millisecond;
// tided's own binary can run it too (`tided stepd`) when tide-stepd is not
// installed next to tided.
package stepd
