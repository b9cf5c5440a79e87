// Package ctld is the controller daemon tidectld: it owns cluster state,
// persists it through the accounting store, serves the versioned HTTP/JSON
// API (unix socket for local clients, TCP with the cluster key for node
// daemons), and runs the scheduling loop around the pure core in
// ctld/sched.
package ctld
