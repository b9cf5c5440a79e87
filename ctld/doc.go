// Package ctld is the controller daemon tidectld: it owns cluster state,
// persists it through the accounting store, serves the versioned HTTP/JSON
// API (unix socket for local clients; for node daemons mutual TLS with
// certificates of the cluster CA (tls.go, nodejoin.go), or TCP with the
// cluster key without a CA), and runs the scheduling loop around the
// pure core in ctld/sched.
package ctld
