// Package scontroltest builds the canned cluster that the scontrol, sacct,
// events and audit tests print: four 8-GPU nodes gpu[01-04] (gpu04
// drained), two partitions, and jobs in every state, including a 2-GPU job,
// a 2-node job, a pending job with a scheduler diagnosis and finished jobs
// that only accounting still knows. Everything is fixed (clock, ids, uids)
// so that golden files stay byte-stable.
package scontroltest
