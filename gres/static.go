package gres

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// StaticGPU is one GPU as the node config lists it, for nodes where NVML
// is not used (like Slurm's gres.conf with AutoDetect=off).
type StaticGPU struct {
	// Index is the GPU's ordinal; the list must hold 0..n-1 once each.
	Index int `mapstructure:"index" json:"index"`
	// UUID as `nvidia-smi -L` prints it; required, containers select by it.
	UUID string `mapstructure:"uuid" json:"uuid"`
	// Model is the product or gres type name ("h100"); required.
	Model string `mapstructure:"model" json:"model"`
	// MemoryMB is total device memory in MiB; required.
	MemoryMB int64 `mapstructure:"memory_mb" json:"memory_mb"`
	// ComputeCap is "major.minor" ("9.0"); optional.
	ComputeCap string `mapstructure:"compute_cap" json:"compute_cap,omitempty"`
	// PCIBusID is the PCI address ("0000:1b:00.0" or NVML's
	// "00000000:1B:00.0"); optional, stored in sysfs form.
	PCIBusID string `mapstructure:"pci_bus_id" json:"pci_bus_id,omitempty"`
	// NUMANode is the closest NUMA node; nil means unknown (-1).
	NUMANode *int `mapstructure:"numa_node" json:"numa_node,omitempty"`
	// File is the device file ("/dev/nvidia3"); optional, default
	// /dev/nvidia<Index>. It sets Device.Minor.
	File string `mapstructure:"file" json:"file,omitempty"`
	// Links is Slurm's Links= list, one entry per GPU in index order: -1
	// for this GPU itself, 0 for no NVLink (PCIe), N for N NVLinks, e.g.
	// "-1,18,18,0". As a Tide extension a PCIe entry may name its path
	// (PIX, PXB, PHB, NODE, SYS) instead of 0. Either every GPU has Links
	// or none does.
	Links string `mapstructure:"links" json:"links,omitempty"`
}

// StaticSource serves an inventory fixed in the node config. It knows no
// usage: every GPU reports healthy, its memory and utilisation unknown
// (-1).
type StaticSource struct {
	devs []Device
}

var _ Source = (*StaticSource)(nil)

// NewStatic validates gpus and returns a source for them. The errors name
// each offending GPU and are joined, so one pass shows every mistake.
func NewStatic(gpus []StaticGPU) (*StaticSource, error) {
	devs, err := StaticDevices(gpus)
	if err != nil {
		return nil, err
	}
	return &StaticSource{devs: devs}, nil
}

// Inventory returns a copy of the configured GPUs; node is unused.
func (s *StaticSource) Inventory(string) ([]Device, error) {
	out := make([]Device, len(s.devs))
	for i, d := range s.devs {
		out[i] = d
		out[i].Links = append([]Link(nil), d.Links...)
	}
	return out, nil
}

// Status reports every configured GPU healthy with its usage unknown:
// nothing here measures it, and an idle reading would make every job
// on the node look as if it left its GPUs idle.
func (s *StaticSource) Status() ([]Status, error) {
	out := make([]Status, len(s.devs))
	for i := range out {
		out[i] = Status{Index: i, Health: Healthy, MemUsedMB: UsageUnknown, UtilPct: UsageUnknown}
	}
	return out, nil
}

// The patterns compile on first use: every CLI process links this
// package (through api.Node), and compiling them at init cost each
// sbatch a tenth of a millisecond for a check only tided makes.
var (
	computeCapRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+\.[0-9]+$`) })
	devFileRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^/dev/nvidia([0-9]+)$`) })
)

