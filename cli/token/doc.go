// Package token implements `tide token`, Tide's `scontrol token`: it
// asks the controller to mint a JSON Web Token and prints it as
// TIDE_JWT=<token>, for programs (portals, notebooks, curl) and for the
// CLI on hosts without MUNGE to use with the controller's TCP API
// (api_addr). The controller holds the key; the command never sees it.
package token
