// Command gen-man writes Tide's manual pages (internal/mangen) under
// -dir: man1/, man5/ and man8/. `make man` runs it from the repository's
// root.
package main

import (
	"os"

	"github.com/tide-hpc/tide/internal/mangen"
)

func main() { os.Exit(mangen.Main(os.Args[1:])) }
