package stepd

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/noded/cgroup"
)

// CgroupPlan is the job cgroup the supervisor makes before the job
// starts (Plan.Cgroup): the job's processes, including any that leave
// its process group, live in it, so that its limits hold whatever the
// runtime, an OOM kill is counted, and the end of the job kills them
// all.
//
// The job enters the cgroup before it execs its script: the cgo spawn's
// vfork child writes its own pid to the cgroup.procs files, the sh
// trampoline (builds without cgo) echoes $$ there, and the exec child
// of a job that runs as another user is moved in by the supervisor
// while it still waits for its plan on stdin. So nothing the job runs
// escapes the limits, not even for a moment.
type CgroupPlan struct {
	// Required fails the job when its cgroup cannot be made or its
	// limits not set (config cgroups: required); otherwise the job runs
	// without them and the supervisor logs why.
	Required bool `json:"required,omitempty"`
	// Root is where the hierarchy is mounted (cgroup.DefaultRoot when
	// empty; tests point it elsewhere).
	Root string `json:"root,omitempty"`
	// Parent is the cgroup, relative to the root, that holds the node's
	// job cgroups ("tide").
	Parent string `json:"parent"`
	// Name is the job's cgroup in Parent (cgroup.JobName).
	Name   string        `json:"name"`
	Limits cgroup.Limits `json:"limits"`
}

// Waits for the kernel while a job cgroup empties and goes away.
const (
	cgroupKillWait   = 10 * time.Second
	cgroupRemoveWait = 10 * time.Second
)

// setupCgroup creates the job's cgroup. It returns nil without an error
// when the plan asks for none, or when cgroups are unusable here and not
// required (it logs that once per job); an error means the job must not
// start.
func setupCgroup(plan *Plan, log *slog.Logger) (*cgroup.Cgroup, error) {
	cp := plan.Cgroup
	if cp == nil {
		return nil, nil
	}
	root := cp.Root
	if root == "" {
		root = cgroup.DefaultRoot
	}
	h, cached, err := preparedHierarchy(root, cp.Parent)
	if err != nil {
		if cp.Required {
			return nil, fmt.Errorf("cgroups are required (cgroups: required) but unusable on node %s: %w", plan.Node, err)
		}
		log.Warn("job runs without a cgroup: cgroups unusable", "err", err)
		return nil, nil
	}
	cg, err := h.Create(cp.Parent, cp.Name, cp.Limits)
	if cg == nil && cached && errors.Is(err, fs.ErrNotExist) {
		// The parent went away since it was prepared (an operator, or a
		// cluster that shares it and was torn down): prepare it again.
		prepared.Delete(preparedKey(root, cp.Parent))
		if h, _, err = preparedHierarchy(root, cp.Parent); err == nil {
			cg, err = h.Create(cp.Parent, cp.Name, cp.Limits)
		}
	}
	if err != nil {
		if cp.Required {
			if cg != nil {
				cleanupCgroup(cg, log)
			}
			return nil, fmt.Errorf("job cgroup (cgroups: required): %w", err)
		}
		if cg == nil {
			log.Warn("job runs without a cgroup", "err", err)
			return nil, nil
		}
		log.Warn("job cgroup lacks some limits", "cgroup", cg.Rel, "err", err)
	}
	return cg, nil
}

// prepared caches, per root and parent, the hierarchy whose parent a
// shared supervisor has prepared: detecting and preparing it again for
// every job would cost a dozen file system calls each time.
var prepared sync.Map // preparedKey -> *cgroup.Hierarchy

func preparedKey(root, parent string) string { return root + "\x00" + parent }

// preparedHierarchy detects the hierarchy under root and prepares
// parent in it, or returns the one prepared before (cached true).
func preparedHierarchy(root, parent string) (h *cgroup.Hierarchy, cached bool, err error) {
	key := preparedKey(root, parent)
	if v, ok := prepared.Load(key); ok {
		return v.(*cgroup.Hierarchy), true, nil
	}
	if h, err = cgroup.Detect(root); err == nil {
		err = h.Prepare(parent)
	}
	if err != nil {
		return nil, false, err
	}
	prepared.Store(key, h)
	return h, false, nil
}

// finishCgroup kills whatever is left in the job's cgroup once the job
// ended, reads whether the OOM killer struck, and removes the cgroup.
func finishCgroup(cg *cgroup.Cgroup, log *slog.Logger) (oom bool) {
	if cg == nil {
		return false
	}
	if err := cg.KillAll(cgroupKillWait); err != nil {
		log.Error("kill leftover processes of the job cgroup", "cgroup", cg.Rel, "err", err)
	}
	if n, err := cg.OOMKills(); err != nil {
		log.Warn("read OOM kills", "cgroup", cg.Rel, "err", err)
	} else if n > 0 {
		oom = true
		log.Info("OOM killer ended processes of the job", "cgroup", cg.Rel, "oom_kills", n)
	}
	if err := cg.Remove(cgroupRemoveWait); err != nil {
		log.Error("remove job cgroup", "cgroup", cg.Rel, "err", err)
	}
	return oom
}

// cleanupCgroup removes a job cgroup the job never ran in.
func cleanupCgroup(cg *cgroup.Cgroup, log *slog.Logger) {
	if err := cg.Remove(cgroupRemoveWait); err != nil {
		log.Error("remove job cgroup", "cgroup", cg.Rel, "err", err)
	}
}

// openProcsFiles opens the cgroup.procs files a spawned job writes its
// pid to (close-on-exec: they must not reach the script).
func openProcsFiles(cg *cgroup.Cgroup) ([]*os.File, error) {
	if cg == nil {
		return nil, nil
	}
	var out []*os.File
	for _, p := range cg.ProcsFiles() {
		f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("open %s: %w", p, unwrapPath(err))
		}
		out = append(out, f)
	}
	return out, nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
