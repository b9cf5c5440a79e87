package stepd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/tide-hpc/tide/noded/cgroup"
)

// FrozenMarker is the content of the frozen marker: when the job was
// suspended and how (FreezeCgroup, FreezeSignal or FreezeContainer).
// The marker is written before the job is frozen and removed after it
// is thawed, so a tided that restarts in between still knows that the
// job must be thawed before it can be killed or continued.
type FrozenMarker struct {
	Time time.Time `json:"time"`
	How  string    `json:"how,omitempty"`
}

// How a job was frozen (FrozenMarker.How).
const (
	// FreezeCgroup: the job cgroup's freezer stopped every process in
	// the cgroup, including those that left the job's process group.
	FreezeCgroup = "cgroup"
	// FreezeSignal: SIGSTOP to the job's process group (a job without a
	// cgroup); processes that left the group keep running.
	FreezeSignal = "signal"
	// FreezeContainer: containerd paused the task (runc's freezer).
	FreezeContainer = "container"
)

// ErrNoJobCgroup means a job has no cgroup to freeze: its plan asks for
// none, the cgroup is gone, or the job runs outside it.
var ErrNoJobCgroup = errors.New("job has no cgroup")

// JobCgroup opens the cgroup that the job in dir runs in, as its plan
// (exec.json) names it, for tided to freeze or thaw it. The job's
// process pid must be in it: a job that could not join its cgroup
// (cgroups: auto) is not confined by it, and freezing the cgroup would
// stop nothing. ErrNoJobCgroup says there is none to use.
func JobCgroup(dir string, pid int) (*cgroup.Cgroup, error) {
	var plan Plan
	if err := readPlan(filepath.Join(dir, FileExec), &plan); err != nil {
		return nil, fmt.Errorf("read launch plan: %w", err)
	}
	cp := plan.Cgroup
	if cp == nil {
		return nil, fmt.Errorf("%w: the plan asks for none", ErrNoJobCgroup)
	}
	root := cp.Root
	if root == "" {
		root = cgroup.DefaultRoot
	}
	h, err := cgroup.Detect(root)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoJobCgroup, err)
	}
	cg := h.Open(cp.Parent, cp.Name)
	if len(cg.Dirs()) == 0 {
		return nil, fmt.Errorf("%w: %s does not exist", ErrNoJobCgroup, cg.Rel)
	}
	procs, err := cg.Procs()
	if err != nil {
		return nil, fmt.Errorf("list processes of cgroup %s: %w", cg.Rel, err)
	}
	if !slices.Contains(procs, pid) {
		return nil, fmt.Errorf("%w: pid %d is not in cgroup %s", ErrNoJobCgroup, pid, cg.Rel)
	}
	return cg, nil
}

// FreezeWait bounds how long tided waits for the kernel to report a job
// cgroup frozen or thawed. A task in uninterruptible sleep (NFS, a GPU
// driver call) holds a v1 cgroup in FREEZING; the kernel keeps trying
// after the wait, so it only decides when tided logs the delay.
const FreezeWait = 10 * time.Second

// WriteFrozenMarker records that the job in dir is being frozen.
func WriteFrozenMarker(dir string, m FrozenMarker) error {
	return WriteJSONAtomic(filepath.Join(dir, MarkFrozen), m, 0o644)
}

// RemoveFrozenMarker records that the job in dir runs again; a marker
// already gone is not an error.
func RemoveFrozenMarker(dir string) error {
	err := os.Remove(filepath.Join(dir, MarkFrozen))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
