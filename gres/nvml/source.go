package nvml

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tide-hpc/tide/gres"
)

// ErrUnavailable is wrapped by every error that comes from NVML failing to
// initialise: no libnvidia-ml, no driver, or no permission. A node whose
// config asks for NVML should refuse to start on it rather than register
// without GPUs.
var ErrUnavailable = errors.New("NVML unavailable")

// Source discovers GPUs through NVML. Each call initialises NVML and shuts
// it down again (go-nvml counts references, so calls may overlap; Open
// keeps one reference for the daemon's life), and no other NVML function
// is called when initialisation fails: after a failed Init any call kills
// the process with a symbol lookup error. Safe for concurrent use.
type Source struct {
	lib   nvml.Interface
	sysfs string

	mu     sync.Mutex
	uuids  []string          // inventory order, from the last Inventory
	marks  map[string]string // UUID → reason, set by WatchHealth
	opened bool              // Open holds an Init
}

var _ gres.Source = (*Source)(nil)

// Option changes how New builds a Source.
type Option func(*Source)

// WithSysfs sets the sysfs root ("/sys" by default) where the NUMA node of
// a GPU is read when the driver cannot report it; "" turns the fallback
// off.
func WithSysfs(root string) Option {
	return func(s *Source) { s.sysfs = root }
}

// New returns a Source over lib: the system's library in production
// (NewSystem), a go-nvml mock in tests.
func New(lib nvml.Interface, opts ...Option) *Source {
	s := &Source{lib: lib, sysfs: "/sys", marks: map[string]string{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// NewSystem returns a Source over the machine's libnvidia-ml, for the
// node daemon: its callers need not import go-nvml (only this package
// does). Nothing is loaded until the first Open, Inventory or Status
// initialises NVML, and on a machine without the library that fails
// with ErrUnavailable, so a binary that links NVML runs without a GPU
// as long as its configuration does not ask for NVML.
func NewSystem(opts ...Option) *Source { return New(nvml.New(), opts...) }

// Open initialises NVML and keeps it initialised until Close, so that the
// Init and Shutdown around each later call only count references. Without
// it every heartbeat's Status pays a full NVML start, which takes seconds
// on GPUs without persistence mode. A node daemon calls Open once at
// start and refuses to run when it fails. Open after Open is a no-op.
func (s *Source) Open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opened {
		return nil
	}
	if err := s.begin(); err != nil {
		return err
	}
	s.opened = true
	return nil
}

// Close releases what Open holds; it does nothing without a successful
// Open, and may be called more than once.
func (s *Source) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opened {
		s.end()
		s.opened = false
	}
}

// begin initialises NVML. Only when it returns nil may the caller use the
// library, and then it must call end.
func (s *Source) begin() error {
	if ret := s.lib.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("%w: init: %w", ErrUnavailable, ret)
	}
	return nil
}

func (s *Source) end() { _ = s.lib.Shutdown() }

// retErr turns an NVML return into nil or an error naming the step.
func retErr(step string, ret nvml.Return) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return fmt.Errorf("%s: %w", step, ret)
}

func isLost(err error) bool { return errors.Is(err, nvml.ERROR_GPU_IS_LOST) }

// Inventory lists the GPUs NVML sees, in NVML index (PCI bus) order, with
// their links. A GPU that NVML reports lost is listed unhealthy with what
// could be read before; any other failure to read a required property
// (UUID, name, memory) fails the whole inventory. node is unused.
func (s *Source) Inventory(string) ([]gres.Device, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	n, ret := s.lib.DeviceGetCount()
	if err := retErr("nvml: device count", ret); err != nil {
		return nil, err
	}
	devs := make([]gres.Device, n)
	handles := make([]nvml.Device, n)
	for i := range n {
		d, h, err := s.readDevice(i)
		if err != nil && !isLost(err) {
			return nil, fmt.Errorf("nvml: gpu %d: %w", i, err)
		}
		devs[i] = d
		if err == nil {
			handles[i] = h
		}
	}
	s.readLinks(devs, handles)
	if err := gres.CheckInventory(devs); err != nil {
		return nil, fmt.Errorf("nvml: inconsistent inventory: %w", err)
	}
	uuids := make([]string, n)
	for i, d := range devs {
		uuids[i] = d.UUID
	}
	s.mu.Lock()
	s.uuids = uuids
	for i := range devs {
		if _, bad := s.marks[devs[i].UUID]; bad {
			devs[i].Health = gres.Unhealthy
		}
	}
	s.mu.Unlock()
	return devs, nil
}

