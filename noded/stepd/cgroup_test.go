package stepd

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/cgroup"
)

// TestSpawnTaskJoinsCgroup checks that the spawned job writes its own
// pid to the cgroup.procs descriptors before it execs (plain files
// stand in for them), and that a strict join that fails stops the start.
func TestSpawnTaskJoinsCgroup(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho $$\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		// broken makes the second procs "file" a directory, which the
		// child cannot write to.
		broken  bool
		strict  bool
		wantErr bool
	}{
		{name: "joins", strict: true},
		{name: "failed join not strict runs", broken: true},
		{name: "failed join strict fails", broken: true, strict: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := t.TempDir()
			var join cgroupJoin
			join.strict = tt.strict
			for i := range 2 {
				p := filepath.Join(d, fmt.Sprintf("procs%d", i))
				flag := os.O_WRONLY
				var err error
				if tt.broken && i == 1 {
					flag, err = os.O_RDONLY, os.Mkdir(p, 0o755)
				} else {
					err = os.WriteFile(p, nil, 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
				f, err := os.OpenFile(p, flag, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				join.procs = append(join.procs, f)
			}
			out := filepath.Join(d, "out")
			plan := &Plan{Script: script, Env: []string{"PATH=" + os.Getenv("PATH")}, WorkDir: d, Stdin: "/dev/null", Stdout: out, Umask: 0o022}
			files, err := openJobFiles(plan, true)
			if err != nil {
				t.Fatal(err)
			}
			proc, err := spawnTask(plan, files, plan.Umask, join)
			files.close()
			if tt.wantErr {
				if !errors.Is(err, errJoinCgroup) {
					// The sh trampoline learns it from the exit status.
					if err == nil {
						if ps, _ := proc.Wait(); ps.ExitCode() != 127 {
							t.Errorf("exit %d, want 127 from the trampoline", ps.ExitCode())
						}
						return
					}
					t.Errorf("err = %v, want errJoinCgroup", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := proc.Wait(); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(filepath.Join(d, "procs0"))
			if strings.TrimSpace(string(got)) != strconv.Itoa(proc.Pid) {
				t.Errorf("procs0 = %q, want pid %d", got, proc.Pid)
			}
			if o, _ := os.ReadFile(out); strings.TrimSpace(string(o)) != strconv.Itoa(proc.Pid) {
				t.Errorf("job ran as %q, spawned %d", o, proc.Pid)
			}
		})
	}
}

func TestSetupCgroupUnusable(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	empty := t.TempDir() // no hierarchy at all
	tests := []struct {
		name     string
		cp       *CgroupPlan
		wantErr  string
		wantNone bool
	}{
		{name: "no cgroup asked", cp: nil, wantNone: true},
		{name: "auto degrades", cp: &CgroupPlan{Root: empty, Parent: "tide", Name: "job_1"}, wantNone: true},
		{name: "required fails", cp: &CgroupPlan{Required: true, Root: empty, Parent: "tide", Name: "job_1"},
			wantErr: "cgroups are required (cgroups: required) but unusable on node n1: cgroups unavailable: no cgroup v2 or v1 hierarchy under " + empty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cg, err := setupCgroup(&Plan{Node: "n1", Cgroup: tt.cp}, log)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || (cg == nil) != tt.wantNone {
				t.Errorf("setupCgroup = %v, %v", cg, err)
			}
		})
	}
}

// TestSupervisorCgroupReal runs a process job through the supervisor in
// a real job cgroup with a 20M memory limit (root and a writable
// hierarchy with a memory controller, else skipped): the job runs in its
// cgroup, a process that left its session dies with it, exceeding the
// limit is reported as OOM, and the cgroup is gone afterwards.
func TestSupervisorCgroupReal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	h, err := cgroup.Detect(cgroup.DefaultRoot)
	if err != nil || !h.Has(cgroup.Memory) {
		t.Skipf("no memory controller (%v)", err)
	}
	parent := fmt.Sprintf("tide-stepdtest-%d", os.Getpid())
	if err := h.Prepare(parent); err != nil {
		t.Skipf("cgroups not writable: %v", err)
	}
	t.Cleanup(func() { h.RemoveParent(parent) })
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	body := "#!/bin/sh\n" +
		"cat /proc/self/cgroup\n" +
		"setsid sleep 300 </dev/null >/dev/null 2>&1 &\necho escaped $!\n" +
		"head -c 200M /dev/zero | tail\n" +
		"echo after $?\n"
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	plan := Plan{JobID: 77, Node: "n1", Script: script, Env: []string{"PATH=" + os.Getenv("PATH")}, WorkDir: dir,
		Stdin: "/dev/null", Stdout: filepath.Join(dir, "out"), Umask: -1,
		Cgroup: &CgroupPlan{Required: true, Parent: parent, Name: cgroup.JobName(77),
			Limits: cgroup.Limits{MemoryBytes: 20 << 20, CPUs: 1, Pids: 100}}}
	if err := WriteJSONNew(filepath.Join(dir, FileExec), &plan, 0o600); err != nil {
		t.Fatal(err)
	}
	st := runPlan(dir, slog.New(slog.DiscardHandler), 0o022)
	out, _ := os.ReadFile(plan.Stdout)
	if st.Error != "" || !st.OOM {
		t.Errorf("status %+v, want OOM without error; output:\n%s", st, out)
	}
	if st.Exit != (api.ExitStatus{Code: 0}) {
		t.Logf("exit %v (the script went on after the kill)", st.Exit)
	}
	rel := parent + "/" + cgroup.JobName(77)
	if !strings.Contains(string(out), ":/"+rel+"\n") {
		t.Errorf("job did not run in %s:\n%s", rel, out)
	}
	var escaped int
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "escaped "); ok {
			escaped, _ = strconv.Atoi(v)
		}
	}
	if escaped <= 0 {
		t.Fatalf("no escaped pid in output:\n%s", out)
	}
	if st, err := ReadProcStat(escaped); err == nil && st.State != 'Z' {
		t.Errorf("escaped process %d still runs (state %c)", escaped, st.State)
	}
	for _, d := range h.Paths(rel) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("job cgroup %s left behind (%v)", d, err)
		}
	}
}

