package scancel

import "github.com/tide-hpc/tide/cli/manpage"

// ManualOptions describes scancel's options for its manual page and shell
// completion: every entry of the table its parser reads, in table order,
// hidden spellings included.
func ManualOptions() []manpage.Option { return manpage.FromGetopt(command.Options) }
