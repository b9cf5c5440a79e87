package gres

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/internal/golden"
)

func TestFakeTopologies(t *testing.T) {
	tests := []struct {
		name string
		cfg  FakeConfig
	}{
		{name: "dgx-default-for-8", cfg: FakeConfig{Count: 8, Model: "h100"}},
		{name: "islands", cfg: FakeConfig{Count: 8, Topology: TopologyIslands}},
		{name: "pcie-default-for-4", cfg: FakeConfig{Count: 4, Model: "l40s", MemoryMB: 46068}},
		{name: "pcie-6-straddling-pair", cfg: FakeConfig{Count: 6, Topology: TopologyPCIe}},
		{name: "dgx-4", cfg: FakeConfig{Count: 4, Topology: TopologyDGX}},
		{name: "single", cfg: FakeConfig{Count: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			devs, err := Fake("node01", tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckInventory(devs); err != nil {
				t.Fatalf("fake inventory is inconsistent: %v", err)
			}
			again, _ := Fake("node01", tt.cfg)
			if diff := cmp.Diff(devs, again); diff != "" {
				t.Errorf("fake is not deterministic (-first +second):\n%s", diff)
			}
			var b strings.Builder
			b.WriteString(FormatTopology(devs))
			for _, d := range devs {
				b.WriteString(d.UUID + " " + d.Model + " " + d.ComputeCap + "\n")
			}
			golden.Check(t, "fake-"+tt.name, b.String())
		})
	}
}

func TestFakeLinkRules(t *testing.T) {
	tests := []struct {
		name string
		cfg  FakeConfig
		a, b int
		want Link
	}{
		{name: "dgx any pair", cfg: FakeConfig{Count: 8}, a: 0, b: 7, want: Link{Peer: 7, Kind: LinkNVLink, NVLinks: 18}},
		{name: "island inside", cfg: FakeConfig{Count: 8, Topology: TopologyIslands}, a: 1, b: 3, want: Link{Peer: 3, Kind: LinkNVLink, NVLinks: 6}},
		{name: "island across", cfg: FakeConfig{Count: 8, Topology: TopologyIslands}, a: 3, b: 4, want: Link{Peer: 4, Kind: LinkPCIe, PCIePath: PathSYS}},
		{name: "pcie pair", cfg: FakeConfig{Count: 8, Topology: TopologyPCIe}, a: 2, b: 3, want: Link{Peer: 3, Kind: LinkPCIe, PCIePath: PathPIX}},
		{name: "pcie same numa", cfg: FakeConfig{Count: 8, Topology: TopologyPCIe}, a: 1, b: 2, want: Link{Peer: 2, Kind: LinkPCIe, PCIePath: PathNODE}},
		{name: "pcie across numa", cfg: FakeConfig{Count: 8, Topology: TopologyPCIe}, a: 0, b: 4, want: Link{Peer: 4, Kind: LinkPCIe, PCIePath: PathSYS}},
		{name: "pcie pair split by numa", cfg: FakeConfig{Count: 6, Topology: TopologyPCIe}, a: 2, b: 3, want: Link{Peer: 3, Kind: LinkPCIe, PCIePath: PathSYS}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			devs, err := Fake("n", tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := devs[tt.a].Link(tt.b)
			if !ok {
				t.Fatalf("gpu %d has no link to %d", tt.a, tt.b)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("link (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFakeErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  FakeConfig
		want string
	}{
		{name: "too many", cfg: FakeConfig{Count: 65}, want: "between 0 and 64"},
		{name: "negative", cfg: FakeConfig{Count: -1}, want: "between 0 and 64"},
		{name: "odd islands", cfg: FakeConfig{Count: 7, Topology: TopologyIslands}, want: "even gpu count"},
		{name: "unknown topology", cfg: FakeConfig{Count: 2, Topology: "torus"}, want: `"torus"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Fake("n", tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Fake(%+v) error = %v, want one containing %q", tt.cfg, err, tt.want)
			}
		})
	}
}

func TestFakeJSONRoundTrip(t *testing.T) {
	devs, err := Fake("node07", FakeConfig{Count: 8, Topology: TopologyIslands})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(devs)
	if err != nil {
		t.Fatal(err)
	}
	var back []Device
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(devs, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	// The fields older readers know keep their names.
	var raw []map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"index", "uuid", "model", "memory_mb", "health", "pci_bus_id", "links"} {
		if _, ok := raw[5][k]; !ok {
			t.Errorf("gpu 5 JSON lacks %q: %s", k, b)
		}
	}
}

func TestFakeSourceStatus(t *testing.T) {
	src := NewFake(FakeConfig{Count: 4, Model: "h100"})
	st, err := src.Status()
	if err != nil {
		t.Fatal(err)
	}
	want := []Status{{Index: 0, Health: Healthy}, {Index: 1, Health: Healthy}, {Index: 2, Health: Healthy}, {Index: 3, Health: Healthy}}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Fatalf("initial status (-want +got):\n%s", diff)
	}

	if err := src.MarkUnhealthy(2, "XID 79: GPU has fallen off the bus"); err != nil {
		t.Fatal(err)
	}
	usage := Status{Index: 1, MemUsedMB: 70000, UtilPct: 93, Processes: []ProcUsage{{PID: 4242, MemMB: 69000}}}
	if err := src.SetUsage(usage); err != nil {
		t.Fatal(err)
	}
	usage.Processes[0].MemMB = 1 // the source must have copied
	st, err = src.Status()
	if err != nil {
		t.Fatal(err)
	}
	want[1] = Status{Index: 1, Health: Healthy, MemUsedMB: 70000, UtilPct: 93, Processes: []ProcUsage{{PID: 4242, MemMB: 69000}}}
	want[2] = Status{Index: 2, Health: Unhealthy, Reason: "XID 79: GPU has fallen off the bus"}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("status after hooks (-want +got):\n%s", diff)
	}
	st[1].Processes[0].PID = 1 // nor may callers reach into it
	if again, _ := src.Status(); again[1].Processes[0].PID != 4242 {
		t.Errorf("Status returned shared process slices")
	}

	devs, err := src.Inventory("gpu01")
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range devs {
		wantHealth := Healthy
		if i == 2 {
			wantHealth = Unhealthy
		}
		if d.Health != wantHealth {
			t.Errorf("inventory gpu %d health = %q, want %q", i, d.Health, wantHealth)
		}
	}

	for _, idx := range []int{-1, 4} {
		if err := src.MarkUnhealthy(idx, "x"); err == nil {
			t.Errorf("MarkUnhealthy(%d) succeeded on a 4-GPU fake", idx)
		}
		if err := src.SetUsage(Status{Index: idx}); err == nil {
			t.Errorf("SetUsage(%d) succeeded on a 4-GPU fake", idx)
		}
	}
}

func TestFakeSourceBadConfig(t *testing.T) {
	src := NewFake(FakeConfig{Count: 99})
	if _, err := src.Inventory("n"); err == nil {
		t.Error("Inventory accepted 99 GPUs")
	}
	if _, err := src.Status(); err == nil {
		t.Error("Status accepted 99 GPUs")
	}
}

func TestFakeSourceUsageFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), FakeUsageFile)
	tests := []struct {
		name string
		// file is the usage file's content; "" means no file.
		file string
		want []Status
		jobs map[int]uint64
		err  string
	}{
		{name: "no-file", want: []Status{{Index: 0, Health: Healthy}, {Index: 1, Health: Healthy}}},
		{name: "processes-sum",
			file: `{"gpus": [{"index": 1, "util_pct": 80, "processes": [{"pid": 7, "mem_mb": 30000, "job_id": 12}, {"pid": 8, "mem_mb": -1}]}]}`,
			want: []Status{{Index: 0, Health: Healthy},
				{Index: 1, Health: Healthy, MemUsedMB: 30000, UtilPct: 80, Processes: []ProcUsage{{PID: 7, MemMB: 30000}, {PID: 8, MemMB: -1}}}},
			jobs: map[int]uint64{7: 12}},
		{name: "explicit-total",
			file: `{"gpus": [{"index": 0, "mem_used_mb": 78000, "processes": [{"pid": 9, "mem_mb": 70000}]}]}`,
			want: []Status{{Index: 0, Health: Healthy, MemUsedMB: 78000, Processes: []ProcUsage{{PID: 9, MemMB: 70000}}},
				{Index: 1, Health: Healthy}}},
		{name: "unknown-gpu", file: `{"gpus": [{"index": 5}]}`, err: "no gpu 5"},
		{name: "not-json", file: `{"gpus": [`, err: "fake gpu usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(path)
			if tt.file != "" {
				if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			src := NewFake(FakeConfig{Count: 2})
			src.SetUsageFile(path)
			st, err := src.Status()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, st); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.jobs, src.ProcJobs()); diff != "" {
				t.Errorf("pid → job (-want +got):\n%s", diff)
			}
		})
	}
}
