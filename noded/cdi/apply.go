package cdi

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Apply makes the edits to an OCI spec as CDI runtimes do: variables
// replace those of the same name, device nodes are created and allowed
// in the devices cgroup (replacing a node at the same path), mounts
// replace those at the same destination and are then ordered parents
// first, hooks are added at their stage. Device numbers missing from a
// spec are read from the host's device file, which must then exist.
func (e *ContainerEdits) Apply(s *specs.Spec) error {
	if e == nil {
		return nil
	}
	if len(e.Env) > 0 {
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		s.Process.Env = mergeEnv(s.Process.Env, e.Env)
	}
	for _, d := range e.DeviceNodes {
		if err := applyDevice(s, d); err != nil {
			return err
		}
	}
	if len(e.Mounts) > 0 {
		for _, m := range e.Mounts {
			s.Mounts = slices.DeleteFunc(s.Mounts, func(x specs.Mount) bool { return cleanPath(x.Destination) == cleanPath(m.ContainerPath) })
			s.Mounts = append(s.Mounts, ociMount(m))
		}
		sortMounts(s.Mounts)
	}
	for _, h := range e.Hooks {
		if s.Hooks == nil {
			s.Hooks = &specs.Hooks{}
		}
		oh := specs.Hook{Path: h.Path, Args: slices.Clone(h.Args), Env: slices.Clone(h.Env), Timeout: h.Timeout}
		switch h.HookName {
		case "prestart":
			s.Hooks.Prestart = append(s.Hooks.Prestart, oh) //nolint:staticcheck // CDI still names it
		case "createRuntime":
			s.Hooks.CreateRuntime = append(s.Hooks.CreateRuntime, oh)
		case "createContainer":
			s.Hooks.CreateContainer = append(s.Hooks.CreateContainer, oh)
		case "startContainer":
			s.Hooks.StartContainer = append(s.Hooks.StartContainer, oh)
		case "poststart":
			s.Hooks.Poststart = append(s.Hooks.Poststart, oh)
		case "poststop":
			s.Hooks.Poststop = append(s.Hooks.Poststop, oh)
		default:
			return fmt.Errorf("cdi hook %s: unknown hookName %q", h.Path, h.HookName)
		}
	}
	return nil
}

// mergeEnv returns base with over's variables replacing or added.
func mergeEnv(base, over []string) []string {
	out := slices.Clone(base)
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		i := slices.IndexFunc(out, func(x string) bool { return strings.HasPrefix(x, k+"=") || x == k })
		if i >= 0 {
			out[i] = kv
		} else {
			out = append(out, kv)
		}
	}
	return out
}

// hostDevice is what a device file on the host says: its type, numbers
// and mode. A variable so that tests can describe devices they cannot
// create.
var hostDevice = func(path string) (typ string, major, minor int64, mode uint32, err error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", 0, 0, 0, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFCHR:
		typ = "c"
	case syscall.S_IFBLK:
		typ = "b"
	case syscall.S_IFIFO:
		typ = "p"
	default:
		return "", 0, 0, 0, fmt.Errorf("%s is not a device file", path)
	}
	rdev := uint64(st.Rdev) //nolint:unconvert // Rdev's type differs between architectures
	major = int64((rdev>>8)&0xfff | (rdev>>32)&^uint64(0xfff))
	minor = int64(rdev&0xff | (rdev>>12)&^uint64(0xff))
	return typ, major, minor, st.Mode & 0o777, nil
}

// applyDevice adds one device node and its cgroup rule.
func applyDevice(s *specs.Spec, d *DeviceNode) error {
	typ, major, minor := d.Type, d.Major, d.Minor
	var mode *uint32
	if d.FileMode != nil {
		m := *d.FileMode
		mode = &m
	}
	needHost := typ == "" || (typ != "p" && major == 0 && minor == 0) || mode == nil
	if needHost {
		host := d.HostPath
		if host == "" {
			host = d.Path
		}
		ht, hmaj, hmin, hmode, err := hostDevice(host)
		if err != nil {
			if typ == "" || (typ != "p" && major == 0 && minor == 0) {
				return fmt.Errorf("cdi device node %s: %w", d.Path, err)
			}
		} else {
			if typ == "" {
				typ = ht
			}
			if typ != "p" && major == 0 && minor == 0 {
				major, minor = hmaj, hmin
			}
			if mode == nil {
				mode = &hmode
			}
		}
	}
	if typ == "u" {
		typ = "c" // unbuffered character device: the same to the kernel
	}
	fm := os.FileMode(0o666)
	if mode != nil {
		fm = os.FileMode(*mode)
	}
	dev := specs.LinuxDevice{Path: d.Path, Type: typ, Major: major, Minor: minor, FileMode: &fm, UID: d.UID, GID: d.GID}
	if s.Linux == nil {
		s.Linux = &specs.Linux{}
	}
	s.Linux.Devices = slices.DeleteFunc(s.Linux.Devices, func(x specs.LinuxDevice) bool { return x.Path == d.Path })
	s.Linux.Devices = append(s.Linux.Devices, dev)
	if typ == "p" {
		return nil // a FIFO needs no devices cgroup rule
	}
	access := d.Permissions
	if access == "" {
		access = "rwm"
	}
	if s.Linux.Resources == nil {
		s.Linux.Resources = &specs.LinuxResources{}
	}
	maj, min := major, minor
	s.Linux.Resources.Devices = append(s.Linux.Resources.Devices,
		specs.LinuxDeviceCgroup{Allow: true, Type: typ, Major: &maj, Minor: &min, Access: access})
	return nil
}

// ociMount turns a CDI mount into an OCI one. A mount without a type
// is a bind mount, and a bind mount needs the bind option for runc.
func ociMount(m *Mount) specs.Mount {
	out := specs.Mount{Source: m.HostPath, Destination: m.ContainerPath, Type: m.Type, Options: slices.Clone(m.Options)}
	bind := slices.Contains(out.Options, "bind") || slices.Contains(out.Options, "rbind")
	if out.Type == "" {
		out.Type = "bind"
	}
	if out.Type == "bind" && !bind {
		out.Options = append(out.Options, "bind")
	}
	return out
}

func cleanPath(p string) string {
	p = strings.TrimRight(p, "/")
	if p == "" {
		return "/"
	}
	return p
}

// sortMounts orders mounts by the depth of their destination, keeping
// the order of equal depths, so that a parent is mounted before what is
// mounted inside it (as CDI runtimes do).
func sortMounts(ms []specs.Mount) {
	depth := func(p string) int { return len(strings.Split(strings.Trim(cleanPath(p), "/"), "/")) }
	sort.SliceStable(ms, func(i, j int) bool { return depth(ms[i].Destination) < depth(ms[j].Destination) })
}
