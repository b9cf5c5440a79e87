package accounting

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	// PostgreSQL through database/sql (driver name "pgx"), so that the
	// queries are shared with SQLite.
	"github.com/jackc/pgx/v5/stdlib"

	// The SQLite driver; with -tags libsqlite3 it links the system
	// library instead of compiling the bundled amalgamation.
	"github.com/mattn/go-sqlite3"
)

// writerDriver is the SQLite driver of the writer connection, which sets
// walCheckpointPages on every connection it opens.
const writerDriver = "sqlite3-tide-writer"

// walCheckpointPages is how long the write-ahead log grows (in 4 KiB
// pages, 32 MiB) before a commit copies it into the database file.
// SQLite's default, 1,000, made a busy controller checkpoint every few
// dozen jobs: each job's commits touch the same dozen table and index
// pages again, and every checkpoint wrote them all back and synced the
// file twice, a third of the controller's writes. A longer log holds
// many versions of a hot page and the checkpoint writes only the last.
const walCheckpointPages = 8192

func init() {
	sql.Register(writerDriver, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		_, err := c.Exec(fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", walCheckpointPages), nil)
		return err
	}})
}

// Store is the controller's database: an SQLite file (Open) or a
// PostgreSQL database (OpenURL with a postgres:// URL). It is safe for
// concurrent use: writes are serialised on one connection, reads run in
// parallel on a second pool (read-only for SQLite) and see the last
// committed Batch.
type Store struct {
	path    string // the SQLite file, or the PostgreSQL URL without its password
	dialect dialect
	w       *sql.DB // the single writer connection
	r       *sql.DB // read pool
	// rebound caches statements rewritten for PostgreSQL (dialect.go).
	rebound sync.Map
	// dst are the statements batches commit with, prepared on the
	// writer's driver connection (txn.go); used only while holding that
	// connection.
	dst *driverStmts
	// leases is the leader lease's own state and connection (lease.go).
	leases leaseState

	// cluster is the cluster_name the store was opened for, "" for
	// none; schema is its PostgreSQL schema (clusters.go), "" on SQLite
	// and on a PostgreSQL store opened without a cluster.
	cluster, schema string

	closeOnce sync.Once
	closeErr  error
}

const jobColumns = `id, "user", uid, name, "partition", account, state,
	submit_time, eligible_time, start_time, end_time, record, array_job_id`

const (
	sqlInsertJob = `INSERT INTO jobs (` + jobColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// A job's owner, submit time and array are fixed when it is first
	// stored, so an update leaves their columns alone: SQLite rewrites
	// the index entries of every column an UPDATE sets, changed or not,
	// and the three indexes on them were a quarter of the pages each
	// start and end of a job wrote.
	sqlUpsertJob = sqlUpsertLiveJob + `, end_time = excluded.end_time`
	// sqlUpsertLiveJob is the update of a job that never ended (no end
	// time, never requeued), whose end_time column is still 0: its start
	// need not touch the end time index.
	sqlUpsertLiveJob = sqlInsertJob + `
		ON CONFLICT (id) DO UPDATE SET
			name = excluded.name, "partition" = excluded."partition",
			account = excluded.account, state = excluded.state,
			eligible_time = excluded.eligible_time, start_time = excluded.start_time,
			record = excluded.record`
	sqlInsertSpool = `INSERT INTO spool (job_id, script, env) VALUES (?, ?, ?)`
	// An event's id counts within its job (migration 0005): the lookup
	// reads the b-tree page the insert then writes.
	sqlInsertEvent = `INSERT INTO events (job_id, id, time, kind, state, reason, message, actor)
		VALUES (?1, (SELECT COALESCE(max(id), 0) + 1 FROM events WHERE job_id = ?1), ?2, ?3, ?4, ?5, ?6, ?7)`
	sqlInsertAudit = `INSERT INTO audit (time, uid, "user", action, target, detail)
		VALUES (?, ?, ?, ?, ?, ?)`
	sqlUpsertNode = `INSERT INTO nodes (name, record) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET record = excluded.record`
	sqlBumpMaxID = `INSERT INTO meta (key, value) VALUES ('` + metaMaxJobID + `', ?1)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value
		WHERE excluded.value > CAST(meta.value AS INTEGER)`
	// sqlBumpMaxIDPG is sqlBumpMaxID for PostgreSQL, whose meta.value is
	// TEXT: compared as numbers, not as strings ("9" > "10").
	sqlBumpMaxIDPG = `INSERT INTO meta (key, value) VALUES ('` + metaMaxJobID + `', CAST(CAST($1 AS BIGINT) AS TEXT))
		ON CONFLICT (key) DO UPDATE SET value = excluded.value
		WHERE CAST(excluded.value AS BIGINT) > CAST(meta.value AS BIGINT)`
)

