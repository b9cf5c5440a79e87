package noded

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/tide-hpc/tide/gres"
)

// The NVIDIA container hook. A container job gets its GPUs' device
// nodes in any case (ctrSpecOpts), but a CUDA program also needs the
// user-space driver (libcuda, libnvidia-ml…) of the node's kernel
// module, which an image must not bring itself. The NVIDIA Container
// Toolkit's OCI hook mounts those libraries (and nvidia-smi) into the
// container before it starts, for the GPUs that NVIDIA_VISIBLE_DEVICES
// in the container's environment names. tided adds the hook as a
// prestart hook, as NVIDIA's own legacy runtime does, with
// NVIDIA_VISIBLE_DEVICES set to the UUIDs of the job's GPUs, overriding
// the image's value (CUDA base images say "all", which would make the
// hook expose every GPU of the node).

// Values of containerd.nvidia_hook besides a path.
const (
	// NvidiaHookAuto uses the hook found on PATH, on a node with GPUs
	// that are not fake.
	NvidiaHookAuto = "auto"
	// NvidiaHookOff never adds the hook: containers get device nodes only.
	NvidiaHookOff = "off"
)

// nvidiaHookNames are the names the NVIDIA Container Toolkit installs
// its hook under: nvidia-container-toolkit is the older name.
var nvidiaHookNames = []string{"nvidia-container-runtime-hook", "nvidia-container-toolkit"}

// validateNvidiaHook checks containerd.nvidia_hook; empty means auto.
func validateNvidiaHook(v string) error {
	if v == "" || v == NvidiaHookAuto || v == NvidiaHookOff || filepath.IsAbs(v) {
		return nil
	}
	return fmt.Errorf("containerd.nvidia_hook: %q must be %s, %s or an absolute path", v, NvidiaHookAuto, NvidiaHookOff)
}

// resolveNvidiaHook decides once at start which hook GPU jobs' containers
// get ("" for none) and says why for the startup log. auto needs GPUs
// that are not fake (a fake inventory has no driver to inject) and the
// hook on PATH (lookPath); an explicit path is used whatever the GPU
// source, and an error says that it cannot be run (the jobs that need
// it will then fail to start, naming it).
func resolveNvidiaHook(setting, gpuSource string, gpus int, lookPath func(string) (string, error)) (hook, why string, err error) {
	switch setting {
	case NvidiaHookOff:
		return "", "off", nil
	case NvidiaHookAuto, "":
		if gpus == 0 {
			return "", "no GPUs", nil
		}
		if gpuSource == GPUSourceFake {
			return "", "fake GPUs have no driver", nil
		}
		for _, n := range nvidiaHookNames {
			if p, err := lookPath(n); err == nil {
				return p, "found on PATH", nil
			}
		}
		return "", strings.Join(nvidiaHookNames, " and ") + " not on PATH: GPU containers get device nodes only", nil
	}
	fi, err := os.Stat(setting)
	switch {
	case err != nil:
		return setting, "configured", fmt.Errorf("containerd.nvidia_hook: %w", err)
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return setting, "configured", fmt.Errorf("containerd.nvidia_hook: %s is not an executable file", setting)
	}
	return setting, "configured", nil
}

// newNvidiaHook is resolveNvidiaHook for the daemon's configuration and
// GPU inventory, logged once.
func (d *Daemon) newNvidiaHook() string {
	hook, why, err := resolveNvidiaHook(d.cfg.Containerd.NvidiaHook, d.cfg.GPUs.Source, len(d.gpus), exec.LookPath)
	switch {
	case err != nil:
		d.log.Error("NVIDIA container hook unusable: GPU container jobs will fail to start", "hook", hook, "err", err)
	case hook != "":
		d.log.Info("NVIDIA container hook for GPU container jobs", "hook", hook, "why", why)
	default:
		d.log.Debug("no NVIDIA container hook", "why", why)
	}
	return hook
}

// gpuUUIDs names the GPUs of indices idx for NVIDIA_VISIBLE_DEVICES: by
// UUID, which names the same GPU inside and outside the container
// whatever the enumeration order, else by index.
func gpuUUIDs(devs []gres.Device, idx []int) []string {
	out := make([]string, 0, len(idx))
	for _, i := range idx {
		id := strconv.Itoa(i)
		for _, d := range devs {
			if d.Index == i && d.UUID != "" {
				id = d.UUID
				break
			}
		}
		out = append(out, id)
	}
	return out
}

// nvidiaHookOpts adds the hook at path to the spec of a job with the
// GPUs visible, and the variables it reads. It must come after the
// options that set the environment. No hook or no GPUs adds nothing.
func nvidiaHookOpts(path string, visible []string) []oci.SpecOpts {
	if path == "" || len(visible) == 0 {
		return nil
	}
	return []oci.SpecOpts{func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		if s.Hooks == nil {
			s.Hooks = &specs.Hooks{}
		}
		s.Hooks.Prestart = append(s.Hooks.Prestart, specs.Hook{Path: path, Args: []string{path, "prestart"}})
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		over := []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(visible, ",")}
		if !hasEnv(s.Process.Env, "NVIDIA_DRIVER_CAPABILITIES") {
			// Older hooks default to utility alone (nvidia-smi, no CUDA).
			over = append(over, "NVIDIA_DRIVER_CAPABILITIES=compute,utility")
		}
		s.Process.Env = mergeEnv(s.Process.Env, over)
		return nil
	}}
}

// hasEnv reports whether env sets key.
func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			return true
		}
	}
	return false
}
