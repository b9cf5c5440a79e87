// Command tided is Tide's node daemon.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/tide-hpc/tide/noded"
)

func main() {
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if noded.NewCommand().ExecuteContext(ctx) != nil {
		os.Exit(1)
	}
}