// bumpMaxID is the statement raising the high-water mark.
func (d dialect) bumpMaxID() string {
	if d == postgresDialect {
		return sqlBumpMaxIDPG
	}
	return sqlBumpMaxID
}

// metaMaxJobID is the meta key of the job id high-water mark.
const metaMaxJobID = "max_job_id"

// dsn builds the go-sqlite3 URI for path. SQLite decodes %XX escapes in
// URI file names, and the driver splits its own parameters off at the
// first '?', so those characters in the path must be escaped.
func dsn(path string, readOnly bool) string {
	p := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	if readOnly {
		// Readers serve occasional sacct queries: a small page cache each.
		return "file:" + p + "?mode=ro&_query_only=1&_busy_timeout=5000&_foreign_keys=on&_cache_size=-512"
	}
	return "file:" + p + "?_journal_mode=WAL&_busy_timeout=5000&_foreign_keys=on&_synchronous=NORMAL&_txlock=immediate"
}

// Open creates or opens the database at path, runs migrations, and sets
// WAL. Errors name the path, so a corrupt or unreadable file is easy to
// find from the controller's log.
func Open(path string) (*Store, error) {
	s, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("open accounting database %s: %w", path, err)
	}
	return s, nil
}

func open(path string) (_ *Store, err error) {
	ctx := context.Background()
	s := &Store{path: path}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()

	s.w, err = sql.Open(writerDriver, dsn(path, false))
	if err != nil {
		return nil, err
	}
	s.leases.open = func() (*sql.DB, error) { return sql.Open("sqlite3", dsn(path, false)) }
	s.writerPool()
	// The first statement is where SQLite reads the header: a garbage
	// file fails here with "file is not a database".
	var mode string
	if err := s.w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return nil, err
	}
	if !strings.EqualFold(mode, "wal") {
		return nil, fmt.Errorf("journal mode is %q, not WAL (is the file on a filesystem without shared memory?)", mode)
	}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	if err := s.prepare(ctx); err != nil {
		return nil, err
	}

	s.r, err = sql.Open("sqlite3", dsn(path, true))
	if err != nil {
		return nil, err
	}
	s.readPool()
	if err := s.r.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("read-only pool: %w", err)
	}
	return s, nil
}

// OpenCluster is Open for the controller of cluster: an SQLite file
// holds one cluster, whose name the store keeps for QueryClusters.
func OpenCluster(path, cluster string) (*Store, error) {
	s, err := Open(path)
	if err != nil {
		return nil, err
	}
	s.cluster = cluster
	return s, nil
}

// OpenURL opens the store named by a URL: sqlite:///path/to/tide.db (an
// SQLite file, as Open) or postgres://user:password@host:port/db?...
// (a PostgreSQL database, also spelt postgresql://; parameters as libpq
// takes them). Errors name the store without its password. A
// PostgreSQL store opened so keeps its tables in the first schema of
// the connection's search_path (public by default); controllers open
// theirs with OpenURLCluster.
func OpenURL(store string) (*Store, error) {
	return OpenURLCluster(store, "")
}

