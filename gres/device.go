package gres

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// Health words a node reports for each GPU.
const (
	Healthy   = "ok"
	Unhealthy = "unhealthy"
)

// Link kinds: how two GPUs of one node reach each other.
const (
	LinkNVLink = "nvlink"
	LinkPCIe   = "pcie"
)

// PCIe paths between two GPUs, named as `nvidia-smi topo -m` names them,
// from closest to farthest. Allocation policies rank PCIe peers by them.
const (
	// PathPIX: at most one PCIe switch between the two GPUs.
	PathPIX = "PIX"
	// PathPXB: several PCIe switches, but no host bridge.
	PathPXB = "PXB"
	// PathPHB: through a PCIe host bridge (the CPU's root complex).
	PathPHB = "PHB"
	// PathNODE: between host bridges of one NUMA node.
	PathNODE = "NODE"
	// PathSYS: across the inter-socket link (QPI/UPI/Infinity Fabric).
	PathSYS = "SYS"
)

// Device is one GPU as a node reports it at registration. Everything here
// is static for the life of the node daemon; what changes (health, memory
// in use) travels in Status with heartbeats.
type Device struct {
	// Index is the GPU's ordinal on its node as NVML enumerates it (PCI
	// bus order); CUDA_VISIBLE_DEVICES uses it with CUDA_DEVICE_ORDER=PCI_BUS_ID.
	Index int `json:"index"`
	// UUID ("GPU-…") names the GPU across reboots and reorderings;
	// containers select GPUs by it (NVIDIA_VISIBLE_DEVICES).
	UUID string `json:"uuid"`
	// Model is the lower-cased product name ("nvidia h100 80gb hbm3" from
	// NVML, or whatever the node config says, such as "h100"). Use
	// ModelShort for gres type matching.
	Model string `json:"model"`
	// MemoryMB is the GPU's total memory in MiB.
	MemoryMB int64 `json:"memory_mb"`
	// Health is Healthy or Unhealthy as known at registration; "" is
	// treated as healthy by older readers.
	Health string `json:"health,omitempty"`
	// Minor is the device file number: the GPU is /dev/nvidia<Minor>. It
	// is what a devices cgroup allows, and need not equal Index; -1 when
	// unknown.
	Minor int `json:"minor,omitempty"`
	// ComputeCap is the CUDA compute capability, "major.minor" ("9.0");
	// "" when unknown.
	ComputeCap string `json:"compute_cap,omitempty"`
	// PCIBusID is the GPU's PCI address in sysfs form, lower case with a
	// 4-digit domain ("0000:1b:00.0"); "" when unknown.
	PCIBusID string `json:"pci_bus_id,omitempty"`
	// NUMANode is the NUMA node closest to the GPU, for CPU and memory
	// binding; -1 when unknown. A Device built without it says 0.
	NUMANode int `json:"numa_node,omitempty"`
	// Links describe how this GPU reaches each other GPU of the node, one
	// entry per peer in peer order; nil when the topology is unknown or
	// the node has one GPU.
	Links []Link `json:"links,omitempty"`
}

// Link is this GPU's connection to one peer GPU on the same node.
type Link struct {
	// Peer is the other GPU's Index.
	Peer int `json:"peer"`
	// Kind is LinkNVLink when the two GPUs share at least one NVLink
	// (directly or through NVSwitch), else LinkPCIe.
	Kind string `json:"kind"`
	// NVLinks is the number of NVLink lanes usable between the two GPUs
	// (18 on an H100 SXM board with NVSwitch); 0 for PCIe.
	NVLinks int `json:"nvlinks,omitempty"`
	// PCIePath is the PCIe path between the two GPUs (PathPIX … PathSYS)
	// for PCIe links; "" when unknown or for NVLink.
	PCIePath string `json:"pcie_path,omitempty"`
}

// Status is a GPU's health and usage, sent with heartbeats. It changes
// while jobs run, so it is kept apart from Device.
type Status struct {
	// Index is the Device.Index this status belongs to.
	Index int `json:"index"`
	// Health is Healthy or Unhealthy; an unhealthy GPU drains its node.
	Health string `json:"health"`
	// Reason says why Health is not Healthy ("XID 79: GPU has fallen off
	// the bus"), or which readings failed on a healthy GPU.
	Reason string `json:"reason,omitempty"`
	// MemUsedMB is device memory in use, in MiB, by all processes;
	// UsageUnknown where the source cannot tell (a static GPU list).
	MemUsedMB int64 `json:"mem_used_mb"`
	// UtilPct is the percentage of time over the driver's last sample
	// period during which a kernel ran (0–100); UsageUnknown where the
	// source cannot tell.
	UtilPct int `json:"util_pct"`
	// Processes are the compute processes on the GPU.
	Processes []ProcUsage `json:"processes,omitempty"`
}

