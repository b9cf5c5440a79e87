package noded

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

// fakeMPSControl is a stand-in for nvidia-cuda-mps-control: "-d" starts
// a sleeping "daemon" and writes its pid where the real one does; "quit"
// on stdin stops it. Every call appends a line to calls.log next to the
// script: the command, CUDA_VISIBLE_DEVICES and the two directories.
const fakeMPSControl = `#!/bin/sh
log="$(dirname "$0")/calls.log"
if [ "$1" = "-d" ]; then
	[ -d "$CUDA_MPS_PIPE_DIRECTORY" ] && [ -d "$CUDA_MPS_LOG_DIRECTORY" ] || { echo "no mps dirs" >&2; exit 1; }
	echo "start $CUDA_VISIBLE_DEVICES $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY" >>"$log"
	sleep 3600 </dev/null >/dev/null 2>&1 &
	echo $! >"$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
	exit 0
fi
read cmd
echo "$cmd $CUDA_VISIBLE_DEVICES $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY" >>"$log"
if [ "$cmd" = quit ]; then
	kill "$(cat "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid")"
	rm -f "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
fi
`

// installFakeMPS puts the fake control binary first on PATH and returns
// its calls.log. Daemons a failed test leaves behind are killed (by the
// pids they wrote under stateDir) at cleanup.
func installFakeMPS(t *testing.T, stateDir string) string {
	t.Helper()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, mpsControlName), []byte(fakeMPSControl), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Cleanup(func() {
		pids, _ := filepath.Glob(filepath.Join(stateDir, "mps", "gpu*", "pipe", mpsPIDFile))
		for _, p := range pids {
			b, _ := os.ReadFile(p)
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return filepath.Join(bin, "calls.log")
}

// mpsCalls reads the fake's calls, with dir shortened to "$S".
func mpsCalls(t *testing.T, log, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(strings.ReplaceAll(string(b), dir, "$S")), "\n")
}

func testMPSManager(t *testing.T, stateDir string) *mpsManager {
	t.Helper()
	cfg := DefaultConfig()
	cfg.StateDir = stateDir
	m := newMPSManager(cfg, []gres.Device{{Index: 0, UUID: "GPU-0000"}, {Index: 1, UUID: "GPU-1111"}, {Index: 2}}, slog.New(slog.DiscardHandler))
	if !m.enabled() {
		t.Fatal("MPS manager disabled with the fake control binary on PATH")
	}
	return m
}

func TestMPSManagerRefcount(t *testing.T) {
	state := t.TempDir()
	calls := installFakeMPS(t, state)
	m := testMPSManager(t, state)

	dirs := m.acquire("job 1.0", []int{1})
	want := map[int]mpsDirs{1: {Pipe: state + "/mps/gpu1/pipe", Log: state + "/mps/gpu1/log"}}
	if diff := cmp.Diff(want, dirs); diff != "" {
		t.Fatalf("acquire dirs (-want +got):\n%s", diff)
	}
	for _, d := range []string{want[1].Pipe, want[1].Log} {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
			t.Errorf("%s: %v %v, want drwxrwxrwt for job users", d, fi.Mode(), err)
		}
	}
	// A second slice job on GPU 1 shares the daemon; one on GPU 2 gets
	// its own, addressed by index (no UUID).
	m.acquire("job 2.0", []int{1, 2})
	m.release("job 1.0")
	if got := m.running(); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("running after the first job left = %v, want [1 2]", got)
	}
	m.release("job 1.0") // idempotent
	m.release("job 2.0")
	if got := m.running(); len(got) != 0 {
		t.Errorf("running after the last job left = %v, want none", got)
	}
	wantCalls := []string{
		"start GPU-1111 $S/mps/gpu1/pipe $S/mps/gpu1/log",
		"start 2 $S/mps/gpu2/pipe $S/mps/gpu2/log",
		"quit GPU-1111 $S/mps/gpu1/pipe $S/mps/gpu1/log",
		"quit 2 $S/mps/gpu2/pipe $S/mps/gpu2/log",
	}
	if diff := cmp.Diff(wantCalls, mpsCalls(t, calls, state)); diff != "" {
		t.Errorf("control calls (-want +got):\n%s", diff)
	}
	if exists(filepath.Join(state, "mps", "gpu1", mpsRecordFile)) {
		t.Error("daemon.json of a stopped daemon left behind")
	}
}

