package scontrol

import (
	"fmt"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/scontrol/scontroltest"
)

func TestScratch(t *testing.T) {
	for _, args := range [][]string{{"show", "job"}, {"-d", "show", "job", "101"}, {"-o", "show", "job", "102"}, {"show", "node"}, {"-d","show","node","gpu01"}, {"show", "part"}, {"show", "config"}, {"show", "job", "999"}} {
		fake := scontroltest.Cluster()
		f, buf := clitest.Factory(fake, nil)
		cmd := newCmd(f, time.UTC)
		cmd.SetArgs(args)
		err := cmd.Execute()
		fmt.Printf("=== %v err=%v\n%s--- stderr\n%s", args, err, buf.Out.String(), buf.Err.String())
	}
}
