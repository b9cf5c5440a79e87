package steps

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestTaskArgv(t *testing.T) {
	g := &api.StepGrant{Argv: []string{"conf"}, TaskArgv: [][]string{{"a", "0"}, {"b", "1"}}}
	if got := taskArgv(g, 1); !cmp.Equal(got, []string{"b", "1"}) {
		t.Fatalf("rank 1: %v", got)
	}
	if got := taskArgv(&api.StepGrant{Argv: []string{"x", "y"}}, 3); !cmp.Equal(got, []string{"x", "y"}) {
		t.Fatalf("no multi-prog: %v", got)
	}
}

func TestWithTaskExtras(t *testing.T) {
	base := []string{"A=1"}
	g := &api.StepGrant{JobID: 7, StepID: 2, NTasks: 4, Nodes: []api.StepNode{{Ranks: []int{2, 3}}},
		Env: []string{"SLURM_NNODES=3", "SLURM_NTASKS=12"}}
	tests := []struct {
		name     string
		cpuBind  string
		mpi      string
		preserve bool
		want     []string
		absent   []string
	}{
		{name: "nothing asked", want: []string{"A=1"}},
		{name: "cpu bind", cpuBind: "verbose,map_cpu:1,0",
			want: []string{"SLURM_CPU_BIND=verbose,map_cpu:1,0", "SLURM_CPU_BIND_VERBOSE=verbose", "SLURM_CPU_BIND_TYPE=map_cpu:",
				"SLURM_CPU_BIND_LIST=1,0", "TIDE_CPU_BIND_TYPE=map_cpu:"}},
		{name: "mask list in hex", cpuBind: "mask_cpu:0x3", want: []string{"SLURM_CPU_BIND=quiet,mask_cpu:0x3", "SLURM_CPU_BIND_LIST=0x3"}},
		{name: "pmi2", mpi: "pmi2", want: []string{"SLURM_MPI_TYPE=pmi2", "PMI_JOBID=7.2", "PMI_RANK=3", "PMI_SIZE=4"}, absent: []string{"PMI_FD"}},
		{name: "none", mpi: "none", want: []string{"SLURM_MPI_TYPE=none"}, absent: []string{"PMI_RANK"}},
		{name: "-E keeps srun's counts", preserve: true, want: []string{"SLURM_NNODES=3", "SLURM_NTASKS=12", "TIDE_NNODES=3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gg := *g
			gg.CPUBind, gg.MPI, gg.PreserveEnv = tt.cpuBind, tt.mpi, tt.preserve
			env := withTaskExtras(&gg, 0, 1, base)
			set := map[string]bool{}
			for _, kv := range env {
				set[kv] = true
			}
			for _, w := range tt.want {
				if !set[w] {
					t.Errorf("lacks %s: %v", w, env)
				}
			}
			for _, a := range tt.absent {
				if envValue(env, a) != "" {
					t.Errorf("has %s: %v", a, env)
				}
			}
		})
	}
}

