package nvml

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/internal/golden"
)

// balanced fails the test unless every Init was matched by a Shutdown.
func balanced(t *testing.T, srv *server.Server) {
	t.Helper()
	if in, out := len(srv.InitCalls()), len(srv.ShutdownCalls()); in != out {
		t.Errorf("%d Init calls but %d Shutdown calls", in, out)
	}
}

// sysfsWith writes numa_node files for bus ids under a fresh sysfs root.
func sysfsWith(t *testing.T, numa map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for bus, v := range numa {
		dir := filepath.Join(root, "bus", "pci", "devices", bus)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "numa_node"), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestInventory(t *testing.T) {
	dgxSysfs := map[string]string{}
	for i, b := range dgxBuses {
		dgxSysfs[fmt.Sprintf("0000:%02x:00.0", b)] = fmt.Sprint(i / 4)
	}
	dgxSysfs["0000:18:00.0"] = "-1" // the kernel does not know either
	tests := []struct {
		name  string
		srv   *server.Server
		sysfs map[string]string
	}{
		{name: "dgx-h100", srv: newDGXH100(true)},
		{name: "dgx-h100-old-driver", srv: newDGXH100(false), sysfs: dgxSysfs},
		{name: "dgx-a100", srv: newDGXA100()},
		{name: "pcie-bridged", srv: newBridged()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := New(tt.srv, WithSysfs(sysfsWith(t, tt.sysfs)))
			devs, err := src.Inventory("ignored")
			if err != nil {
				t.Fatal(err)
			}
			balanced(t, tt.srv)
			if err := gres.CheckInventory(devs); err != nil {
				t.Fatal(err)
			}
			if len(devs) != len(tt.srv.Devices) {
				t.Fatalf("%d devices, want %d", len(devs), len(tt.srv.Devices))
			}
			var b strings.Builder
			b.WriteString(gres.FormatTopology(devs))
			for _, d := range devs {
				fmt.Fprintf(&b, "%d %s %q short=%s mem=%d cc=%s minor=%d health=%s\n",
					d.Index, d.UUID, d.Model, d.ModelShort(), d.MemoryMB, d.ComputeCap, d.Minor, d.Health)
			}
			golden.Check(t, "inventory-"+tt.name, b.String())
		})
	}
}

func TestInventoryFields(t *testing.T) {
	srv := newDGXH100(true)
	devs, err := New(srv, WithSysfs("")).Inventory("")
	if err != nil {
		t.Fatal(err)
	}
	links := make([]gres.Link, 0, 7)
	for j := 1; j < 8; j++ {
		links = append(links, gres.Link{Peer: j, Kind: gres.LinkNVLink, NVLinks: 18})
	}
	want := gres.Device{
		Index: 0, UUID: uuidOf(0), Model: "nvidia h100 80gb hbm3", MemoryMB: 81920, Health: gres.Healthy,
		Minor: 0, ComputeCap: "9.0", PCIBusID: "0000:18:00.0", NUMANode: 0, Links: links,
	}
	if diff := cmp.Diff(want, devs[0]); diff != "" {
		t.Errorf("gpu 0 (-want +got):\n%s", diff)
	}
	if got := devs[0].ModelShort(); got != "h100" {
		t.Errorf("ModelShort() = %q, want h100", got)
	}
}

func TestInventoryLostGPU(t *testing.T) {
	srv := newDGXH100(true)
	device(srv, 3).GetNameFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	devs, err := New(srv, WithSysfs("")).Inventory("")
	if err != nil {
		t.Fatal(err)
	}
	balanced(t, srv)
	lost := devs[3]
	if lost.Health != gres.Unhealthy || lost.UUID != uuidOf(3) || lost.Links != nil {
		t.Errorf("lost gpu = %+v, want unhealthy with its UUID and no links", lost)
	}
	for i, d := range devs {
		if i == 3 {
			continue
		}
		if d.Health != gres.Healthy || len(d.Links) != 6 {
			t.Errorf("gpu %d: health %q with %d links, want healthy with 6 (none to the lost gpu)", i, d.Health, len(d.Links))
		}
		if _, ok := d.Link(3); ok {
			t.Errorf("gpu %d has a link to the lost gpu", i)
		}
	}
	// The lost GPU's links were never read.
	if n := len(device(srv, 3).GetNvLinkStateCalls()); n != 0 {
		t.Errorf("GetNvLinkState called %d times on the lost gpu", n)
	}
}

