package noded

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/hostlist"
)

func TestEmulateConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*EmulateConfig)
		wantErr []string
	}{
		{name: "defaults with a count", edit: func(*EmulateConfig) {}},
		{name: "no nodes", edit: func(e *EmulateConfig) { e.Count = 0 }, wantErr: []string{"--emulate: 0 nodes"}},
		{name: "prefix ending in a digit", edit: func(e *EmulateConfig) { e.Prefix = "n1" }, wantErr: []string{`--emulate-prefix: "n1"`}},
		{name: "prefix with a comma", edit: func(e *EmulateConfig) { e.Prefix = "a,b" }, wantErr: []string{"--emulate-prefix"}},
		{name: "width too small", edit: func(e *EmulateConfig) { e.Width, e.Count = 2, 200 }, wantErr: []string{"cannot hold index 200"}},
		{name: "everything wrong at once", edit: func(e *EmulateConfig) {
			e.CPUs, e.Memory, e.GPUs, e.Duration, e.Leaf, e.First = 0, "lots", 65, -time.Second, 0, -1
		}, wantErr: []string{"--emulate-cpus", "--emulate-memory", "--emulate-gpus", "--emulate-duration", "--emulate-leaf", "--emulate-first"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ec := DefaultEmulateConfig()
			ec.Count = 10
			tt.edit(&ec)
			err := ec.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate passed; want errors %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestEmulateNodeConfigs(t *testing.T) {
	ec := DefaultEmulateConfig()
	ec.Count, ec.First = 2000, 1
	if got, want := ec.Names()[:2], []string{"emu0001", "emu0002"}; !cmp.Equal(got, want) {
		t.Errorf("names = %v, want %v", got, want)
	}
	if got := ec.Name(ec.Count - 1); got != "emu2000" {
		t.Errorf("last name = %s", got)
	}
	base := DefaultConfig()
	base.StateDir = "/run/tided"
	base.Heartbeat = 10 * time.Second
	hbs := map[time.Duration]bool{}
	for i := range ec.Count {
		c := ec.nodeConfig(base, i)
		if c.Heartbeat < 9*time.Second || c.Heartbeat > 11*time.Second {
			t.Fatalf("%s: heartbeat %v outside 10s ± 10%%", c.Name, c.Heartbeat)
		}
		hbs[c.Heartbeat] = true
		if i == 0 {
			want := "/run/tided/emulate/emu0001"
			if c.StateDir != want || c.Cgroups != CgroupsOff || c.StepAddr != "" || c.MPS != MPSOff ||
				c.GPUs.Source != GPUSourceFake || c.GPUs.Fake.Count != 8 || c.CPUs != 64 || c.AcctGatherFrequency != 0 {
				t.Errorf("node config = %+v", c)
			}
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "key_file") {
				// Only the key is missing here: the rest must be valid.
				t.Errorf("Validate = %v, want only the missing key", err)
			}
		}
	}
	// Spread, not lockstep: 2,000 nodes get many different periods.
	if len(hbs) < 500 {
		t.Errorf("only %d different heartbeats over %d nodes", len(hbs), ec.Count)
	}
	ec.Count, ec.First = 3, 98
	if got, want := ec.Names(), []string{"emu0098", "emu0099", "emu0100"}; !cmp.Equal(got, want) {
		t.Errorf("names from 98 = %v, want %v", got, want)
	}
}

func TestEmulateControllerYAML(t *testing.T) {
	ec := DefaultEmulateConfig()
	ec.Count, ec.Leaf, ec.GPUs = 5, 2, 4
	var b strings.Builder
	if err := ec.WriteControllerYAML(&b, "emu"); err != nil {
		t.Fatal(err)
	}
	want := `partitions:
  - {name: emu, nodes: "emu[0001-0005]", default: true, default_time: "1:00:00", max_time: "7-00:00:00"}
nodes:
  - {names: "emu[0001-0005]", cpus: 64, memory: 512G, gpus: 4}
topology:
  switches:
    - {name: leaf01, nodes: "emu[0001-0002]"}
    - {name: leaf02, nodes: "emu[0003-0004]"}
    - {name: leaf03, nodes: "emu0005"}
    - {name: spine, switches: "leaf[01-03]"}
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("controller YAML (-want +got):\n%s", diff)
	}
	// Every node is in exactly one leaf, at 2,000 nodes too.
	ec.Count, ec.Leaf = 2000, 32
	names, members := ec.leaves()
	seen := map[string]int{}
	for i, m := range members {
		expanded, err := hostlist.Expand(hostlist.Compress(m))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range expanded {
			seen[n]++
		}
		if len(m) > 32 || len(m) == 0 {
			t.Errorf("%s holds %d nodes", names[i], len(m))
		}
	}
	if len(seen) != 2000 || len(names) != 63 {
		t.Errorf("%d nodes in %d leaves, want 2000 in 63", len(seen), len(names))
	}
	for n, c := range seen {
		if c != 1 {
			t.Errorf("%s is in %d leaves", n, c)
		}
	}
}

// emuFleet runs n emulated nodes, each against a fake controller of its
// own, until the test ends.
func emuFleet(t *testing.T, ec EmulateConfig) (*Fleet, map[string]*fakeCtld) {
	t.Helper()
	key := "emulation-test-key"
	base := DefaultConfig()
	base.Controller = "127.0.0.1:1" // every node gets its fake through NewAPI
	base.KeyFile = writeKey(t, t.TempDir(), 0o600, key+"\n")
	base.StateDir = t.TempDir()
	base.Heartbeat = time.Minute // ends reach the fakes through the wake-up path
	base.KillWait = time.Second
	base.AllowRootJobs = true
	fakes := map[string]*fakeCtld{}
	for _, name := range ec.Names() {
		fakes[name] = newFakeCtld(t, key)
	}
	f, err := SetupFleet(context.Background(), base, ec, FleetOptions{Logger: testLogger(),
		NewAPI: func(name string) (NodeAPI, func()) {
			c := client.NewTCP(fakes[name].addr(), key)
			return c, c.Close
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Fleet.Run: %v", err)
		}
	})
	return f, fakes
}

// emuSpec is a launch of job id on node with the given environment.
func emuSpec(id uint64, node, wd string, env ...string) api.LaunchSpec {
	return api.LaunchSpec{
		JobRef: api.JobRef{JobID: id}, Name: "emu", UserID: uint32(os.Getuid()), GroupID: uint32(os.Getgid()),
		User: "u", Partition: "emu", Cluster: "test", Script: "#!/bin/sh\nexit 7\n",
		WorkDir: wd, SubmitDir: wd, Env: env, TimeLimit: api.Infinite, StartTime: time.Now(), KillWait: 1,
		Alloc: []api.NodeAlloc{{Node: node, CPUs: 1, GPUs: []int{0}, Tasks: 1}}, NumTasks: 1, CPUsPerTask: 1,
	}
}

func TestFleetNodesRegisterRunAndEndJobs(t *testing.T) {
	ec := DefaultEmulateConfig()
	ec.Count, ec.GPUs, ec.Duration = 3, 4, 100*time.Millisecond
	f, fakes := emuFleet(t, ec)
	uuids := map[string]bool{}
	for _, name := range ec.Names() {
		fk := fakes[name]
		fk.waitFor(t, name+" registration", func() bool { return fk.registrations == 1 })
		fk.mu.Lock()
		reg := fk.lastReg
		fk.mu.Unlock()
		if reg.Name != name || reg.CPUs != 64 || reg.MemoryMB != 512*1024 || len(reg.GPUs) != 4 || reg.StepAddr != "" {
			t.Errorf("%s registered %+v", name, reg)
		}
		for _, g := range reg.GPUs {
			uuids[g.UUID] = true
		}
	}
	if len(uuids) != 12 {
		t.Errorf("%d distinct GPU UUIDs over 3 nodes of 4 GPUs, want 12", len(uuids))
	}

	wd := t.TempDir()
	n1, n2, n3 := fakes["emu0001"], fakes["emu0002"], fakes["emu0003"]
	// Its own duration, the default one, and one until cancelled.
	timed := emuSpec(11, "emu0001", wd, "TIDE_EMULATE=300ms")
	plain := emuSpec(12, "emu0002", wd)
	forever := emuSpec(13, "emu0003", wd, "TIDE_EMULATE=inf")
	begin := time.Now()
	n1.queue(api.NodeSyncResponse{Launch: []api.LaunchSpec{timed}})
	n2.queue(api.NodeSyncResponse{Launch: []api.LaunchSpec{plain}})
	n3.queue(api.NodeSyncResponse{Launch: []api.LaunchSpec{forever}})

	r := n1.waitReport(t, timed.JobRef, api.NodeJobFinished)
	if ran := time.Since(begin); ran < 300*time.Millisecond {
		t.Errorf("job 11 ended after %v, before its 300ms", ran)
	}
	if r.Exit != (api.ExitStatus{}) || r.Error != "" || r.Killed || r.TimedOut {
		t.Errorf("job 11 report = %+v, want exit 0:0", r)
	}
	if r := n2.waitReport(t, plain.JobRef, api.NodeJobFinished); r.Exit != (api.ExitStatus{}) {
		t.Errorf("job 12 (default duration) report = %+v, want exit 0:0", r)
	}
	n3.waitReport(t, forever.JobRef, api.NodeJobRunning)
	if f.Running() != 1 {
		t.Errorf("%d emulated jobs run, want 1 (job 13)", f.Running())
	}
	n3.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: forever.JobRef, Kill: true}}})
	r = n3.waitReport(t, forever.JobRef, api.NodeJobFinished)
	if r.Exit != (api.ExitStatus{Signal: int(syscall.SIGTERM)}) || !r.Killed {
		t.Errorf("cancelled job 13 report = %+v, want killed by signal 15", r)
	}

	// The controller's acknowledgement drops the job directory.
	n1.queue(api.NodeSyncResponse{Ack: []api.JobRef{timed.JobRef}})
	dir := filepath.Join(f.Daemons()[0].cfg.StateDir, "jobs", dirName(timed.JobRef))
	waitUntil(t, "job 11's directory removed", func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	})
	// Nothing ran: no script wrote its output file.
	if entries, _ := os.ReadDir(wd); len(entries) != 0 {
		t.Errorf("the work directory holds %d entries; emulated jobs write no output", len(entries))
	}
}

func TestFleetTimeLimitAndBadDuration(t *testing.T) {
	ec := DefaultEmulateConfig()
	ec.Count, ec.GPUs = 1, 0
	_, fakes := emuFleet(t, ec)
	n := fakes["emu0001"]
	n.waitFor(t, "registration", func() bool { return n.registrations == 1 })
	wd := t.TempDir()
	limited := emuSpec(21, "emu0001", wd, "TIDE_EMULATE=1h")
	limited.TimeLimit = 1
	bad := emuSpec(22, "emu0001", wd, "TIDE_EMULATE=later")
	n.queue(api.NodeSyncResponse{Launch: []api.LaunchSpec{limited, bad}})
	r := n.waitReport(t, limited.JobRef, api.NodeJobFinished)
	if !r.TimedOut || r.Exit.Signal != int(syscall.SIGTERM) {
		t.Errorf("job 21 past its 1 s limit: report %+v, want timed out by SIGTERM", r)
	}
	r = n.waitReport(t, bad.JobRef, api.NodeJobFinished)
	if r.Exit.Code != 1 || !strings.Contains(r.Error, `"later"`) || r.LaunchFailed {
		t.Errorf("job 22 with a bad duration: report %+v, want a failure of the job naming the value", r)
	}
}
