package noded

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/internal/stepio"
	"github.com/tide-hpc/tide/noded/cgroup"
)

// fenceDaemon is a step listener for node n1 whose configuration edit
// changed (cgroups, GPUs); status is what Setup would have found of the
// node's cgroups ("off", or "v1 (…)").
func fenceDaemon(t *testing.T, status string, gpus []gres.Device, edit func(*Config)) *Daemon {
	t.Helper()
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Name, cfg.KillWait, cfg.StateDir = "n1", time.Second, dir
	cfg.KeyFile = writeKey(t, dir, 0o600, stepKey+"\n")
	cfg.StepAddr = "127.0.0.1:0"
	cfg.AllowRootJobs = true
	if edit != nil {
		edit(&cfg)
	}
	pinTestKey(t, dir)
	d := &Daemon{cfg: cfg, log: slog.New(slog.DiscardHandler), asRoot: os.Geteuid() == 0, gpus: gpus,
		cgroups: status, jobs: map[api.JobRef]*job{}, jobsDir: filepath.Join(dir, "jobs")}
	if err := os.Mkdir(d.jobsDir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := d.startSteps(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stopSteps)
	hostTestJob(d)
	return d
}

// oneNodeGrant is step 3 of job 42: one task on n1 that sees gpus.
func oneNodeGrant(t *testing.T, addr string, gpus []int, argv ...string) api.SignedGrant {
	t.Helper()
	sn := api.StepNode{Name: "n1", Addr: addr, Ranks: []int{0}, CPUs: 2}
	if gpus != nil {
		sn.GPUs = [][]int{gpus}
	}
	now := time.Now()
	g := &api.StepGrant{JobID: 42, StepID: 3, JobName: "t", UserID: uint32(os.Getuid()), GroupID: uint32(os.Getgid()),
		User: "u", Issued: now, Expires: now.Add(time.Minute), JobEnd: now.Add(time.Hour), JobNodes: []string{"n1"}, NTasks: 1,
		Nodes: []api.StepNode{sn}, Argv: argv, Cwd: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}}
	sg, err := testSigner.Sign(g)
	if err != nil {
		t.Fatal(err)
	}
	return sg
}

// runStep runs a step to its end and returns task 0's output, or the
// node's error.
func runStep(t *testing.T, d *Daemon, sg api.SignedGrant) (string, string) {
	t.Helper()
	c, f := dialStep(t, d.steps, sg, stepio.StdinNone)
	if f.Type == stepio.Error {
		return "", string(f.Payload)
	}
	if f.Type != stepio.Ready {
		t.Fatalf("first frame %s %q", f.Type, f.Payload)
	}
	var out strings.Builder
	for {
		f, err := stepio.ReadFrame(c)
		if err != nil {
			break
		}
		if f.Type == stepio.Stdout || f.Type == stepio.Stderr {
			out.Write(f.Payload)
		}
	}
	return out.String(), ""
}

