package ctr

import (
	"context"
	"fmt"

	containerd "github.com/containerd/containerd/v2/client"
)

// Pause freezes every process of a task: the shim has runc freeze the
// container's cgroup, which stops also the processes that left the
// init's process group and cannot be undone from inside the container.
// A task already paused (or pausing) is not an error, so that a
// repeated suspend changes nothing.
func Pause(ctx context.Context, t containerd.Task) error {
	if st, err := t.Status(ctx); err == nil && (st.Status == containerd.Paused || st.Status == containerd.Pausing) {
		return nil
	}
	if err := t.Pause(ctx); err != nil {
		return fmt.Errorf("pause task %s: %w", t.ID(), err)
	}
	return nil
}

// Resume thaws a paused task. A task that is not paused (never was, or
// ended meanwhile) is not an error.
func Resume(ctx context.Context, t containerd.Task) error {
	st, err := t.Status(ctx)
	if err == nil && st.Status != containerd.Paused && st.Status != containerd.Pausing {
		return nil
	}
	if err := t.Resume(ctx); err != nil {
		return fmt.Errorf("resume task %s: %w", t.ID(), err)
	}
	return nil
}