func TestMPSManagerRecover(t *testing.T) {
	tests := []struct {
		name string
		// kill ends the first tided's daemon while no tided runs.
		kill    bool
		holders map[string][]int
		// wantNew are the control calls the second tided makes.
		wantNew     []string
		wantRunning []int
	}{
		{name: "daemon of a running slice is found again", holders: map[string][]int{"job 7.0": {0}},
			wantRunning: []int{0}},
		{name: "daemon without slices left is stopped", holders: map[string][]int{},
			wantNew: []string{"quit GPU-0000 $S/mps/gpu0/pipe $S/mps/gpu0/log"}},
		{name: "daemon that died is started again for its slice", kill: true, holders: map[string][]int{"job 7.0": {0}},
			wantNew: []string{"start GPU-0000 $S/mps/gpu0/pipe $S/mps/gpu0/log"}, wantRunning: []int{0}},
		{name: "daemon that died without slices is forgotten", kill: true, holders: map[string][]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			calls := installFakeMPS(t, state)
			testMPSManager(t, state).acquire("job 7.0", []int{0})
			if tt.kill {
				b, _ := os.ReadFile(filepath.Join(state, "mps", "gpu0", "pipe", mpsPIDFile))
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				id, _ := identityOf(pid)
				syscall.Kill(pid, syscall.SIGKILL)
				waitUntil(t, "fake daemon gone", func() bool { return !id.Alive() })
			}
			before := len(mpsCalls(t, calls, state))
			m := testMPSManager(t, state) // a restarted tided
			m.recoverDaemons(tt.holders)
			got := mpsCalls(t, calls, state)[before:]
			if diff := cmp.Diff(tt.wantNew, got, cmpEmpty); diff != "" {
				t.Errorf("control calls after restart (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRunning, m.running(), cmpEmpty); diff != "" {
				t.Errorf("running (-want +got):\n%s", diff)
			}
			// Whatever runs stops with its last holder.
			for h := range tt.holders {
				m.release(h)
			}
			if len(m.running()) != 0 {
				t.Errorf("daemons %v still run after their slices left", m.running())
			}
		})
	}
}

// cmpEmpty makes nil and empty slices equal.
var cmpEmpty = cmp.Transformer("empty", func(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
})

func TestMPSDisabled(t *testing.T) {
	state := t.TempDir()
	installFakeMPS(t, state)
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{name: "mps: off", edit: func(c *Config) { c.MPS = MPSOff }},
		{name: "mps_control not executable", edit: func(c *Config) { c.MPSControl = "/dev/null" }},
		{name: "no binary on PATH", edit: func(*Config) { t.Setenv("PATH", t.TempDir()) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.StateDir = state
			tt.edit(&cfg)
			m := newMPSManager(cfg, nil, slog.New(slog.DiscardHandler))
			if m.enabled() || m.acquire("job 1.0", []int{0}) != nil {
				t.Errorf("manager enabled (control %q)", m.control)
			}
			m.release("job 1.0")
		})
	}
}

