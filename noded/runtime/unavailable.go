package runtime

import (
	"context"
	"syscall"

	"github.com/tide-hpc/tide/noded/stepd"
)

// Unavailable is the runtime of jobs a node cannot run, such as
// container jobs on a node without containerd: the controller should
// not send them (the containerd feature), and a node that lost its
// runtime refuses them with a clear error. Nothing of such a job ever
// runs, so there is nothing to signal, freeze, measure or delete.
type Unavailable struct {
	// Kind is the runtime's Name ("container").
	Kind string
	// Err is why: Start and Reattach fail with it.
	Err error
}

var _ Runtime = Unavailable{}

// Name is u.Kind.
func (u Unavailable) Name() string { return u.Kind }

// Start fails with u.Err.
func (u Unavailable) Start(context.Context, Job) (<-chan struct{}, error) { return nil, u.Err }

// Reattach fails with u.Err: the job is lost.
func (u Unavailable) Reattach(context.Context, Job) (<-chan struct{}, *stepd.Status, error) {
	return nil, nil, u.Err
}

// State is Stopped.
func (Unavailable) State(Job) State { return Stopped }

// Signal gives ErrNotRunning.
func (Unavailable) Signal(context.Context, Job, syscall.Signal, bool) error { return ErrNotRunning }

// Stats gives ErrNotRunning.
func (Unavailable) Stats(context.Context, Job) (Stats, error) { return Stats{}, ErrNotRunning }

// Freeze gives ErrNotRunning.
func (Unavailable) Freeze(context.Context, Job, func(string)) (string, error) {
	return "", ErrNotRunning
}

// Thaw gives ErrNotRunning.
func (Unavailable) Thaw(context.Context, Job, string) error { return ErrNotRunning }

// Delete has nothing to remove.
func (Unavailable) Delete(context.Context, Job) error { return nil }

// Close has nothing to close.
func (Unavailable) Close() error { return nil }
