package accounting

// Several clusters in one accounting database (issue 26), as slurmdbd
// keeps several clusters in one MySQL database with a table set per
// cluster (<cluster>_job_table): on PostgreSQL each cluster's tables live
// in a schema of their own, tide_<cluster>, and a registry table in the
// public schema, public.tide_clusters, lists them for sacct -M all.
// A store opened for a cluster (OpenURLCluster) sets search_path to its
// schema on every connection of both pools, so every statement, every
// migration and the writer's prepared statements name their tables
// unqualified, exactly as on SQLite, and land in the cluster's schema.
// Only the cross-cluster read (QueryClusters) names other schemas.
//
// SQLite holds one cluster per file: the name is a label there, and a
// query naming another cluster is refused.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tide-hpc/tide/ctld/api"
)

// Cluster is one cluster of a store: on PostgreSQL a row of the
// registry, public.tide_clusters.
type Cluster struct {
	// Name is the cluster's cluster_name.
	Name string
	// Schema is its PostgreSQL schema ("" for SQLite).
	Schema string
	// Created is when the cluster was first registered (zero for
	// SQLite).
	Created time.Time
}

// clusterLockID is the PostgreSQL advisory lock held while a cluster
// registers: CREATE SCHEMA IF NOT EXISTS and CREATE TABLE IF NOT EXISTS
// are not safe against a concurrent twin (both may pass the check and
// one then fails on the catalog's unique index), and two controllers of
// one cluster, or two clusters, may start at once.
const clusterLockID = 0x7469_6465_636c_75 // "tideclu"

// sqlRegistry creates the registry of clusters. schema is UNIQUE: two
// names that map to one schema cannot both register.
const sqlRegistry = `CREATE TABLE public.tide_clusters (
		name    TEXT   PRIMARY KEY,
		schema  TEXT   NOT NULL UNIQUE,
		created BIGINT NOT NULL
	)`

// ClusterSchema returns the PostgreSQL schema of cluster name
// (api.ClusterSchema, which the configuration check shares).
func ClusterSchema(name string) (string, error) { return api.ClusterSchema(name) }

// AllClusters is api.AllClusters.
const AllClusters = api.AllClusters

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// register creates the cluster's schema and its registry row, both
// idempotent, under clusterLockID. It creates only what is missing, so
// that a controller whose role may not create schemas runs once an
// administrator has created them (PostgreSQL checks CREATE privileges
// before IF NOT EXISTS). A schema that another name registered is
// refused.
func (s *Store) register(ctx context.Context) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("register cluster %s: %w", s.cluster, err)
	}
	defer tx.Rollback()
	fail := func(step string, err error) error {
		return fmt.Errorf("register cluster %s: %s: %w", s.cluster, step, err)
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(clusterLockID)); err != nil {
		return fail("lock", err)
	}
	var registry, schema bool
	if err := tx.QueryRowContext(ctx, `SELECT to_regclass('public.tide_clusters') IS NOT NULL,
		EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, s.schema).Scan(&registry, &schema); err != nil {
		return fail("look up", err)
	}
	if !registry {
		if _, err := tx.ExecContext(ctx, sqlRegistry); err != nil {
			return fail("create public.tide_clusters", err)
		}
	}
	if !schema {
		if _, err := tx.ExecContext(ctx, `CREATE SCHEMA `+quoteIdent(s.schema)); err != nil {
			return fail("create schema "+s.schema, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO public.tide_clusters (name, schema, created)
		VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, s.cluster, s.schema, time.Now().Unix()); err != nil {
		return fail("record", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT name, schema FROM public.tide_clusters
		WHERE name = $1 OR schema = $2`, s.cluster, s.schema)
	if err != nil {
		return fail("check", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, schema string
		if err := rows.Scan(&name, &schema); err != nil {
			return fail("check", err)
		}
		if name != s.cluster {
			return fmt.Errorf("cluster_name %q maps to PostgreSQL schema %s, which cluster %q already uses in this database: "+
				"names that differ only in case or in '-' against '_' cannot share a store: %w",
				s.cluster, s.schema, name, api.ErrConflict)
		}
		if schema != s.schema {
			return fmt.Errorf("cluster %q is registered with schema %s, not %s: %w", name, schema, s.schema, api.ErrConflict)
		}
	}
	if err := rows.Err(); err != nil {
		return fail("check", err)
	}
	if err := tx.Commit(); err != nil {
		return fail("commit", err)
	}
	return nil
}