// StaticDevices checks a static GPU list and turns it into Devices in
// index order: indexes 0..n-1 each once, UUIDs, bus ids and device files
// unique, links one per GPU, -1 for self only, and symmetric.
func StaticDevices(gpus []StaticGPU) ([]Device, error) {
	n := len(gpus)
	var errs []error
	bad := func(g StaticGPU, format string, args ...any) {
		errs = append(errs, fmt.Errorf("static gpu %d: %s", g.Index, fmt.Sprintf(format, args...)))
	}
	devs := make([]Device, n)
	seen := make([]bool, n)
	uuids, buses, minors := map[string]int{}, map[string]int{}, map[int]int{}
	links := make([][]string, n)
	withLinks := 0
	for _, g := range gpus {
		if g.Index < 0 || g.Index >= n {
			bad(g, "index out of range: %d gpus need indexes 0..%d", n, n-1)
			continue
		}
		if seen[g.Index] {
			bad(g, "index listed twice")
			continue
		}
		seen[g.Index] = true
		d := Device{
			Index:      g.Index,
			UUID:       strings.TrimSpace(g.UUID),
			Model:      strings.ToLower(strings.TrimSpace(g.Model)),
			MemoryMB:   g.MemoryMB,
			Health:     Healthy,
			Minor:      g.Index,
			ComputeCap: g.ComputeCap,
			NUMANode:   -1,
		}
		if d.UUID == "" {
			bad(g, "uuid missing (see nvidia-smi -L)")
		} else if prev, dup := uuids[d.UUID]; dup {
			bad(g, "uuid %s also used by gpu %d", d.UUID, prev)
		} else {
			uuids[d.UUID] = g.Index
		}
		if d.Model == "" {
			bad(g, "model missing")
		}
		if g.MemoryMB <= 0 {
			bad(g, "memory_mb must be positive, not %d", g.MemoryMB)
		}
		if g.ComputeCap != "" && !computeCapRE().MatchString(g.ComputeCap) {
			bad(g, "compute_cap %q: want major.minor such as 9.0", g.ComputeCap)
		}
		if g.PCIBusID != "" {
			bus, err := NormalizeBusID(g.PCIBusID)
			switch {
			case err != nil:
				bad(g, "%v", err)
			case buses[bus] != 0:
				bad(g, "pci_bus_id %s also used by gpu %d", bus, buses[bus]-1)
			default:
				buses[bus] = g.Index + 1
				d.PCIBusID = bus
			}
		}
		if g.NUMANode != nil {
			if *g.NUMANode < -1 {
				bad(g, "numa_node %d: want -1 (unknown) or a node number", *g.NUMANode)
			} else {
				d.NUMANode = *g.NUMANode
			}
		}
		if g.File != "" {
			m := devFileRE().FindStringSubmatch(g.File)
			if m == nil {
				bad(g, "file %q: want /dev/nvidiaN", g.File)
			} else {
				d.Minor, _ = strconv.Atoi(m[1])
			}
		}
		if prev, dup := minors[d.Minor]; dup {
			bad(g, "device /dev/nvidia%d also used by gpu %d", d.Minor, prev)
		} else {
			minors[d.Minor] = g.Index
		}
		if strings.TrimSpace(g.Links) != "" {
			withLinks++
			links[g.Index] = splitLinks(g.Links)
		}
		devs[g.Index] = d
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if withLinks > 0 && withLinks < n {
		for i := range links {
			if links[i] == nil {
				errs = append(errs, fmt.Errorf("static gpu %d: links missing while other gpus have them", i))
			}
		}
		return nil, errors.Join(errs...)
	}
	if withLinks == 0 {
		return devs, nil
	}
	for i := range devs {
		ls, err := parseLinks(links[i], i, n)
		if err != nil {
			errs = append(errs, fmt.Errorf("static gpu %d: links %q: %w", i, strings.Join(links[i], ","), err))
			continue
		}
		devs[i].Links = ls
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if n == 1 {
		devs[0].Links = nil
	}
	if err := CheckInventory(devs); err != nil {
		return nil, fmt.Errorf("static gpus: %w", err)
	}
	return devs, nil
}

// splitLinks splits a Links= list into trimmed entries.
func splitLinks(s string) []string {
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// pciePaths are the path names a static link entry may use.
var pciePaths = map[string]string{
	"pix": PathPIX, "pxb": PathPXB, "phb": PathPHB, "node": PathNODE, "sys": PathSYS,
}

// parseLinks turns GPU self's Links= entries into one Link per peer of
// the n GPUs.
func parseLinks(entries []string, self, n int) ([]Link, error) {
	if len(entries) != n {
		return nil, fmt.Errorf("%d entries, want one per gpu (%d) with -1 at %d for this gpu", len(entries), n, self)
	}
	var errs []error
	out := make([]Link, 0, len(entries))
	for peer, e := range entries {
		if peer == self {
			if e != "-1" {
				errs = append(errs, fmt.Errorf("entry %d is this gpu itself and must be -1, not %q", peer, e))
			}
			continue
		}
		if path, ok := pciePaths[strings.ToLower(e)]; ok {
			out = append(out, Link{Peer: peer, Kind: LinkPCIe, PCIePath: path})
			continue
		}
		v, err := strconv.Atoi(e)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("entry %d: %q is not a link count or PCIe path", peer, e))
		case v == -1:
			errs = append(errs, fmt.Errorf("entry %d: -1 is only for the gpu itself (entry %d)", peer, self))
		case v < 0:
			errs = append(errs, fmt.Errorf("entry %d: negative link count %d", peer, v))
		case v == 0:
			out = append(out, Link{Peer: peer, Kind: LinkPCIe})
		default:
			out = append(out, Link{Peer: peer, Kind: LinkNVLink, NVLinks: v})
		}
	}
	return out, errors.Join(errs...)
}

// FormatLinks writes d's links as a Links= list for a node of n GPUs (the
// inverse of the static parser): "-1,18,18,SYS". Peers d does not describe
// print as 0, and PCIe links of unknown path as 0.
func FormatLinks(d Device, n int) string {
	parts := make([]string, n)
	for j := range parts {
		parts[j] = "0"
	}
	if d.Index >= 0 && d.Index < n {
		parts[d.Index] = "-1"
	}
	for _, l := range d.Links {
		if l.Peer < 0 || l.Peer >= n || l.Peer == d.Index {
			continue
		}
		switch {
		case l.Kind == LinkNVLink:
			parts[l.Peer] = strconv.Itoa(l.NVLinks)
		case l.PCIePath != "":
			parts[l.Peer] = l.PCIePath
		}
	}
	return strings.Join(parts, ",")
}

// NormalizeBusID rewrites a PCI address to sysfs form, lower case with a
// 4-digit domain: "00000000:1B:00.0" (NVML) and "1b:00.0" (lspci) both
// become "0000:1b:00.0". GPUs are matched by bus id across NVML calls and
// against sysfs, which spell it differently.
func NormalizeBusID(s string) (string, error) {
	orig := s
	s = strings.TrimSpace(s)
	dom := "0"
	if strings.Count(s, ":") == 2 {
		dom, s, _ = strings.Cut(s, ":")
	}
	bus, rest, ok1 := strings.Cut(s, ":")
	dev, fn, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 {
		return "", fmt.Errorf("pci bus id %q: want [domain:]bus:device.function", orig)
	}
	var v [4]uint64
	for i, p := range []struct {
		s    string
		bits int
	}{{dom, 32}, {bus, 8}, {dev, 5}, {fn, 3}} {
		x, err := strconv.ParseUint(p.s, 16, p.bits)
		if err != nil || p.s == "" {
			return "", fmt.Errorf("pci bus id %q: want [domain:]bus:device.function in hex", orig)
		}
		v[i] = x
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", v[0], v[1], v[2], v[3]), nil
}
