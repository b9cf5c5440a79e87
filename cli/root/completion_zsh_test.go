package root

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
)

// TestZshCompletionScript loads `tide completion zsh` in real zsh (when
// installed) and checks the part Tide adds: every link is bound to
// _tide_slurm, which hands "sbatch --gp" to cobra's _tide as "tide
// sbatch --gp", with tide found beside the link. (_tide itself, and
// what "tide __complete sbatch ..." answers, are cobra's and
// TestCobraCompletion's.)
func TestZshCompletionScript(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("zsh is not installed")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range append(SlurmNames(), "tide") {
		if err := os.WriteFile(filepath.Join(bin, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, bufs := clitest.Factory(completionCluster(), nil)
	if code := Main([]string{"tide", "completion", "zsh"}, f); code != 0 {
		t.Fatalf("tide completion zsh: exit %d: %s", code, bufs.Err.String())
	}
	script := filepath.Join(dir, "_tide")
	if err := os.WriteFile(script, bufs.Out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// compdef and _tide are stand-ins that print what they were given.
	prog := strings.Join([]string{
		`compdef() { print -r -- "compdef $*" }`,
		"source " + shq(script),
		`_tide() { print -r -- "_tide CURRENT=$CURRENT words=${(j:|:)words}" }`,
		`words=(sbatch --gp); CURRENT=2; _tide_slurm`,
		`words=(` + shq(filepath.Join(bin, "scancel")) + ` ''); CURRENT=2; _tide_slurm`,
	}, "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, zsh, "-f", "-c", prog)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + dir}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("zsh: %v\n%s", err, errb.String())
	}
	names := strings.Join(SlurmNames(), " ")
	want := "compdef _tide tide\n" +
		"compdef _tide_slurm " + names + "\n" +
		"_tide CURRENT=3 words=" + filepath.Join(bin, "tide") + "|sbatch|--gp\n" +
		"_tide CURRENT=3 words=" + filepath.Join(bin, "tide") + "|scancel|\n"
	if out.String() != want {
		t.Errorf("zsh printed\n%s\nwant\n%s\nstderr: %s", out.String(), want, errb.String())
	}
}
