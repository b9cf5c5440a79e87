// Package ui is tidectld's read-only web dashboard, served under /ui/:
// the cluster map (nodes by switch, every GPU a cell), the queue with
// reasons and planned starts, a page per job (request, placement, the
// trail, output paths, usage), and queues with the last 24 hours of
// utilisation and fragmentation.
//
// Pages are rendered on the server with html/template; the little CSS
// and JavaScript they use are embedded (go:embed), so that the
// dashboard works on clusters without Internet access and asks nothing
// of any other host (the Content-Security-Policy forbids it). Pages
// update without a reload: the script polls the page's main part every
// few seconds (?part=main, with its ETag), and pauses while the tab is
// hidden.
//
// The package decides nothing about identity or privacy: everything it
// shows comes from a Source, which the controller implements with its
// API's own rules for the caller of each request. How a browser
// authenticates (a token from `tide token` in a cookie on api_addr, or
// the unix socket through an SSH tunnel) is in docs/operations.md,
// "Dashboard".
package ui
