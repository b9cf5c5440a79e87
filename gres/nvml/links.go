package nvml

import (
	"cmp"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tide-hpc/tide/gres"
)

// nvlinkEnds is what one GPU's NVLinks lead to.
type nvlinkEnds struct {
	peers    map[int]int // peer index → links straight to it
	switches int         // links into the NVSwitch fabric
}

// readLinks fills devs[i].Links for every pair of readable GPUs. A pair
// with NVLinks gets their count: direct links plus, when both GPUs have
// links into NVSwitches, the fewer of the two switch link counts (that is
// the bandwidth the fabric gives the pair; nvidia-smi prints NV18 for
// every pair of a DGX H100). Other pairs get their PCIe path from the
// common ancestor NVML reports. handles[i] is nil for a lost GPU, which
// gets no links and appears in nobody's.
func (s *Source) readLinks(devs []gres.Device, handles []nvml.Device) {
	n := len(devs)
	if n < 2 {
		return
	}
	byBus := make(map[string]int, n)
	for i, d := range devs {
		if d.PCIBusID != "" {
			byBus[d.PCIBusID] = i
		}
	}
	typed := s.hasSymbol("nvmlDeviceGetNvLinkRemoteDeviceType")
	ends := make([]nvlinkEnds, n)
	for i, h := range handles {
		if h != nil {
			ends[i] = readNVLinks(h, i, byBus, typed)
		}
	}
	for i := range devs {
		if handles[i] == nil {
			continue
		}
		devs[i].Links = make([]gres.Link, 0, n-1)
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			if handles[i] == nil || handles[j] == nil {
				continue
			}
			// A link is counted from both ends; trust what both see.
			count := min(ends[i].peers[j], ends[j].peers[i])
			if ends[i].switches > 0 && ends[j].switches > 0 {
				count += min(ends[i].switches, ends[j].switches)
			}
			l := gres.Link{Kind: gres.LinkNVLink, NVLinks: count}
			if count == 0 {
				l = gres.Link{Kind: gres.LinkPCIe, PCIePath: pciePath(handles[i], handles[j])}
			}
			l.Peer = j
			devs[i].Links = append(devs[i].Links, l)
			l.Peer = i
			devs[j].Links = append(devs[j].Links, l)
		}
	}
	for i := range devs {
		if devs[i].Links != nil {
			sortLinks(devs[i].Links)
		}
	}
}

// readNVLinks walks GPU self's NVLinks until the driver says the index is
// past the last link. A link whose far end is one of the node's GPUs
// counts toward that peer; one ending at an NVSwitch counts toward the
// fabric. When the driver cannot type the far end (typed false, or the
// call unsupported), a bus id that is no GPU of this node is taken for a
// switch.
func readNVLinks(h nvml.Device, self int, byBus map[string]int, typed bool) nvlinkEnds {
	e := nvlinkEnds{peers: map[int]int{}}
	for link := range nvml.NVLINK_MAX_LINKS {
		state, ret := h.GetNvLinkState(link)
		if ret == nvml.ERROR_INVALID_ARGUMENT || ret == nvml.ERROR_GPU_IS_LOST {
			break // past the last link, or nothing more to read
		}
		if ret != nvml.SUCCESS || state != nvml.FEATURE_ENABLED {
			continue // unsupported or down: this link carries nothing
		}
		kind := nvml.NVLINK_DEVICE_TYPE_UNKNOWN
		if typed {
			if t, ret := h.GetNvLinkRemoteDeviceType(link); ret == nvml.SUCCESS {
				kind = t
			}
		}
		switch kind {
		case nvml.NVLINK_DEVICE_TYPE_SWITCH:
			e.switches++
			continue
		case nvml.NVLINK_DEVICE_TYPE_IBMNPU:
			continue // a link to the CPU, not to a GPU
		}
		pci, ret := h.GetNvLinkRemotePciInfo(link)
		if ret != nvml.SUCCESS {
			continue
		}
		peer, ok := byBus[busID(pci)]
		switch {
		case ok && peer != self:
			e.peers[peer]++
		case !ok && kind == nvml.NVLINK_DEVICE_TYPE_UNKNOWN:
			e.switches++
		}
	}
	return e
}

// pciePath maps NVML's common ancestor of two GPUs to nvidia-smi's name
// for the path; "" when the driver cannot say.
func pciePath(a, b nvml.Device) string {
	level, ret := a.GetTopologyCommonAncestor(b)
	if ret != nvml.SUCCESS {
		return ""
	}
	switch level {
	case nvml.TOPOLOGY_INTERNAL, nvml.TOPOLOGY_SINGLE:
		return gres.PathPIX
	case nvml.TOPOLOGY_MULTIPLE:
		return gres.PathPXB
	case nvml.TOPOLOGY_HOSTBRIDGE:
		return gres.PathPHB
	case nvml.TOPOLOGY_NODE:
		return gres.PathNODE
	case nvml.TOPOLOGY_SYSTEM:
		return gres.PathSYS
	}
	return ""
}

// sortLinks orders links by peer.
func sortLinks(ls []gres.Link) {
	slices.SortFunc(ls, func(a, b gres.Link) int { return cmp.Compare(a.Peer, b.Peer) })
}
