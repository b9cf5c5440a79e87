// Package checkpoint implements `tide checkpoint-done`: a job tells
// the controller that it finished writing a checkpoint, so that a
// preemption waiting in the job's grace time goes on at once and the
// scheduler knows how much work a later preemption would lose.
package checkpoint
