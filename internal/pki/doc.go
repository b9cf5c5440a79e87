// Package pki is Tide's small certificate authority (issue 21): the
// cluster CA the controller keeps in its state directory, the
// certificates it issues (its own server certificate, and one client
// and server certificate per node, named by the node), the TLS
// configurations that check them, and the one-time join tokens a node
// presents to get its first certificate.
//
// It uses the standard library only (crypto/x509, crypto/tls); keys are
// ECDSA P-256.
//
// Roles are told apart by a URI SAN, not by host names alone: the
// controller's certificate carries ControllerURI, a node's
// NodeURI(name). A node's certificate can thus never pass for the
// controller's, nor the controller's for a node's, although one CA
// issues both.
package pki
