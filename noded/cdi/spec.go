package cdi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DefaultSpecDirs are where CDI specs live, lowest priority first: a
// device in /var/run/cdi (generated at boot) overrides the same device
// in /etc/cdi.
var DefaultSpecDirs = []string{"/etc/cdi", "/var/run/cdi"}

// Spec is one CDI spec file: the devices of one kind ("nvidia.com/gpu")
// and the edits every container using any of them gets.
type Spec struct {
	Version        string         `json:"cdiVersion" yaml:"cdiVersion"`
	Kind           string         `json:"kind" yaml:"kind"`
	Devices        []Device       `json:"devices" yaml:"devices"`
	ContainerEdits ContainerEdits `json:"containerEdits" yaml:"containerEdits"`
	// Path is the file the spec was read from.
	Path string `json:"-" yaml:"-"`
}

// Device is one device of a spec, named within its kind ("0", "all",
// "GPU-<uuid>").
type Device struct {
	Name           string         `json:"name" yaml:"name"`
	ContainerEdits ContainerEdits `json:"containerEdits" yaml:"containerEdits"`
}

// ContainerEdits are the changes a device (or a spec) makes to a
// container's OCI spec.
type ContainerEdits struct {
	// Env holds KEY=VALUE variables, replacing the image's and the job's.
	Env         []string      `json:"env,omitempty" yaml:"env,omitempty"`
	DeviceNodes []*DeviceNode `json:"deviceNodes,omitempty" yaml:"deviceNodes,omitempty"`
	Mounts      []*Mount      `json:"mounts,omitempty" yaml:"mounts,omitempty"`
	Hooks       []*Hook       `json:"hooks,omitempty" yaml:"hooks,omitempty"`
}

// DeviceNode is a device file created in the container. Type, Major,
// Minor and FileMode default to those of the host file (HostPath, else
// Path).
type DeviceNode struct {
	Path        string  `json:"path" yaml:"path"`
	HostPath    string  `json:"hostPath,omitempty" yaml:"hostPath,omitempty"`
	Type        string  `json:"type,omitempty" yaml:"type,omitempty"`
	Major       int64   `json:"major,omitempty" yaml:"major,omitempty"`
	Minor       int64   `json:"minor,omitempty" yaml:"minor,omitempty"`
	FileMode    *uint32 `json:"fileMode,omitempty" yaml:"fileMode,omitempty"`
	Permissions string  `json:"permissions,omitempty" yaml:"permissions,omitempty"`
	UID         *uint32 `json:"uid,omitempty" yaml:"uid,omitempty"`
	GID         *uint32 `json:"gid,omitempty" yaml:"gid,omitempty"`
}

// Mount binds a host path (a driver library, a socket) into the
// container.
type Mount struct {
	HostPath      string   `json:"hostPath" yaml:"hostPath"`
	ContainerPath string   `json:"containerPath" yaml:"containerPath"`
	Type          string   `json:"type,omitempty" yaml:"type,omitempty"`
	Options       []string `json:"options,omitempty" yaml:"options,omitempty"`
}

// Hook is an OCI hook run by the runtime at HookName
// (createContainer: nvidia-ctk's ldconfig update, for one).
type Hook struct {
	HookName string   `json:"hookName" yaml:"hookName"`
	Path     string   `json:"path" yaml:"path"`
	Args     []string `json:"args,omitempty" yaml:"args,omitempty"`
	Env      []string `json:"env,omitempty" yaml:"env,omitempty"`
	Timeout  *int     `json:"timeout,omitempty" yaml:"timeout,omitempty"`
}

// Hook names CDI allows, as in the OCI runtime spec.
var hookNames = map[string]bool{
	"prestart": true, "createRuntime": true, "createContainer": true,
	"startContainer": true, "poststart": true, "poststop": true,
}

// ReadSpec reads a spec file: JSON when its name ends in .json, YAML
// otherwise, and checks it.
func ReadSpec(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cdi spec: %w", err)
	}
	s, err := ParseSpec(data, strings.EqualFold(filepath.Ext(path), ".json"))
	if err != nil {
		return nil, fmt.Errorf("cdi spec %s: %w", path, err)
	}
	s.Path = path
	return s, nil
}

// ParseSpec decodes a spec (JSON or YAML) and validates it.
func ParseSpec(data []byte, isJSON bool) (*Spec, error) {
	var s Spec
	if isJSON {
		dec := json.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&s); err != nil {
			return nil, err
		}
	} else if err := yaml.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate checks the version, kind, device names and edits.
