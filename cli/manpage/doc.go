// Package manpage describes commands for their manual pages and shell
// completion, and writes manual pages as roff (man(7) macros).
//
// The descriptions come from the option tables the commands' parsers
// read: each command package turns its own table into []Option
// (FromGetopt for the cli/getopt tables, FromFlags for cobra's flag
// sets), so that a page or a completion cannot list an option the
// parser lacks or miss one it has. The package is pure: it imports no
// command, prints only to the writers it is given, and builds nothing at
// initialisation (every CLI command links it).
package manpage
