package nvml

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// go-nvml's DGX mocks give names, memory, compute capability and MIG, but
// no bus ids, NUMA, NVLink or topology. machine describes those, and
// install sets the missing mock functions from it.

// end is one NVLink of a GPU as the driver would report it.
type end struct {
	unsupported bool // GetNvLinkState says ERROR_NOT_SUPPORTED
	down        bool // FEATURE_DISABLED
	kind        nvml.IntNvLinkDeviceType
	remote      string // far end's bus id, NVML form
}

type machine struct {
	bus      []string // NVML form: "00000000:18:00.0"
	numa     []int    // -1: GetNumaNodeId says ERROR_NOT_SUPPORTED
	links    [][]end  // per GPU, per link index; past the end: ERROR_INVALID_ARGUMENT
	ancestor func(i, j int) (nvml.GpuTopologyLevel, nvml.Return)
	symbols  bool // the driver exports GetNumaNodeId and GetNvLinkRemoteDeviceType
}

// dgxBuses are a DGX H100's GPU bus numbers.
var dgxBuses = []int{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}

func nvmlBus(b int) string { return fmt.Sprintf("00000000:%02X:00.0", b) }

// uuidOf is the deterministic UUID install gives GPU i.
func uuidOf(i int) string { return fmt.Sprintf("GPU-%08x-1111-2222-3333-%012x", i, i) }

// dgxMachine is a DGX: 8 GPUs, each with perSwitch[s] links into NVSwitch
// s, NUMA 0 for the first four. typed says whether the driver can name
// the far end's type; without it the NVSwitch's bus id (no GPU of the
// node) has to tell.
func dgxMachine(typed bool, perSwitch []int) machine {
	m := machine{symbols: typed}
	var switchBus []string
	for s := range perSwitch {
		switchBus = append(switchBus, nvmlBus(0x05+s))
	}
	for i, b := range dgxBuses {
		m.bus = append(m.bus, nvmlBus(b))
		m.numa = append(m.numa, i/4)
		var ls []end
		for s, k := range perSwitch {
			for range k {
				ls = append(ls, end{kind: nvml.NVLINK_DEVICE_TYPE_SWITCH, remote: switchBus[s]})
			}
		}
		m.links = append(m.links, ls)
	}
	m.ancestor = func(i, j int) (nvml.GpuTopologyLevel, nvml.Return) { return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS }
	return m
}

// bridgedMachine is four PCIe GPUs: 0 and 1 joined by a 12-link NVLink
// bridge (one link down, one the driver cannot read), 2 and 3 under one
// PCIe switch without NVLink, NUMA 0 for 0-1 and 1 for 2-3. The pair 1-3
// has no topology answer.
func bridgedMachine() machine {
	m := machine{symbols: true}
	for i := range 4 {
		m.bus = append(m.bus, nvmlBus(0x41+i))
		m.numa = append(m.numa, i/2)
	}
	bridge := func(peer int) []end {
		var ls []end
		for range 12 {
			ls = append(ls, end{kind: nvml.NVLINK_DEVICE_TYPE_GPU, remote: m.bus[peer]})
		}
		ls[3].down = true
		ls[7].unsupported = true
		return ls
	}
	noNVLink := make([]end, nvml.NVLINK_MAX_LINKS)
	for k := range noNVLink {
		noNVLink[k].unsupported = true
	}
	m.links = [][]end{bridge(1), bridge(0), noNVLink, noNVLink}
	m.ancestor = func(i, j int) (nvml.GpuTopologyLevel, nvml.Return) {
		switch {
		case min(i, j) == 1 && max(i, j) == 3:
			return 0, nvml.ERROR_NOT_SUPPORTED
		case i/2 == j/2:
			return nvml.TOPOLOGY_SINGLE, nvml.SUCCESS
		case min(i, j) == 0 && max(i, j) == 2:
			return nvml.TOPOLOGY_NODE, nvml.SUCCESS
		}
		return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
	}
	return m
}

func pciInfo(bus string) nvml.PciInfo {
	var p nvml.PciInfo
	for k := range len(bus) {
		p.BusId[k] = int8(bus[k])
	}
	return p
}

var errNoSymbol = errors.New("undefined symbol")

// install sets the mock functions the DGX fakes lack on srv's devices.
func install(srv *server.Server, m machine) *server.Server {
	srv.LookupSymbolFunc = func(name string) error {
		if m.symbols {
			return nil
		}
		return fmt.Errorf("%s: %w", name, errNoSymbol)
	}
	for i, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.UUID = uuidOf(i)
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return pciInfo(m.bus[i]), nvml.SUCCESS }
		dev.GetNumaNodeIdFunc = func() (int, nvml.Return) {
			if m.numa[i] < 0 {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			return m.numa[i], nvml.SUCCESS
		}
		link := func(l int) (end, nvml.Return) {
			switch {
			case l < 0 || l >= len(m.links[i]):
				return end{}, nvml.ERROR_INVALID_ARGUMENT
			case m.links[i][l].unsupported:
				return end{}, nvml.ERROR_NOT_SUPPORTED
			}
			return m.links[i][l], nvml.SUCCESS
		}
		dev.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
			e, ret := link(l)
			if ret != nvml.SUCCESS {
				return 0, ret
			}
			if e.down {
				return nvml.FEATURE_DISABLED, nvml.SUCCESS
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		dev.GetNvLinkRemoteDeviceTypeFunc = func(l int) (nvml.IntNvLinkDeviceType, nvml.Return) {
			if !m.symbols {
				panic("GetNvLinkRemoteDeviceType called although the driver lacks it")
			}
			e, ret := link(l)
			return e.kind, ret
		}
		dev.GetNvLinkRemotePciInfoFunc = func(l int) (nvml.PciInfo, nvml.Return) {
			e, ret := link(l)
			return pciInfo(e.remote), ret
		}
		dev.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			return m.ancestor(i, other.(*server.Device).Index)
		}
		if !m.symbols {
			dev.GetNumaNodeIdFunc = nil // calling it would kill a real process
		}
	}
	return srv
}

// newDGXH100 is a DGX H100: 18 NVLink4 links per GPU into 4 NVSwitches.
func newDGXH100(typed bool) *server.Server {
	return install(dgxh100.New(), dgxMachine(typed, []int{5, 4, 4, 5}))
}

// newDGXA100 is a DGX A100: 12 NVLink3 links per GPU, 2 into each of 6
// NVSwitches.
func newDGXA100() *server.Server {
	return install(dgxa100.New(), dgxMachine(true, []int{2, 2, 2, 2, 2, 2}))
}

func newBridged() *server.Server {
	return install(dgxh100.NewWithGPUs(gpus.Multiple(4, gpus.A100_PCIE_80GB)...), bridgedMachine())
}

// device returns srv's GPU i.
func device(srv *server.Server, i int) *server.Device { return srv.Devices[i].(*server.Device) }
