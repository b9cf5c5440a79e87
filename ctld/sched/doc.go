// Package sched is Tide's pure scheduling core: Schedule takes a Snapshot
// of nodes, partitions and pending jobs plus the current time and returns
// a Plan of starts with a recorded reason for every job left pending. It
// does no I/O, reads no clock, starts no goroutines and never logs, so the
// controller and the trace simulator run the very same code.
//
// A pass orders the pending jobs, runs each through cheap gates, a chain
// of small node Filters and a best-fit choice, and takes what a started
// job uses from its working copy of the free resources. CheckFeasible is
// the same judgement against total capacity, for the controller to refuse
// impossible jobs at submit. The Policy (backfill.go) decides what jobs
// behind one that does not fit may do; PolicyBackfill (Slurm's backfill)
// and PolicyEASY plan in time (timeline.go). README.md draws the
// pipeline.
package sched
