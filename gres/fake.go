package gres

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"
)

// Canned fake topologies (FakeConfig.Topology).
const (
	// TopologyDGX is a full NVLink mesh through NVSwitch: every pair has
	// 18 NVLinks, as on a DGX H100.
	TopologyDGX = "dgx"
	// TopologyIslands is two NVLink islands (first and second half of the
	// GPUs, one per NUMA node) joined only by PCIe across the sockets.
	TopologyIslands = "islands"
	// TopologyPCIe has no NVLink: GPUs 2k and 2k+1 share a PCIe switch
	// (PIX), GPUs of one NUMA half meet at NODE, the halves at SYS.
	TopologyPCIe = "pcie"
)

// Link counts of the canned topologies.
const (
	fakeDGXNVLinks    = 18 // H100 SXM5: 18 links into the NVSwitch fabric
	fakeIslandNVLinks = 6  // 4-GPU HGX H100: 18 links split over 3 peers
)

// FakeConfig describes a fake inventory: Count identical GPUs.
type FakeConfig struct {
	Count    int    `mapstructure:"count" json:"count"`
	Model    string `mapstructure:"model" json:"model"`
	MemoryMB int64  `mapstructure:"memory_mb" json:"memory_mb"`
	// Topology is TopologyDGX, TopologyIslands or TopologyPCIe; "" picks
	// dgx for 8 GPUs and pcie otherwise.
	Topology string `mapstructure:"topology" json:"topology,omitempty"`
	// Load is what the GPUs jobs hold read: FakeLoadBusy (or "") a
	// plausible, changing load (FakeSource.SetHolders), FakeLoadIdle
	// nothing, as GPUs a job reserved and never used.
	Load string `mapstructure:"load" json:"load,omitempty"`
}

// Fake loads (FakeConfig.Load).
const (
	// FakeLoadBusy simulates a load on every GPU a job holds: a
	// utilisation that wanders around a level of the job's own, and
	// memory that fills part of the GPU (or of the job's slice).
	FakeLoadBusy = "busy"
	// FakeLoadIdle leaves every GPU idle whatever holds it.
	FakeLoadIdle = "idle"
)

// Fake returns a deterministic inventory for node: UUIDs derive from the
// node name so that restarts report the same devices. PCI bus ids, NUMA
// nodes (first half of the GPUs on node 0, second half on node 1) and
// links follow c.Topology.
func Fake(node string, c FakeConfig) ([]Device, error) {
	if c.Count < 0 || c.Count > 64 {
		return nil, fmt.Errorf("fake gpu count %d: must be between 0 and 64", c.Count)
	}
	topo := c.Topology
	if topo == "" {
		topo = TopologyPCIe
		if c.Count == 8 {
			topo = TopologyDGX
		}
	}
	switch topo {
	case TopologyDGX, TopologyPCIe:
	case TopologyIslands:
		if c.Count%2 != 0 {
			return nil, fmt.Errorf("fake gpu topology %q: needs an even gpu count, not %d", topo, c.Count)
		}
	default:
		return nil, fmt.Errorf("fake gpu topology %q: want %s, %s or %s", topo, TopologyDGX, TopologyIslands, TopologyPCIe)
	}
	if err := checkFakeLoad(c.Load); err != nil {
		return nil, err
	}
	model := c.Model
	if model == "" {
		model = "a100"
	}
	model = strings.ToLower(model)
	mem := c.MemoryMB
	if mem == 0 {
		mem = 80 * 1024
	}
	out := make([]Device, c.Count)
	for i := range out {
		out[i] = Device{
			Index:      i,
			UUID:       fakeUUID(node, i),
			Model:      model,
			MemoryMB:   mem,
			Health:     Healthy,
			Minor:      i,
			ComputeCap: computeCaps[ShortModel(model)],
			// Spread bus numbers like a real board so that NUMA halves
			// sit in separate ranges; 0x10+3*63 still fits one byte.
			PCIBusID: fmt.Sprintf("0000:%02x:00.0", 0x10+3*i),
			NUMANode: fakeNUMA(i, c.Count),
		}
	}
	if c.Count > 1 {
		for i := range out {
			out[i].Links = make([]Link, 0, c.Count-1)
			for j := range out {
				if j != i {
					out[i].Links = append(out[i].Links, fakeLink(topo, i, j, c.Count))
				}
			}
		}
	}
	return out, nil
}

// computeCaps are the compute capabilities of models fakes commonly use,
// so that fake inventories look like the real thing.
var computeCaps = map[string]string{
	"b200": "10.0", "gb200": "10.0", "h100": "9.0", "h200": "9.0", "gh200": "9.0",
	"a100": "8.0", "a30": "8.0", "l40s": "8.9", "l40": "8.9", "l4": "8.9",
	"a10": "8.6", "a40": "8.6", "v100": "7.0", "t4": "7.5",
}

