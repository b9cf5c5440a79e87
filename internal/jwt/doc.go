// Package jwt makes and checks the JSON Web Tokens of Tide's TCP API
// (RFC 7519): HS256 only, with Slurm's claims (sun, iat, exp), so that
// `tide token` works as `scontrol token` does. It is written here rather
// than taken from a library because it is small and a token checker
// should accept exactly one thing: the header must name HS256 (never
// "none", never another algorithm, no key references), the signature is
// compared in constant time before any claim is read, and duplicated
// JSON members are refused.
//
// Only the controller links this package: it holds the key, mints
// tokens and verifies them; clients pass tokens on as opaque strings.
package jwt
