// Package slurmfmt parses and renders the output formats of Slurm's
// listing commands, so that squeue, sinfo, scontrol and sacct print
// byte-for-byte what scripts written for Slurm expect.
//
// Two syntaxes are supported: the short one of -o/--format
// ("%.18i %.9P %R": a literal prefix, then %[.][width]X items each followed
// by literal text) and the long one of -O/--Format
// ("JobID:10,Name:.9,State": comma-separated names with an optional
// :[.][width][suffix]). Both parse into a Format, which Compile turns into
// a Table for one row type. Rendering appends into byte slices and does no
// per-row parsing, formatting or allocation of its own, because squeue
// prints tens of thousands of rows in a few milliseconds.
//
// Cells follow Slurm's _print_str: left-justified values are always cut to
// the width and padded after; right-justified values are padded before and
// cut to the width only when the field allows it (node lists and durations
// are never cut). Values are escaped first (internal/termsafe: control
// characters, invalid UTF-8 and bidi controls), because they are other
// users' text, and widths apply to the escaped text; unlike Slurm, a cut
// never splits a UTF-8 character.
package slurmfmt