// fakeNUMA puts the first half of n GPUs (rounded up) on NUMA node 0 and
// the rest on node 1.
func fakeNUMA(i, n int) int {
	if i < (n+1)/2 {
		return 0
	}
	return 1
}

// fakeLink is GPU i's link to GPU j in a canned topology of n GPUs.
func fakeLink(topo string, i, j, n int) Link {
	sameNUMA := fakeNUMA(i, n) == fakeNUMA(j, n)
	switch {
	case topo == TopologyDGX:
		return Link{Peer: j, Kind: LinkNVLink, NVLinks: fakeDGXNVLinks}
	case topo == TopologyIslands && i/(n/2) == j/(n/2):
		return Link{Peer: j, Kind: LinkNVLink, NVLinks: fakeIslandNVLinks}
	case topo == TopologyIslands:
		return Link{Peer: j, Kind: LinkPCIe, PCIePath: PathSYS}
	case i/2 == j/2 && sameNUMA:
		return Link{Peer: j, Kind: LinkPCIe, PCIePath: PathPIX}
	case sameNUMA:
		return Link{Peer: j, Kind: LinkPCIe, PCIePath: PathNODE}
	default:
		return Link{Peer: j, Kind: LinkPCIe, PCIePath: PathSYS}
	}
}

// fakeUUID builds a stable GPU-xxxxxxxx-... identifier from an FNV hash of
// the node name and index.
func fakeUUID(node string, idx int) string {
	h := uint64(14695981039346656037)
	for _, c := range []byte(fmt.Sprintf("%s/%d", node, idx)) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return fmt.Sprintf("GPU-%08x-%04x-%04x-%04x-%012x", uint32(h>>32), uint16(h>>16), uint16(h), idx, h&0xffffffffffff)
}

// FakeSource is the Source of development clusters and tests: Fake's
// inventory, healthy, idle where no job holds a GPU and, under
// FakeLoadBusy, busy with a simulated load where one does
// (SetHolders), unless a test says otherwise with MarkUnhealthy or
// SetUsage, or a usage file (SetUsageFile) says so.
type FakeSource struct {
	cfg FakeConfig

	mu     sync.Mutex
	status []Status // nil until first needed
	// usageFile, when set, is read on every Status call.
	usageFile string
	procJobs  map[int]uint64
	// listed are the GPUs the usage file listed at its last reading;
	// pinned those SetUsage set. Their readings stand: no simulated
	// load covers them.
	listed, pinned map[int]bool
	// holders are the jobs on each GPU and loadAt the time of the
	// simulated readings (SetHolders); simJobs maps the pids of the
	// simulated processes to their jobs.
	holders map[int][]FakeHolder
	loadAt  time.Time
	simJobs map[int]uint64
}

// FakeHolder is a job holding a fake GPU, as the node tells the fake
// (SetHolders) so that the GPU reads the job's simulated load.
type FakeHolder struct {
	JobID uint64
	// PID is the job's process (its batch script): the GPU lists it as
	// a compute process using the job's memory, so that the node
	// charges the load to the job as it would NVML's. 0: no process.
	PID int
	// SliceMemMB and SliceComputePct are the job's slice of a shared
	// GPU; both 0 for a whole GPU.
	SliceMemMB      int64
	SliceComputePct int
}

// checkFakeLoad checks FakeConfig.Load.
func checkFakeLoad(load string) error {
	switch load {
	case "", FakeLoadBusy, FakeLoadIdle:
		return nil
	}
	return fmt.Errorf("fake gpu load %q: want %s or %s", load, FakeLoadBusy, FakeLoadIdle)
}

// FakeUsageFile is the name of the usage file tided's fake source reads
// in the node's state directory: writing it drives a fake GPU's memory
// use, for the local cluster and tests of reclaim.
const FakeUsageFile = "gpu-usage.json"

// FakeUsage is the content of a fake usage file:
//
//	{"gpus": [{"index": 2, "mem_used_mb": 78000, "util_pct": 90,
//	           "processes": [{"pid": 4242, "mem_mb": 70000, "job_id": 17}]}]}
//
// GPUs it does not list keep their readings. A GPU it lists reads what
// it says whatever job holds it, with no simulated load: {"gpus":
// [{"index": 0}]} makes GPU 0 read idle, as a job that reserved it and
// never used it. MemUsedMB 0 with processes means the sum of their
// memory.
type FakeUsage struct {
	GPUs []FakeGPUUsage `json:"gpus"`
}

