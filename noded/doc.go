// Package noded is tided, the node daemon that runs on every GPU host.
//
// tided registers the node with tidectld (over mutual TLS with the
// certificate "tided join" got it, tls.go and join.go, or with the
// cluster key on a controller without TLS) and then long-polls the node
// sync endpoint: every request carries the state of every job the node
// knows, and every answer carries the controller's commands (launch,
// signal, kill, new time limits, acknowledgements of finished reports).
// Launches run beside the sync loop, each within launch_timeout
// (launch.go), so that no job can keep the node from reporting.
//
// Jobs run under a supervisor in a session of its own, so that
// restarting tided never touches running jobs: by default one shared
// supervisor per node ("tide-stepd stepd-serve", see shared.go and
// noded/stepd/serve.go), or one per job ("stepd --job-dir DIR") with
// supervisor: per-job. The supervisor starts the batch script through
// "stepd-exec", which drops to the job's user, opens the output files
// as that user and execs the script (for jobs of its own user it does
// that itself).
// A job with a container image runs instead as a containerd task: the
// runtime is chosen per job behind the runtime seam (noded/runtime, and
// runtime.go here for the daemon's side), and every runtime keeps the
// job directory below. srun's tasks come through the step server
// (noded/steps; steps.go here is the daemon's side of it), and the
// environment rules both share live in noded/jobenv. Neither package
// imports this one.
// Everything a job needs is written to its directory under
// <state_dir>/jobs/<jobid>.<restart>/ before anything starts, and the
// final status is written there atomically, so that neither a tided
// restart nor a controller restart loses an exit status:
//
//	launch.json  the LaunchSpec as received (time limit updated in place)
//	exec.json    what the supervisor runs: script, env, files, user
//	script       the batch script, owned by the job's user, mode 0700
//	stepd.pid    the supervisor's pid and /proc start time (shared or not)
//	pid          the job's pid (= process group) and start time
//	stepd.log    the supervisor's own log
//	killed       marker: the controller cancelled the job
//	timedout     marker: the job reached its time limit
//	signalled    marker: the --signal warning was sent
//	forgotten    marker: the controller no longer wants the job
//	frozen       marker: the job is suspended, and how (suspend.go)
//	signals      signals sent to a container job's task (ctrexit.go)
//	status.json  the final exit status, written by tmp + rename
package noded