func TestInventoryErrors(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(srv *server.Server)
		want   string
		is     error
	}{
		{name: "count", break_: func(srv *server.Server) {
			srv.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NO_PERMISSION }
		}, want: "nvml: device count: ERROR_NO_PERMISSION", is: nvml.ERROR_NO_PERMISSION},
		{name: "handle", break_: func(srv *server.Server) {
			srv.DeviceGetHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return nil, nvml.ERROR_NO_PERMISSION }
		}, want: "nvml: gpu 0: handle: ERROR_NO_PERMISSION", is: nvml.ERROR_NO_PERMISSION},
		{name: "name", break_: func(srv *server.Server) {
			device(srv, 2).GetNameFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
		}, want: "nvml: gpu 2: name: ERROR_UNKNOWN", is: nvml.ERROR_UNKNOWN},
		{name: "memory", break_: func(srv *server.Server) {
			device(srv, 5).GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_UNKNOWN }
		}, want: "nvml: gpu 5: memory: ERROR_UNKNOWN", is: nvml.ERROR_UNKNOWN},
		{name: "duplicate uuid", break_: func(srv *server.Server) { device(srv, 1).UUID = uuidOf(0) },
			want: "nvml: inconsistent inventory: gpu 1: uuid " + uuidOf(0) + " also used by gpu 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newDGXH100(true)
			tt.break_(srv)
			_, err := New(srv, WithSysfs("")).Inventory("")
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Inventory() error = %v, want %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
			if errors.Is(err, ErrUnavailable) {
				t.Errorf("%v claims NVML is unavailable", err)
			}
			balanced(t, srv)
		})
	}
}

// notFound is a library whose Init fails as it does without
// libnvidia-ml. Every other method is left nil, so calling any of them
// (Shutdown included) panics and fails the test: that is the check that
// nothing runs after a failed Init.
func notFound(ret nvml.Return) *mock.Interface {
	return &mock.Interface{InitFunc: func() nvml.Return { return ret }}
}

func TestInitFailureCallsNothingElse(t *testing.T) {
	for _, ret := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_NO_PERMISSION} {
		t.Run(ret.Error(), func(t *testing.T) {
			lib := notFound(ret)
			src := New(lib)
			calls := map[string]func() error{
				"Inventory": func() error { _, err := src.Inventory("n"); return err },
				"Status":    func() error { _, err := src.Status(); return err },
				"WatchXID":  func() error { return WatchXID(t.Context(), lib, nil, make(chan XIDEvent)) },
				"WatchHealth": func() error {
					return src.WatchHealth(t.Context(), nil, nil)
				},
			}
			for name, call := range calls {
				err := call()
				if err == nil {
					t.Fatalf("%s succeeded without NVML", name)
				}
				if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ret) {
					t.Errorf("%s error %v does not wrap ErrUnavailable and %v", name, err, ret)
				}
				if want := "NVML unavailable: init: " + ret.Error(); err.Error() != want {
					t.Errorf("%s error = %q, want %q", name, err, want)
				}
			}
			if n := len(lib.InitCalls()); n != len(calls) {
				t.Errorf("Init called %d times, want %d", n, len(calls))
			}
		})
	}
}