// FakeGPUUsage is one GPU's readings in a fake usage file.
type FakeGPUUsage struct {
	Index     int        `json:"index"`
	MemUsedMB int64      `json:"mem_used_mb,omitempty"`
	UtilPct   int        `json:"util_pct,omitempty"`
	Processes []FakeProc `json:"processes,omitempty"`
}

// FakeProc is one process of a fake usage file. JobID, when set, tells
// which job the process belongs to: fake pids need not exist, so the
// node could not find out from /proc.
type FakeProc struct {
	PID   int    `json:"pid"`
	MemMB int64  `json:"mem_mb"`
	JobID uint64 `json:"job_id,omitempty"`
}

var _ Source = (*FakeSource)(nil)

// NewFake returns a fake source for c. The config is checked on the first
// Inventory call, as Fake checks it.
func NewFake(c FakeConfig) *FakeSource {
	return &FakeSource{cfg: c}
}

// Inventory returns Fake(node, c).
func (f *FakeSource) Inventory(node string) ([]Device, error) {
	devs, err := Fake(node, f.cfg)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.statusLocked()
	for i := range devs {
		if i < len(st) {
			devs[i].Health = st[i].Health
		}
	}
	return devs, nil
}

// SetUsageFile makes every later Status call read path (a FakeUsage) and
// apply it over the current readings; a missing file changes nothing.
// An empty path stops reading.
func (f *FakeSource) SetUsageFile(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usageFile = path
}

// ProcJobs returns the pid → job map of the usage file as last read
// and of the simulated processes of the last Status (nil when they name
// no job), so that the node can report which job a fake process
// belongs to.
func (f *FakeSource) ProcJobs() map[int]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.procJobs) == 0 && len(f.simJobs) == 0 {
		return nil
	}
	out := make(map[int]uint64, len(f.procJobs)+len(f.simJobs))
	for pid, id := range f.simJobs {
		out[pid] = id
	}
	for pid, id := range f.procJobs {
		out[pid] = id
	}
	return out
}

