// Package steps is tided's srun step server (issue 7): it accepts
// srun's connections on the step listener, checks the controller's
// signed grant and that the grant's job runs here under its user
// (auth.go, issue 21), starts this node's tasks of the step as the job's
// user inside the job's fences (fence.go: the job's or the step's
// cgroup, slice limits and MPS), and streams their standard streams,
// signals and exits over the connection (internal/stepio). The
// connection is the step's lifeline: when it closes before the tasks
// end (srun died, or the job ended and took srun with it) the tasks are
// killed, SIGTERM first and SIGKILL after the kill wait, so that no task
// outlives its srun.
//
// What the server needs of the node daemon comes through Host (which
// jobs run here and as whom, a job's batch script, the user's groups,
// the MPS daemons, where usage goes) and Config; the package imports
// neither noded nor the controller (internal/layers checks it). The
// daemon starts it (Start), hands it the controller's key (LearnKey)
// and signals (Signal), samples its tasks (Units), and closes it with
// itself (Close).
package steps