// addBatchJob records job 42 as running here with a batch process pid.
func addBatchJob(t *testing.T, d *Daemon, alloc api.NodeAlloc, pid int) {
	t.Helper()
	ref := api.JobRef{JobID: 42}
	j := &job{ref: ref, dir: filepath.Join(d.jobsDir, dirName(ref)), hasSpec: true,
		spec: api.LaunchSpec{JobRef: ref, UserID: uint32(os.Getuid()), GroupID: uint32(os.Getgid()), Alloc: []api.NodeAlloc{alloc}}}
	if err := os.Mkdir(j.dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if pid > 0 {
		id, err := identityOf(pid)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeJSONNew(filepath.Join(j.dir, filePID), &id, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.mu.Lock()
	d.jobs[ref] = j
	d.mu.Unlock()
}

// TestStepCgroups runs steps in real cgroups where this host allows it
// (root, a writable hierarchy with a memory controller): a step of a job
// whose batch script runs elsewhere gets <parent>/job_42/step_3, removed
// with the step; one on the batch node joins the batch script's cgroup;
// a job_42 cgroup that is not the job's is never joined.
func TestStepCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	h, err := cgroup.Detect(cgroup.DefaultRoot)
	if err != nil || !h.Has(cgroup.Memory) {
		t.Skipf("no usable cgroup hierarchy: %v", err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	parent := "tide-test-steps-" + hex.EncodeToString(b)
	cfgFor := func(mode string) func(*Config) {
		return func(c *Config) { c.Cgroups, c.CgroupParent = mode, parent }
	}
	status, err := cgroupStatus(func() Config { c := DefaultConfig(); cfgFor(CgroupsAuto)(&c); return c }(), slog.New(slog.DiscardHandler))
	if err != nil || status == "off" {
		t.Skipf("cgroups unusable here: %s %v", status, err)
	}
	t.Cleanup(func() { removeTree(h, parent) })
	jobRel := parent + "/" + cgroup.JobName(42)
	gone := func(rel string) bool {
		for _, d := range h.Open(filepath.Dir(rel), filepath.Base(rel)).Dirs() {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				return false
			}
		}
		return true
	}

	tests := []struct {
		name string
		mode string
		// setup prepares the node and returns a cleanup.
		setup func(t *testing.T, d *Daemon)
		// wantIn is the cgroup the task shows ("" for none); wantErr a
		// refusal.
		wantIn, wantErr string
		// jobCgroupAfter: job_42 still exists after the step.
		jobCgroupAfter bool
	}{
		{name: "no batch script here: job and step cgroups made and removed", mode: CgroupsRequired,
			wantIn: jobRel + "/step_3"},
		{name: "batch script here: the step joins its job cgroup", mode: CgroupsRequired,
			setup: func(t *testing.T, d *Daemon) {
				cg, err := h.Create(parent, cgroup.JobName(42), cgroup.Limits{CPUs: 2})
				if err != nil {
					t.Fatal(err)
				}
				sleep := exec.Command("sleep", "300")
				if err := sleep.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					sleep.Process.Kill()
					sleep.Wait()
					cg.Remove(10 * time.Second)
				})
				if err := cg.AddProc(sleep.Process.Pid); err != nil {
					t.Fatal(err)
				}
				addBatchJob(t, d, api.NodeAlloc{Node: "n1", CPUs: 2}, sleep.Process.Pid)
			},
			wantIn: jobRel, jobCgroupAfter: true},
		{name: "someone else's job_42 is not joined (required: refused)", mode: CgroupsRequired,
			setup: func(t *testing.T, d *Daemon) {
				cg, err := h.Create(parent, cgroup.JobName(42), cgroup.Limits{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cg.Remove(10 * time.Second) })
			},
			wantErr: "step cgroup (cgroups: required)", jobCgroupAfter: true},
		{name: "someone else's job_42 is not joined (auto: runs without)", mode: CgroupsAuto,
			setup: func(t *testing.T, d *Daemon) {
				cg, err := h.Create(parent, cgroup.JobName(42), cgroup.Limits{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cg.Remove(10 * time.Second) })
			},
			jobCgroupAfter: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := fenceDaemon(t, status, nil, cfgFor(tt.mode))
			if tt.setup != nil {
				tt.setup(t, d)
			}
			out, nodeErr := runStep(t, d, oneNodeGrant(t, d.steps.Advertised(), nil, "cat", "/proc/self/cgroup"))
			if tt.wantErr != "" || nodeErr != "" {
				if tt.wantErr == "" || !strings.Contains(nodeErr, tt.wantErr) {
					t.Fatalf("node error %q, want %q", nodeErr, tt.wantErr)
				}
				return
			}
			in := ""
			for _, line := range strings.Split(out, "\n") {
				if i := strings.Index(line, "/"+parent+"/"); i >= 0 {
					in = line[i+1:]
				}
			}
			if in != tt.wantIn {
				t.Fatalf("task in cgroup %q, want %q; /proc/self/cgroup:\n%s", in, tt.wantIn, out)
			}
			waitUntil(t, "step cgroup removed", func() bool { return gone(jobRel + "/step_3") })
			if !tt.jobCgroupAfter {
				waitUntil(t, "job cgroup made for the step removed", func() bool { return gone(jobRel) })
			} else if gone(jobRel) {
				t.Error("the job's own cgroup was removed with the step")
			}
		})
	}
}

// removeTree removes what a test left of rel (children first) in every
// hierarchy.
func removeTree(h *cgroup.Hierarchy, rel string) {
	roots := []string{filepath.Join(h.Root, rel)}
	if h.Version == cgroup.V1 {
		roots = roots[:0]
		for _, c := range h.Controllers {
			roots = append(roots, filepath.Join(h.Root, c, rel))
		}
	}
	for _, r := range roots {
		var dirs []string
		filepath.WalkDir(r, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = syscall.Rmdir(dirs[i])
		}
	}
}

// TestStepMPS runs a slice step on the batch node with the fake MPS
// control binary: the task is pointed at its GPU's daemon, which the
// step holds until it ends.
func TestStepMPS(t *testing.T) {
	var d *Daemon
	state := ""
	d = fenceDaemon(t, "off", []gres.Device{{Index: 1, UUID: "GPU-1111"}}, func(c *Config) { state = c.StateDir })
	calls := installFakeMPS(t, state)
	addBatchJob(t, d, api.NodeAlloc{Node: "n1", CPUs: 2, GPUs: []int{1}, GPUMemMB: 4096, GPUComputePct: 30}, 0)
	out, nodeErr := runStep(t, d, oneNodeGrant(t, d.steps.Advertised(), []int{1},
		"sh", "-c", `echo "$CUDA_VISIBLE_DEVICES|$CUDA_MPS_PIPE_DIRECTORY|$CUDA_MPS_LOG_DIRECTORY|$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT|$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"`))
	if nodeErr != "" {
		t.Fatal(nodeErr)
	}
	want := "1|" + state + "/mps/gpu1/pipe|" + state + "/mps/gpu1/log|0=4096M|30\n"
	if out != want {
		t.Fatalf("task env %q, want %q", out, want)
	}
	waitUntil(t, "daemon quit with the step", func() bool { return len(mpsCalls(t, calls, state)) == 2 })
	wantCalls := []string{"start GPU-1111 $S/mps/gpu1/pipe $S/mps/gpu1/log", "quit GPU-1111 $S/mps/gpu1/pipe $S/mps/gpu1/log"}
	if diff := cmp.Diff(wantCalls, mpsCalls(t, calls, state)); diff != "" {
		t.Errorf("control calls (-want +got):\n%s", diff)
	}
}
