// Package sacct implements `sacct`: accounting data of running and
// finished jobs, in Slurm 22.05's fixed-width, parsable (-p/-P) or JSON
// layouts. Field names, abbreviations, default widths, truncation with
// '+', the N.batch step rows and the default time window follow Slurm, so
// that scripts such as `sacct -X -j 42 -P -n --format=JobID,State,ExitCode`
// read the same answer from Tide.
package sacct
