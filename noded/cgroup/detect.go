package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// DefaultRoot is where the cgroup file systems are mounted on a node.
const DefaultRoot = "/sys/fs/cgroup"

// Version is a cgroup hierarchy's kind.
type Version int

// Hierarchy kinds. None means that nothing usable was found.
const (
	None Version = 0
	V1   Version = 1
	V2   Version = 2
)

func (v Version) String() string {
	switch v {
	case V1:
		return "v1"
	case V2:
		return "v2"
	}
	return "none"
}

// Controllers a job cgroup may use. On v1 each is a hierarchy of its own
// (DefaultRoot/<name>); on v2 they are enabled in cgroup.subtree_control.
const (
	CPU     = "cpu"
	Cpuset  = "cpuset"
	Memory  = "memory"
	Devices = "devices"
	Pids    = "pids"
	Freezer = "freezer"
)

// v1Controllers are the v1 hierarchies a job cgroup may join, in the
// order they are created (and removed in reverse).
var v1Controllers = []string{Memory, Freezer, Pids, CPU, Cpuset, Devices}

// v2Controllers are the v2 controllers Prepare enables for the parent's
// children. v2 has no freezer or devices controller: the freezer is
// core (cgroup.freeze) and device control is an eBPF program.
var v2Controllers = []string{CPU, Cpuset, Memory, Pids}

// ErrUnavailable means the root offers no cgroup hierarchy this package
// can use (none mounted, or not writable by the caller).
var ErrUnavailable = errors.New("cgroups unavailable")

// Hierarchy is what Detect found under a root. It is immutable and safe
// for concurrent use.
type Hierarchy struct {
	// Root is the directory the hierarchy was detected under.
	Root string
	// Version is V1 or V2.
	Version Version
	// Controllers are the usable controllers, sorted: on v1 the mounted
	// hierarchies among those a job cgroup joins, on v2 the root's
	// cgroup.controllers.
	Controllers []string
	// mkdir and rmdir create and remove a cgroup directory (os.Mkdir
	// and syscall.Rmdir; tests fill and empty the directory's control
	// files, as the kernel does).
	mkdir, rmdir func(dir string) error
}

func (h *Hierarchy) mkdirFn() func(string) error {
	if h.mkdir != nil {
		return h.mkdir
	}
	return func(dir string) error { return os.Mkdir(dir, 0o755) }
}

func (h *Hierarchy) rmdirFn() func(string) error {
	if h.rmdir != nil {
		return h.rmdir
	}
	return syscall.Rmdir
}

// Detect looks at root and reports which hierarchy it offers: v2 when
// root itself is a cgroup2 mount (it has cgroup.controllers), else v1
// with the per-controller hierarchies mounted below it. A hybrid host's
// root/unified tree is ignored: it carries no controllers. It reads
// files only; Prepare finds out whether they are writable.
func Detect(root string) (*Hierarchy, error) {
	if data, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil {
		ctrls := strings.Fields(string(data))
		slices.Sort(ctrls)
		return &Hierarchy{Root: root, Version: V2, Controllers: ctrls}, nil
	}
	var ctrls []string
	for _, c := range v1Controllers {
		if isFile(filepath.Join(root, c, "cgroup.procs")) {
			ctrls = append(ctrls, c)
		}
	}
	if len(ctrls) == 0 {
		return nil, fmt.Errorf("%w: no cgroup v2 or v1 hierarchy under %s", ErrUnavailable, root)
	}
	slices.Sort(ctrls)
	return &Hierarchy{Root: root, Version: V1, Controllers: ctrls}, nil
}

// Has reports whether the hierarchy offers controller c.
func (h *Hierarchy) Has(c string) bool {
	_, ok := slices.BinarySearch(h.Controllers, c)
	return ok
}

// String describes the hierarchy for a log line: "v1 (cpu,memory)".
func (h *Hierarchy) String() string {
	if h == nil {
		return "off"
	}
	return fmt.Sprintf("%s (%s)", h.Version, strings.Join(h.Controllers, ","))
}

