package noded

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tide-hpc/tide/ctld/api"
)

// The process side of usage accounting (usage.go): one look at every
// process of the node, each charged to the task whose process tree it
// is in, as Slurm's jobacct_gather/linux does. Memory and faults are
// what only processes tell (a cgroup's memory includes page cache that
// is no one's resident set, and nothing counts virtual memory but the
// processes).

// procRoot is where the process table is read (tests use a fake one).
var procRoot = "/proc"

// userHZ is the unit of /proc/<pid>/stat's CPU times (USER_HZ).
const userHZ = 100

// procInfo is one process as /proc shows it.
type procInfo struct {
	pid, ppid, sid int
	// user and sys are CPU times in USER_HZ ticks, of the process and
	// of the children it reaped (cutime, cstime); faults likewise
	// (majflt + cmajflt).
	user, sys, faults uint64
	vsize, rss        uint64 // bytes
	// read and write are storage I/O of the process and the children it
	// reaped (/proc/<pid>/io read_bytes, write_bytes); hasIO is false
	// when that file could not be read.
	read, write uint64
	hasIO       bool
}

// readProcTable reads every process of the node. Processes that end
// while it reads are skipped.
func readProcTable() map[int]*procInfo {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil
	}
	page := uint64(os.Getpagesize())
	out := make(map[int]*procInfo, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		data, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "stat"))
		if err != nil {
			continue
		}
		p, ok := parseProcInfo(data, page)
		if !ok {
			continue
		}
		p.pid = pid
		out[pid] = p
	}
	return out
}

// parseProcInfo reads a /proc/<pid>/stat line (fields counted from the
// last ')', since the command name may hold spaces and parentheses).
func parseProcInfo(data []byte, page uint64) (*procInfo, bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, false
	}
	f := bytes.Fields(data[i+1:])
	// f[0] is field 3 (state); rss, field 24, is f[21].
	if len(f) < 22 {
		return nil, false
	}
	num := func(k int) uint64 {
		n, _ := strconv.ParseUint(string(f[k]), 10, 64)
		return n
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	sid, err2 := strconv.Atoi(string(f[3]))
	if err1 != nil || err2 != nil {
		return nil, false
	}
	return &procInfo{ppid: ppid, sid: sid,
		faults: num(9) + num(10),
		user:   num(11) + num(13), sys: num(12) + num(14),
		vsize: num(20), rss: num(21) * page}, true
}

// readProcDetail fills in what a charged process's other files say:
// its storage I/O (/proc/<pid>/io, readable by the process's user and
// by root) and the peaks of its resident and virtual size the kernel
// keeps (/proc/<pid>/status VmHWM and VmPeak), which replace the sizes
// of the moment: a process that grew and shrank between two samples
// still shows its peak. A file that cannot be read leaves the values of
// the stat line.
func readProcDetail(p *procInfo) {
	dir := filepath.Join(procRoot, strconv.Itoa(p.pid))
	if data, err := os.ReadFile(filepath.Join(dir, "io")); err == nil {
		for _, line := range bytes.Split(data, []byte("\n")) {
			k, v, ok := bytes.Cut(line, []byte(":"))
			if !ok {
				continue
			}
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				continue
			}
			switch string(k) {
			case "read_bytes":
				p.read, p.hasIO = n, true
			case "write_bytes":
				p.write = n
			}
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
		for _, line := range bytes.Split(data, []byte("\n")) {
			k, v, ok := bytes.Cut(line, []byte(":"))
			if !ok || !bytes.HasPrefix(k, []byte("Vm")) {
				continue
			}
			f := bytes.Fields(v)
			if len(f) != 2 || string(f[1]) != "kB" {
				continue
			}
			n, err := strconv.ParseUint(string(f[0]), 10, 64)
			if err != nil {
				continue
			}
			switch string(k) {
			case "VmHWM":
				p.rss = max(p.rss, n<<10)
			case "VmPeak":
				p.vsize = max(p.vsize, n<<10)
			}
		}
	}
}

// unitSpec says which processes make up one measured unit (the batch
// step, or an srun step's part on this node) and their tasks.
type unitSpec struct {
	key usageUnit
	// roots maps each task's process to its rank: the task is that
	// process and its descendants.
	roots map[int]int
	// session and cgroupPids claim, for the unit's first task, the
	// processes no root claims: those of the batch script's session
	// (a child its parent left behind keeps it) and those in the job's
	// cgroup (whatever left the session too).
	session    int
	cgroupPids []int
	firstTask  int
}

// attribute charges each process of procs to the task of the unit
// whose process tree it is in (a root's descendants; the nearest root
// wins, so an srun task started inside a batch job's cgroup is its
// step's, not the batch script's), else to a unit whose session or
// cgroup holds it, and sums them per task: CPU, faults and I/O count
// the live processes and what they reaped, memory the live processes'
// peak resident and virtual sizes. It reads the other /proc files of the
// processes it
// charges (readDetail: readProcDetail, nil in tests that fill them
// themselves).
func attribute(procs map[int]*procInfo, units []unitSpec, readDetail func(*procInfo)) map[usageUnit]map[int]*api.TaskUsage {
	type owner struct {
		unit int
		task int
	}
	rootOf := map[int]owner{}
	for ui, u := range units {
		for pid, task := range u.roots {
			rootOf[pid] = owner{ui, task}
		}
	}
	memo := map[int]*owner{}
	var find func(pid, depth int) *owner
	find = func(pid, depth int) *owner {
		if o, ok := memo[pid]; ok {
			return o
		}
		var res *owner
		if o, ok := rootOf[pid]; ok {
			res = &o
		} else if p := procs[pid]; p != nil && depth < 256 && p.ppid > 1 && p.ppid != pid {
			res = find(p.ppid, depth+1)
		}
		memo[pid] = res
		return res
	}
	claimed := map[int]owner{}
	for ui, u := range units {
		for _, pid := range u.cgroupPids {
			claimed[pid] = owner{ui, u.firstTask}
		}
	}
	sessions := map[int]owner{}
	for ui, u := range units {
		if u.session > 0 {
			sessions[u.session] = owner{ui, u.firstTask}
		}
	}
	out := map[usageUnit]map[int]*api.TaskUsage{}
	for _, u := range units {
		m := map[int]*api.TaskUsage{}
		for _, task := range u.roots {
			m[task] = &api.TaskUsage{Task: task}
		}
		if _, ok := m[u.firstTask]; !ok && (u.session > 0 || len(u.cgroupPids) > 0) {
			m[u.firstTask] = &api.TaskUsage{Task: u.firstTask}
		}
		out[u.key] = m
	}
	for pid, p := range procs {
		o := find(pid, 0)
		if o == nil {
			if c, ok := claimed[pid]; ok {
				o = &c
			} else if s, ok := sessions[p.sid]; ok {
				o = &s
			}
		}
		if o == nil {
			continue
		}
		t := out[units[o.unit].key][o.task]
		if t == nil {
			continue
		}
		if readDetail != nil {
			readDetail(p)
		}
		t.UserUsec += p.user * (1e6 / userHZ)
		t.SystemUsec += p.sys * (1e6 / userHZ)
		t.Pages += p.faults
		t.RSS += p.rss
		t.VMSize += p.vsize
		t.ReadBytes += p.read
		t.WriteBytes += p.write
	}
	return out
}