// SetHolders tells the fake which jobs hold each GPU (by index) at time
// at; later Status calls read, on each GPU held, the load the holders
// simulate at that time (under FakeLoadIdle, none). GPUs not in holders
// are idle. The fake takes the time as data: its readings are a pure
// function of the holders and the time, so tests can replay them.
func (f *FakeSource) SetHolders(at time.Time, holders map[int][]FakeHolder) {
	cp := make(map[int][]FakeHolder, len(holders))
	for i, hs := range holders {
		cp[i] = append([]FakeHolder(nil), hs...)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holders, f.loadAt = cp, at
}

// Status returns a copy of every GPU's current fake status, after
// applying the usage file when one is set.
func (f *FakeSource) Status() ([]Status, error) {
	if f.cfg.Count < 0 || f.cfg.Count > 64 {
		return nil, fmt.Errorf("fake gpu count %d: must be between 0 and 64", f.cfg.Count)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.statusLocked()
	if err := f.readUsageLocked(st); err != nil {
		return nil, err
	}
	out := make([]Status, len(st))
	for i, s := range st {
		out[i] = s
		out[i].Processes = append([]ProcUsage(nil), s.Processes...)
	}
	f.simulateLocked(out)
	return out, nil
}

// simulateLocked puts the simulated load of each held GPU into st,
// except on GPUs whose readings a test set (SetUsage, the usage file).
//
// A job's load has a level of its own, 55 to 90 % utilisation, which
// wanders by up to 6 points every 5 seconds, and fills 35 to 79 % of
// its GPU's memory. A slice adds its share of the GPU's compute (its
// compute percentage, or an equal share) of such a level, and fills
// 35 to 60 % of its slice's memory (or of its equal share of the GPU):
// with the slices' memory capped at 70 % of the card, a simulated load
// never passes a reclaim watermark (at least 0.5, 0.95 by default) on
// its own.
func (f *FakeSource) simulateLocked(st []Status) {
	f.simJobs = nil
	if f.cfg.Load == FakeLoadIdle {
		return
	}
	memMB := f.cfg.MemoryMB
	if memMB == 0 {
		memMB = 80 * 1024
	}
	tick := uint64(f.loadAt.Unix() / 5)
	for i := range st {
		hs := f.holders[st[i].Index]
		if len(hs) == 0 || f.pinned[st[i].Index] || f.listed[st[i].Index] || st[i].Health == Unhealthy {
			continue
		}
		whole := len(hs) == 1 && hs[0].SliceMemMB == 0 && hs[0].SliceComputePct == 0
		var util float64
		var used int64
		var procs []ProcUsage
		for _, h := range hs {
			level := 55 + float64(mix(h.JobID)%36)
			u := min(max(level+float64(mix(h.JobID, uint64(st[i].Index), tick)%13)-6, 1), 100)
			var mem int64
			if whole {
				util = u
				mem = memMB * int64(35+mix(h.JobID, 1)%45) / 100
			} else {
				share := 1 / float64(len(hs))
				if h.SliceComputePct > 0 {
					share = float64(h.SliceComputePct) / 100
				}
				util += u * share
				capMB := h.SliceMemMB
				if capMB <= 0 {
					capMB = memMB / int64(len(hs))
				}
				mem = capMB * int64(35+mix(h.JobID, 1)%26) / 100
			}
			used += mem
			if h.PID > 0 {
				procs = append(procs, ProcUsage{PID: h.PID, MemMB: mem})
				if f.simJobs == nil {
					f.simJobs = map[int]uint64{}
				}
				f.simJobs[h.PID] = h.JobID
			}
		}
		if !whole && used > memMB*7/10 {
			// Scale every slice down alike to the cap.
			for k := range procs {
				procs[k].MemMB = procs[k].MemMB * (memMB * 7 / 10) / used
			}
			used = memMB * 7 / 10
		}
		st[i].UtilPct = int(min(util, 100) + 0.5)
		st[i].MemUsedMB = used
		st[i].Processes = procs
	}
}

// mix hashes vs into 64 well-mixed bits (splitmix64 over the values), so
// that simulated loads look random yet replay exactly.
func mix(vs ...uint64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, v := range vs {
		h ^= v
		h += 0x9e3779b97f4a7c15
		h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9
		h = (h ^ (h >> 27)) * 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

// MarkUnhealthy makes GPU index report Unhealthy with reason from now on,
// as an XID or a lost GPU would. It fails for an index the fake lacks.
func (f *FakeSource) MarkUnhealthy(index int, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.statusLocked()
	if index < 0 || index >= len(st) {
		return fmt.Errorf("fake gpu %d: no such gpu (have %d)", index, len(st))
	}
	st[index].Health, st[index].Reason = Unhealthy, reason
	return nil
}

// SetUsage replaces the memory, utilisation and process readings of GPU
// s.Index, keeping its health, so tests can drive a GPU over a watermark.
func (f *FakeSource) SetUsage(s Status) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.statusLocked()
	if s.Index < 0 || s.Index >= len(st) {
		return fmt.Errorf("fake gpu %d: no such gpu (have %d)", s.Index, len(st))
	}
	cur := &st[s.Index]
	cur.MemUsedMB, cur.UtilPct = s.MemUsedMB, s.UtilPct
	cur.Processes = append([]ProcUsage(nil), s.Processes...)
	if f.pinned == nil {
		f.pinned = map[int]bool{}
	}
	f.pinned[s.Index] = true
	return nil
}

// statusLocked returns the status table, creating it healthy and idle.
func (f *FakeSource) statusLocked() []Status {
	if f.status == nil && f.cfg.Count > 0 && f.cfg.Count <= 64 {
		f.status = make([]Status, f.cfg.Count)
		for i := range f.status {
			f.status[i] = Status{Index: i, Health: Healthy}
		}
	}
	return f.status
}

// readUsageLocked applies the usage file, if any, to st and records its
// pid → job map.
func (f *FakeSource) readUsageLocked(st []Status) error {
	if f.usageFile == "" {
		return nil
	}
	data, err := os.ReadFile(f.usageFile)
	if errors.Is(err, fs.ErrNotExist) {
		f.listed = nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("fake gpu usage: %w", err)
	}
	var u FakeUsage
	if err := json.Unmarshal(data, &u); err != nil {
		return fmt.Errorf("fake gpu usage %s: %w", f.usageFile, err)
	}
	jobs := map[int]uint64{}
	listed := map[int]bool{}
	for _, g := range u.GPUs {
		if g.Index < 0 || g.Index >= len(st) {
			return fmt.Errorf("fake gpu usage %s: no gpu %d (have %d)", f.usageFile, g.Index, len(st))
		}
		listed[g.Index] = true
		cur := &st[g.Index]
		cur.MemUsedMB, cur.UtilPct, cur.Processes = g.MemUsedMB, g.UtilPct, nil
		var sum int64
		for _, p := range g.Processes {
			cur.Processes = append(cur.Processes, ProcUsage{PID: p.PID, MemMB: p.MemMB})
			sum += max(p.MemMB, 0)
			if p.JobID != 0 {
				jobs[p.PID] = p.JobID
			}
		}
		if cur.MemUsedMB == 0 {
			cur.MemUsedMB = sum
		}
	}
	f.procJobs, f.listed = jobs, listed
	return nil
}