func (s *Spec) Validate() error {
	if err := checkVersion(s.Version); err != nil {
		return err
	}
	if _, _, err := splitKind(s.Kind); err != nil {
		return err
	}
	if err := s.ContainerEdits.validate(); err != nil {
		return fmt.Errorf("containerEdits: %w", err)
	}
	if len(s.Devices) == 0 {
		return fmt.Errorf("kind %s has no devices", s.Kind)
	}
	seen := map[string]bool{}
	for _, d := range s.Devices {
		if !validDeviceName(d.Name) {
			return fmt.Errorf("invalid device name %q", d.Name)
		}
		if seen[d.Name] {
			return fmt.Errorf("device %q is defined twice", d.Name)
		}
		seen[d.Name] = true
		if err := d.ContainerEdits.validate(); err != nil {
			return fmt.Errorf("device %s: %w", d.Name, err)
		}
	}
	return nil
}

// checkVersion accepts the spec versions whose fields Tide knows:
// 0.3.0 to 0.6.x. A later version may carry edits (additional GIDs,
// network devices) that running without would break the device.
func checkVersion(v string) error {
	if v == "" {
		return fmt.Errorf("no cdiVersion")
	}
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return fmt.Errorf("cdiVersion %q is not MAJOR.MINOR.PATCH", v)
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 {
			return fmt.Errorf("cdiVersion %q is not MAJOR.MINOR.PATCH", v)
		}
		n[i] = x
	}
	if n[0] != 0 || n[1] < 3 || n[1] > 6 {
		return fmt.Errorf("cdiVersion %s is not supported (0.3.0 to 0.6.x)", v)
	}
	return nil
}

// splitKind splits "vendor.com/class" and checks both parts as CDI
// does: the vendor is a domain-like name, the class a plain word.
func splitKind(kind string) (vendor, class string, err error) {
	vendor, class, ok := strings.Cut(kind, "/")
	if !ok || vendor == "" || class == "" {
		return "", "", fmt.Errorf("invalid kind %q: want VENDOR/CLASS (nvidia.com/gpu)", kind)
	}
	okName := func(s, extra string) bool {
		for i, r := range s {
			alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
			if !alnum && (i == 0 || i == len(s)-1 || !strings.ContainsRune(extra, r)) {
				return false
			}
		}
		return true
	}
	if !okName(vendor, "-_.") || !okName(class, "-_") {
		return "", "", fmt.Errorf("invalid kind %q: want VENDOR/CLASS (nvidia.com/gpu)", kind)
	}
	return vendor, class, nil
}

// validDeviceName accepts CDI's device names: letters and digits, with
// '-', '_', '.' and ':' inside ("0", "GPU-8a1f…", "0:1" for a MIG slice).
func validDeviceName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || i == len(name)-1 || !strings.ContainsRune("-_.:", r)) {
			return false
		}
	}
	return true
}

func (e *ContainerEdits) validate() error {
	for _, kv := range e.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("env %q is not KEY=VALUE", kv)
		}
	}
	for _, d := range e.DeviceNodes {
		if d == nil || !filepath.IsAbs(d.Path) {
			return fmt.Errorf("device node without an absolute path")
		}
		if d.HostPath != "" && !filepath.IsAbs(d.HostPath) {
			return fmt.Errorf("device node %s: hostPath %q is not absolute", d.Path, d.HostPath)
		}
		switch d.Type {
		case "", "b", "c", "u", "p":
		default:
			return fmt.Errorf("device node %s: type %q is not b, c, u or p", d.Path, d.Type)
		}
		if strings.Trim(d.Permissions, "rwm") != "" {
			return fmt.Errorf("device node %s: permissions %q are not a subset of rwm", d.Path, d.Permissions)
		}
	}
	for _, m := range e.Mounts {
		if m == nil || m.HostPath == "" || !filepath.IsAbs(m.ContainerPath) {
			return fmt.Errorf("mount needs a hostPath and an absolute containerPath")
		}
	}
	for _, h := range e.Hooks {
		if h == nil || !hookNames[h.HookName] {
			return fmt.Errorf("hook with an unknown hookName")
		}
		if !filepath.IsAbs(h.Path) {
			return fmt.Errorf("%s hook: path %q is not absolute", h.HookName, h.Path)
		}
	}
	return nil
}
