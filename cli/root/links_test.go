package root

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMakefileLinksEveryName keeps `make build`'s links and the names
// the binary answers to in step: a command added here without a link is
// unreachable as srun or sprio, and a link without a command runs the
// tide help.
func TestMakefileLinksEveryName(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Skipf("no Makefile: %v", err)
	}
	m := regexp.MustCompile(`(?m)^SLURM_LINKS\s*:=\s*(.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile has no SLURM_LINKS line")
	}
	links := strings.Fields(string(m[1]))
	slices.Sort(links)
	if !slices.Equal(links, SlurmNames()) {
		t.Errorf("Makefile SLURM_LINKS = %v, SlurmNames() = %v", links, SlurmNames())
	}
}
