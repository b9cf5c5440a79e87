package cmdutil

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestExecuteRawCommand checks that a raw command gets its words as they
// are, cobra's own words included, with a context.
func TestExecuteRawCommand(t *testing.T) {
	for _, args := range [][]string{
		{"completion", "bash"},
		{"__complete", "--wr"},
		{"--help"},
		{"-h", "script.sh"},
		{},
	} {
		var got []string
		var ctxSet bool
		cmd := RawCommand("sbatch", "Submit", func(ctx context.Context, a []string) error {
			got, ctxSet = a, ctx != nil
			return nil
		})
		if err := Execute(cmd, args); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if !slices.Equal(got, args) || !ctxSet {
			t.Errorf("%q: run got %q (context %v)", args, got, ctxSet)
		}
	}
}

// TestExecuteFallsBackToCobra checks that commands cobra has work for
// (hooks, flags) still run through cobra's Execute.
func TestExecuteFallsBackToCobra(t *testing.T) {
	var order []string
	raw := RawCommand("srun", "Run", func(context.Context, []string) error {
		order = append(order, "run")
		return nil
	})
	raw.PreRunE = func(*cobra.Command, []string) error {
		order = append(order, "prerun")
		return nil
	}
	if err := Execute(raw, []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []string{"prerun", "run"}) {
		t.Errorf("hooks ran as %v", order)
	}

	var flag string
	flagged := &cobra.Command{Use: "squeue", RunE: func(*cobra.Command, []string) error { return nil }}
	flagged.Flags().StringVarP(&flag, "partition", "p", "", "")
	if err := Execute(flagged, []string{"-p", "gpu"}); err != nil || flag != "gpu" {
		t.Errorf("flags: err %v, partition %q", err, flag)
	}
}

// TestExecuteHelpError checks that a raw command asking for its help
// with pflag.ErrHelp gets it, as under cobra.
func TestExecuteHelpError(t *testing.T) {
	cmd := RawCommand("salloc", "Obtain an allocation", func(context.Context, []string) error { return pflag.ErrHelp })
	var out bytes.Buffer
	cmd.SetOut(&out)
	if err := Execute(cmd, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Obtain an allocation") {
		t.Errorf("help output %q", out.String())
	}
}

func TestLazyBuildsOnce(t *testing.T) {
	n := 0
	l := Lazy[int]{Build: func() int { n++; return 42 }}
	if n != 0 {
		t.Fatal("built before use")
	}
	if l.Get() != 42 || l.Get() != 42 || n != 1 {
		t.Errorf("Get = %d, built %d times", l.Get(), n)
	}
}
