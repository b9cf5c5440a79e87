package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoGCSettings keeps the simulator's code path (tide-sim's main, the
// tide sim command, this package and the trace reader) free of garbage
// collector settings: docs/simulator.md promises that GOGC and
// GOMEMLIMIT work as for any Go program, and an override once made a
// replay of three policies take 2 GB.
func TestNoGCSettings(t *testing.T) {
	dirs := []string{".", "trace", "../cmd/tide-sim", "../cli/sim"}
	checked := 0
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			checked++
			for _, call := range []string{"SetGCPercent(", "SetMemoryLimit("} {
				if strings.Contains(string(b), call) {
					t.Errorf("%s calls debug.%s...): the user's GOGC and GOMEMLIMIT decide", f, call)
				}
			}
		}
	}
	if checked < len(dirs) {
		t.Fatalf("checked %d files in %v: the layout changed, update the list", checked, dirs)
	}
}