func TestStatus(t *testing.T) {
	srv := newDGXH100(true)
	d0, d1, d2, d4 := device(srv, 0), device(srv, 1), device(srv, 2), device(srv, 4)
	for i := range srv.Devices {
		d := device(srv, i)
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.SUCCESS }
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		d.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	}
	// GPU 0: a training job and two MPS clients, one also listed as a
	// compute process, one whose memory the driver cannot tell.
	d0.MemoryInfo = nvml.Memory{Total: 80 << 30, Used: 30 << 30}
	d0.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 87, Memory: 40}, nvml.SUCCESS }
	d0.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 20 << 30}, {Pid: 200, UsedGpuMemory: 8 << 30}}, nvml.SUCCESS
	}
	d0.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 200, UsedGpuMemory: 1}, {Pid: 300, UsedGpuMemory: ^uint64(0)}}, nvml.SUCCESS
	}
	// GPU 1: utilisation unsupported (not worth a note), MPS unsupported.
	d1.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
	d1.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	// GPU 2: memory reading fails: healthy, noted.
	d2.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_UNKNOWN }
	// GPU 4: fell off the bus.
	d4.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST }

	got, err := New(srv).Status()
	if err != nil {
		t.Fatal(err)
	}
	balanced(t, srv)
	want := make([]gres.Status, 8)
	for i := range want {
		want[i] = gres.Status{Index: i, Health: gres.Healthy}
	}
	want[0] = gres.Status{Index: 0, Health: gres.Healthy, MemUsedMB: 30 << 10, UtilPct: 87,
		Processes: []gres.ProcUsage{{PID: 100, MemMB: 20 << 10}, {PID: 200, MemMB: 8 << 10}, {PID: 300, MemMB: -1}}}
	want[2] = gres.Status{Index: 2, Health: gres.Healthy, Reason: "memory: ERROR_UNKNOWN"}
	want[4] = gres.Status{Index: 4, Health: gres.Unhealthy, Reason: "GPU is lost (utilization: ERROR_GPU_IS_LOST)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Status() (-want +got):\n%s", diff)
	}
	if n := len(d4.GetComputeRunningProcessesCalls()); n != 0 {
		t.Errorf("lost gpu asked for its processes %d times", n)
	}
}

// idle gives every GPU of srv the usage functions Status needs.
func idle(srv *server.Server) {
	for i := range srv.Devices {
		d := device(srv, i)
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.SUCCESS }
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		d.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	}
}

func TestStatusFollowsInventoryWhenAGPUVanishes(t *testing.T) {
	srv := newDGXH100(true)
	idle(srv)
	src := New(srv, WithSysfs(""))
	if _, err := src.Inventory(""); err != nil {
		t.Fatal(err)
	}
	// GPU 1 drops out of enumeration: NVML renumbers the rest.
	srv.Devices = append(srv.Devices[:1:1], srv.Devices[2:]...)
	device(srv, 3).MemoryInfo.Used = 5 << 30 // inventory gpu 4
	got, err := src.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 8 {
		t.Fatalf("%d statuses, want 8 (one per inventoried gpu)", len(got))
	}
	for i, s := range got {
		if s.Index != i {
			t.Errorf("status %d has index %d", i, s.Index)
		}
	}
	if got[1].Health != gres.Unhealthy || got[1].Reason != "GPU no longer visible to NVML" {
		t.Errorf("vanished gpu status = %+v", got[1])
	}
	if got[4].MemUsedMB != 5<<10 || got[4].Health != gres.Healthy {
		t.Errorf("gpu 4 status = %+v, want its own reading at its own index", got[4])
	}
}

func TestBusID(t *testing.T) {
	tests := []struct {
		name string
		info nvml.PciInfo
		want string
	}{
		{name: "bus id", info: pciInfo("00000000:9A:00.0"), want: "0000:9a:00.0"},
		{name: "legacy only", info: func() nvml.PciInfo {
			var p nvml.PciInfo
			for k, c := range "0000:AB:00.0" {
				p.BusIdLegacy[k] = int8(c)
			}
			return p
		}(), want: "0000:ab:00.0"},
		{name: "empty, as in go-nvml's DGX mocks", info: nvml.PciInfo{PciDeviceId: 0x233010DE}, want: ""},
		{name: "garbage", info: pciInfo("not a bus"), want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := busID(tt.info); got != tt.want {
				t.Errorf("busID() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOpenClose(t *testing.T) {
	srv := newDGXH100(true)
	src := New(srv, WithSysfs(""))
	src.Close() // nothing open: no Shutdown
	if err := src.Open(); err != nil {
		t.Fatal(err)
	}
	if err := src.Open(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Inventory(""); err != nil {
		t.Fatal(err)
	}
	if in, out := len(srv.InitCalls()), len(srv.ShutdownCalls()); in != 2 || out != 1 {
		t.Errorf("after Open, Open, Inventory: %d Init and %d Shutdown calls, want 2 and 1", in, out)
	}
	src.Close()
	src.Close()
	balanced(t, srv)

	failing := New(notFound(nvml.ERROR_LIBRARY_NOT_FOUND))
	if err := failing.Open(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open() = %v, want NVML unavailable", err)
	}
	failing.Close() // must not call Shutdown (the mock would panic)
}
