// Package sched is Tide's pure scheduling core: Schedule takes a Snapshot
// of nodes, partitions and pending jobs plus the current time and returns
// a Plan of starts with a recorded reason for every job left pending. It
// does no I/O, reads no clock, starts no goroutines and never logs, so the
// controller and the trace simulator run the very same code.
package sched
