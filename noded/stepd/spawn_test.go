package stepd

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSpawnTask runs a script through spawnTask (the cgo fork or the sh
// trampoline, whichever this build has) and checks what the job sees:
// its own pid in SLURM_TASK_PID, the environment, arguments, directory,
// umask, a session of its own, and the exit status.
func TestSpawnTask(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	body := "#!/bin/sh\necho \"$SLURM_TASK_PID $TIDE_TASK_PID $$ $(ps -o sid= -p $$ | tr -d ' ')\"\necho \"$FOO|$1|$2\"\npwd\numask\nexit 5\n"
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	out := filepath.Join(dir, "out")
	plan := &Plan{Script: script, Args: []string{"a b", "c"}, Env: []string{"FOO=bar", "PATH=" + os.Getenv("PATH")},
		WorkDir: work, Stdin: "/dev/null", Stdout: out, Umask: 0o027}
	files, err := openJobFiles(plan, true)
	if err != nil {
		t.Fatal(err)
	}
	proc, err := spawnTask(plan, files, plan.Umask, cgroupJoin{})
	files.close()
	if err != nil {
		t.Fatal(err)
	}
	ps, err := proc.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if ws := ps.Sys().(syscall.WaitStatus); ws.ExitStatus() != 5 {
		t.Errorf("exit status %d, want 5", ws.ExitStatus())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 4 {
		t.Fatalf("output %q", data)
	}
	f := strings.Fields(lines[0])
	if len(f) != 4 || f[0] != f[2] || f[1] != f[2] || f[3] != f[2] {
		t.Errorf("pid line %q: SLURM_TASK_PID, TIDE_TASK_PID and the session id must equal $$", lines[0])
	}
	if lines[1] != "bar|a b|c" {
		t.Errorf("env/args line %q", lines[1])
	}
	if lines[2] != work {
		t.Errorf("pwd %q, want %q", lines[2], work)
	}
	if lines[3] != "0027" {
		t.Errorf("umask %q, want 0027", lines[3])
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("output file mode %v (%v), want 0640", fi.Mode().Perm(), err)
	}
}

func TestSpawnTaskExecFailure(t *testing.T) {
	dir := t.TempDir()
	plan := &Plan{Script: filepath.Join(dir, "missing"), WorkDir: dir, Stdin: "/dev/null", Stdout: filepath.Join(dir, "out"), Umask: 0o022}
	files, err := openJobFiles(plan, true)
	if err != nil {
		t.Fatal(err)
	}
	defer files.close()
	proc, err := spawnTask(plan, files, plan.Umask, cgroupJoin{})
	if err == nil {
		// The trampoline build only learns it from the exit status.
		ps, _ := proc.Wait()
		if ps.Success() {
			t.Fatal("a missing script ran")
		}
		return
	}
	if !strings.Contains(err.Error(), "no such file") {
		t.Errorf("err = %v, want ENOENT", err)
	}
}

// TestSpawnTaskRlimits: the script starts under the plan's soft limits,
// a raise past the hard limit bounded by it.
func TestSpawnTaskRlimits(t *testing.T) {
	var hard syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &hard); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nulimit -c\nulimit -n\nulimit -Hn\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	plan := &Plan{Script: script, Env: []string{"PATH=" + os.Getenv("PATH")}, WorkDir: dir, Stdin: "/dev/null",
		Stdout: out, Umask: -1, Rlimits: []Rlimit{{Resource: syscall.RLIMIT_CORE, Cur: 0}, {Resource: syscall.RLIMIT_NOFILE, Cur: ^uint64(0)}}}
	files, err := openJobFiles(plan, true)
	if err != nil {
		t.Fatal(err)
	}
	proc, err := spawnTask(plan, files, plan.Umask, cgroupJoin{})
	files.close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := proc.Wait(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(data))
	if len(f) != 3 || f[0] != "0" || f[1] != f[2] {
		t.Fatalf("ulimit -c, -n, -Hn = %q: want 0 and the soft NOFILE raised to the hard one", data)
	}
}
