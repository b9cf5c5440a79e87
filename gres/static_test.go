package gres

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func intp(v int) *int { return &v }

// staticH100 is a valid 4-GPU static list: 0-1 and 2-3 NVLinked, the
// pairs joined by PCIe.
func staticH100() []StaticGPU {
	links := []string{"-1,18,0,0", "18,-1,0,0", "0,0,-1,SYS", "0,0,sys,-1"}
	gpus := make([]StaticGPU, 4)
	for i := range gpus {
		gpus[i] = StaticGPU{
			Index:    i,
			UUID:     "GPU-000" + string(rune('0'+i)),
			Model:    "H100",
			MemoryMB: 81559,
			Links:    links[i],
		}
	}
	gpus[2].Links = "0,0,-1,SYS"
	return gpus
}

func TestStaticDevices(t *testing.T) {
	gpus := staticH100()
	gpus[0].ComputeCap = "9.0"
	gpus[0].PCIBusID = "00000000:1B:00.0"
	gpus[0].NUMANode = intp(0)
	gpus[1].NUMANode = intp(1)
	gpus[3].File = "/dev/nvidia7"
	// Listed out of order: the result is in index order.
	gpus[0], gpus[3] = gpus[3], gpus[0]
	src, err := NewStatic(gpus)
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.Inventory("ignored")
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{
		{Index: 0, UUID: "GPU-0000", Model: "h100", MemoryMB: 81559, Health: Healthy, Minor: 0, ComputeCap: "9.0", PCIBusID: "0000:1b:00.0", NUMANode: 0,
			Links: []Link{{Peer: 1, Kind: LinkNVLink, NVLinks: 18}, {Peer: 2, Kind: LinkPCIe}, {Peer: 3, Kind: LinkPCIe}}},
		{Index: 1, UUID: "GPU-0001", Model: "h100", MemoryMB: 81559, Health: Healthy, Minor: 1, NUMANode: 1,
			Links: []Link{{Peer: 0, Kind: LinkNVLink, NVLinks: 18}, {Peer: 2, Kind: LinkPCIe}, {Peer: 3, Kind: LinkPCIe}}},
		{Index: 2, UUID: "GPU-0002", Model: "h100", MemoryMB: 81559, Health: Healthy, Minor: 2, NUMANode: -1,
			Links: []Link{{Peer: 0, Kind: LinkPCIe}, {Peer: 1, Kind: LinkPCIe}, {Peer: 3, Kind: LinkPCIe, PCIePath: PathSYS}}},
		{Index: 3, UUID: "GPU-0003", Model: "h100", MemoryMB: 81559, Health: Healthy, Minor: 7, NUMANode: -1,
			Links: []Link{{Peer: 0, Kind: LinkPCIe}, {Peer: 1, Kind: LinkPCIe}, {Peer: 2, Kind: LinkPCIe, PCIePath: PathSYS}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("inventory (-want +got):\n%s", diff)
	}
	for i, d := range got {
		if s := FormatLinks(d, len(got)); s != strings.ToUpper(staticH100()[i].Links) {
			t.Errorf("FormatLinks(gpu %d) = %q, want %q", i, s, strings.ToUpper(staticH100()[i].Links))
		}
	}
	got[0].Links[0].NVLinks = 1
	again, _ := src.Inventory("")
	if again[0].Links[0].NVLinks != 18 {
		t.Error("Inventory handed out the source's own link slice")
	}
	st, err := src.Status()
	if err != nil {
		t.Fatal(err)
	}
	wantSt := make([]Status, 4)
	for i := range wantSt {
		wantSt[i] = Status{Index: i, Health: Healthy, MemUsedMB: UsageUnknown, UtilPct: UsageUnknown}
	}
	if diff := cmp.Diff(wantSt, st); diff != "" {
		t.Errorf("Status() (-want +got):\n%s", diff)
	}
}

func TestStaticWithoutLinks(t *testing.T) {
	gpus := staticH100()
	for i := range gpus {
		gpus[i].Links = ""
	}
	devs, err := StaticDevices(gpus)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Links != nil {
			t.Errorf("gpu %d has links %v without a Links= list", d.Index, d.Links)
		}
	}
	one, err := StaticDevices([]StaticGPU{{Index: 0, UUID: "GPU-x", Model: "a100", MemoryMB: 40960, Links: "-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if one[0].Links != nil {
		t.Errorf("single gpu has links %v", one[0].Links)
	}
}

func TestStaticErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(g []StaticGPU) []StaticGPU
		want   []string
	}{
		{name: "duplicate index", modify: func(g []StaticGPU) []StaticGPU { g[1].Index = 0; return g },
			want: []string{"static gpu 0: index listed twice"}},
		{name: "index out of range", modify: func(g []StaticGPU) []StaticGPU { g[3].Index = 4; return g },
			want: []string{"static gpu 4: index out of range: 4 gpus need indexes 0..3"}},
		{name: "link list too short", modify: func(g []StaticGPU) []StaticGPU { g[1].Links = "18,-1,0"; return g },
			want: []string{`static gpu 1: links "18,-1,0": 3 entries, want one per gpu (4)`}},
		{name: "self not -1", modify: func(g []StaticGPU) []StaticGPU { g[1].Links = "18,0,0,0"; return g },
			want: []string{"static gpu 1: ", "entry 1 is this gpu itself and must be -1"}},
		{name: "-1 for a peer", modify: func(g []StaticGPU) []StaticGPU { g[1].Links = "-1,-1,0,0"; return g },
			want: []string{"entry 0: -1 is only for the gpu itself (entry 1)"}},
		{name: "not a number", modify: func(g []StaticGPU) []StaticGPU { g[0].Links = "-1,lots,0,0"; return g },
			want: []string{`static gpu 0: `, `entry 1: "lots" is not a link count or PCIe path`}},
		{name: "asymmetric", modify: func(g []StaticGPU) []StaticGPU { g[1].Links = "12,-1,0,0"; return g },
			want: []string{"gpu 0: link not symmetric: gpu 0 says NV18 to gpu 1, gpu 1 says NV12 back"}},
		{name: "links on some gpus only", modify: func(g []StaticGPU) []StaticGPU { g[2].Links = ""; return g },
			want: []string{"static gpu 2: links missing while other gpus have them"}},
		{name: "missing fields", modify: func(g []StaticGPU) []StaticGPU { g[2].UUID, g[2].Model, g[2].MemoryMB = "", "", 0; return g },
			want: []string{"static gpu 2: uuid missing", "static gpu 2: model missing", "static gpu 2: memory_mb must be positive"}},
		{name: "duplicate uuid", modify: func(g []StaticGPU) []StaticGPU { g[3].UUID = g[0].UUID; return g },
			want: []string{"static gpu 3: uuid GPU-0000 also used by gpu 0"}},
		{name: "bad compute cap", modify: func(g []StaticGPU) []StaticGPU { g[0].ComputeCap = "sm90"; return g },
			want: []string{`static gpu 0: compute_cap "sm90"`}},
		{name: "bad and duplicate bus ids", modify: func(g []StaticGPU) []StaticGPU {
			g[0].PCIBusID, g[1].PCIBusID, g[2].PCIBusID = "1b:00.0", "0000:1B:00.0", "zz"
			return g
		}, want: []string{"static gpu 1: pci_bus_id 0000:1b:00.0 also used by gpu 0", `static gpu 2: pci bus id "zz"`}},
		{name: "bad numa", modify: func(g []StaticGPU) []StaticGPU { g[0].NUMANode = intp(-3); return g },
			want: []string{"static gpu 0: numa_node -3"}},
		{name: "bad file", modify: func(g []StaticGPU) []StaticGPU { g[0].File = "/dev/dri/card0"; return g },
			want: []string{`static gpu 0: file "/dev/dri/card0": want /dev/nvidiaN`}},
		{name: "file clash", modify: func(g []StaticGPU) []StaticGPU { g[0].File = "/dev/nvidia1"; return g },
			want: []string{"static gpu 1: device /dev/nvidia1 also used by gpu 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewStatic(tt.modify(staticH100()))
			if err == nil {
				t.Fatal("NewStatic accepted a bad list")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestNormalizeBusID(t *testing.T) {
	tests := []struct {
		name, in, want string
		bad            bool
	}{
		{name: "nvml form", in: "00000000:1B:00.0", want: "0000:1b:00.0"},
		{name: "sysfs form", in: "0000:1b:00.0", want: "0000:1b:00.0"},
		{name: "lspci short", in: "9a:00.0", want: "0000:9a:00.0"},
		{name: "big domain", in: "00010000:01:00.0", want: "10000:01:00.0"},
		{name: "spaces", in: " 0000:3a:00.1 ", want: "0000:3a:00.1"},
		{name: "no function", in: "0000:1b:00", bad: true},
		{name: "function too big", in: "0000:1b:00.8", bad: true},
		{name: "device too big", in: "0000:1b:20.0", bad: true},
		{name: "bus too big", in: "0000:100:00.0", bad: true},
		{name: "empty part", in: "0000::00.0", bad: true},
		{name: "empty", in: "", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NormalizeBusID(tt.in)
			if tt.bad {
				if err == nil {
					t.Fatalf("NormalizeBusID(%q) = %q, want an error", tt.in, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("NormalizeBusID(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}