// readDevice reads GPU i's static properties. On ERROR_GPU_IS_LOST it
// returns the device marked unhealthy along with the error.
func (s *Source) readDevice(i int) (gres.Device, nvml.Device, error) {
	d := gres.Device{Index: i, Health: gres.Healthy, Minor: -1, NUMANode: -1}
	lost := func(err error) (gres.Device, nvml.Device, error) {
		d.Health = gres.Unhealthy
		return d, nil, err
	}
	h, ret := s.lib.DeviceGetHandleByIndex(i)
	if err := retErr("handle", ret); err != nil {
		return lost(err)
	}
	var err error
	if d.UUID, ret = h.GetUUID(); ret != nvml.SUCCESS {
		return lost(retErr("uuid", ret))
	}
	name, ret := h.GetName()
	if err = retErr("name", ret); err != nil {
		return lost(err)
	}
	d.Model = strings.ToLower(strings.TrimSpace(name))
	mem, ret := h.GetMemoryInfo()
	if err = retErr("memory", ret); err != nil {
		return lost(err)
	}
	d.MemoryMB = int64(mem.Total >> 20)

	// The rest is optional: unsupported means unknown.
	optional := func(step string, ret nvml.Return) (ok bool, err error) {
		switch ret {
		case nvml.SUCCESS:
			return true, nil
		case nvml.ERROR_GPU_IS_LOST:
			return false, retErr(step, ret)
		}
		return false, nil
	}
	minor, ret := h.GetMinorNumber()
	if ok, err := optional("minor number", ret); err != nil {
		return lost(err)
	} else if ok {
		d.Minor = minor
	}
	major, minorCC, ret := h.GetCudaComputeCapability()
	if ok, err := optional("compute capability", ret); err != nil {
		return lost(err)
	} else if ok {
		d.ComputeCap = fmt.Sprintf("%d.%d", major, minorCC)
	}
	pci, ret := h.GetPciInfo()
	if ok, err := optional("pci info", ret); err != nil {
		return lost(err)
	} else if ok {
		d.PCIBusID = busID(pci)
	}
	if s.hasSymbol("nvmlDeviceGetNumaNodeId") {
		node, ret := h.GetNumaNodeId()
		if ok, err := optional("numa node", ret); err != nil {
			return lost(err)
		} else if ok {
			d.NUMANode = node
		}
	}
	if d.NUMANode < 0 {
		d.NUMANode = s.sysfsNUMA(d.PCIBusID)
	}
	return d, h, nil
}

// hasSymbol says whether the loaded library exports name. Functions newer
// than the installed driver are missing, and calling one kills the
// process, so they are looked up first.
func (s *Source) hasSymbol(name string) bool {
	ext := s.lib.Extensions()
	return ext != nil && ext.LookupSymbol(name) == nil
}

