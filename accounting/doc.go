// Package accounting is the controller's durable store: the live job
// records it reloads after a restart, the spool of batch scripts and
// environments, the per-job event trail, the audit log, operator-set node
// state and the job id high-water mark. It also answers sacct, so finished
// jobs stay queryable long after the controller forgot them.
//
// The store is one SQLite file in WAL mode (Open), or a PostgreSQL
// database (OpenURL with a postgres:// URL, through pgx's database/sql
// driver) with the same tables, migrations and queries; dialect.go lists
// where the two differ. Several clusters may share one PostgreSQL
// database, each in a schema of its own (OpenURLCluster, clusters.go);
// QueryClusters reads across them for sacct -M. All writes go through a
// single connection, one transaction per Batch, so a submission or a
// scheduling pass commits as a whole or not at all; queries use a separate pool, so a long sacct
// never blocks the controller's commits. Each job row keeps a few indexed
// columns for sacct's filters plus the full api.Job as JSON, so new job
// fields need no migration. Schema changes are embedded, numbered SQL
// files (one text per dialect) applied in order at open and recorded in
// schema_version.
//
// The package imports only ctld/api from the project (and
// internal/pgtest in its tests).
package accounting
