package noded

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/runtime"
)

// The daemon's side of the runtime seam (noded/runtime): which runtime
// runs a job, and the plain values it hands the runtime. The daemon keeps
// its own locking: it asks a runtime's State under d.mu (State never
// blocks) and makes every other call outside it, on the job's ops queue
// (suspend.go), so that a job's signals, freezes and thaws reach its
// runtime in the order the daemon decided them.

// runtimeCallTimeout bounds one runtime call the daemon makes for a
// signal, freeze, thaw or cleanup.
const runtimeCallTimeout = 30 * time.Second

// runtimeFor picks the job's runtime: a job with a container image runs
// under the container runtime (refused on a node without one), every
// other job under the process runtime. It reads only what a job never
// changes after its creation, so it needs no lock.
func (d *Daemon) runtimeFor(j *job) runtime.Runtime {
	if j.hasSpec && j.spec.ContainerImage != "" {
		if d.ctr == nil {
			return runtime.Unavailable{Kind: "container",
				Err: fmt.Errorf("no container runtime on node %s (tided has no containerd.socket configured)", d.cfg.Name)}
		}
		return d.ctr
	}
	return d.proc
}

// runtimeJob names j to its runtime, for every call but Start and
// Reattach.
func runtimeJob(j *job) runtime.Job {
	return runtime.Job{Ref: j.ref, Dir: j.dir}
}

// startJob describes j to its runtime for Start or Reattach: with a copy
// of its launch (applyLimit changes j.spec under d.mu while a runtime
// may read its copy) and what the launch resolves to on this node.
// Called under d.mu, or by the launch, which alone touches the spec
// meanwhile.
func (d *Daemon) startJob(j *job) runtime.Job {
	spec := j.spec
	rj := runtimeJob(j)
	rj.Spec = &spec
	rj.Resolve = func() runtime.Launch { return d.resolveLaunch(&spec) }
	return rj
}

// resolveLaunch is what spec runs on this node, for runtimes that do not
// read exec.json: the environment, files and work directory the
// supervisor's plan would have, the user with the groups NSS gives it
// (tided as root), and the node's share of the allocation.
func (d *Daemon) resolveLaunch(spec *api.LaunchSpec) runtime.Launch {
	alloc := nodeAlloc(spec, d.cfg.Name)
	u := runtime.User{UID: spec.UserID, GID: spec.GroupID, Umask: umaskFromEnv(spec.Env)}
	u.Switch = d.asRoot && (u.UID != uint32(os.Geteuid()) || u.GID != uint32(os.Getegid()))
	u.Groups = []uint32{u.GID}
	if d.asRoot {
		u.Groups = d.groups.get(u.UID, u.GID, d.log)
	}
	return runtime.Launch{
		Env:     BuildEnv(spec, d.cfg.Name),
		Files:   ResolveFiles(spec, d.cfg.Name),
		WorkDir: workDir(spec),
		Append:  spec.OpenMode == "append",
		User:    u,
		CPUs:    alloc.CPUs, MemoryMB: alloc.MemoryMB, GPUs: alloc.GPUs,
	}
}

// runtimeCtx bounds one runtime call made on a job's ops queue.
func runtimeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), runtimeCallTimeout)
}

// closeRuntimes closes the runtimes' connections when tided stops; jobs
// keep running.
func (d *Daemon) closeRuntimes() {
	for _, rt := range []runtime.Runtime{d.proc, d.ctr} {
		if rt == nil {
			continue
		}
		if err := rt.Close(); err != nil {
			d.log.Warn("closing job runtime", "runtime", rt.Name(), "err", err)
		}
	}
}
