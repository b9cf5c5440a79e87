// Package cgroup gives a process job the fences a container gets from
// runc: a cgroup of its own under a configurable parent, with CPU quota
// and cpuset, memory (and swap) limits, a pids limit and a device fence,
// the kernel's OOM-kill count, the freezer for suspend, and a kill of
// every process in it, including those that left the job's process
// group. It speaks both hierarchies: cgroup v2 (one tree, controllers
// enabled through cgroup.subtree_control) and v1 (a tree per controller,
// as on hybrid hosts, where the v2 tree carries no controllers).
//
// Every path is relative to a root directory (DefaultRoot on a node), so
// tests run against a directory of plain files that looks like either
// layout, and, as root on a host whose hierarchy is writable, against the
// real one. Detect says what a root offers; callers that find nothing
// usable run jobs without cgroups unless told that cgroups are required.
//
// The package imports only the standard library and golang.org/x/sys/unix
// (for the bpf system call number), so the small tide-stepd supervisor
// can use it without growing.
package cgroup
