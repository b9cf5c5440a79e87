package root

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
)

// childEnv makes the test binary act as tide (TestMain): "fake" against
// completionCluster, "system" with the production factory (whatever
// TIDE_SOCKET names).
const childEnv = "TIDE_COMPLETION_TEST_TIDE"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "fake":
		f, _ := clitest.Factory(completionCluster(), nil)
		f.IO = cmdutil.System()
		os.Exit(Main(os.Args, f))
	case "system":
		os.Exit(Main(os.Args, cmdutil.New()))
	}
	os.Exit(m.Run())
}

// bashSession is a directory holding tide (this test binary), the
// Slurm-named links to it and the bash completion script, and a
// working directory with a few files.
type bashSession struct {
	bin, work, script string
	env               []string
}

func newBashSession(t *testing.T, mode string, env ...string) *bashSession {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &bashSession{bin: filepath.Join(dir, "bin"), work: filepath.Join(dir, "work")}
	for _, d := range []string{s.bin, s.work, filepath.Join(s.work, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"train.sh", "train.py", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(s.work, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(self, filepath.Join(s.bin, "tide")); err != nil {
		t.Fatal(err)
	}
	for _, n := range SlurmNames() {
		if err := os.Symlink("tide", filepath.Join(s.bin, n)); err != nil {
			t.Fatal(err)
		}
	}
	// The script as `tide completion bash` prints it.
	f, bufs := clitest.Factory(completionCluster(), nil)
	if code := Main([]string{"tide", "completion", "bash"}, f); code != 0 {
		t.Fatalf("tide completion bash: exit %d: %s", code, bufs.Err.String())
	}
	s.script = filepath.Join(dir, "tide.bash")
	if err := os.WriteFile(s.script, bufs.Out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// A bare environment: nothing of the caller's shell or controller.
	s.env = append([]string{"PATH=" + s.bin + ":/usr/bin:/bin", "HOME=" + dir, "LC_ALL=C", childEnv + "=" + mode,
		"TIDE_SOCKET=" + filepath.Join(dir, "no-controller.sock")}, env...)
	return s
}

// compWordsOf splits line as bash does for COMP_WORDS: at blanks, and
// around runs of the other word-break characters (= and :).
func compWordsOf(line string) []string {
	var words []string
	for _, f := range strings.Fields(line) {
		cur := ""
		for i := 0; i < len(f); i++ {
			brk := f[i] == '=' || f[i] == ':'
			if cur != "" && brk != (cur[len(cur)-1] == '=' || cur[len(cur)-1] == ':') {
				words = append(words, cur)
				cur = ""
			}
			cur += string(f[i])
		}
		words = append(words, cur)
	}
	if strings.HasSuffix(line, " ") {
		words = append(words, "")
	}
	return words
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// complete runs real bash: source the script, find the function
// `complete -p` registered for the command, set COMP_WORDS, COMP_CWORD,
// COMP_LINE and COMP_POINT as readline would for line (cursor at its
// end), call the function and print COMPREPLY, one a line.
func (s *bashSession) complete(t *testing.T, line string) []string {
	t.Helper()
	words := compWordsOf(line)
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shq(w)
	}
	script := strings.Join([]string{
		"source " + shq(s.script),
		"spec=$(complete -p " + shq(words[0]) + ") || exit 3",
		`fn=${spec#*-F }; fn=${fn%% *}`,
		"COMP_WORDS=(" + strings.Join(q, " ") + ")",
		"COMP_CWORD=" + strconv.Itoa(len(words)-1),
		"COMP_LINE=" + shq(line),
		"COMP_POINT=${#COMP_LINE}",
		`COMPREPLY=()`,
		`"$fn" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" || exit 4`,
		`printf '%s\n' "${COMPREPLY[@]}"`,
	}, "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--norc", "--noprofile", "-c", script)
	cmd.Dir, cmd.Env = s.work, s.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("bash completing %q: %v\nstderr: %s", line, err, errb.String())
	}
	if errb.Len() > 0 {
		t.Errorf("bash completing %q wrote to stderr: %s", line, errb.String())
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) == 1 && got[0] == "" {
		return nil
	}
	return got
}

// TestBashCompletion drives the bash script as bash does, against this
// binary acting as tide with a test controller.
func TestBashCompletion(t *testing.T) {
	s := newBashSession(t, "fake")
	tests := []struct {
		line string
		want []string // exactly (sorted)
		has  []string // or at least
	}{
		// Acceptance: options of sbatch, the user's jobs for scancel.
		{line: "sbatch --gp", has: []string{"--gpus=", "--gpus-per-node=", "--gpus-per-task=", "--gpu-bind="}},
		{line: "scancel ", want: []string{"101", "102", "103", "103_1"}},
		// Bash replaces the part after '=' or ':' only.
		{line: "sbatch --partition=g", want: []string{"gpu"}},
		{line: "sbatch --partition=", want: []string{"cpu", "debug", "gpu"}},
		{line: "sbatch --gres=gpu:", want: []string{"a100:", "h100:"}},
		{line: "sbatch -p d", want: []string{"debug"}},
		{line: "squeue -t PENDING,R", want: []string{"PENDING,RUNNING"}},
		{line: "sinfo -p c", want: []string{"cpu"}},
		{line: "sstat -j 10", want: []string{"101", "103", "103_1"}},
		{line: "scontrol show node gpu", want: []string{"gpu01", "gpu02"}},
		{line: "scontrol update NodeName=gpu01 State=DR", want: []string{"DRAIN"}},
		{line: "srun --gpus-per-task=h", want: []string{"h100:"}},
		{line: "salloc --qos=tr", want: []string{"training"}},
		// File names from bash itself, after an option or as the script.
		{line: "sbatch --output=lo", want: []string{"logs"}},
		{line: "sbatch -J x tr", want: []string{"train.py", "train.sh"}},
		{line: "sbatch -Dl", want: []string{"-Dlogs"}},
		{line: "srun tid", want: []string{"tide"}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got := s.complete(t, tt.line)
			sorted := slices.Sorted(slices.Values(got))
			if tt.want != nil && !slices.Equal(sorted, tt.want) {
				t.Errorf("COMPREPLY = %q, want %q", sorted, tt.want)
			}
			for _, h := range tt.has {
				if !slices.Contains(got, h) {
					t.Errorf("COMPREPLY %q lacks %q", got, h)
				}
			}
		})
	}
}

// TestBashCompletionNoController: with no controller, or one that never
// answers, values are left out and options still complete; nothing is
// printed.
func TestBashCompletionNoController(t *testing.T) {
	dir := t.TempDir()
	mute := filepath.Join(dir, "mute.sock")
	l, err := net.Listen("unix", mute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var held []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // accepted, never answered
		}
	}()
	for _, tt := range []struct {
		name string
		env  []string
	}{
		{name: "no socket"},
		{name: "controller that never answers", env: []string{"TIDE_SOCKET=" + mute}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newBashSession(t, "system", tt.env...)
			if got := s.complete(t, "scancel "); len(got) != 0 {
				t.Errorf("scancel: COMPREPLY = %q, want none", got)
			}
			if got := s.complete(t, "sbatch --partition="); len(got) != 0 {
				t.Errorf("sbatch --partition=: COMPREPLY = %q, want none", got)
			}
			if got := s.complete(t, "sbatch --gpus-per-n"); !slices.Equal(got, []string{"--gpus-per-node="}) {
				t.Errorf("sbatch --gpus-per-n: COMPREPLY = %q", got)
			}
		})
	}
}
