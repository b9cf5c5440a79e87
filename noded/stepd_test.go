package noded

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// runSupervisor runs "tided stepd" on a prepared job directory, as tided
// does, and returns the status it wrote.
func runSupervisor(t *testing.T, plan execPlan, script string) (jobStatus, string) {
	t.Helper()
	dir := t.TempDir()
	plan.Script = filepath.Join(dir, fileScript)
	if plan.Env == nil {
		plan.Env = []string{"PATH=" + os.Getenv("PATH")}
	}
	if err := os.WriteFile(plan.Script, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeJSONAtomic(filepath.Join(dir, fileExec), &plan, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testExe, "stepd", "--job-dir", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("stepd: %v\n%s", err, out)
	}
	var st jobStatus
	if err := readJSON(filepath.Join(dir, fileStatus), &st); err != nil {
		t.Fatalf("status: %v", err)
	}
	if st.EndTime.IsZero() {
		t.Error("status has no end time")
	}
	return st, dir
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSupervisor(t *testing.T) {
	tests := []struct {
		name   string
		script string
		setup  func(t *testing.T, wd string, p *execPlan)
		// check inspects the outputs; wantExit/wantErr the status.
		wantExit api.ExitStatus
		wantErr  string
		check    func(t *testing.T, wd string, p *execPlan)
	}{
		{
			name:   "runs in work dir with task pid",
			script: "#!/bin/sh\necho \"$SLURM_TASK_PID $TIDE_TASK_PID $$\"\npwd\n",
			check: func(t *testing.T, wd string, p *execPlan) {
				lines := strings.Split(readFile(t, p.Stdout), "\n")
				f := strings.Fields(lines[0])
				if len(f) != 3 || f[0] != f[2] || f[1] != f[2] {
					t.Errorf("task pid line %q: SLURM_TASK_PID and TIDE_TASK_PID must equal $$", lines[0])
				}
				if lines[1] != wd {
					t.Errorf("pwd = %q, want %q", lines[1], wd)
				}
			},
		},
		{
			name:   "script arguments",
			script: "#!/bin/sh\necho \"$#|$1|$2\"\n",
			setup: func(t *testing.T, wd string, p *execPlan) {
				p.Args = []string{"first arg", "--second"}
			},
			check: func(t *testing.T, wd string, p *execPlan) {
				if got := readFile(t, p.Stdout); got != "2|first arg|--second\n" {
					t.Errorf("output = %q", got)
				}
			},
		},
		{
			name:     "exit code",
			script:   "#!/bin/sh\nexit 42\n",
			wantExit: api.ExitStatus{Code: 42},
		},
		{
			name:     "killed by a signal",
			script:   "#!/bin/sh\nkill -9 $$\n",
			wantExit: api.ExitStatus{Signal: 9},
		},
		{
			name:   "chdir failure goes to /tmp",
			script: "#!/bin/sh\npwd\n",
			setup: func(t *testing.T, wd string, p *execPlan) {
				p.WorkDir = "/nonexistent/workdir"
			},
			check: func(t *testing.T, wd string, p *execPlan) {
				want := "slurmstepd: error: couldn't chdir to `/nonexistent/workdir': No such file or directory: going to /tmp instead\n/tmp\n"
				if got := readFile(t, p.Stdout); got != want {
					t.Errorf("output = %q, want %q", got, want)
				}
			},
		},
		{
			name:   "stdout cannot be opened",
			script: "#!/bin/sh\necho hi\n",
			setup: func(t *testing.T, wd string, p *execPlan) {
				p.Stdout = "/nonexistent/dir/out"
			},
			wantExit: api.ExitStatus{Code: 1},
			wantErr:  "could not open stdout file /nonexistent/dir/out: no such file or directory",
		},
		{
			name:   "stdin cannot be opened",
			script: "#!/bin/sh\ncat\n",
			setup: func(t *testing.T, wd string, p *execPlan) {
				p.Stdin = filepath.Join(wd, "missing.in")
			},
			wantExit: api.ExitStatus{Code: 1},
			wantErr:  "could not open stdin file",
		},
		{
			name:     "script that cannot be executed",
			script:   "echo no interpreter line\n",
			wantExit: api.ExitStatus{Code: 1},
			wantErr:  "exec format error",
		},
		{
			name:   "truncate by default",
			script: "#!/bin/sh\necho new\n",
			setup: func(t *testing.T, wd string, p *execPlan) {
				os.WriteFile(p.Stdout, []byte("old content\n"), 0o644)
			},
			check: func(t *testing.T, wd string, p *execPlan) {
				if got := readFile(t, p.Stdout); got != "new\n" {
					t.Errorf("output = %q, want %q", got, "new\n")
				}
			},
		},
		{
			name:   "append mode",
			script: "#!/bin/sh\necho new\n",
			setup: func(t *testing.T, wd string, p *execPlan) {
				p.Append = true
				os.WriteFile(p.Stdout, []byte("old\n"), 0o644)
			},
			check: func(t *testing.T, wd string, p *execPlan) {
				if got := readFile(t, p.Stdout); got != "old\nnew\n" {
					t.Errorf("output = %q, want %q", got, "old\nnew\n")
				}
			},
		},
		{
			name:   "stderr shares stdout",
			script: "#!/bin/sh\necho out\necho err >&2\necho out2\n",
			check: func(t *testing.T, wd string, p *execPlan) {
				if got := readFile(t, p.Stdout); got != "out\nerr\nout2\n" {
					t.Errorf("output = %q", got)
				}
			},
		},
		{
			name:   "separate stderr and stdin file",
			script: "#!/bin/sh\ncat\necho err >&2\n",
			setup: func(t *testing.T, wd string, p *execPlan) {
				p.Stderr = filepath.Join(wd, "job.err")
				p.Stdin = filepath.Join(wd, "job.in")
				os.WriteFile(p.Stdin, []byte("from stdin\n"), 0o644)
			},
			check: func(t *testing.T, wd string, p *execPlan) {
				if got := readFile(t, p.Stdout); got != "from stdin\n" {
					t.Errorf("stdout = %q", got)
				}
				if got := readFile(t, p.Stderr); got != "err\n" {
					t.Errorf("stderr = %q", got)
				}
			},
		},
		{
			name:   "umask applies to output files",
			script: "#!/bin/sh\ntrue\n",
			setup: func(t *testing.T, wd string, p *execPlan) {
				p.Umask = 0o077
			},
			check: func(t *testing.T, wd string, p *execPlan) {
				info, err := os.Stat(p.Stdout)
				if err != nil {
					t.Fatal(err)
				}
				if info.Mode().Perm() != 0o600 {
					t.Errorf("output mode %o, want 600", info.Mode().Perm())
				}
			},
		},
		{
			name:   "leftover processes are killed",
			script: "#!/bin/sh\nsleep 300 &\necho $! > child.pid\n",
			check: func(t *testing.T, wd string, p *execPlan) {
				pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(wd, "child.pid"))))
				if err != nil {
					t.Fatal(err)
				}
				// SIGKILL is delivered asynchronously: give the kernel a
				// moment to end the process.
				deadline := time.Now().Add(5 * time.Second)
				for {
					st, err := readProcStat(pid)
					if err != nil || st.State == 'Z' {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("background child %d survived its job (state %c)", pid, st.State)
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wd := t.TempDir()
			p := execPlan{JobID: 1, Node: "n1", WorkDir: wd, Stdin: "/dev/null", Stdout: filepath.Join(wd, "slurm-1.out"), Umask: -1}
			if tt.setup != nil {
				tt.setup(t, wd, &p)
			}
			st, _ := runSupervisor(t, p, tt.script)
			if st.Exit != tt.wantExit {
				t.Errorf("exit = %v, want %v (error %q)", st.Exit, tt.wantExit, st.Error)
			}
			if tt.wantErr == "" && st.Error != "" || !strings.Contains(st.Error, tt.wantErr) {
				t.Errorf("error = %q, want %q", st.Error, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, wd, &p)
			}
		})
	}
}