func TestWithMPSEnv(t *testing.T) {
	dirs := map[int]mpsDirs{1: {Pipe: "/run/tided/mps/gpu1/pipe", Log: "/run/tided/mps/gpu1/log"}}
	inherited := []string{"HOME=/h", "CUDA_MPS_PIPE_DIRECTORY=/elsewhere", "CUDA_MPS_LOG_DIRECTORY=/elsewhere",
		"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M,1=8192M", "TIDE_GPU_MEM_MB=8192"}
	batch := []struct {
		name string
		gpus []int
		want string
	}{
		{name: "batch script on one slice", gpus: []int{1}, want: "HOME=/h CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M,1=8192M TIDE_GPU_MEM_MB=8192 CUDA_MPS_PIPE_DIRECTORY=/run/tided/mps/gpu1/pipe CUDA_MPS_LOG_DIRECTORY=/run/tided/mps/gpu1/log"},
		{name: "batch script on two slices", gpus: []int{1, 2}, want: "HOME=/h CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M,1=8192M TIDE_GPU_MEM_MB=8192"},
	}
	for _, tt := range batch {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(withMPSEnv(inherited, tt.gpus, dirs), " "); got != tt.want {
				t.Errorf("batch env:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// TestDaemonMPS runs slice jobs through tided with the fake control
// binary: one daemon for two slice jobs on one GPU, stopped with the
// last, pointed at by the jobs, and found again by a restarted tided.
func TestDaemonMPS(t *testing.T) {
	state := t.TempDir()
	calls := installFakeMPS(t, state)
	n := newTestNode(t, state)
	stop := n.start(t)
	wd := t.TempDir()
	os.Chmod(wd, 0o777)
	slice := func(id uint64) api.LaunchSpec {
		s := n.spec(t, id, fmt.Sprintf("#!/bin/sh\necho \"$CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_PINNED_DEVICE_MEM_LIMIT\"\nwhile [ ! -e %s/end-%d ]; do sleep 0.05; done\n", wd, id), wd)
		s.Alloc = []api.NodeAlloc{{Node: "n1", CPUs: 1, GPUs: []int{1}, GPUMemMB: 8192, Tasks: 1}}
		return s
	}
	end := func(id uint64) {
		t.Helper()
		os.WriteFile(filepath.Join(wd, fmt.Sprintf("end-%d", id)), nil, 0o644)
		n.fake.waitReport(t, api.JobRef{JobID: id}, api.NodeJobFinished)
	}
	devs, err := gres.Fake("n1", n.cfg.GPUs.Fake)
	if err != nil {
		t.Fatal(err)
	}
	uuid := devs[1].UUID
	start := fmt.Sprintf("start %s $S/mps/gpu1/pipe $S/mps/gpu1/log", uuid)
	quit := fmt.Sprintf("quit %s $S/mps/gpu1/pipe $S/mps/gpu1/log", uuid)
	out := func(id uint64) string {
		p := filepath.Join(wd, fmt.Sprintf("slurm-%d.out", id))
		waitUntil(t, "job output", func() bool { b, _ := os.ReadFile(p); return len(b) > 0 })
		return strings.TrimSpace(readFile(t, p))
	}

	n.launch(slice(301), slice(302))
	wantOut := state + "/mps/gpu1/pipe 0=8192M"
	if got1, got2 := out(301), out(302); got1 != wantOut || got2 != wantOut {
		t.Fatalf("job outputs %q %q, want %q", got1, got2, wantOut)
	}
	end(301)
	if diff := cmp.Diff([]string{start}, mpsCalls(t, calls, state)); diff != "" {
		t.Fatalf("with one of two slices left (-want +got):\n%s", diff)
	}
	end(302)
	waitUntil(t, "daemon quit after the last slice", func() bool { return len(mpsCalls(t, calls, state)) == 2 })
	if diff := cmp.Diff([]string{start, quit}, mpsCalls(t, calls, state)); diff != "" {
		t.Fatalf("after both slices (-want +got):\n%s", diff)
	}

	// A tided restart while a slice runs finds the daemon again; the
	// slice's end stops it.
	n.launch(slice(303))
	out(303)
	stop()
	n.start(t)
	n.fake.waitReport(t, api.JobRef{JobID: 303}, api.NodeJobRunning)
	if diff := cmp.Diff([]string{start, quit, start}, mpsCalls(t, calls, state)); diff != "" {
		t.Fatalf("after the restart (-want +got):\n%s", diff)
	}
	end(303)
	waitUntil(t, "daemon quit after the restart", func() bool { return len(mpsCalls(t, calls, state)) == 4 })
	if got := mpsCalls(t, calls, state)[3]; got != quit {
		t.Fatalf("last call %q, want %q", got, quit)
	}
	// Whole-GPU jobs never start a daemon.
	whole := n.spec(t, 304, "#!/bin/sh\ntrue\n", wd)
	n.launch(whole)
	n.fake.waitReport(t, whole.JobRef, api.NodeJobFinished)
	if got := len(mpsCalls(t, calls, state)); got != 4 {
		t.Fatalf("%d control calls after a whole-GPU job, want 4", got)
	}
}
