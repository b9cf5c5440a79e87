package gres

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// CheckInventory reports what is inconsistent in one node's GPU list, so
// that a bad discovery or config fails at registration and not inside an
// allocation policy: indexes must be 0..n-1 in order, UUIDs unique, each
// link must name another GPU of the node at most once with a known kind,
// and where both GPUs describe their link they must agree. A nil or empty
// list is valid. All problems are joined into one error.
func CheckInventory(devs []Device) error {
	var errs []error
	bad := func(i int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("gpu %d: %s", i, fmt.Sprintf(format, args...)))
	}
	n := len(devs)
	uuids := map[string]int{}
	for i, d := range devs {
		if d.Index != i {
			bad(i, "index %d out of order (position %d)", d.Index, i)
		}
		if d.UUID != "" {
			if prev, dup := uuids[d.UUID]; dup {
				bad(i, "uuid %s also used by gpu %d", d.UUID, prev)
			}
			uuids[d.UUID] = i
		}
		if d.NUMANode < -1 {
			bad(i, "numa node %d: want -1 (unknown) or a node number", d.NUMANode)
		}
		peers := map[int]bool{}
		for _, l := range d.Links {
			switch {
			case l.Peer < 0 || l.Peer >= n:
				bad(i, "link to gpu %d, which the node lacks", l.Peer)
				continue
			case l.Peer == i:
				bad(i, "link to itself")
				continue
			case peers[l.Peer]:
				bad(i, "two links to gpu %d", l.Peer)
				continue
			}
			peers[l.Peer] = true
			switch l.Kind {
			case LinkNVLink:
				if l.NVLinks <= 0 || l.PCIePath != "" {
					bad(i, "nvlink to gpu %d: want a positive link count and no PCIe path", l.Peer)
				}
			case LinkPCIe:
				if l.NVLinks != 0 || !validPath(l.PCIePath) {
					bad(i, "pcie link to gpu %d: want no NVLinks and a path of PIX, PXB, PHB, NODE, SYS or none", l.Peer)
				}
			default:
				bad(i, "link to gpu %d of unknown kind %q", l.Peer, l.Kind)
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for i := range devs {
		for _, l := range devs[i].Links {
			if l.Peer < i {
				continue
			}
			back, ok := devs[l.Peer].Link(i)
			if !ok {
				continue
			}
			if back.Kind != l.Kind || back.NVLinks != l.NVLinks || back.PCIePath != l.PCIePath {
				bad(i, "link not symmetric: gpu %d says %s to gpu %d, gpu %d says %s back",
					i, l, l.Peer, l.Peer, back)
			}
		}
	}
	return errors.Join(errs...)
}

func validPath(p string) bool {
	switch p {
	case "", PathPIX, PathPXB, PathPHB, PathNODE, PathSYS:
		return true
	}
	return false
}

// String prints the link the way `nvidia-smi topo -m` does: "NV18",
// "PIX", or "PCIe" when the path is unknown.
func (l Link) String() string {
	switch {
	case l.Kind == LinkNVLink:
		return fmt.Sprintf("NV%d", l.NVLinks)
	case l.PCIePath != "":
		return l.PCIePath
	}
	return "PCIe"
}

// FormatTopology prints the node's GPU matrix like `nvidia-smi topo -m`
// (X for self, NV<n>, PIX … SYS, PCIe when the path is unknown, "-"
// where a GPU does not describe the pair) with each GPU's NUMA node and
// bus id, so logs and checks can be compared with the real thing.
func FormatTopology(devs []Device) string {
	var b strings.Builder
	row := func(cells []string) {
		var line strings.Builder
		for _, c := range cells {
			fmt.Fprintf(&line, "%-6s ", c)
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteString("\n")
	}
	head := []string{""}
	for i := range devs {
		head = append(head, fmt.Sprintf("GPU%d", i))
	}
	row(append(head, "NUMA", "BUS"))
	for i, d := range devs {
		cells := []string{fmt.Sprintf("GPU%d", i)}
		for j := range devs {
			switch l, ok := d.Link(j); {
			case j == i:
				cells = append(cells, "X")
			case ok:
				cells = append(cells, l.String())
			default:
				cells = append(cells, "-")
			}
		}
		numa := "N/A"
		if d.NUMANode >= 0 {
			numa = strconv.Itoa(d.NUMANode)
		}
		bus := d.PCIBusID
		if bus == "" {
			bus = "N/A"
		}
		row(append(cells, numa, bus))
	}
	return b.String()
}
