package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Limits are what a job cgroup enforces; a zero field sets nothing.
type Limits struct {
	// CPUs is the CPU quota in whole CPUs: CPUs × period of run time per
	// period (cpu.max on v2, cpu.cfs_quota_us on v1).
	CPUs int `json:"cpus,omitempty"`
	// Cpuset and Mems pin the job to CPU ids and memory nodes ("0-3,8");
	// empty inherits the parent's.
	Cpuset string `json:"cpuset,omitempty"`
	Mems   string `json:"mems,omitempty"`
	// MemoryBytes caps the job's memory; swap is capped too (v1
	// memory.memsw at the same value, v2 memory.swap.max 0), so a job
	// over its limit is OOM-killed rather than swapped out.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// Pids caps the number of tasks.
	Pids int64 `json:"pids,omitempty"`
	// Devices fences device access; nil leaves devices alone.
	Devices *DeviceFence `json:"devices,omitempty"`
}

// Cgroup is one job cgroup: a directory per joined v1 hierarchy, or one
// v2 directory. Methods other than Remove may be called concurrently.
type Cgroup struct {
	h *Hierarchy
	// Rel is the path below the root ("tide/job_7").
	Rel string
	// dirs maps each joined v1 controller to its directory; on v2 the
	// single directory is under the key "".
	dirs map[string]string
	// order lists the keys of dirs in creation order.
	order []string
	// kill sends SIGKILL to one process (tests replace it).
	kill func(pid int) error
	// poll is the wait between two looks at a draining cgroup.
	poll time.Duration
}

// JobName is the cgroup name of a job: job_<id>.
func JobName(jobID uint64) string { return "job_" + strconv.FormatUint(jobID, 10) }

// Create makes the cgroup parent/name (Prepare the parent first) in the
// hierarchies that l needs, then sets l. On v1 it always joins memory
// (for the OOM count) and freezer (suspend, and a kill that a fork bomb
// cannot outrun), and cpu, cpuset, pids and devices only for a limit of
// theirs: every v1 hierarchy joined costs a mkdir, a pid written to its
// cgroup.procs and an rmdir per job. The cgroup must not exist: one of the
// same name is left alone and Create fails with ErrInUse, because it may
// hold another job's processes (of a second cluster on this host that
// shares the parent, or of a supervisor that died: Open and Remove clean
// that up). A nil Cgroup with an error means nothing was created; a
// Cgroup with an error means
// the cgroup exists (and contains, kills and counts OOM kills) but some
// limits could not be set: the error lists them, and the caller decides
// whether that is fatal.
func (h *Hierarchy) Create(parent, name string, l Limits) (*Cgroup, error) {
	if err := checkParent(parent); err != nil {
		return nil, err
	}
	if name == "" || strings.ContainsAny(name, "/") || name == "." || name == ".." {
		return nil, fmt.Errorf("cgroup name %q must be one path element", name)
	}
	want := map[string]bool{
		Memory: true, Freezer: true, Pids: l.Pids > 0,
		CPU: l.CPUs > 0, Cpuset: l.Cpuset != "" || l.Mems != "", Devices: l.Devices != nil,
	}
	c := h.open(filepath.Join(parent, name), func(k string) bool { return want[k] })
	mkdir, rmdir := h.mkdirFn(), h.rmdirFn()
	for i, k := range c.order {
		if err := mkdir(c.dirs[k]); err != nil {
			for j := i - 1; j >= 0; j-- {
				_ = rmdir(c.dirs[c.order[j]])
			}
			switch {
			case errors.Is(err, fs.ErrExist):
				return nil, fmt.Errorf("%w: %s exists", ErrInUse, c.dirs[k])
			case errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS):
				return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
			}
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
	}
	return c, c.set(l)
}

// ErrInUse means a job cgroup of that name exists already.
var ErrInUse = errors.New("cgroup in use")

// Open names an existing cgroup parent/name in every hierarchy a job
// cgroup may have joined, for cleaning up after a supervisor that died:
// Procs, KillAll and Remove skip the directories that do not exist.
func (h *Hierarchy) Open(parent, name string) *Cgroup {
	c := h.open(filepath.Join(parent, name), func(string) bool { return true })
	var keep []string
	for _, k := range c.order {
		if fi, err := os.Stat(c.dirs[k]); err == nil && fi.IsDir() {
			keep = append(keep, k)
		} else {
			delete(c.dirs, k)
		}
	}
	c.order = keep
	return c
}