// UsageUnknown is Status.MemUsedMB and Status.UtilPct from a source that
// does not measure them: readers must not take it for an idle GPU.
const UsageUnknown = -1

// ProcUsage is one process's use of a GPU, so that slice owners can be
// found when shared memory runs out.
type ProcUsage struct {
	// PID is the process id as the host sees it.
	PID int `json:"pid"`
	// MemMB is the process's device memory in MiB; -1 when the driver
	// cannot say (for example without permission or for MPS clients on
	// older drivers).
	MemMB int64 `json:"mem_mb"`
}

// Source is where a node's GPU inventory comes from: NVML, a static list
// in the node config, or a fake. Implementations are safe for concurrent
// use.
type Source interface {
	// Inventory lists the node's GPUs in Index order. node is the node's
	// name; only the fake uses it, to derive stable UUIDs.
	Inventory(node string) ([]Device, error)
	// Status reports health and usage of every GPU, in Index order.
	Status() ([]Status, error)
}

// Link returns d's link to peer, and false when d does not describe one.
func (d *Device) Link(peer int) (Link, bool) {
	for _, l := range d.Links {
		if l.Peer == peer {
			return l, true
		}
	}
	return Link{}, false
}

// knownModels are the product tokens ModelShort recognises, the names
// sites use as gres types. Longer names that contain shorter ones (gh200,
// h200) are separate tokens, so whole-token matching keeps them apart.
var knownModels = map[string]bool{
	"gb300": true, "gb200": true, "b300": true, "b200": true, "b100": true,
	"gh200": true, "h200": true, "h100": true, "h800": true, "h20": true,
	"a100": true, "a800": true, "a40": true, "a30": true, "a16": true,
	"a10g": true, "a10": true, "a2": true,
	"l40s": true, "l40": true, "l20": true, "l4": true,
	"v100": true, "v100s": true, "t4": true, "p100": true, "p40": true, "p4": true,
	"a6000": true, "a5000": true, "a4000": true,
}

// vendorWords are dropped before ModelShort falls back to the first token.
var vendorWords = map[string]bool{"nvidia": true, "tesla": true, "geforce": true, "quadro": true}

// ModelShort returns the short model name used as a gres type: "h100" for
// "nvidia h100 80gb hbm3", "a100" for "nvidia a100-sxm4-80gb", "l40s" for
// "nvidia l40s". Unknown products give their first non-vendor word, with
// "rtx" joined to the word after it ("rtx4090"); a model that is already
// short is returned unchanged.
func (d *Device) ModelShort() string {
	return ShortModel(d.Model)
}

// ShortModel is ModelShort for a bare model string, so that request
// parsing and config validation can normalise names the same way.
func ShortModel(model string) string {
	if s, ok := shortModels.Load(model); ok {
		return s.(string)
	}
	s := shortModel(model)
	if shortModelsN.Add(1) <= maxShortModels {
		shortModels.Store(model, s)
	}
	return s
}

// shortModels remembers ShortModel's answers. A cluster has a handful of
// GPU models, and the controller asks for every node's at every
// submission and scheduling pass: on 512 nodes, lower-casing and
// splitting the same few strings was a third of a submission's checks.
// At most maxShortModels are kept (shortModelsN counts the attempts), so
// that nodes reporting endless distinct names cannot grow it.
var (
	shortModels  sync.Map // model -> short name
	shortModelsN atomic.Int64
)

const maxShortModels = 256

func shortModel(model string) string {
	tokens := strings.FieldsFunc(strings.ToLower(model), func(r rune) bool {
		return r == ' ' || r == '-' || r == '_' || r == '/'
	})
	for _, t := range tokens {
		if knownModels[t] {
			return t
		}
	}
	for i, t := range tokens {
		if vendorWords[t] {
			continue
		}
		if t == "rtx" && i+1 < len(tokens) {
			return t + tokens[i+1]
		}
		return t
	}
	return ""
}

// FormatIndices prints GPU indices the way CUDA_VISIBLE_DEVICES and
// SLURM_JOB_GPUS expect them: "0,1".
func FormatIndices(idx []int) string {
	var b strings.Builder
	for i, x := range idx {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d", x)
	}
	return b.String()
}
