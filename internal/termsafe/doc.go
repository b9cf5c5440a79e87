// Package termsafe escapes text that other people control, such as job
// names, comments, paths, node reasons and the controller's messages that
// echo them, so that printing it cannot drive the reader's terminal.
//
// Escape turns C0 controls (\n, \r and \t included), DEL, C1 controls
// (U+0080–U+009F), invalid UTF-8 bytes and the Unicode bidi overrides
// and isolates (U+202A–U+202E, U+2066–U+2069), which reorder text on
// screen, into short readable escapes: \n, \r, \t, \x1b, \x7f, \xff,
// \u009b, \u202e. Printable text, any script, is kept as it is, and so
// is the backslash: Slurm prints names raw, and scripts that read a name
// with a backslash in it must read the same bytes from Tide. The escaped
// form is therefore for eyes, not for parsing back; programs read the
// exact values from the JSON outputs, which EscapeJSON makes safe to
// print too without changing what they decode to.
//
// The package has no dependencies so that every printer (the CLI, the
// node tools) can use it.
package termsafe
