package noded

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procStat is the part of /proc/<pid>/stat tided needs: the state letter
// and the start time in clock ticks since boot, which tells a live
// process from a later one that reused its pid.
type procStat struct {
	State     byte
	StartTime uint64
}

// readProcStat parses /proc/<pid>/stat. The command name may contain
// spaces and parentheses, so fields are counted from the last ')'.
func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(data)
}

func parseProcStat(data []byte) (procStat, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return procStat{}, fmt.Errorf("malformed stat line %q", data)
	}
	// After ") " come field 3 (state) onwards; starttime is field 22.
	fields := strings.Fields(string(data[i+2:]))
	if len(fields) < 20 {
		return procStat{}, fmt.Errorf("malformed stat line %q: %d fields", data, len(fields))
	}
	st, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("malformed start time in stat line: %w", err)
	}
	return procStat{State: fields[0][0], StartTime: st}, nil
}

// procIdentity names one process across pid reuse.
type procIdentity struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

// selfIdentity returns the calling process's identity.
func selfIdentity() (procIdentity, error) {
	return identityOf(os.Getpid())
}

func identityOf(pid int) (procIdentity, error) {
	st, err := readProcStat(pid)
	if err != nil {
		return procIdentity{}, fmt.Errorf("read start time of pid %d: %w", pid, err)
	}
	return procIdentity{PID: pid, StartTime: st.StartTime}, nil
}

// alive reports whether the process still runs: same pid, same start
// time, and not a zombie waiting to be reaped.
func (p procIdentity) alive() bool {
	if p.PID <= 0 {
		return false
	}
	st, err := readProcStat(p.PID)
	if err != nil {
		return false
	}
	if st.State == 'Z' || st.State == 'X' || st.State == 'x' {
		return false
	}
	return st.StartTime == p.StartTime
}

// signalGroup sends sig to the process group led by pgid; a group that
// is already gone is not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("refusing to signal process group %d", pgid)
	}
	if err := syscall.Kill(-pgid, sig); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("signal %d to process group %d: %w", sig, pgid, err)
	}
	return nil
}

// signalProcess sends sig to one process (batch-only signals).
func signalProcess(pid int, sig syscall.Signal) error {
	if pid <= 1 {
		return fmt.Errorf("refusing to signal pid %d", pid)
	}
	if err := syscall.Kill(pid, sig); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("signal %d to pid %d: %w", sig, pid, err)
	}
	return nil
}

// meminfo returns fields of /proc/meminfo in MiB (MemTotal, MemAvailable…).
func meminfo() (map[string]int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make(map[string]int64)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			continue
		}
		if len(fs) > 1 && fs[1] == "kB" {
			n /= 1024
		}
		out[k] = n
	}
	return out, sc.Err()
}

// loadAvg returns the one-minute load average.
func loadAvg() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	fs := strings.Fields(string(data))
	if len(fs) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(fs[0], 64)
	return v
}

// bootTime reads btime from /proc/stat (zero when unknown).
func bootTime() time.Time {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return time.Unix(n, 0)
			}
		}
	}
	return time.Time{}
}
