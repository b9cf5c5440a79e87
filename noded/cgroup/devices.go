package cgroup

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Any matches every major or minor number in a Device.
const Any = -1

// Device names device nodes by type and numbers, as a line of v1
// devices.allow does ("c 195:0 rwm").
type Device struct {
	// Type is "c" (character), "b" (block) or "a" (all).
	Type  string `json:"type"`
	Major int64  `json:"major"`
	Minor int64  `json:"minor"`
	// Access is a subset of "rwm" (read, write, mknod); "" means all.
	Access string `json:"access,omitempty"`
}

// String is the v1 rule: "c 195:0 rwm", "c 136:* rw", "a".
func (d Device) String() string {
	if d.Type == "a" {
		return "a"
	}
	num := func(n int64) string {
		if n == Any {
			return "*"
		}
		return strconv.FormatInt(n, 10)
	}
	return fmt.Sprintf("%s %s:%s %s", d.Type, num(d.Major), num(d.Minor), d.access())
}

func (d Device) access() string {
	if d.Access == "" {
		return "rwm"
	}
	return d.Access
}

// valid checks a Device before it reaches the kernel.
func (d Device) valid() error {
	switch d.Type {
	case "a":
		return nil
	case "c", "b":
	default:
		return fmt.Errorf("device rule %+v: type must be c, b or a", d)
	}
	if d.Major < Any || d.Minor < Any || d.Major > 1<<32-1 || d.Minor > 1<<32-1 {
		return fmt.Errorf("device rule %v: bad device number", d)
	}
	if strings.Trim(d.access(), "rwm") != "" {
		return fmt.Errorf("device rule %v: access must be a subset of rwm", d)
	}
	return nil
}

// DevicePolicy says what a DeviceFence's list means.
type DevicePolicy string

const (
	// AllowListed lets the job reach only the listed devices, as a
	// container gets.
	AllowListed DevicePolicy = "allow-listed"
	// DenyListed lets the job reach every device except the listed ones,
	// as Slurm's ConstrainDevices hides the GPUs a job was not given
	// while the host's other devices (InfiniBand, FUSE) stay usable.
	DenyListed DevicePolicy = "deny-listed"
)

// DeviceFence is a job's device access: a policy and its list.
type DeviceFence struct {
	Policy  DevicePolicy `json:"policy"`
	Devices []Device     `json:"devices,omitempty"`
}

func (f *DeviceFence) valid() error {
	if f.Policy != AllowListed && f.Policy != DenyListed {
		return fmt.Errorf("device policy %q must be %s or %s", f.Policy, AllowListed, DenyListed)
	}
	for _, d := range f.Devices {
		if err := d.valid(); err != nil {
			return err
		}
	}
	return nil
}

// BaseDevices are the device nodes every job needs under an AllowListed
// fence: null, zero, full, random, urandom, tty, console, ptmx and the
// pseudo-terminals.
func BaseDevices() []Device {
	c := func(major, minor int64) Device { return Device{Type: "c", Major: major, Minor: minor, Access: "rwm"} }
	return []Device{c(1, 3), c(1, 5), c(1, 7), c(1, 8), c(1, 9), c(5, 0), c(5, 1), c(5, 2), c(136, Any)}
}

// DeviceOf returns the device rule of the device node at path, with all
// access.
func DeviceOf(path string) (Device, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return Device{}, fmt.Errorf("stat %s: %w", path, err)
	}
	var typ string
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFCHR:
		typ = "c"
	case syscall.S_IFBLK:
		typ = "b"
	default:
		return Device{}, fmt.Errorf("%s is not a device node", path)
	}
	dev := uint64(st.Rdev)
	major := int64((dev>>8)&0xfff | (dev>>32)&^0xfff)
	minor := int64(dev&0xff | (dev>>12)&^0xff)
	return Device{Type: typ, Major: major, Minor: minor, Access: "rwm"}, nil
}

// writeDeviceRules sets a v1 devices cgroup: an allow list starts by
// denying everything, a deny list by allowing everything.
func writeDeviceRules(dir string, f *DeviceFence) error {
	if err := f.valid(); err != nil {
		return err
	}
	base, list := "devices.deny", "devices.allow"
	if f.Policy == DenyListed {
		base, list = list, base
	}
	if err := appendFile(filepath.Join(dir, base), "a"); err != nil {
		return err
	}
	for _, d := range f.Devices {
		if err := appendFile(filepath.Join(dir, list), d.String()); err != nil {
			return err
		}
	}
	return nil
}

// deviceAccess is the kernel's access bits of a rule (BPF_DEVCG_ACC_*).
func (d Device) accessBits() int32 {
	var m int32
	for _, r := range d.access() {
		switch r {
		case 'm':
			m |= 1
		case 'r':
			m |= 2
		case 'w':
			m |= 4
		}
	}
	return m
}
