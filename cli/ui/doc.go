// Package ui implements `tide ui`, the way from the command line to the
// controller's web dashboard (/ui/, ctld/ui). Over TCP (TIDE_CONTROLLER)
// it mints a token as `tide token` does and prints a sign-in link that
// carries it in the URL's fragment; over the unix socket, which a
// browser cannot reach, it prints the `ssh -L` recipe that forwards a
// workstation's port to the socket.
package ui
