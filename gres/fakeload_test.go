package gres

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestFakeLoadPlausible checks the simulated load over an hour of
// readings: every held GPU reads a utilisation within 49-96 % that
// changes over time, memory within the bounds the doc promises and a
// process of the job's; GPUs nobody holds stay idle.
func TestFakeLoadPlausible(t *testing.T) {
	src := NewFake(FakeConfig{Count: 4, MemoryMB: 81920})
	holders := map[int][]FakeHolder{
		0: {{JobID: 7, PID: 4100}},
		1: {{JobID: 7, PID: 4100}},
		2: {{JobID: 9, PID: 4200, SliceMemMB: 20480, SliceComputePct: 50},
			{JobID: 10, PID: 0, SliceMemMB: 20480, SliceComputePct: 25}},
	}
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	utils := map[int]map[int]bool{}
	for k := range 720 {
		src.SetHolders(start.Add(time.Duration(k)*5*time.Second), holders)
		st, err := src.Status()
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, 1} {
			g := st[i]
			if g.UtilPct < 49 || g.UtilPct > 96 {
				t.Fatalf("reading %d: whole gpu %d util %d, want 49-96", k, i, g.UtilPct)
			}
			if g.MemUsedMB < 81920*35/100 || g.MemUsedMB > 81920*79/100 {
				t.Fatalf("reading %d: whole gpu %d memory %d MiB, want 35-79 %% of 81920", k, i, g.MemUsedMB)
			}
			if len(g.Processes) != 1 || g.Processes[0].PID != 4100 || g.Processes[0].MemMB != g.MemUsedMB {
				t.Fatalf("reading %d: whole gpu %d processes %+v, want pid 4100 with all the memory", k, i, g.Processes)
			}
			if utils[i] == nil {
				utils[i] = map[int]bool{}
			}
			utils[i][g.UtilPct] = true
		}
		sh := st[2]
		// Slices: 50 % and 25 % of levels within 49-96.
		if sh.UtilPct < 36 || sh.UtilPct > 72 {
			t.Fatalf("reading %d: shared gpu util %d, want 36-72", k, sh.UtilPct)
		}
		if sh.MemUsedMB < 2*20480*35/100 || sh.MemUsedMB > 2*20480*60/100 {
			t.Fatalf("reading %d: shared gpu memory %d MiB, want 35-60 %% of the two 20480 MiB slices", k, sh.MemUsedMB)
		}
		if len(sh.Processes) != 1 || sh.Processes[0].PID != 4200 || sh.Processes[0].MemMB > 20480*60/100 {
			t.Fatalf("reading %d: shared gpu processes %+v, want pid 4200 within its slice", k, sh.Processes)
		}
		if st[3].UtilPct != 0 || st[3].MemUsedMB != 0 || st[3].Processes != nil {
			t.Fatalf("reading %d: free gpu 3 reads %+v, want idle", k, st[3])
		}
	}
	for i, seen := range utils {
		if len(seen) < 5 {
			t.Errorf("gpu %d: only %d distinct utilisations in an hour of readings: the load does not wander", i, len(seen))
		}
	}
	if diff := cmp.Diff(map[int]uint64{4100: 7, 4200: 9}, src.ProcJobs()); diff != "" {
		t.Errorf("pid → job (-want +got):\n%s", diff)
	}

	// The same holders and time read the same again (replayable).
	at := start.Add(time.Hour)
	src.SetHolders(at, holders)
	a, _ := src.Status()
	b, _ := newFakeAt(t, FakeConfig{Count: 4, MemoryMB: 81920}, at, holders).Status()
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two fakes read differently at one time (-first +second):\n%s", diff)
	}

	// The job gone, its GPUs are idle again.
	src.SetHolders(at, nil)
	st, _ := src.Status()
	for _, g := range st {
		if g.UtilPct != 0 || g.MemUsedMB != 0 || len(g.Processes) != 0 {
			t.Errorf("gpu %d after the jobs left: %+v, want idle", g.Index, g)
		}
	}
	if got := src.ProcJobs(); got != nil {
		t.Errorf("pid → job after the jobs left: %v, want none", got)
	}
}