// ClusterName is the cluster the store was opened for ("" when opened
// without one, by Open or OpenURL).
func (s *Store) ClusterName() string { return s.cluster }

// ListClusters returns the clusters whose jobs the store holds, sorted
// by name: on PostgreSQL every registered cluster (none when no cluster
// ever registered), on SQLite the store's own cluster when it was opened
// with a name.
func (s *Store) ListClusters(ctx context.Context) ([]Cluster, error) {
	if s.dialect != postgresDialect {
		if s.cluster == "" {
			return []Cluster{}, nil
		}
		return []Cluster{{Name: s.cluster}}, nil
	}
	var exists bool
	if err := s.r.QueryRowContext(ctx, `SELECT to_regclass('public.tide_clusters') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	out := []Cluster{}
	if !exists {
		return out, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT name, schema, created FROM public.tide_clusters ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c Cluster
		var created int64
		if err := rows.Scan(&c.Name, &c.Schema, &created); err != nil {
			return nil, fmt.Errorf("list clusters: %w", err)
		}
		c.Created = time.Unix(created, 0).UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	return out, nil
}

// QueryClusters is QueryJobs over several clusters of a shared store
// (sacct -M): the jobs of each named cluster that match f (f.Clusters is
// not read), each with Cluster set to its cluster's name, sorted by
// cluster name and then by job id, since ids repeat across clusters.
// "all" (any case) names every cluster; no name at all, the store's own
// cluster. A name is matched as its schema (ClusterSchema: case and '-'
// against '_' do not matter); a name of no registered cluster selects
// nothing and is no error, as slurmdbd answers. On SQLite, which holds
// one cluster, naming another is ErrInvalidArgument. It only reads.
func (s *Store) QueryClusters(ctx context.Context, clusters []string, f api.JobFilter) ([]api.Job, error) {
	targets, err := s.resolveClusters(ctx, clusters)
	if err != nil {
		return nil, err
	}
	var out []api.Job
	for _, c := range targets {
		table := "jobs"
		if c.Schema != "" {
			// A cluster registers before its first migration: until
			// that commits it has no jobs table, and no jobs.
			var ready bool
			if err := s.r.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`,
				quoteIdent(c.Schema)+".jobs").Scan(&ready); err != nil {
				return nil, fmt.Errorf("query jobs of cluster %s: %w", c.Name, err)
			}
			if !ready {
				continue
			}
			table = quoteIdent(c.Schema) + ".jobs"
		}
		jobs, err := s.queryJobs(ctx, table, f)
		if err != nil {
			return nil, fmt.Errorf("query jobs of cluster %s: %w", c.Name, err)
		}
		if c.Name != "" {
			for i := range jobs {
				jobs[i].Cluster = c.Name
			}
		}
		if out == nil {
			out = jobs
		} else {
			out = append(out, jobs...)
		}
	}
	if out == nil {
		out = []api.Job{}
	}
	return out, nil
}

// ClusterSteps is Steps for the jobs jobIDs of cluster (sacct -M): the
// srun steps other clusters of a shared store recorded, as their own
// controllers stored them. The store's own cluster (or "") reads its own
// tables; a name of no registered cluster, or one whose tables do not
// exist yet, has no steps; on SQLite another name is
// ErrInvalidArgument. It only reads.
func (s *Store) ClusterSteps(ctx context.Context, cluster string, jobIDs []uint64) ([]api.StepRecord, error) {
	return clusterRecords[api.StepRecord](ctx, s, cluster, "steps", "job_id, step_id", "step", jobIDs)
}

