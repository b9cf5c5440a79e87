package topology

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// PCIe paths between two GPUs, named as `nvidia-smi topo -m` names them
// (SameBoard is NVML's P2P level for two GPUs on one card), from closest
// to farthest.
const (
	PathSameBoard = "SameBoard"
	PathPIX       = "PIX"  // at most one PCIe switch between the GPUs
	PathPXB       = "PXB"  // several PCIe switches, no host bridge
	PathPHB       = "PHB"  // through a PCIe host bridge (CPU root complex)
	PathNODE      = "NODE" // between host bridges of one NUMA node
	PathSYS       = "SYS"  // across the inter-socket link
)

// NVLinkScore is what each NVLink between a pair adds to its Score, so one
// NVLink outranks any PCIe path, as in go-gpuallocator.
const NVLinkScore = 100

// pathScores rank PCIe paths. "" (unknown) scores 0, below SYS: a pair
// nobody described is no reason to prefer it.
var pathScores = map[string]int{
	PathSameBoard: 60,
	PathPIX:       60,
	PathPXB:       50,
	PathPHB:       40,
	PathNODE:      30,
	PathSYS:       10,
	"":            0,
}

// PathScore returns the score of a PCIe path (case-insensitive) and
// whether the path is known; the empty path (unknown) scores 0 and is ok.
func PathScore(path string) (int, bool) {
	canon, ok := canonicalPath(path)
	if !ok {
		return 0, false
	}
	return pathScores[canon], true
}

func canonicalPath(p string) (string, bool) {
	for name := range pathScores {
		if strings.EqualFold(name, p) {
			return name, true
		}
	}
	return "", false
}

// GPULink describes how GPU From reaches GPU To on one node. The matrix is
// symmetric, so describing a pair in one direction is enough; where both
// directions are given they must agree. It mirrors gres.Link without
// importing gres, so that topology stays at the bottom of the imports.
type GPULink struct {
	From, To int
	// NVLinks is the number of NVLink lanes between the two GPUs (18 on
	// H100 SXM through NVSwitch); 0 for PCIe only.
	NVLinks int
	// PCIePath is one of the Path constants (case-insensitive), or ""
	// when unknown or irrelevant (NVLink pairs usually leave it empty).
	PCIePath string
}

// Matrix is the link matrix of one node's GPUs, indexed by GPU index
// (0..N-1). It is immutable after NewMatrix and safe for concurrent use;
// pair scores are precomputed so that allocation policies, which try many
// subsets, pay one slice load per pair.
type Matrix struct {
	n       int
	nvlinks []int
	paths   []string
	scores  []int
	// numa is each GPU's NUMA node (nil: unknown, see WithNUMA).
	numa []int
}