// TestSetupCgroupPreparesAgain checks the cache of prepared parents: a
// parent removed after it was prepared is prepared again rather than
// failing the job's Create. Plain directories stand in for a v1 memory
// hierarchy; the kernel's control files are written by the test, so a
// parent that Prepare recreates lacks cgroup.procs and is refused by
// Prepare, which shows that it ran.
func TestSetupCgroupPreparesAgain(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	root := t.TempDir()
	parent := filepath.Join(root, "memory", "tide")
	makeParent := func() {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{filepath.Dir(parent), parent} {
			if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	makeParent()
	setup := func(id uint64) (*cgroup.Cgroup, error) {
		return setupCgroup(&Plan{Node: "n1", Cgroup: &CgroupPlan{Required: true, Root: root, Parent: "tide", Name: cgroup.JobName(id)}}, log)
	}
	for id := uint64(1); id <= 2; id++ {
		if cg, err := setup(id); err != nil || cg == nil {
			t.Fatalf("job %d: setupCgroup = %v, %v", id, cg, err)
		}
	}
	if err := os.RemoveAll(parent); err != nil {
		t.Fatal(err)
	}
	_, err := setup(3)
	if err == nil || !strings.Contains(err.Error(), "tide/cgroup.procs") {
		t.Fatalf("job 3 after the parent went away: %v, want Prepare's refusal of the recreated parent", err)
	}
	makeParent()
	if cg, err := setup(4); err != nil || cg == nil {
		t.Fatalf("job 4: setupCgroup = %v, %v", cg, err)
	}
}
