package accounting

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql migrations/postgres/*.sql
var migrationFS embed.FS

// migration is one numbered schema step, written for each dialect:
// migrations/NNNN_name.sql for SQLite and migrations/postgres/NNNN_name.sql
// for PostgreSQL. The list is one: every step has both texts, under the
// same name, and a database of either kind records the same versions.
// Where SQLite's step only changes its storage (0004, 0005), the
// PostgreSQL text does what the step means there, and says so.
type migration struct {
	version int
	name    string
	sql     string // SQLite
	pgsql   string // PostgreSQL
}

// text is m's SQL for dialect d.
func (m migration) text(d dialect) string {
	if d == postgresDialect {
		return m.pgsql
	}
	return m.sql
}

// loadMigrations reads the embedded files NNNN_name.sql and checks that
// they are numbered 1, 2, 3… without gaps, and that each has its
// PostgreSQL text, so a missing or duplicated file is caught by the
// tests rather than on a production database.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var ms []migration
	for _, n := range names {
		base := path.Base(n)
		num, _, ok := strings.Cut(base, "_")
		if !ok {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", base)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: bad version number %q", base, num)
		}
		body, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", base, err)
		}
		pg, err := fs.ReadFile(fsys, path.Join(path.Dir(n), "postgres", base))
		if err != nil {
			return nil, fmt.Errorf("migration %s has no PostgreSQL text: %w", base, err)
		}
		ms = append(ms, migration{version: v, name: base, sql: string(body), pgsql: string(pg)})
	}
	// A PostgreSQL step without its SQLite twin would never run.
	pgNames, err := fs.Glob(fsys, "migrations/postgres/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	for _, n := range pgNames {
		if _, err := fs.Stat(fsys, path.Join("migrations", path.Base(n))); err != nil {
			return nil, fmt.Errorf("migration postgres/%s has no SQLite text", path.Base(n))
		}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d", m.name, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the schema version this build of the package writes;
// Open refuses databases written by a newer one.
func SchemaVersion() int {
	ms, err := loadMigrations(migrationFS)
	if err != nil {
		return 0
	}
	return len(ms)
}

// sqlSchemaVersion creates the table of applied versions (SQLite).
const sqlSchemaVersion = `CREATE TABLE IF NOT EXISTS schema_version (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	)`

// sqlSchemaVersionPG is sqlSchemaVersion for PostgreSQL, whose INTEGER
// is 32 bits.
const sqlSchemaVersionPG = `CREATE TABLE IF NOT EXISTS schema_version (
		version    BIGINT PRIMARY KEY,
		applied_at BIGINT NOT NULL
	)`

// migrateLockID is the PostgreSQL advisory lock that migrations hold:
// several controllers (or clusters) sharing a database may start at
// once, and only one may apply a step.
const migrateLockID = 0x7469_6465_6d69_67 // "tidemig"

// migrate brings the writer's database up to the newest embedded schema
// in one transaction, so a crash mid-way leaves the previous version
// intact.
func (s *Store) migrate(ctx context.Context) error {
	return migrate(ctx, s.w, s.dialect)
}

func migrate(ctx context.Context, db *sql.DB, dl dialect) error {
	ms, err := loadMigrations(migrationFS)
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()

	create, insert := sqlSchemaVersion, `INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`
	if dl == postgresDialect {
		// Held until the transaction ends; a second controller waits
		// here and then finds the steps applied.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLockID)); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		create, insert = sqlSchemaVersionPG, rebind(insert)
	}
	if _, err := tx.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("migrate: create schema_version: %w", err)
	}
	var cur int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&cur); err != nil {
		return fmt.Errorf("migrate: read schema version: %w", err)
	}
	if cur > len(ms) {
		return fmt.Errorf("migrate: database schema version %d is newer than this program's %d", cur, len(ms))
	}
	for _, m := range ms[cur:] {
		if _, err := tx.ExecContext(ctx, m.text(dl)); err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, insert, m.version, time.Now().Unix()); err != nil {
			return fmt.Errorf("migrate: record %s: %w", m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}
