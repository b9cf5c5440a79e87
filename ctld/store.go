package ctld

import (
	"context"
	"path/filepath"
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

// openStore opens the controller's database: the store key's URL when
// set (sqlite:///path or postgres://…), else tide.db in the state
// directory, as before the key existed. It is opened for cluster_name:
// a PostgreSQL database may hold several clusters, each in a schema of
// its own (accounting/clusters.go).
func openStore(cl *Cluster) (*accounting.Store, error) {
	if cl.Store != "" {
		return accounting.OpenURLCluster(cl.Store, cl.ClusterName)
	}
	return accounting.OpenCluster(filepath.Join(cl.StateDir, "tide.db"), cl.ClusterName)
}
