// Package stepio is the wire between srun and a node daemon for one job
// step: reading the controller's grant (its credential is made and
// checked by internal/stepcred) and the small framed protocol that carries
// the step's start, its tasks' standard streams, signals and exits over
// one TCP connection per node.
//
// A frame is a type byte, the task id (the global rank, or AllTasks) as a
// big-endian uint32, the payload length as a big-endian uint32, then the
// payload. srun opens with a Hello frame; the node answers Ready or Error
// and then streams Stdout, Stderr and Exit frames, and closes the
// connection once every local task has exited. srun sends Stdin,
// StdinEOF, Signal and Winsize frames. A connection that closes before
// the tasks ended kills them.
package stepio