// open lays out the directories of rel, in the v1 hierarchies that want
// accepts, without touching the file system.
func (h *Hierarchy) open(rel string, want func(controller string) bool) *Cgroup {
	c := &Cgroup{h: h, Rel: rel, dirs: map[string]string{}, kill: sigkill, poll: time.Millisecond}
	if h.Version == V2 {
		c.dirs[""] = filepath.Join(h.Root, rel)
		c.order = []string{""}
		return c
	}
	for _, k := range v1Controllers {
		if want(k) && h.Has(k) {
			c.dirs[k] = filepath.Join(h.Root, k, rel)
			c.order = append(c.order, k)
		}
	}
	return c
}

func sigkill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// Dirs returns the cgroup's directories (one on v2, one per joined
// hierarchy on v1).
func (c *Cgroup) Dirs() []string {
	out := make([]string, 0, len(c.order))
	for _, k := range c.order {
		out = append(out, c.dirs[k])
	}
	return out
}

// dir returns the directory holding controller k's files, or "".
func (c *Cgroup) dir(k string) string {
	if c.h.Version == V2 {
		return c.dirs[""]
	}
	return c.dirs[k]
}

// has reports whether controller k's files are in the cgroup: on v1
// whether it joined the hierarchy, on v2 whether the parent enabled it.
func (c *Cgroup) has(k string) bool {
	if c.h.Version == V1 {
		return c.dirs[k] != ""
	}
	data, err := os.ReadFile(filepath.Join(c.dirs[""], "cgroup.controllers"))
	return err == nil && slices.Contains(strings.Fields(string(data)), k)
}

// set writes the limits; it returns every limit it could not set.
func (c *Cgroup) set(l Limits) error {
	var errs []error
	need := func(k string) bool {
		if c.has(k) {
			return true
		}
		errs = append(errs, fmt.Errorf("no %s controller for cgroup %s", k, c.Rel))
		return false
	}
	v2 := c.h.Version == V2
	if (l.Cpuset != "" || l.Mems != "") && need(Cpuset) {
		d := c.dir(Cpuset)
		if !v2 {
			// A v1 cpuset starts empty: inherit what is not given.
			errs = append(errs, inheritCpuset(filepath.Join(c.h.Root, Cpuset), c.Rel))
		}
		if l.Cpuset != "" {
			errs = append(errs, writeFile(filepath.Join(d, "cpuset.cpus"), l.Cpuset))
		}
		if l.Mems != "" {
			errs = append(errs, writeFile(filepath.Join(d, "cpuset.mems"), l.Mems))
		}
	}
	if l.CPUs > 0 && need(CPU) {
		d := c.dir(CPU)
		if v2 {
			period := int64(100000)
			if cur, err := readTrim(filepath.Join(d, "cpu.max")); err == nil {
				if f := strings.Fields(cur); len(f) == 2 {
					if p, err := strconv.ParseInt(f[1], 10, 64); err == nil && p > 0 {
						period = p
					}
				}
			}
			errs = append(errs, writeFile(filepath.Join(d, "cpu.max"), fmt.Sprintf("%d %d", int64(l.CPUs)*period, period)))
		} else {
			period := int64(100000)
			if v, err := readInt(filepath.Join(d, "cpu.cfs_period_us")); err == nil && v > 0 {
				period = v
			}
			errs = append(errs, writeFile(filepath.Join(d, "cpu.cfs_quota_us"), strconv.FormatInt(int64(l.CPUs)*period, 10)))
		}
	}
	if l.MemoryBytes > 0 && need(Memory) {
		d := c.dir(Memory)
		mem := strconv.FormatInt(l.MemoryBytes, 10)
		if v2 {
			errs = append(errs, writeFile(filepath.Join(d, "memory.max"), mem))
			if p := filepath.Join(d, "memory.swap.max"); isFile(p) {
				errs = append(errs, writeFile(p, "0"))
			}
		} else {
			errs = append(errs, writeFile(filepath.Join(d, "memory.limit_in_bytes"), mem))
			if p := filepath.Join(d, "memory.memsw.limit_in_bytes"); isFile(p) {
				errs = append(errs, writeFile(p, mem))
			}
		}
	}
	if l.Pids > 0 && need(Pids) {
		errs = append(errs, writeFile(filepath.Join(c.dir(Pids), "pids.max"), strconv.FormatInt(l.Pids, 10)))
	}
	if l.Devices != nil {
		if v2 {
			errs = append(errs, c.attachDeviceProgram(l.Devices))
		} else if need(Devices) {
			errs = append(errs, writeDeviceRules(c.dir(Devices), l.Devices))
		}
	}
	return errors.Join(errs...)
}

