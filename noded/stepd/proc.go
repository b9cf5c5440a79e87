package stepd

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ProcStat is the part of /proc/<pid>/stat tided needs: the state letter
// and the start time in clock ticks since boot, which tells a live
// process from a later one that reused its pid.
type ProcStat struct {
	State     byte
	StartTime uint64
}

// ReadProcStat parses /proc/<pid>/stat. The command name may contain
// spaces and parentheses, so fields are counted from the last ')'.
func ReadProcStat(pid int) (ProcStat, error) {
	data, err := ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ProcStat{}, err
	}
	return ParseProcStat(data)
}

func ParseProcStat(data []byte) (ProcStat, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return ProcStat{}, fmt.Errorf("malformed stat line %q", data)
	}
	// After ") " come field 3 (state) onwards; starttime is field 22.
	fields := strings.Fields(string(data[i+2:]))
	if len(fields) < 20 {
		return ProcStat{}, fmt.Errorf("malformed stat line %q: %d fields", data, len(fields))
	}
	st, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return ProcStat{}, fmt.Errorf("malformed start time in stat line: %w", err)
	}
	return ProcStat{State: fields[0][0], StartTime: st}, nil
}

// ProcIdentity names one process across pid reuse.
type ProcIdentity struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

// SelfIdentity returns the calling process's identity.
func SelfIdentity() (ProcIdentity, error) {
	return IdentityOf(os.Getpid())
}

func IdentityOf(pid int) (ProcIdentity, error) {
	st, err := ReadProcStat(pid)
	if err != nil {
		return ProcIdentity{}, fmt.Errorf("read start time of pid %d: %w", pid, err)
	}
	return ProcIdentity{PID: pid, StartTime: st.StartTime}, nil
}

// Alive reports whether the process still runs: same pid, same start
// time, and not a zombie waiting to be reaped.
func (p ProcIdentity) Alive() bool {
	if p.PID <= 0 {
		return false
	}
	st, err := ReadProcStat(p.PID)
	if err != nil {
		return false
	}
	if st.State == 'Z' || st.State == 'X' || st.State == 'x' {
		return false
	}
	return st.StartTime == p.StartTime
}

// SignalGroup sends sig to the process group led by pgid; a group that
// is already gone is not an error.
func SignalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("refusing to signal process group %d", pgid)
	}
	if err := syscall.Kill(-pgid, sig); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("signal %d to process group %d: %w", sig, pgid, err)
	}
	return nil
}

// SignalProcess sends sig to one process (batch-only signals).
func SignalProcess(pid int, sig syscall.Signal) error {
	if pid <= 1 {
		return fmt.Errorf("refusing to signal pid %d", pid)
	}
	if err := syscall.Kill(pid, sig); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("signal %d to pid %d: %w", sig, pid, err)
	}
	return nil
}