// NewMatrix builds the matrix of n GPUs from link descriptions. Pairs not
// described have no NVLink and an unknown PCIe path. It rejects indexes
// outside 0..n-1, self links, negative link counts, unknown PCIe paths,
// a direction described twice, and the two directions of a pair
// disagreeing; all problems are joined into one error.
func NewMatrix(n int, links []GPULink) (*Matrix, error) {
	if n < 0 {
		return nil, fmt.Errorf("matrix: %d GPUs", n)
	}
	m := &Matrix{n: n, nvlinks: make([]int, n*n), paths: make([]string, n*n), scores: make([]int, n*n)}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("matrix: "+format, args...))
	}
	given := make([]bool, n*n) // direction From->To already described
	for _, l := range links {
		switch {
		case l.From < 0 || l.From >= n || l.To < 0 || l.To >= n:
			bad("link %d-%d: GPU index outside 0..%d", l.From, l.To, n-1)
			continue
		case l.From == l.To:
			bad("link %d-%d: a GPU cannot link to itself", l.From, l.To)
			continue
		case l.NVLinks < 0:
			bad("link %d-%d: %d NVLinks", l.From, l.To, l.NVLinks)
			continue
		}
		path, ok := canonicalPath(l.PCIePath)
		if !ok {
			bad("link %d-%d: unknown PCIe path %q (want SameBoard, PIX, PXB, PHB, NODE, SYS or empty)", l.From, l.To, l.PCIePath)
			continue
		}
		fwd, back := l.From*n+l.To, l.To*n+l.From
		if given[fwd] {
			bad("link %d-%d described twice", l.From, l.To)
			continue
		}
		given[fwd] = true
		if given[back] {
			if m.nvlinks[back] != l.NVLinks || m.paths[back] != path {
				bad("link %d-%d not symmetric: %s one way, %s the other",
					l.From, l.To, linkString(l.NVLinks, path), linkString(m.nvlinks[back], m.paths[back]))
			}
			continue
		}
		score := l.NVLinks*NVLinkScore + pathScores[path]
		for _, i := range []int{fwd, back} {
			m.nvlinks[i], m.paths[i], m.scores[i] = l.NVLinks, path, score
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return m, nil
}

// N returns the number of GPUs; 0 for a nil matrix.
func (m *Matrix) N() int {
	if m == nil {
		return 0
	}
	return m.n
}

func (m *Matrix) idx(a, b int) (int, bool) {
	if m == nil || a < 0 || b < 0 || a >= m.n || b >= m.n || a == b {
		return 0, false
	}
	return a*m.n + b, true
}

// WithNUMA returns a copy of m that also knows the NUMA node closest to
// each GPU (numa[i] for GPU i, -1 when unknown), so that placement can
// keep a job's GPUs on one NUMA node and bind its CPUs and memory there.
// It rejects a list whose length is not N or a node below -1. The link
// data is shared with m (both are immutable).
func (m *Matrix) WithNUMA(numa []int) (*Matrix, error) {
	if m == nil {
		return nil, errors.New("matrix: WithNUMA on a nil matrix")
	}
	if len(numa) != m.n {
		return nil, fmt.Errorf("matrix: %d NUMA nodes for %d GPUs", len(numa), m.n)
	}
	for i, x := range numa {
		if x < -1 {
			return nil, fmt.Errorf("matrix: GPU %d: NUMA node %d (want -1 for unknown or a node number)", i, x)
		}
	}
	c := *m
	c.numa = append([]int(nil), numa...)
	return &c, nil
}

// NUMA returns the NUMA node closest to GPU i; -1 when the matrix has no
// NUMA data, the GPU's node is unknown, or i is outside the matrix.
func (m *Matrix) NUMA(i int) int {
	if m == nil || m.numa == nil || i < 0 || i >= m.n {
		return -1
	}
	return m.numa[i]
}

// HasNUMA reports whether the matrix carries NUMA nodes (WithNUMA).
func (m *Matrix) HasNUMA() bool { return m != nil && m.numa != nil }

// NUMANodes returns the distinct known NUMA nodes of gpus, ascending
// (nil when none is known): the nodes a job on those GPUs should run its
// CPUs and memory on.
func (m *Matrix) NUMANodes(gpus []int) []int {
	var out []int
	for _, g := range gpus {
		if x := m.NUMA(g); x >= 0 && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}

// NVLinks returns the NVLink count between GPUs a and b; 0 for PCIe-only
// pairs, a == b, or indexes outside the matrix.
func (m *Matrix) NVLinks(a, b int) int {
	if i, ok := m.idx(a, b); ok {
		return m.nvlinks[i]
	}
	return 0
}

// PCIePath returns the PCIe path between a and b in canonical spelling;
// "" when unknown, a == b, or outside the matrix.
func (m *Matrix) PCIePath(a, b int) string {
	if i, ok := m.idx(a, b); ok {
		return m.paths[i]
	}
	return ""
}

// Score rates the pair a, b: NVLinkScore per NVLink plus the PathScore of
// its PCIe path (SameBoard/PIX 60, PXB 50, PHB 40, NODE 30, SYS 10,
// unknown 0). 0 for a == b or indexes outside the matrix.
func (m *Matrix) Score(a, b int) int {
	if i, ok := m.idx(a, b); ok {
		return m.scores[i]
	}
	return 0
}

// SetScore is the sum of Score over all unordered pairs of gpus: the
// aggregate a policy maximises when it picks a set of GPUs for one job.
// Repeated indexes add nothing for their pair with themselves.
func (m *Matrix) SetScore(gpus []int) int {
	total := 0
	for i, a := range gpus {
		for _, b := range gpus[i+1:] {
			total += m.Score(a, b)
		}
	}
	return total
}

// Islands returns the NVLink domains: connected components of the graph
// whose edges are pairs with at least one NVLink. Each island is sorted,
// islands are ordered by their lowest GPU, and a GPU without NVLink is an
// island of its own. Nil for an empty or nil matrix.
func (m *Matrix) Islands() [][]int {
	n := m.N()
	if n == 0 {
		return nil
	}
	comp := make([]int, n)
	for i := range comp {
		comp[i] = -1
	}
	var out [][]int
	for s := 0; s < n; s++ {
		if comp[s] >= 0 {
			continue
		}
		id := len(out)
		island := []int{s}
		comp[s] = id
		for q := 0; q < len(island); q++ {
			a := island[q]
			for b := 0; b < n; b++ {
				if comp[b] < 0 && m.nvlinks[a*n+b] > 0 {
					comp[b] = id
					island = append(island, b)
				}
			}
		}
		sort.Ints(island)
		out = append(out, island)
	}
	return out
}

// String prints the matrix like `nvidia-smi topo -m` (X on the diagonal,
// NV<n>, the PCIe path, or "-" where unknown), for logs and test failures.
func (m *Matrix) String() string {
	n := m.N()
	rows := make([]string, 0, n+1)
	row := func(head string, cells func(j int) string) {
		var b strings.Builder
		fmt.Fprintf(&b, "%-5s", head)
		for j := 0; j < n; j++ {
			fmt.Fprintf(&b, " %-6s", cells(j))
		}
		rows = append(rows, strings.TrimRight(b.String(), " "))
	}
	row("", func(j int) string { return "GPU" + strconv.Itoa(j) })
	for i := 0; i < n; i++ {
		row("GPU"+strconv.Itoa(i), func(j int) string {
			if i == j {
				return "X"
			}
			return linkString(m.nvlinks[i*n+j], m.paths[i*n+j])
		})
	}
	return strings.Join(rows, "\n")
}

func linkString(nv int, path string) string {
	switch {
	case nv > 0:
		return "NV" + strconv.Itoa(nv)
	case path != "":
		return path
	}
	return "-"
}
