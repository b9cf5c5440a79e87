package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Stats is what a cgroup counted for everything that ran in it, the
// processes that ended included: the numbers sacct's TotalCPU and disk
// fields come from where a job or step has a cgroup of its own.
type Stats struct {
	// HasCPU: the CPU times below were read (v2 cpu.stat; v1
	// cpuacct.stat where cpuacct shares the cpu hierarchy).
	HasCPU bool
	// UserUsec and SystemUsec are CPU time in microseconds; UsageUsec
	// their sum as the kernel keeps it (v2 usage_usec, v1
	// cpuacct.usage), which can differ from the sum by a tick.
	UserUsec, SystemUsec, UsageUsec uint64
	// HasIO: the block I/O below was read (v2 io.stat, present where the
	// io controller is enabled for the cgroup).
	HasIO bool
	// ReadBytes and WriteBytes are bytes read from and written to block
	// devices, over all devices.
	ReadBytes, WriteBytes uint64
}

// userHZ is the unit of v1 cpuacct.stat: USER_HZ, 100 on every Linux
// architecture as user space sees it.
const userHZ = 100

// Stats reads the cgroup's CPU time and block I/O. A counter the
// hierarchy does not offer is left out (HasCPU or HasIO false) rather
// than an error; a cgroup that is gone is an error wrapping
// fs.ErrNotExist. It must be called before Remove.
func (c *Cgroup) Stats() (Stats, error) {
	var st Stats
	if c.h.Version == V2 {
		d := c.dirs[""]
		kv, err := readKeys(filepath.Join(d, "cpu.stat"))
		if err != nil {
			return Stats{}, fmt.Errorf("cgroup %s: %w", c.Rel, err)
		}
		st.UserUsec, st.SystemUsec, st.UsageUsec = kv["user_usec"], kv["system_usec"], kv["usage_usec"]
		st.HasCPU = true
		r, w, ok, err := readIOStat(filepath.Join(d, "io.stat"))
		if err != nil {
			return Stats{}, fmt.Errorf("cgroup %s: %w", c.Rel, err)
		}
		st.ReadBytes, st.WriteBytes, st.HasIO = r, w, ok
		return st, nil
	}
	d := c.dir(CPU)
	if d == "" {
		return st, nil
	}
	kv, err := readKeys(filepath.Join(d, "cpuacct.stat"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, derr := os.Stat(d); derr != nil {
			return Stats{}, fmt.Errorf("cgroup %s: %w", c.Rel, derr)
		}
		// cpu without cpuacct in its hierarchy: no CPU times here.
		return st, nil
	case err != nil:
		return Stats{}, fmt.Errorf("cgroup %s: %w", c.Rel, err)
	}
	st.HasCPU = true
	st.UserUsec, st.SystemUsec = kv["user"]*(1e6/userHZ), kv["system"]*(1e6/userHZ)
	st.UsageUsec = st.UserUsec + st.SystemUsec
	if ns, err := readInt(filepath.Join(d, "cpuacct.usage")); err == nil && ns >= 0 {
		st.UsageUsec = uint64(ns) / 1000
	}
	return st, nil
}

// readKeys reads a flat keyed file ("key value" lines) into a map;
// values that are not unsigned numbers are skipped.
func readKeys(path string) (map[string]uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, unwrapPath(err)
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}

// readIOStat sums rbytes and wbytes over the devices of a v2 io.stat
// ("8:0 rbytes=1 wbytes=2 rios=…" per line). A missing file (no io
// controller) is ok false.
func readIOStat(path string) (read, write uint64, ok bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, unwrapPath(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		for _, kv := range f[min(1, len(f)):] {
			k, v, found := strings.Cut(kv, "=")
			if !found {
				continue
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "rbytes":
				read += n
			case "wbytes":
				write += n
			}
		}
	}
	return read, write, true, nil
}
