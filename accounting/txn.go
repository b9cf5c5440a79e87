package accounting

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/mattn/go-sqlite3"
)

// A Batch commits on the writer's driver connection, not through a
// database/sql transaction. database/sql starts a goroutine per
// transaction to watch its context (Tx.awaitDone) and wakes it again at
// the commit, and rebinds every statement to the transaction: two thread
// wake-ups and a dozen allocations per commit, three commits per job,
// each on the way to an answer that sbatch or a node waits for. Here the
// writer pool's one connection is taken with Conn and Raw, and the batch
// runs between BEGIN IMMEDIATE and COMMIT on statements prepared once on
// that connection (driverStmts). A commit is never interrupted halfway:
// the statements run without a context, as a commit shared by several
// submissions must (groupCommit). A PostgreSQL store takes the same path
// on pgx's database/sql connection, between BEGIN and COMMIT.

// driverStmts are the write statements prepared on one driver connection.
type driverStmts struct {
	conn    any // the driver connection they belong to
	dialect dialect
	// inTxn reports whether the connection is inside a transaction.
	inTxn                                 func() bool
	begin, commit, rollback               driver.Stmt
	insertJob, upsertJob, upsertLive      driver.Stmt
	insertSpool, insertEvent, insertAudit driver.Stmt
	upsertNode, bumpMaxID, upsertStep     driver.Stmt
	upsertUsage                           driver.Stmt
	// fence reads the lease's epoch (lease.go); on PostgreSQL with a
	// share lock that a takeover waits for.
	fence driver.Stmt
	// args is exec's argument list, reused: statements run one at a
	// time on the one writer connection.
	args []driver.NamedValue
	// rec is the buffer job records are encoded into, reused likewise.
	rec []byte
}

// all lists the statements for closing.
func (d *driverStmts) all() []driver.Stmt {
	return []driver.Stmt{d.begin, d.commit, d.rollback, d.insertJob, d.upsertJob, d.upsertLive,
		d.insertSpool, d.insertEvent, d.insertAudit, d.upsertNode, d.bumpMaxID, d.upsertStep, d.upsertUsage, d.fence}
}

// prepareDriverStmts prepares the write statements on the driver
// connection dc, an SQLite or a pgx one as dl says.
func prepareDriverStmts(dc any, dl dialect) (*driverStmts, error) {
	d := &driverStmts{conn: dc, dialect: dl}
	var prep func(string) (driver.Stmt, error)
	begin, q := "BEGIN IMMEDIATE", func(s string) string { return s }
	fence := `SELECT epoch FROM leases WHERE name = '` + leaseName + `'`
	switch c := dc.(type) {
	case *sqlite3.SQLiteConn:
		if dl != sqliteDialect {
			return nil, fmt.Errorf("an SQLite connection in a %s store", dl)
		}
		prep = c.Prepare
		d.inTxn = func() bool { return !c.AutoCommit() }
	case *stdlib.Conn:
		if dl != postgresDialect {
			return nil, fmt.Errorf("a PostgreSQL connection in a %s store", dl)
		}
		prep = c.Prepare
		// 'I' is idle; 'T' in a transaction and 'E' in a failed one,
		// which needs its ROLLBACK as much.
		d.inTxn = func() bool { return c.Conn().PgConn().TxStatus() != 'I' }
		begin, q = "BEGIN", rebind
		fence += " FOR SHARE"
	default:
		return nil, fmt.Errorf("the writer connection is a %T", dc)
	}
	for _, p := range []struct {
		dst *driver.Stmt
		sql string
	}{
		{&d.begin, begin},
		{&d.commit, "COMMIT"},
		{&d.rollback, "ROLLBACK"},
		{&d.insertJob, sqlInsertJob},
		{&d.upsertJob, sqlUpsertJob},
		{&d.upsertLive, sqlUpsertLiveJob},
		{&d.insertSpool, sqlInsertSpool},
		{&d.insertEvent, sqlInsertEvent},
		{&d.insertAudit, sqlInsertAudit},
		{&d.upsertNode, sqlUpsertNode},
		{&d.bumpMaxID, dl.bumpMaxID()},
		{&d.upsertStep, sqlUpsertStep},
		{&d.upsertUsage, sqlUpsertUsage},
		{&d.fence, fence},
	} {
		st, err := prep(q(p.sql))
		if err != nil {
			d.close()
			return nil, fmt.Errorf("prepare %q: %w", firstLine(p.sql), err)
		}
		*p.dst = st
	}
	return d, nil
}

// close finalizes the statements (a connection with statements left
// open would not close, nor checkpoint and remove its log).
func (d *driverStmts) close() {
	for _, st := range d.all() {
		if st != nil {
			_ = st.Close()
		}
	}
}

// exec runs st with positional args.
func (d *driverStmts) exec(st driver.Stmt, args ...driver.Value) error {
	d.args = d.args[:0]
	for i, v := range args {
		if d.dialect == postgresDialect {
			v = pgText(v)
		}
		d.args = append(d.args, driver.NamedValue{Ordinal: i + 1, Value: v})
	}
	_, err := st.(driver.StmtExecContext).ExecContext(context.Background(), d.args)
	clear(d.args) // the values stay with the batch, not here
	return err
}

// inTxn runs apply between BEGIN IMMEDIATE and COMMIT on the writer
// connection, rolling back when apply or the commit fails.
func (s *Store) inTxn(ctx context.Context, apply func(*driverStmts) error) error {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		d := s.dst
		if d == nil || d.conn != dc {
			// The first write, or the pool replaced a broken connection
			// (whose statements went with it).
			if d, err = prepareDriverStmts(dc, s.dialect); err != nil {
				return err
			}
			s.dst = d
		}
		if err := d.exec(d.begin); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		if f := s.leases.fence.Load(); f != 0 {
			if err := d.checkFence(f); err != nil {
				return errors.Join(err, rollback(d))
			}
		}
		if err := apply(d); err != nil {
			return errors.Join(err, rollback(d))
		}
		if err := d.exec(d.commit); err != nil {
			return errors.Join(fmt.Errorf("commit: %w", err), rollback(d))
		}
		return nil
	})
}

// rollback ends a failed transaction. SQLite rolls some failures back by
// itself (a full disk, an I/O error), and then ROLLBACK finds no
// transaction: that is not an error.
func rollback(d *driverStmts) error {
	if !d.inTxn() {
		return nil
	}
	if err := d.exec(d.rollback); err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

// closeDriverStmts finalizes the writer's statements before its pool
// closes.
func (s *Store) closeDriverStmts() {
	if s.dst == nil {
		return
	}
	conn, err := s.w.Conn(context.Background())
	if err != nil {
		return
	}
	defer conn.Close()
	_ = conn.Raw(func(dc any) error {
		if dc == s.dst.conn {
			s.dst.close()
		}
		s.dst = nil
		return nil
	})
}