// JobControllers lists, sorted, the controllers job cgroups under a
// prepared parent get: on v1 every mounted one, on v2 those the parent
// passes on (cgroup.subtree_control), which can be fewer than the root
// offers (a container's namespace root with processes of its own cannot
// pass any on).
func (h *Hierarchy) JobControllers(parent string) []string {
	if h.Version == V1 {
		return slices.Clone(h.Controllers)
	}
	data, _ := os.ReadFile(filepath.Join(h.Root, parent, "cgroup.subtree_control"))
	var out []string
	for _, f := range strings.Fields(string(data)) {
		out = append(out, strings.TrimPrefix(f, "+"))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// checkParent rejects parents that would leave the hierarchy.
func checkParent(parent string) error {
	if parent == "" || filepath.IsAbs(parent) || filepath.Clean(parent) != parent || parent == "." ||
		parent == ".." || strings.HasPrefix(parent, "../") {
		return fmt.Errorf("cgroup parent %q must be a clean relative path such as tide", parent)
	}
	return nil
}

// RemoveParent removes parent (a path relative to the hierarchy's root)
// from every hierarchy where it is empty: the counterpart of Prepare for
// a cluster that goes away (test and development clusters give each
// tided a parent of its own). Its ancestors stay; a parent that still
// holds cgroups or does not exist is left as it is.
func (h *Hierarchy) RemoveParent(parent string) {
	if checkParent(parent) != nil {
		return
	}
	rmdir := h.rmdirFn()
	for _, d := range h.Paths(parent) {
		_ = rmdir(d)
	}
}

// Paths lists where the cgroup rel (a path relative to the root) is, or
// would be, in each hierarchy: one directory on v2, one per controller
// on v1. It touches nothing.
func (h *Hierarchy) Paths(rel string) []string {
	if h.Version == V2 {
		return []string{filepath.Join(h.Root, rel)}
	}
	out := make([]string, 0, len(h.Controllers))
	for _, c := range h.Controllers {
		out = append(out, filepath.Join(h.Root, c, rel))
	}
	return out
}

// Prepare creates the parent cgroup (a path relative to the hierarchy's
// root, such as "tide") where it is missing and makes it usable for job
// cgroups: on v2 it enables the cpu, cpuset, memory and pids
// controllers for the parent's children (those the root offers; one
// that cannot be enabled is left out, and Create then reports the limits
// it cannot set), on v1 it fills in an empty cpuset of the parent. It is
// idempotent, and an error wrapping ErrUnavailable means the caller
// cannot create cgroups there (a read-only or foreign hierarchy).
func (h *Hierarchy) Prepare(parent string) error {
	if err := checkParent(parent); err != nil {
		return err
	}
	switch h.Version {
	case V2:
		dir := filepath.Join(h.Root, parent)
		if err := mkdirAll(dir); err != nil {
			return err
		}
		if err := writable(dir); err != nil {
			return err
		}
		// Each level from the root down must pass the controllers on.
		cur := h.Root
		for _, part := range strings.Split(parent, "/") {
			enableControllers(cur)
			cur = filepath.Join(cur, part)
		}
		enableControllers(cur)
		return nil
	case V1:
		for _, c := range h.Controllers {
			dir := filepath.Join(h.Root, c, parent)
			if err := mkdirAll(dir); err != nil {
				return err
			}
			if err := writable(dir); err != nil {
				return err
			}
			if c == Cpuset {
				if err := inheritCpuset(filepath.Join(h.Root, c), parent); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return fmt.Errorf("%w: no hierarchy", ErrUnavailable)
}

// enableControllers asks dir's cgroup.subtree_control for each wanted
// controller it offers, one at a time (a write naming several fails as a
// whole when one of them cannot be enabled, for example in a namespace
// root that has processes of its own).
func enableControllers(dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return
	}
	offered := strings.Fields(string(data))
	enabled, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	// The kernel lists "cpu memory"; a file in tests keeps "+cpu" lines.
	on := strings.Fields(strings.ReplaceAll(string(enabled), "+", ""))
	for _, c := range v2Controllers {
		if slices.Contains(offered, c) && !slices.Contains(on, c) {
			_ = appendFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+c)
		}
	}
}

// inheritCpuset gives each level of a new v1 cpuset path the CPUs and
// memory nodes of its parent: a v1 cpuset starts empty, and no process
// can join an empty one.
func inheritCpuset(mount, rel string) error {
	cur := mount
	for _, part := range strings.Split(rel, "/") {
		next := filepath.Join(cur, part)
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := readTrim(filepath.Join(next, f)); err == nil && v != "" {
				continue
			}
			v, err := readTrim(filepath.Join(cur, f))
			if err != nil {
				return fmt.Errorf("cpuset of %s: %w", cur, err)
			}
			if err := writeFile(filepath.Join(next, f), v); err != nil {
				return err
			}
		}
		cur = next
	}
	return nil
}

// mkdirAll creates a cgroup directory and its parents; failures that say
// the hierarchy is not ours to change wrap ErrUnavailable.
func mkdirAll(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		return fmt.Errorf("create cgroup: %w", err)
	}
	return nil
}

// writable checks that the caller may move processes into dir.
func writable(dir string) error {
	if err := syscall.Access(filepath.Join(dir, "cgroup.procs"), 0x2 /* W_OK */); err != nil {
		return fmt.Errorf("%w: %s/cgroup.procs: %v", ErrUnavailable, dir, err)
	}
	return nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
