package steps

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepio"
	"github.com/tide-hpc/tide/noded/jobenv"
	"github.com/tide-hpc/tide/noded/stepd"
)

// TestHostedJobArrivesLate: a grant for a job the host does not list
// yet has the host sync now (Wake) and waits for the list to change.
func TestHostedJobArrivesLate(t *testing.T) {
	h := newFakeHost()
	h.unhost()
	s := startServer(t, testConfig(t), h)
	sg := stepGrant(t, s.Advertised(), nil, "/bin/echo", "late")
	time.AfterFunc(100*time.Millisecond, func() { h.host(api.JobRef{JobID: 42}, uint32(os.Getuid()), uint32(os.Getgid())) })
	if out, nodeErr := runStep(t, s, sg); nodeErr != "" || out != "late\nlate\n" {
		t.Fatalf("output %q, node error %q", out, nodeErr)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.wakes == 0 {
		t.Error("the host was not asked to sync")
	}
}

// TestStepUsageAndUnits: while a step runs the server lists its tasks
// for the host's sampler; at its end the host gets each task's usage.
func TestStepUsageAndUnits(t *testing.T) {
	h := newFakeHost()
	s := startServer(t, testConfig(t), h)
	sg := testGrant(t, s.Advertised(), time.Now().Add(time.Hour), "/bin/sh", "-c",
		`i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo up; read _`)
	c, f := dialStep(t, s, sg, stepio.StdinAll)
	if f.Type != stepio.Ready {
		t.Fatalf("first frame %s %q", f.Type, f.Payload)
	}
	var ready stepio.ReadyMsg
	if err := json.Unmarshal(f.Payload, &ready); err != nil {
		t.Fatal(err)
	}
	units := s.Units()
	if len(units) != 1 || units[0].Ref != (api.JobRef{JobID: 42}) || units[0].Step != 3 {
		t.Fatalf("units %+v", units)
	}
	want := map[int]int{ready.Pids[0]: 0, ready.Pids[1]: 1}
	if diff := cmp.Diff(want, units[0].Tasks); diff != "" {
		t.Errorf("task roots (-want +got):\n%s", diff)
	}
	stepio.WriteFrame(c, stepio.Frame{Type: stepio.StdinEOF, Task: stepio.AllTasks})
	for {
		if _, err := stepio.ReadFrame(c); err != nil {
			break
		}
	}
	waitUntil(t, "the step's usage", func() bool { return len(h.endedSteps()) == 1 })
	u := h.endedSteps()[0]
	if u.Ref != (api.JobRef{JobID: 42}) || u.Step != 3 || len(u.Tasks) != 2 || u.InJobCgroup || u.Cgroup != nil {
		t.Fatalf("usage %+v", u)
	}
	for rank, tu := range u.Tasks {
		if tu.Task != rank || tu.UserUsec+tu.SystemUsec == 0 {
			t.Errorf("task %d: %+v, want its own rank and CPU time", rank, tu)
		}
	}
	waitUntil(t, "the step gone from the units", func() bool { return len(s.Units()) == 0 })
}

// TestStepMPSFromHost: a task that sees one GPU sliced on this node is
// pointed at that GPU's MPS daemon, which the step holds through the
// host until it ends.
func TestStepMPSFromHost(t *testing.T) {
	h := newFakeHost()
	dirs := jobenv.MPSDirs{Pipe: "/run/tided/mps/gpu1/pipe", Log: "/run/tided/mps/gpu1/log"}
	h.mps = map[int]jobenv.MPSDirs{1: dirs}
	spec := &api.LaunchSpec{JobRef: api.JobRef{JobID: 42}, UserID: uint32(os.Getuid()), GroupID: uint32(os.Getgid()),
		Alloc: []api.NodeAlloc{{Node: "n1", CPUs: 2, GPUs: []int{1}, GPUMemMB: 4096, GPUComputePct: 30}}}
	h.batch = func(uint64) (*api.LaunchSpec, int, bool) { return spec, 0, true }
	s := startServer(t, testConfig(t), h)
	sg := stepGrant(t, s.Advertised(), func(g *api.StepGrant) {
		g.Nodes = []api.StepNode{{Name: "n1", Addr: s.Advertised(), Ranks: []int{0}, CPUs: 2, GPUs: [][]int{{1}}}}
		g.JobNodes, g.NTasks = []string{"n1"}, 1
	}, "sh", "-c", `echo "$CUDA_VISIBLE_DEVICES|$CUDA_MPS_PIPE_DIRECTORY|$CUDA_MPS_LOG_DIRECTORY|$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT|$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"`)
	out, nodeErr := runStep(t, s, sg)
	if nodeErr != "" {
		t.Fatal(nodeErr)
	}
	if want := "1|" + dirs.Pipe + "|" + dirs.Log + "|0=4096M|30\n"; out != want {
		t.Errorf("task env %q, want %q", out, want)
	}
	waitUntil(t, "the MPS hold released", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.released) == 1
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if !cmp.Equal(h.held[[2]uint64{42, 3}], []int{1}) || h.released[0] != [2]uint64{42, 3} {
		t.Errorf("held %v, released %v", h.held, h.released)
	}
}

// TestCloseKillsSteps: a stopping tided ends the steps that depend on
// its connections, and refuses new ones.
func TestCloseKillsSteps(t *testing.T) {
	h := newFakeHost()
	s, err := Start(testConfig(t), h)
	if err != nil {
		t.Fatal(err)
	}
	sg := testGrant(t, s.Advertised(), time.Now().Add(time.Hour), "/bin/sh", "-c", `trap "" TERM; while :; do sleep 0.05; done`)
	c, f := dialStep(t, s, sg, stepio.StdinNone)
	if f.Type != stepio.Ready {
		t.Fatalf("first frame %s %q", f.Type, f.Payload)
	}
	var ready stepio.ReadyMsg
	if err := json.Unmarshal(f.Payload, &ready); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for {
		if _, err := stepio.ReadFrame(c); err != nil {
			break
		}
	}
	for _, pid := range ready.Pids {
		waitUntil(t, "the task killed", func() bool { return syscall.Kill(-pid, 0) != nil })
	}
}

func TestPlanRlimits(t *testing.T) {
	got := PlanRlimits([]string{"SLURM_RLIMIT_CORE=0", "HOME=/h", "SLURM_RLIMIT_NOFILE=U2048", "SLURM_RLIMIT_NOPE=1"})
	want := []stepd.Rlimit{{Resource: unix.RLIMIT_CORE, Cur: 0}, {Resource: unix.RLIMIT_NOFILE, Cur: 2048}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestSignalWholeJob: a signal for a job's steps (no step ids) reaches
// every step of that incarnation here and nothing else.
func TestSignalWholeJob(t *testing.T) {
	s := testStepServer(t)
	sg := testGrant(t, s.Advertised(), time.Now().Add(time.Hour), "/bin/sh", "-c",
		`trap 'echo "got USR2 $SLURM_PROCID"; exit 0' USR2; echo ready; while :; do sleep 0.05; done`)
	c, f := dialStep(t, s, sg, stepio.StdinNone)
	if f.Type != stepio.Ready {
		t.Fatalf("first frame %s %q", f.Type, f.Payload)
	}
	var out strings.Builder
	var lines []string
	readLine := func() {
		for !strings.Contains(out.String(), "\n") {
			f, err := stepio.ReadFrame(c)
			if err != nil {
				t.Fatalf("connection ended: output %q", out.String())
			}
			if f.Type == stepio.Stdout {
				out.Write(f.Payload)
			}
		}
		line, rest, _ := strings.Cut(out.String(), "\n")
		lines = append(lines, line)
		out.Reset()
		out.WriteString(rest)
	}
	readLine()
	readLine()
	for _, other := range []api.JobRef{{JobID: 43}, {JobID: 42, Restart: 1}} {
		if n := s.Signal(other, nil, syscall.SIGUSR2); n != 0 {
			t.Errorf("a signal for job %d run %d reached %d steps", other.JobID, other.Restart, n)
		}
	}
	if n := s.Signal(api.JobRef{JobID: 42}, nil, syscall.SIGUSR2); n != 1 {
		t.Fatalf("the signal reached %d steps, want 1", n)
	}
	readLine()
	readLine()
	slices.Sort(lines)
	if diff := cmp.Diff([]string{"got USR2 0", "got USR2 1", "ready", "ready"}, lines); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
