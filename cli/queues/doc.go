// Package queues implements `tide queues`, Tide's sshare: every queue's
// guaranteed GPUs, cap and current use (what it borrows from others and
// lends to them, its running, pending and buffered jobs), children
// indented under their parent, and with --qos the job classes.
package queues
