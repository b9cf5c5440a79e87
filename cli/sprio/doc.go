// Package sprio implements sprio (and `tide prio`): the factors of
// pending jobs' priority. Tide orders jobs by a level (1-10, asked with
// --priority or the class's default) raised by aging, inside queues
// that share the cluster by guaranteed GPUs, so its columns are those
// factors rather than Slurm's multifactor weights: queue, class, level,
// time waited, aged level, since when the job starves, the queue's use
// of its share, and the reason the job waits.
package sprio
