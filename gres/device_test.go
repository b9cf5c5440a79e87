package gres

import (
	"fmt"
	"strings"
	"testing"
)

// TestShortModelRemembered: a remembered answer costs no allocation,
// answers stay right past the memo's bound, and the memo stops growing
// there.
func TestShortModelRemembered(t *testing.T) {
	ShortModel("NVIDIA A100-SXM4-80GB")
	if n := testing.AllocsPerRun(100, func() { _ = ShortModel("NVIDIA A100-SXM4-80GB") }); n != 0 {
		t.Errorf("a remembered model allocates %v times", n)
	}
	for i := range maxShortModels + 50 {
		model := fmt.Sprintf("NVIDIA X%d Ultra", i)
		for range 2 {
			if got, want := ShortModel(model), fmt.Sprintf("x%d", i); got != want {
				t.Fatalf("ShortModel(%q) = %q, want %q", model, got, want)
			}
		}
	}
	kept := 0
	shortModels.Range(func(any, any) bool { kept++; return true })
	if kept > maxShortModels {
		t.Errorf("%d models remembered, at most %d", kept, maxShortModels)
	}
}

func TestShortModel(t *testing.T) {
	tests := []struct {
		name, model, want string
	}{
		{name: "h100 sxm", model: "NVIDIA H100 80GB HBM3", want: "h100"},
		{name: "h100 pcie", model: "NVIDIA H100 PCIe", want: "h100"},
		{name: "h100 nvl", model: "NVIDIA H100 NVL", want: "h100"},
		{name: "h200", model: "NVIDIA H200 141GB HBM3e", want: "h200"},
		{name: "gh200 is not h200", model: "NVIDIA GH200 480GB", want: "gh200"},
		{name: "a100 dashed", model: "NVIDIA A100-SXM4-80GB", want: "a100"},
		{name: "a100 pcie", model: "NVIDIA A100 80GB PCIe", want: "a100"},
		{name: "l40s not l40", model: "NVIDIA L40S", want: "l40s"},
		{name: "l4", model: "NVIDIA L4", want: "l4"},
		{name: "a10g not a10", model: "NVIDIA A10G", want: "a10g"},
		{name: "tesla v100", model: "Tesla V100-SXM2-32GB", want: "v100"},
		{name: "tesla t4", model: "Tesla T4", want: "t4"},
		{name: "b200", model: "NVIDIA B200", want: "b200"},
		{name: "rtx a6000", model: "NVIDIA RTX A6000", want: "a6000"},
		{name: "unknown geforce", model: "NVIDIA GeForce RTX 4090", want: "rtx4090"},
		{name: "unknown product", model: "NVIDIA Xyz 9000", want: "xyz"},
		{name: "already short", model: "h100", want: "h100"},
		{name: "site type", model: "mygpu", want: "mygpu"},
		{name: "empty", model: "", want: ""},
		{name: "vendor only", model: "NVIDIA", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Device{Model: strings.ToLower(tt.model)}
			if got := d.ModelShort(); got != tt.want {
				t.Errorf("ModelShort(%q) = %q, want %q", tt.model, got, tt.want)
			}
			if got := ShortModel(tt.model); got != tt.want {
				t.Errorf("ShortModel(%q) = %q, want %q", tt.model, got, tt.want)
			}
		})
	}
}

func TestFormatIndices(t *testing.T) {
	tests := []struct {
		name string
		in   []int
		want string
	}{
		{name: "none", in: nil, want: ""},
		{name: "one", in: []int{3}, want: "3"},
		{name: "several", in: []int{0, 1, 5}, want: "0,1,5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FormatIndices(tt.in); got != tt.want {
				t.Errorf("FormatIndices(%v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestLinkString(t *testing.T) {
	tests := []struct {
		name string
		l    Link
		want string
	}{
		{name: "nvlink", l: Link{Kind: LinkNVLink, NVLinks: 18}, want: "NV18"},
		{name: "pcie path", l: Link{Kind: LinkPCIe, PCIePath: PathPXB}, want: "PXB"},
		{name: "pcie unknown", l: Link{Kind: LinkPCIe}, want: "PCIe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.l.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCheckInventory(t *testing.T) {
	two := func(a, b []Link) []Device {
		return []Device{{Index: 0, UUID: "GPU-a", Links: a}, {Index: 1, UUID: "GPU-b", Links: b}}
	}
	nv := func(peer, n int) Link { return Link{Peer: peer, Kind: LinkNVLink, NVLinks: n} }
	tests := []struct {
		name string
		devs []Device
		want string // "" for valid
	}{
		{name: "empty", devs: nil},
		{name: "symmetric nvlink", devs: two([]Link{nv(1, 4)}, []Link{nv(0, 4)})},
		{name: "one side only", devs: two([]Link{nv(1, 4)}, nil)},
		{name: "asymmetric count", devs: two([]Link{nv(1, 4)}, []Link{nv(0, 2)}), want: "gpu 0: link not symmetric: gpu 0 says NV4 to gpu 1, gpu 1 says NV2 back"},
		{name: "asymmetric kind", devs: two([]Link{nv(1, 4)}, []Link{{Peer: 0, Kind: LinkPCIe, PCIePath: PathSYS}}), want: "says SYS back"},
		{name: "self link", devs: two([]Link{{Peer: 0, Kind: LinkPCIe}}, nil), want: "gpu 0: link to itself"},
		{name: "peer out of range", devs: two([]Link{nv(5, 1)}, nil), want: "gpu 0: link to gpu 5, which the node lacks"},
		{name: "duplicate peer", devs: two([]Link{nv(1, 1), nv(1, 1)}, nil), want: "two links to gpu 1"},
		{name: "nvlink without count", devs: two([]Link{{Peer: 1, Kind: LinkNVLink}}, nil), want: "positive link count"},
		{name: "bad path", devs: two([]Link{{Peer: 1, Kind: LinkPCIe, PCIePath: "FAR"}}, nil), want: "path of PIX"},
		{name: "bad kind", devs: two([]Link{{Peer: 1, Kind: "infiniband"}}, nil), want: `unknown kind "infiniband"`},
		{name: "index out of order", devs: []Device{{Index: 1}, {Index: 0}}, want: "gpu 0: index 1 out of order"},
		{name: "duplicate uuid", devs: []Device{{Index: 0, UUID: "GPU-x"}, {Index: 1, UUID: "GPU-x"}}, want: "gpu 1: uuid GPU-x also used by gpu 0"},
		{name: "bad numa", devs: []Device{{Index: 0, NUMANode: -2}}, want: "numa node -2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckInventory(tt.devs)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("CheckInventory() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("CheckInventory() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
