// Command tidectld is Tide's controller daemon.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tide-hpc/tide/ctld"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := ctld.NewCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "tidectld:", err)
		os.Exit(1)
	}
}
