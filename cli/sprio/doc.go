// Package sprio implements sprio (and `tide prio`): the factors of
// pending jobs' priority. Under policy tide, when its multifactor
// priority orders the passes, sprio prints Slurm's multifactor layout
// from the controller's priority listing (multifactor.go): the weighted
// age, fair-share, job-size and Tide's length factors. Otherwise (share
// mode, where jobs go by a level (1-10, asked with --priority or the
// class's default) raised by aging, inside queues that share the
// cluster by guaranteed GPUs, or another policy) its columns are those
// factors: queue, class, level, time waited, aged level, since when the
// job starves, the queue's use of its share, and the reason the job
// waits.
package sprio
