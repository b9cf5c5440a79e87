package cdi

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Registry is the set of devices the spec files of some directories
// define, by qualified name ("nvidia.com/gpu=0").
type Registry struct {
	dirs    []string
	devices map[string]*entry
	kinds   map[string]bool
	// Problems lists the spec files that were skipped (unreadable,
	// invalid, unsupported version) and the device names defined twice
	// at the same priority, which CDI leaves unresolved.
	Problems []error
}

type entry struct {
	spec   *Spec
	device *Device
	prio   int
}

// Load reads every .json, .yaml and .yml file under dirs (recursively,
// in name order). A later directory has the higher priority: its device
// replaces an earlier one of the same name. Missing directories are
// fine (a node without specs); bad files are skipped and listed in
// Problems, so that one broken file does not take every GPU's edits
// away.
func Load(dirs []string) *Registry {
	r := &Registry{dirs: dirs, devices: map[string]*entry{}, kinds: map[string]bool{}}
	conflicts := map[string]bool{}
	for prio, dir := range dirs {
		var files []string
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if path == dir && errors.Is(err, fs.ErrNotExist) {
					return fs.SkipDir
				}
				r.Problems = append(r.Problems, fmt.Errorf("cdi spec dir: %w", err))
				return nil
			}
			switch strings.ToLower(filepath.Ext(path)) {
			case ".json", ".yaml", ".yml":
				if d.Type().IsRegular() || d.Type()&fs.ModeSymlink != 0 {
					files = append(files, path)
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.Problems = append(r.Problems, fmt.Errorf("cdi spec dir %s: %w", dir, err))
		}
		sort.Strings(files)
		for _, f := range files {
			s, err := ReadSpec(f)
			if err != nil {
				r.Problems = append(r.Problems, err)
				continue
			}
			r.kinds[s.Kind] = true
			for i := range s.Devices {
				name := s.Kind + "=" + s.Devices[i].Name
				old := r.devices[name]
				if old != nil && old.prio == prio {
					conflicts[name] = true
					r.Problems = append(r.Problems, fmt.Errorf("cdi device %s is defined in both %s and %s: ignored", name, old.spec.Path, s.Path))
					continue
				}
				r.devices[name] = &entry{spec: s, device: &s.Devices[i], prio: prio}
				delete(conflicts, name) // a higher priority settles it
			}
		}
	}
	for name := range conflicts {
		delete(r.devices, name)
	}
	return r
}

// HasKind reports whether any valid spec defines devices of kind.
func (r *Registry) HasKind(kind string) bool { return r.kinds[kind] }

// Has reports whether the qualified device name is defined.
func (r *Registry) Has(name string) bool { return r.devices[name] != nil }

// Dirs are the directories the registry was loaded from.
func (r *Registry) Dirs() []string { return r.dirs }

// Resolve gathers the edits of the qualified device names, in order:
// for each spec, its own edits once (before its first device's), then
// each device's edits. An unknown name is an error naming the
// directories searched.
func (r *Registry) Resolve(names []string) (*ContainerEdits, error) {
	out := &ContainerEdits{}
	seenSpec := map[*Spec]bool{}
	seenDev := map[string]bool{}
	for _, n := range names {
		e := r.devices[n]
		if e == nil {
			return nil, fmt.Errorf("cdi device %s is not defined in %s", n, strings.Join(r.dirs, ", "))
		}
		if seenDev[n] {
			continue
		}
		seenDev[n] = true
		if !seenSpec[e.spec] {
			seenSpec[e.spec] = true
			out.append(&e.spec.ContainerEdits)
		}
		out.append(&e.device.ContainerEdits)
	}
	return out, nil
}

func (e *ContainerEdits) append(o *ContainerEdits) {
	e.Env = append(e.Env, o.Env...)
	e.DeviceNodes = append(e.DeviceNodes, o.DeviceNodes...)
	e.Mounts = append(e.Mounts, o.Mounts...)
	e.Hooks = append(e.Hooks, o.Hooks...)
}

// GPUKind is the kind of NVIDIA's GPUs in the specs nvidia-ctk writes.
const GPUKind = "nvidia.com/gpu"

// GPUNames names the CDI devices of GPUs given by index: "<GPUKind>=N"
// where the specs define it, else "<GPUKind>=<UUID>" (uuidOf gives a
// GPU's UUID, "" when unknown). A GPU the specs define under neither
// name is an error: the specs are there but do not match the node.
func (r *Registry) GPUNames(indices []int, uuidOf func(int) string) ([]string, error) {
	out := make([]string, 0, len(indices))
	for _, i := range indices {
		byIndex := GPUKind + "=" + strconv.Itoa(i)
		if r.Has(byIndex) {
			out = append(out, byIndex)
			continue
		}
		if u := uuidOf(i); u != "" && r.Has(GPUKind+"="+u) {
			out = append(out, GPUKind+"="+u)
			continue
		}
		what := byIndex
		if u := uuidOf(i); u != "" {
			what += " (or " + GPUKind + "=" + u + ")"
		}
		return nil, fmt.Errorf("cdi device %s is not defined in %s", what, strings.Join(r.dirs, ", "))
	}
	return out, nil
}