// OpenURLCluster is OpenURL for the controller of cluster (its
// cluster_name; "" is OpenURL). On PostgreSQL, which several clusters
// may share, the cluster's tables live in a schema of their own
// (ClusterSchema), which it creates and registers in
// public.tide_clusters at the first start, idempotently; every
// connection's search_path is that schema. A cluster name that maps to
// no schema, or to the schema of another registered name, is refused.
// On SQLite the name is only recorded (OpenCluster).
func OpenURLCluster(store, cluster string) (*Store, error) {
	scheme, rest, ok := strings.Cut(store, "://")
	switch {
	case ok && scheme == "sqlite":
		path, err := url.PathUnescape(rest)
		if err != nil || path == "" || path[0] != '/' {
			return nil, fmt.Errorf("open accounting database %s: want sqlite:///absolute/path", store)
		}
		return OpenCluster(path, cluster)
	case ok && (scheme == "postgres" || scheme == "postgresql"):
		s, err := openPostgres(store, cluster)
		if err != nil {
			return nil, fmt.Errorf("open accounting database %s: %w", redact(store), err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("open accounting database %q: want sqlite:///path or postgres://host/db", redact(store))
}

// redact is a store URL without its password, for logs and errors.
func redact(store string) string {
	u, err := url.Parse(store)
	if err != nil {
		// An unparsable URL may hold a password anywhere: show the scheme.
		scheme, _, _ := strings.Cut(store, ":")
		return scheme + "://…"
	}
	return u.Redacted()
}

func openPostgres(dsn, cluster string) (_ *Store, err error) {
	ctx := context.Background()
	s := &Store{path: redact(dsn), dialect: postgresDialect, cluster: cluster}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if cluster != "" {
		if s.schema, err = ClusterSchema(cluster); err != nil {
			return nil, err
		}
	}
	// Parsing first gives a clear error for a malformed URL instead of
	// one on the first query.
	cfg, err := pgxConfig(dsn)
	if err != nil {
		return nil, err
	}
	if s.schema != "" {
		// Before any connection is opened, so that every one of every
		// pool has it (the read pool's config is a copy): unqualified
		// names are the cluster's tables. The schema may not exist yet;
		// PostgreSQL resolves the path at each use.
		cfg.RuntimeParams["search_path"] = quoteIdent(s.schema)
	}
	// A write transaction left idle is a writer that was paused or cut
	// off mid-batch: PostgreSQL ends it, and with it the share lock on
	// the lease row (lease.go) that would keep every standby from
	// taking over for as long as the pause lasts.
	cfg.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.Itoa(int(writeIdleTimeout / time.Millisecond))
	s.w = stdlib.OpenDB(*cfg)
	s.leases.open = func() (*sql.DB, error) { return stdlib.OpenDB(*cfg), nil }
	s.writerPool()
	if err := s.w.PingContext(ctx); err != nil {
		return nil, err
	}
	if s.schema != "" {
		if err := s.register(ctx); err != nil {
			return nil, err
		}
	}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	if err := s.prepare(ctx); err != nil {
		return nil, err
	}
	// The read pool cannot write, as SQLite's is opened read-only: a
	// query that tried would fail rather than bypass the writer's order.
	rcfg := cfg.Copy()
	rcfg.RuntimeParams["default_transaction_read_only"] = "on"
	s.r = stdlib.OpenDB(*rcfg)
	s.readPool()
	if err := s.r.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("read pool: %w", err)
	}
	return s, nil
}

// writeIdleTimeout is how long PostgreSQL lets a write transaction sit
// idle between statements before it ends the session. A batch sends its
// statements back to back (microseconds apart); a longer gap means the
// controller stopped (SIGSTOP, a stalled VM, a cut network) holding the
// lease row's lock, which a standby's takeover waits for. The failover
// bound is the lease TTL plus this plus a poll.
const writeIdleTimeout = 2 * time.Second

// writerPool sets the writer pool to its one connection: SQLite allows
// one write transaction at a time anyway, a PostgreSQL store gets the
// same order of batches, and a single connection keeps the prepared
// statements valid.
func (s *Store) writerPool() {
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
}

// readPool sizes the read pool: queries serve occasional sacct and
// squeue --all requests.
func (s *Store) readPool() {
	n := max(4, runtime.GOMAXPROCS(0))
	s.r.SetMaxOpenConns(n)
	s.r.SetMaxIdleConns(1)
	s.r.SetConnMaxIdleTime(time.Minute)
}

// prepare prepares the write statements on the writer connection, so
// that a schema they do not fit fails Open rather than the first write.
func (s *Store) prepare(ctx context.Context) error {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		d, err := prepareDriverStmts(dc, s.dialect)
		if err != nil {
			return err
		}
		s.dst = d
		return nil
	})
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// Path is the database file the store was opened on, or for PostgreSQL
// its URL without the password.
func (s *Store) Path() string { return s.path }

// Close releases the statements and both pools; for SQLite the last
// connection to close checkpoints the WAL into the main file. It is safe to call more
// than once; other methods fail after it with "database is closed".
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.w != nil {
			s.closeDriverStmts()
		}
		var errs []error
		// Readers first, so that the writer is the last connection and
		// may checkpoint and remove the WAL.
		if s.r != nil {
			errs = append(errs, s.r.Close())
		}
		errs = append(errs, s.leases.close())
		if s.w != nil {
			errs = append(errs, s.w.Close())
		}
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("close accounting database %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// nanos encodes t for the time columns: unix nanoseconds, 0 for the zero
// time (whose UnixNano would overflow). The instant 1970-01-01T00:00:00Z
// therefore reads back as the zero time; times outside 1678–2262 do not
// fit. Job times do not depend on it: they come back from the record.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromNanos decodes a time column, in UTC.
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// utc converts t to UTC, keeping the zero time zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}