func TestTaskCPUs(t *testing.T) {
	avail := []int{0, 1, 2, 3, 4, 5, 6, 7}
	topo := cpuTopology{socket: map[int]int{0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1},
		ldomOf: map[int]int{0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1},
		ldom:   map[int][]int{0: {0, 1, 2, 3}, 1: {4, 5, 6, 7}}}
	tests := []struct {
		bind string
		k    int
		cpt  int
		want []int
	}{
		{"none", 1, 1, nil},
		{"verbose", 1, 1, nil},
		{"cores", 1, 2, []int{2, 3}},
		{"threads", 3, 1, []int{3}},
		{"rank", 9, 1, []int{1}},
		{"map_cpu:5,6", 1, 1, []int{6}},
		{"map_cpu:5,6", 2, 1, []int{5}},
		{"mask_cpu:0x3,0xc", 1, 1, []int{2, 3}},
		{"sockets", 3, 2, []int{4, 5, 6, 7}},
		{"ldoms", 0, 1, []int{0, 1, 2, 3}},
		{"rank_ldom", 1, 1, []int{4, 5, 6, 7}},
		{"map_ldom:1", 0, 1, []int{4, 5, 6, 7}},
		{"mask_ldom:0x3", 0, 1, []int{0, 1, 2, 3, 4, 5, 6, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.bind, func(t *testing.T) {
			b, err := api.ParseCPUBind(tt.bind)
			if err != nil {
				t.Fatal(err)
			}
			if got := taskCPUs(b, tt.k, 4, tt.cpt, avail, topo); !cmp.Equal(got, tt.want) {
				t.Fatalf("task %d: %v, want %v", tt.k, got, tt.want)
			}
		})
	}
}

func TestCPUBindLines(t *testing.T) {
	tests := []struct {
		name string
		bind string
		cpus []int
		fail bool
		want string
	}{
		{name: "map", bind: "verbose,map_cpu:1", cpus: []int{1}, want: "cpu-bind=MAP  - gpu01, task  3  1 [4242]: mask 0x2 set\n"},
		{name: "cores", bind: "v,cores", cpus: []int{0, 1, 4}, want: "cpu-bind-cores=MASK - gpu01, task  3  1 [4242]: mask 0x13 set\n"},
		{name: "none", bind: "v,none", cpus: []int{0, 1, 2, 3}, want: "cpu-bind=NONE - gpu01, task  3  1 [4242]: mask 0xf\n"},
		{name: "failed", bind: "v,rank", cpus: []int{9}, fail: true, want: "cpu-bind=RANK - gpu01, task  3  1 [4242]: mask 0x200 set FAILED\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := api.ParseCPUBind(tt.bind)
			if got := cpuBindLine(b, "gpu01", 3, 1, 4242, tt.cpus, tt.fail); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	for in, want := range map[string]string{"": "0", "0": "1", "0,1,2,3": "f", "4": "10", "0,63": "8000000000000001"} {
		var cpus []int
		if in != "" {
			cpus, _ = parseCPUList(in)
		}
		if got := cpuMaskHex(cpus); got != want {
			t.Errorf("cpuMaskHex(%s) = %q, want %q", in, got, want)
		}
	}
	if got := gpuBindLine([]int{4, 5, 6, 7}, []int{6}, 2); got != "gpu-bind: usable_gres=0x4; bit_alloc=0xF; local_inx=2; global_list=6; local_list=0\n" {
		t.Errorf("gpu-bind line %q", got)
	}
}

func TestParseCPUList(t *testing.T) {
	got, err := parseCPUList("0-2,5,8-9")
	if err != nil || !cmp.Equal(got, []int{0, 1, 2, 5, 8, 9}) {
		t.Fatalf("got %v %v", got, err)
	}
	for _, bad := range []string{"x", "3-1", "1-"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestReadCPUTopology(t *testing.T) {
	root := t.TempDir()
	for cpu, sock := range map[string]string{"cpu0": "0", "cpu1": "1"} {
		dir := filepath.Join(root, "devices/system/cpu", cpu, "topology")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "physical_package_id"), []byte(sock+"\n"), 0o644)
	}
	for node, list := range map[string]string{"node0": "0", "node1": "1"} {
		dir := filepath.Join(root, "devices/system/node", node)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "cpulist"), []byte(list+"\n"), 0o644)
	}
	topo := readCPUTopology(root)
	want := cpuTopology{socket: map[int]int{0: 0, 1: 1}, ldomOf: map[int]int{0: 0, 1: 1}, ldom: map[int][]int{0: {0}, 1: {1}}}
	if diff := cmp.Diff(want, topo, cmp.AllowUnexported(cpuTopology{})); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
}

// TestTaskPrologScript runs a task through the prolog wrapper: the
// prolog's export, unset and print lines reach the task; a failing
// prolog ends the task with its status.
func TestTaskPrologScript(t *testing.T) {
	dir := t.TempDir()
	prolog := filepath.Join(dir, "prolog")
	os.WriteFile(prolog, []byte("#!/bin/sh\necho 'export  A = x y'\necho 'export B=$HOME'\necho 'print   hi there'\necho 'unset C'\necho 'export 1BAD=z'\necho 'junk'\n"), 0o755)
	cmd := withTaskProlog(&exec.Cmd{Path: "/bin/sh", Args: []string{"sh", "-c", `echo "A=$A B=$B C=${C-unset}"; env | grep -c BAD=`}}, prolog)
	cmd.Env = []string{"C=set", "PATH=/usr/bin:/bin"}
	out, _ := cmd.Output() // grep -c finds none: exit 1
	// Slurm keeps the value as written after "=", its spaces too.
	if want := "hi there\nA= x y B=$HOME C=unset\n0\n"; string(out) != want {
		t.Fatalf("output %q, want %q", out, want)
	}
	os.WriteFile(prolog, []byte("#!/bin/sh\nexit 3\n"), 0o755)
	cmd = withTaskProlog(&exec.Cmd{Path: "/bin/echo", Args: []string{"echo", "ran"}}, prolog)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || len(out) != 0 ||
		!strings.Contains(stderr.String(), "slurmstepd: error: TaskProlog failed status=3") {
		t.Fatalf("failing prolog: %v, out %q, stderr %q", err, out, stderr.String())
	}
}

func TestRunTaskEpilog(t *testing.T) {
	dir := t.TempDir()
	epilog := filepath.Join(dir, "epilog")
	os.WriteFile(epilog, []byte("#!/bin/sh\necho out $T\necho err >&2\npwd\n"), 0o755)
	var out, errb bytes.Buffer
	runTaskEpilog("epilog", dir, []string{"T=7"}, nil, &out, &errb)
	if out.String() != "out 7\n"+dir+"\n" || errb.String() != "err\n" {
		t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	runTaskEpilog(filepath.Join(dir, "missing"), dir, nil, nil, &out, &errb)
	if !strings.Contains(errb.String(), "slurmstepd: error: TaskEpilog") {
		t.Fatalf("missing epilog: stderr %q", errb.String())
	}
}

// TestRunTaskEpilogBackgroundChild: an epilog that leaves a child in
// the background (which keeps its output open) returns once the epilog
// itself exits, and the child is killed with it, as slurmstepd does.
func TestRunTaskEpilogBackgroundChild(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	epilog := filepath.Join(dir, "epilog")
	os.WriteFile(epilog, []byte("#!/bin/sh\necho before\nsleep 60 &\necho $! >"+pidFile+"\nexit 0\n"), 0o755)
	var out, errb bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		runTaskEpilog(epilog, dir, nil, nil, &out, &errb)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("runTaskEpilog waited for the epilog's background child")
	}
	if out.String() != "before\n" || errb.String() != "" {
		t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// Killed: gone, or a zombie until init reaps it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the epilog's child %d still runs", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