// newFakeAt is a fake holding holders at time at.
func newFakeAt(t *testing.T, c FakeConfig, at time.Time, holders map[int][]FakeHolder) *FakeSource {
	t.Helper()
	f := NewFake(c)
	f.SetHolders(at, holders)
	return f
}

// TestFakeLoadOverrides checks what wins over the simulated load: the
// idle load setting, a GPU the usage file lists (the knob that makes a
// held GPU idle), SetUsage, and an unhealthy GPU.
func TestFakeLoadOverrides(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	held := map[int][]FakeHolder{0: {{JobID: 3, PID: 50}}, 1: {{JobID: 4, PID: 60}}}
	tests := []struct {
		name string
		cfg  FakeConfig
		// setup drives the fake; file is the usage file's content.
		setup func(*FakeSource) error
		file  string
		// busy lists the GPUs that must read a simulated load.
		busy []int
		want map[int]Status
	}{
		{name: "busy by default", cfg: FakeConfig{Count: 3}, busy: []int{0, 1},
			want: map[int]Status{2: {Index: 2, Health: Healthy}}},
		{name: "load idle", cfg: FakeConfig{Count: 3, Load: FakeLoadIdle},
			want: map[int]Status{0: {Index: 0, Health: Healthy}, 1: {Index: 1, Health: Healthy}}},
		{name: "usage file idles gpu 0", cfg: FakeConfig{Count: 3}, file: `{"gpus": [{"index": 0}]}`, busy: []int{1},
			want: map[int]Status{0: {Index: 0, Health: Healthy}}},
		{name: "usage file sets gpu 1", cfg: FakeConfig{Count: 3}, file: `{"gpus": [{"index": 1, "util_pct": 2, "mem_used_mb": 900}]}`,
			busy: []int{0}, want: map[int]Status{1: {Index: 1, Health: Healthy, UtilPct: 2, MemUsedMB: 900}}},
		{name: "SetUsage pins gpu 1", cfg: FakeConfig{Count: 3}, busy: []int{0},
			setup: func(f *FakeSource) error { return f.SetUsage(Status{Index: 1, UtilPct: 3}) },
			want:  map[int]Status{1: {Index: 1, Health: Healthy, UtilPct: 3}}},
		{name: "unhealthy gpu reads nothing", cfg: FakeConfig{Count: 3}, busy: []int{1},
			setup: func(f *FakeSource) error { return f.MarkUnhealthy(0, "XID 79") },
			want:  map[int]Status{0: {Index: 0, Health: Unhealthy, Reason: "XID 79"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := NewFake(tt.cfg)
			if tt.file != "" {
				path := filepath.Join(t.TempDir(), FakeUsageFile)
				if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
					t.Fatal(err)
				}
				src.SetUsageFile(path)
			}
			if tt.setup != nil {
				if err := tt.setup(src); err != nil {
					t.Fatal(err)
				}
			}
			src.SetHolders(at, held)
			st, err := src.Status()
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range tt.busy {
				if st[i].UtilPct < 49 || st[i].MemUsedMB == 0 || len(st[i].Processes) != 1 {
					t.Errorf("gpu %d reads %+v, want a simulated load", i, st[i])
				}
			}
			for i, want := range tt.want {
				if diff := cmp.Diff(want, st[i]); diff != "" {
					t.Errorf("gpu %d (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestFakeLoadBadConfig(t *testing.T) {
	_, err := Fake("n", FakeConfig{Count: 2, Load: "heavy"})
	if err == nil || !strings.Contains(err.Error(), `fake gpu load "heavy": want busy or idle`) {
		t.Errorf("Fake with load heavy: %v, want an error naming the load", err)
	}
}
