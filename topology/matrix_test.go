package topology_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/topology"
	"github.com/tide-hpc/tide/topology/topotest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func TestNewMatrix(t *testing.T) {
	tests := []struct {
		name    string
		n       int
		links   []topology.GPULink
		wantErr []string
	}{
		{name: "no GPUs", n: 0},
		{name: "one direction is enough", n: 2, links: []topology.GPULink{{From: 0, To: 1, NVLinks: 4}}},
		{name: "both directions agreeing", n: 2, links: []topology.GPULink{
			{From: 0, To: 1, PCIePath: "PIX"}, {From: 1, To: 0, PCIePath: "pix"}}},
		{name: "negative size", n: -1, wantErr: []string{"matrix: -1 GPUs"}},
		{name: "index out of range", n: 2, links: []topology.GPULink{{From: 0, To: 2}},
			wantErr: []string{"matrix: link 0-2: GPU index outside 0..1"}},
		{name: "self link", n: 2, links: []topology.GPULink{{From: 1, To: 1, NVLinks: 2}},
			wantErr: []string{"matrix: link 1-1: a GPU cannot link to itself"}},
		{name: "negative NVLinks", n: 2, links: []topology.GPULink{{From: 0, To: 1, NVLinks: -2}},
			wantErr: []string{"matrix: link 0-1: -2 NVLinks"}},
		{name: "unknown PCIe path", n: 2, links: []topology.GPULink{{From: 0, To: 1, PCIePath: "QPI"}},
			wantErr: []string{`matrix: link 0-1: unknown PCIe path "QPI" (want SameBoard, PIX, PXB, PHB, NODE, SYS or empty)`}},
		{name: "same direction twice", n: 2, links: []topology.GPULink{{From: 0, To: 1}, {From: 0, To: 1}},
			wantErr: []string{"matrix: link 0-1 described twice"}},
		{name: "asymmetric NVLinks", n: 3, links: []topology.GPULink{
			{From: 0, To: 2, NVLinks: 6}, {From: 2, To: 0, NVLinks: 4}},
			wantErr: []string{"matrix: link 2-0 not symmetric: NV4 one way, NV6 the other"}},
		{name: "asymmetric path", n: 2, links: []topology.GPULink{
			{From: 0, To: 1, PCIePath: "SYS"}, {From: 1, To: 0}},
			wantErr: []string{"matrix: link 1-0 not symmetric: - one way, SYS the other"}},
		{name: "all problems reported", n: 2, links: []topology.GPULink{{From: 0, To: 5}, {From: 0, To: 1, PCIePath: "x"}},
			wantErr: []string{"matrix: link 0-5: GPU index outside 0..1", `matrix: link 0-1: unknown PCIe path "x" (want SameBoard, PIX, PXB, PHB, NODE, SYS or empty)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := topology.NewMatrix(tt.n, tt.links)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("NewMatrix succeeded, want %q", tt.wantErr)
				}
				if diff := cmp.Diff(tt.wantErr, strings.Split(err.Error(), "\n")); diff != "" {
					t.Errorf("errors (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.N() != tt.n {
				t.Errorf("N = %d, want %d", m.N(), tt.n)
			}
			for _, l := range tt.links { // described pairs read back both ways
				for _, p := range [][2]int{{l.From, l.To}, {l.To, l.From}} {
					if got := m.NVLinks(p[0], p[1]); got != l.NVLinks {
						t.Errorf("NVLinks(%d,%d) = %d, want %d", p[0], p[1], got, l.NVLinks)
					}
					if got := m.PCIePath(p[0], p[1]); !strings.EqualFold(got, l.PCIePath) {
						t.Errorf("PCIePath(%d,%d) = %q, want %q", p[0], p[1], got, l.PCIePath)
					}
				}
			}
		})
	}
}

func TestPathScore(t *testing.T) {
	tests := []struct {
		name   string
		path   string
		want   int
		wantOK bool
	}{
		{name: "same board", path: "SameBoard", want: 60, wantOK: true},
		{name: "one PCIe switch", path: "PIX", want: 60, wantOK: true},
		{name: "several switches", path: "PXB", want: 50, wantOK: true},
		{name: "host bridge", path: "phb", want: 40, wantOK: true},
		{name: "same NUMA node", path: "NODE", want: 30, wantOK: true},
		{name: "across sockets", path: "SYS", want: 10, wantOK: true},
		{name: "unknown path", path: "", want: 0, wantOK: true},
		{name: "nonsense", path: "NV12", want: 0, wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := topology.PathScore(tt.path)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("PathScore(%q) = (%d, %v), want (%d, %v)", tt.path, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestScore(t *testing.T) {
	pcie8 := topotest.PCIeOnly(8).Matrix
	custom, err := topology.NewMatrix(4, []topology.GPULink{
		{From: 0, To: 1, PCIePath: topology.PathPXB},
		{From: 0, To: 2, PCIePath: topology.PathPHB},
		{From: 1, To: 2, NVLinks: 2, PCIePath: topology.PathSameBoard},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		m    *topology.Matrix
		a, b int
		want int
	}{
		{name: "DGX pair: 18 NVLinks", m: topotest.DGXH100().Matrix, a: 0, b: 7, want: 1800},
		{name: "island pair: 6 NVLinks", m: topotest.TwoIslands().Matrix, a: 1, b: 3, want: 600},
		{name: "across islands: SYS", m: topotest.TwoIslands().Matrix, a: 3, b: 4, want: 10},
		{name: "PCIe switch pair", m: pcie8, a: 2, b: 3, want: 60},
		{name: "same NUMA node", m: pcie8, a: 0, b: 3, want: 30},
		{name: "across NUMA nodes", m: pcie8, a: 1, b: 6, want: 10},
		{name: "PXB", m: custom, a: 1, b: 0, want: 50},
		{name: "PHB", m: custom, a: 0, b: 2, want: 40},
		{name: "NVLink adds to the PCIe path", m: custom, a: 2, b: 1, want: 260},
		{name: "undescribed pair", m: custom, a: 0, b: 3, want: 0},
		{name: "same GPU", m: custom, a: 1, b: 1, want: 0},
		{name: "outside the matrix", m: custom, a: 0, b: 9, want: 0},
		{name: "nil matrix", m: nil, a: 0, b: 1, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.Score(tt.a, tt.b); got != tt.want {
				t.Errorf("Score(%d,%d) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
			if got := tt.m.Score(tt.b, tt.a); got != tt.want {
				t.Errorf("Score(%d,%d) = %d, want %d (symmetry)", tt.b, tt.a, got, tt.want)
			}
		})
	}
}

func TestSetScore(t *testing.T) {
	islands := topotest.TwoIslands().Matrix
	pcie := topotest.PCIeOnly(8).Matrix
	tests := []struct {
		name string
		m    *topology.Matrix
		gpus []int
		want int
	}{
		{name: "empty set", m: islands, gpus: nil, want: 0},
		{name: "one GPU has no pairs", m: islands, gpus: []int{5}, want: 0},
		{name: "whole DGX", m: topotest.DGXH100().Matrix, gpus: []int{0, 1, 2, 3, 4, 5, 6, 7}, want: 28 * 1800},
		{name: "one full island", m: islands, gpus: []int{4, 5, 6, 7}, want: 6 * 600},
		{name: "split over the islands", m: islands, gpus: []int{0, 1, 4, 5}, want: 2*600 + 4*10},
		{name: "PIX pair", m: pcie, gpus: []int{0, 1}, want: 60},
		{name: "NUMA half", m: pcie, gpus: []int{0, 1, 2, 3}, want: 2*60 + 4*30},
		{name: "duplicate index adds nothing", m: pcie, gpus: []int{0, 1, 1}, want: 2 * 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.SetScore(tt.gpus); got != tt.want {
				t.Errorf("SetScore(%v) = %d, want %d", tt.gpus, got, tt.want)
			}
		})
	}
	// The ordering placement relies on: all-NVLink beats partial beats PCIe.
	full, partial := islands.SetScore([]int{0, 1, 2, 3}), islands.SetScore([]int{0, 1, 2, 4})
	pcieOnly := pcie.SetScore([]int{0, 1, 2, 3})
	if !(full > partial && partial > pcieOnly) {
		t.Errorf("want full NVLink %d > partial %d > PCIe %d", full, partial, pcieOnly)
	}
}

func TestIslands(t *testing.T) {
	chain, err := topology.NewMatrix(6, []topology.GPULink{
		{From: 0, To: 1, NVLinks: 1}, {From: 2, To: 1, NVLinks: 1}, // 0-1-2 through 1
		{From: 5, To: 4, NVLinks: 2}, {From: 3, To: 4, PCIePath: "PIX"},
	})
	if err != nil {
		t.Fatal(err)
	}
	empty, err := topology.NewMatrix(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		m    *topology.Matrix
		want [][]int
	}{
		{name: "NVSwitch: one island", m: topotest.DGXH100().Matrix, want: [][]int{{0, 1, 2, 3, 4, 5, 6, 7}}},
		{name: "two islands", m: topotest.TwoIslands().Matrix, want: [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}},
		{name: "PCIe only: every GPU alone", m: topotest.PCIeOnly(4).Matrix, want: [][]int{{0}, {1}, {2}, {3}}},
		{name: "transitive and PCIe edges ignored", m: chain, want: [][]int{{0, 1, 2}, {3}, {4, 5}}},
		{name: "no GPUs", m: empty, want: nil},
		{name: "nil matrix", m: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.m.Islands()); diff != "" {
				t.Errorf("Islands (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatrixString(t *testing.T) {
	tests := []struct {
		name string
		m    *topology.Matrix
	}{
		{name: "two-islands", m: topotest.TwoIslands().Matrix},
		{name: "pcie-6", m: topotest.PCIeOnly(6).Matrix},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.m.String() + "\n"
			path := filepath.Join("testdata", "matrix-"+tt.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("String (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatrixNUMA(t *testing.T) {
	base, err := topology.NewMatrix(4, []topology.GPULink{{From: 0, To: 1, NVLinks: 2}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		numa      []int
		wantErr   string
		wantNodes []int // NUMANodes(0, 1, 2, 3)
		wantGPU2  int
	}{
		{name: "two sockets", numa: []int{0, 0, 1, 1}, wantNodes: []int{0, 1}, wantGPU2: 1},
		{name: "one unknown", numa: []int{0, -1, 0, 0}, wantNodes: []int{0}, wantGPU2: 0},
		{name: "all unknown", numa: []int{-1, -1, -1, -1}, wantGPU2: -1},
		{name: "wrong length", numa: []int{0, 1}, wantErr: "2 NUMA nodes for 4 GPUs"},
		{name: "below -1", numa: []int{0, 0, -2, 0}, wantErr: "GPU 2: NUMA node -2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := base.WithNUMA(tt.numa)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !m.HasNUMA() || base.HasNUMA() {
				t.Errorf("HasNUMA: copy %v, base %v; want true, false (base untouched)", m.HasNUMA(), base.HasNUMA())
			}
			if diff := cmp.Diff(tt.wantNodes, m.NUMANodes([]int{3, 2, 1, 0})); diff != "" {
				t.Errorf("NUMANodes (-want +got):\n%s", diff)
			}
			if got := m.NUMA(2); got != tt.wantGPU2 {
				t.Errorf("NUMA(2) = %d, want %d", got, tt.wantGPU2)
			}
			if m.NVLinks(0, 1) != 2 || m.N() != 4 {
				t.Errorf("links lost in the copy: NVLinks(0,1) = %d, N = %d", m.NVLinks(0, 1), m.N())
			}
		})
	}
	if got := base.NUMA(0); got != -1 {
		t.Errorf("NUMA without data = %d, want -1", got)
	}
	var nilM *topology.Matrix
	if nilM.NUMA(0) != -1 || nilM.HasNUMA() || nilM.NUMANodes([]int{0}) != nil {
		t.Error("nil matrix should know no NUMA nodes")
	}
}