// sysfsNUMA reads the GPU's NUMA node from sysfs, -1 when unknown.
func (s *Source) sysfsNUMA(bus string) int {
	if s.sysfs == "" || bus == "" {
		return -1
	}
	b, err := os.ReadFile(filepath.Join(s.sysfs, "bus", "pci", "devices", bus, "numa_node"))
	if err != nil {
		return -1
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || v < 0 {
		return -1
	}
	return v
}

// busID returns the PCI address from NVML's info in sysfs form, "" when
// the driver filled in neither bus id string.
func busID(p nvml.PciInfo) string {
	for _, raw := range [][]int8{p.BusId[:], p.BusIdLegacy[:]} {
		if s := cString(raw); s != "" {
			if norm, err := gres.NormalizeBusID(s); err == nil {
				return norm
			}
		}
	}
	return ""
}

// cString converts a NUL-terminated C char array.
func cString(raw []int8) string {
	b := make([]byte, 0, len(raw))
	for _, c := range raw {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// Status reads memory in use, utilisation and compute processes of every
// GPU. A GPU is unhealthy when NVML reports it lost, when WatchHealth saw
// a critical XID on it, or when it was inventoried and NVML no longer
// lists it. Readings that fail otherwise are left zero and named in
// Reason. Statuses follow the last Inventory's indexes (matched by UUID),
// so a GPU vanishing does not shift the others.
func (s *Source) Status() ([]gres.Status, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	n, ret := s.lib.DeviceGetCount()
	if err := retErr("nvml: device count", ret); err != nil {
		return nil, err
	}
	s.mu.Lock()
	uuids := append([]string(nil), s.uuids...)
	marks := make(map[string]string, len(s.marks))
	for k, v := range s.marks {
		marks[k] = v
	}
	s.mu.Unlock()

	byUUID := make(map[string]int, len(uuids))
	for i, u := range uuids {
		byUUID[u] = i
	}
	size := max(n, len(uuids))
	out := make([]gres.Status, size)
	seen := make([]bool, size)
	next := len(uuids) // where GPUs unknown to the inventory go
	for i := range n {
		st, uuid := readStatus(s.lib, i)
		idx := i
		if len(uuids) > 0 {
			j, known := byUUID[uuid]
			switch {
			case known && !seen[j]:
				idx = j
			case uuid == "" && i < len(uuids) && !seen[i]:
				idx = i // lost before its UUID could be read: trust the order
			default:
				if next >= len(out) {
					out, seen = append(out, gres.Status{}), append(seen, false)
				}
				idx = next
				next++
			}
		}
		if why, bad := marks[uuid]; bad && st.Health == gres.Healthy {
			st.Health, st.Reason = gres.Unhealthy, why
		}
		st.Index = idx
		out[idx], seen[idx] = st, true
	}
	for i := range out {
		if !seen[i] {
			out[i] = gres.Status{Index: i, Health: gres.Unhealthy, Reason: "GPU no longer visible to NVML"}
		}
	}
	return out, nil
}

// readStatus reads GPU i's usage; it returns the UUID ("" if unreadable)
// so that the caller can place the status.
func readStatus(lib nvml.Interface, i int) (gres.Status, string) {
	st := gres.Status{Index: i, Health: gres.Healthy}
	var notes []string
	// fail records a failed reading and reports whether to stop: a lost
	// GPU answers nothing more.
	fail := func(step string, ret nvml.Return) bool {
		if ret == nvml.ERROR_GPU_IS_LOST {
			st.Health, st.Reason = gres.Unhealthy, fmt.Sprintf("GPU is lost (%s: %s)", step, ret)
			return true
		}
		if ret != nvml.ERROR_NOT_SUPPORTED {
			notes = append(notes, fmt.Sprintf("%s: %s", step, ret))
		}
		return false
	}
	finish := func(uuid string) (gres.Status, string) {
		if st.Health == gres.Healthy && len(notes) > 0 {
			st.Reason = strings.Join(notes, "; ")
		}
		return st, uuid
	}
	h, ret := lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		fail("handle", ret)
		return finish("")
	}
	uuid, ret := h.GetUUID()
	if ret != nvml.SUCCESS && fail("uuid", ret) {
		return finish("")
	}
	if mem, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
		st.MemUsedMB = int64(mem.Used >> 20)
	} else if fail("memory", ret) {
		return finish(uuid)
	}
	if u, ret := h.GetUtilizationRates(); ret == nvml.SUCCESS {
		st.UtilPct = int(u.Gpu)
	} else if fail("utilization", ret) {
		return finish(uuid)
	}
	// MPS clients are listed apart from ordinary compute processes; a
	// PID in both keeps its first reading.
	seen := map[uint32]bool{}
	for _, q := range []struct {
		step string
		get  func() ([]nvml.ProcessInfo, nvml.Return)
	}{
		{"compute processes", h.GetComputeRunningProcesses},
		{"mps processes", h.GetMPSComputeRunningProcesses},
	} {
		procs, ret := q.get()
		if ret != nvml.SUCCESS {
			if fail(q.step, ret) {
				return finish(uuid)
			}
			continue
		}
		for _, p := range procs {
			if seen[p.Pid] {
				continue
			}
			seen[p.Pid] = true
			st.Processes = append(st.Processes, gres.ProcUsage{PID: int(p.Pid), MemMB: procMemMB(p.UsedGpuMemory)})
		}
	}
	return finish(uuid)
}

// procMemMB converts a process's memory, which NVML gives as
// NVML_VALUE_NOT_AVAILABLE (all ones) when it cannot say.
func procMemMB(b uint64) int64 {
	if b == ^uint64(0) {
		return -1
	}
	return int64(b >> 20)
}
