package ctld

import (
	"context"
	"time"

	"github.com/tide-hpc/tide/accounting"
	"github.com/tide-hpc/tide/ctld/api"
)

// Store is what the controller needs from persistence;
// *accounting.Store implements it.
type Store interface {
	Write(ctx context.Context, b *accounting.Batch) error
	LastJobID(ctx context.Context) (uint64, error)
	LoadJobs(ctx context.Context, since time.Time) ([]*api.Job, error)
	Spool(ctx context.Context, id uint64) (string, []string, error)
	QueryJobs(ctx context.Context, f api.JobFilter) ([]api.Job, error)
	Events(ctx context.Context, jobID uint64) ([]api.Event, error)
	AuditLog(ctx context.Context, limit int) ([]api.AuditRecord, error)
	LoadNodes(ctx context.Context) ([]api.Node, error)
	PurgeSpool(ctx context.Context, before time.Time) (int, error)
	Close() error
}

var _ Store = (*accounting.Store)(nil)
