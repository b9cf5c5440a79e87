// Package runtime is tided's seam between the node daemon and what runs
// a job: the Runtime interface, shaped like containerd's Task (Start,
// the exit channel Start returns, Signal, Stats, Freeze and Thaw,
// Delete, plus State, Reattach after a restart, and Close), and its
// implementations:
//
//   - Process runs a job under the shared or per-job supervisor
//     (tide-stepd, noded/stepd), which outlives tided;
//   - Containerd runs a job with a container image as a containerd
//     task, whose OCI spec is built with oci.SpecOpts-style options
//     (ctrspec.go);
//   - Fake runs nothing and is scripted by tests (end a job with an exit
//     code, fail its start, hold it before its first process, see every
//     call), so that the daemon's bookkeeping is tested without
//     processes;
//   - Unavailable refuses the jobs of a kind the node cannot run.
//
// A runtime knows nothing of the daemon: it gets a Job (the incarnation,
// its directory, its launch and what that resolves to on the node) as
// plain values, never takes the daemon's lock, and keeps the job
// directory's contract (noded/stepd): the daemon writes the directory
// and the kill markers, the runtime honours the markers and writes
// status.json when the job ends. The package imports neither noded nor
// the controller nor the CLI (internal/layers checks it).
//
// A new runtime (another container engine, a VM) implements Runtime, is
// given to the daemon in noded.Options (or chosen in its runtimeFor),
// and gets the same tests the others have: start, signal, freeze and
// thaw, stats, delete and reattach against a real job directory.
package runtime