// ProcsFiles are the cgroup.procs files a process is written to in
// order to join the cgroup (one per v1 hierarchy).
func (c *Cgroup) ProcsFiles() []string {
	out := make([]string, 0, len(c.order))
	for _, d := range c.Dirs() {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

// AddProc moves process pid (with all its threads) into the cgroup.
func (c *Cgroup) AddProc(pid int) error {
	for _, f := range c.ProcsFiles() {
		if err := appendFile(f, strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("move pid %d into cgroup %s: %w", pid, c.Rel, err)
		}
	}
	return nil
}

// Procs lists the processes in the cgroup. On v1 the memory hierarchy is
// read (every hierarchy holds the same processes), else the first one.
func (c *Cgroup) Procs() ([]int, error) {
	k := c.primary()
	if k == "-" {
		return nil, nil
	}
	data, err := os.ReadFile(filepath.Join(c.dirs[k], "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if p, err := strconv.Atoi(f); err == nil && p > 0 {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// primary is the key of the directory that lists the processes, or "-".
func (c *Cgroup) primary() string {
	if c.dirs[Memory] != "" {
		return Memory
	}
	if len(c.order) == 0 {
		return "-"
	}
	return c.order[0]
}

// OOMKills returns how many processes the kernel's OOM killer ended in
// the cgroup: v2 memory.events oom_kill; v1 memory.oom_control oom_kill
// (kernel 4.13 and later), else memory.failcnt, which counts hits of the
// limit rather than kills and so may overstate them on old kernels. It
// must be read before Remove.
func (c *Cgroup) OOMKills() (uint64, error) {
	d := c.dir(Memory)
	if d == "" {
		return 0, fmt.Errorf("no memory controller for cgroup %s", c.Rel)
	}
	if c.h.Version == V2 {
		return readKey(filepath.Join(d, "memory.events"), "oom_kill")
	}
	n, err := readKey(filepath.Join(d, "memory.oom_control"), "oom_kill")
	if errors.Is(err, errNoKey) {
		v, err := readInt(filepath.Join(d, "memory.failcnt"))
		return uint64(max(v, 0)), err
	}
	return n, err
}

// MemoryCurrent returns the memory charged to the cgroup now, page
// cache included: v2 memory.current, v1 memory.usage_in_bytes.
func (c *Cgroup) MemoryCurrent() (uint64, error) {
	d := c.dir(Memory)
	if d == "" {
		return 0, fmt.Errorf("no memory controller for cgroup %s", c.Rel)
	}
	name := "memory.usage_in_bytes"
	if c.h.Version == V2 {
		name = "memory.current"
	}
	v, err := readInt(filepath.Join(d, name))
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", c.Rel, err)
	}
	return uint64(max(v, 0)), nil
}

// Freeze stops every process of the cgroup (v2 cgroup.freeze, v1
// freezer.state) and waits up to timeout until the kernel says they all
// are.
func (c *Cgroup) Freeze(timeout time.Duration) error {
	return c.freezer(true, timeout)
}

// Thaw lets a frozen cgroup run again.
func (c *Cgroup) Thaw(timeout time.Duration) error {
	return c.freezer(false, timeout)
}

func (c *Cgroup) freezer(freeze bool, timeout time.Duration) error {
	var file, value, doneFile, doneKey, done string
	if c.h.Version == V2 {
		file, value = filepath.Join(c.dirs[""], "cgroup.freeze"), "0"
		doneFile, doneKey, done = filepath.Join(c.dirs[""], "cgroup.events"), "frozen", "0"
		if freeze {
			value, done = "1", "1"
		}
	} else {
		d := c.dirs[Freezer]
		if d == "" {
			return fmt.Errorf("no freezer controller for cgroup %s", c.Rel)
		}
		file, value, doneFile, done = filepath.Join(d, "freezer.state"), "THAWED", filepath.Join(d, "freezer.state"), "THAWED"
		if freeze {
			value, done = "FROZEN", "FROZEN"
		}
	}
	// A cgroup that went away (its job ended and its supervisor removed
	// it, possibly while we wait) holds nothing frozen: a thaw is done.
	gone := func(err error) bool { return !freeze && errors.Is(err, fs.ErrNotExist) }
	if err := writeFile(file, value); err != nil {
		if gone(err) {
			return nil
		}
		return err
	}
	deadline := time.Now().Add(timeout)
	for delay := c.poll; ; delay = min(2*delay, 50*time.Millisecond) {
		var got string
		var err error
		if doneKey != "" {
			var n uint64
			n, err = readKey(doneFile, doneKey)
			got = strconv.FormatUint(n, 10)
		} else {
			got, err = readTrim(doneFile)
		}
		if err != nil {
			if gone(err) {
				return nil
			}
			return err
		}
		if got == done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s still %s after %s", c.Rel, got, timeout)
		}
		time.Sleep(delay)
	}
}

// KillAll sends SIGKILL to every process in the cgroup until it is
// empty, or gives up after timeout. On v2 one write to cgroup.kill does
// it (kernel 5.14 and later); otherwise the processes are listed and
// killed round after round, which also catches those forked meanwhile.
// A v1 cgroup with a freezer is frozen for the first round, so that a
// fork bomb cannot outrun the listing.
//
// It looks first: the common case, a job whose processes all ended with
// it, costs one read and no freezer round trip (on v1 a freeze and thaw
// of even an empty cgroup costs more than creating it).
func (c *Cgroup) KillAll(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if pids, err := c.Procs(); err == nil && len(pids) == 0 {
		return nil
	}
	if c.h.Version == V2 {
		if p := filepath.Join(c.dirs[""], "cgroup.kill"); isFile(p) {
			if err := writeFile(p, "1"); err == nil {
				if c.waitEmpty(deadline) {
					return nil
				}
			}
		}
	}
	frozen := false
	if c.h.Version == V1 && c.dirs[Freezer] != "" {
		// Frozen processes die as soon as they are thawed.
		frozen = writeFile(filepath.Join(c.dirs[Freezer], "freezer.state"), "FROZEN") == nil
	}
	defer func() {
		if frozen {
			_ = writeFile(filepath.Join(c.dirs[Freezer], "freezer.state"), "THAWED")
		}
	}()
	for delay := c.poll; ; delay = min(2*delay, 50*time.Millisecond) {
		pids, err := c.Procs()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			if err := c.kill(p); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kill pid %d of cgroup %s: %w", p, c.Rel, err)
			}
		}
		if frozen {
			// Killed while frozen, they exit once thawed; later rounds
			// catch any that forked before the freeze took hold.
			_ = writeFile(filepath.Join(c.dirs[Freezer], "freezer.state"), "THAWED")
			frozen = false
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s still has %d processes after %s", c.Rel, len(pids), timeout)
		}
		time.Sleep(delay)
	}
}

// waitEmpty polls until the cgroup has no processes or deadline passes.
func (c *Cgroup) waitEmpty(deadline time.Time) bool {
	for delay := c.poll; ; delay = min(2*delay, 50*time.Millisecond) {
		if pids, err := c.Procs(); err == nil && len(pids) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(delay)
	}
}

// Remove deletes the cgroup's directories, retrying while the kernel
// still drains exiting processes (EBUSY), up to timeout. Directories
// already gone are not an error.
func (c *Cgroup) Remove(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	rmdir := c.h.rmdirFn()
	var errs []error
	for i := len(c.order) - 1; i >= 0; i-- {
		d := c.dirs[c.order[i]]
		for delay := c.poll; ; delay = min(2*delay, 50*time.Millisecond) {
			err := rmdir(d)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
				break
			}
			time.Sleep(delay)
		}
	}
	return errors.Join(errs...)
}

// writeFile writes one value to a cgroup control file, which must exist
// (cgroup files are never created by writing).
func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, unwrapPath(err))
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, unwrapPath(err))
	}
	return nil
}

// appendFile writes one entry to a file that takes a list of them
// (cgroup.procs, devices.allow, cgroup.subtree_control): the kernel acts
// on each write, and a plain file in tests keeps them all.
func appendFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, unwrapPath(err))
	}
	_, err = f.WriteString(value + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, unwrapPath(err))
	}
	return nil
}

func readTrim(path string) (string, error) {
	data, err := os.ReadFile(path)
	return strings.TrimSpace(string(data)), err
}

func readInt(path string) (int64, error) {
	s, err := readTrim(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

var errNoKey = errors.New("key not found")

// readKey reads the value of key in a flat keyed file ("key value" lines,
// as memory.events and memory.oom_control).
func readKey(path, key string) (uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %s: %w", path, key, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("%s: %w: %s", path, errNoKey, key)
}

// unwrapPath drops the *PathError wrapper whose text repeats the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
