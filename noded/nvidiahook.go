package noded

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The NVIDIA container hook. A container job gets its GPUs' device
// nodes in any case, but a CUDA program also needs the user-space
// driver (libcuda, libnvidia-ml…) of the node's kernel module, which an
// image must not bring itself: the NVIDIA Container Toolkit's OCI hook
// mounts it. The containerd runtime adds the hook to GPU jobs' specs
// (runtime.WithNvidiaHook); which hook, if any, tided decides here once
// at start.

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