// ClusterUsage is Usage for the jobs jobIDs of cluster (sacct -M): the
// node reports of the steps of another cluster of a shared store, as its
// controller stored them (the final ones, and none of the running
// values its controller keeps in memory). Names are read as by
// ClusterSteps. It only reads.
func (s *Store) ClusterUsage(ctx context.Context, cluster string, jobIDs []uint64) ([]api.NodeUsage, error) {
	return clusterRecords[api.NodeUsage](ctx, s, cluster, "usage", "job_id, step_id, node", "usage", jobIDs)
}

// clusterRecords is jobRecords on table of cluster, one cluster of the
// store: its own (or "") reads the search path's table, another
// registered one its schema's, if that table exists yet; a name of no
// registered cluster reads nothing. "all" is ErrInvalidArgument, as is
// on SQLite any name but the store's own.
func clusterRecords[T any](ctx context.Context, s *Store, cluster, table, order, what string, jobIDs []uint64) ([]T, error) {
	if strings.EqualFold(strings.TrimSpace(cluster), AllClusters) {
		return nil, fmt.Errorf("%s of cluster %q: name one cluster: %w", table, cluster, api.ErrInvalidArgument)
	}
	targets, err := s.resolveClusters(ctx, []string{cluster})
	if err != nil {
		return nil, err
	}
	if len(targets) == 0 {
		return nil, nil
	}
	c := targets[0]
	if c.Schema == "" || c.Schema == s.schema {
		return jobRecords[T](ctx, s, table, order, what, jobIDs)
	}
	qualified := quoteIdent(c.Schema) + "." + table
	var ready bool
	if err := s.r.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, qualified).Scan(&ready); err != nil {
		return nil, fmt.Errorf("query %s of cluster %s: %w", table, c.Name, err)
	}
	if !ready {
		return nil, nil
	}
	return jobRecords[T](ctx, s, qualified, order, what, jobIDs)
}

// resolveClusters turns QueryClusters' names into the clusters to read,
// each once, sorted by name. Schema "" is the store's own tables.
func (s *Store) resolveClusters(ctx context.Context, names []string) ([]Cluster, error) {
	own := Cluster{Name: s.cluster, Schema: s.schema}
	var asked []string
	all := false
	for _, n := range names {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
		case strings.EqualFold(n, AllClusters):
			all = true
		default:
			asked = append(asked, n)
		}
	}
	if !all && len(asked) == 0 {
		own.Schema = "" // the search path's tables, whatever the store's name
		return []Cluster{own}, nil
	}
	if s.dialect != postgresDialect {
		for _, n := range asked {
			if s.cluster == "" || !strings.EqualFold(n, s.cluster) {
				return nil, s.sqliteOneCluster(n)
			}
		}
		own.Schema = ""
		return []Cluster{own}, nil
	}
	registered, err := s.ListClusters(ctx)
	if err != nil {
		return nil, fmt.Errorf("query jobs: %w", err)
	}
	if all {
		return registered, nil
	}
	var out []Cluster
	for _, n := range asked {
		schema, err := ClusterSchema(n)
		if err != nil {
			continue // no cluster can have registered it
		}
		i := slices.IndexFunc(registered, func(c Cluster) bool { return c.Schema == schema })
		if i >= 0 && !slices.ContainsFunc(out, func(c Cluster) bool { return c.Schema == schema }) {
			out = append(out, registered[i])
		}
	}
	slices.SortFunc(out, func(a, b Cluster) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// sqliteOneCluster is the refusal of a query naming another cluster
// than the one an SQLite store holds.
func (s *Store) sqliteOneCluster(asked string) error {
	holds := "only this controller's cluster"
	if s.cluster != "" {
		holds = "only cluster " + s.cluster
	}
	return api.Errorf(api.ErrInvalidArgument,
		"cluster %s: the accounting store is SQLite: it holds %s; several clusters need a shared PostgreSQL store",
		asked, holds)
}
