// Package api holds the wire types of Tide's versioned HTTP/JSON API
// (/api/v1/...), the job and node state words, pending reason codes, error
// classes and Slurm time formats. Every other package may import it; it
// imports nothing from the project except pure helpers.
package api
