package accounting

// The leader lease (issue 26). Controllers that share a store take turns
// as primary: the one holding the lease row acts, the others wait. The
// lease's epoch is a fencing token: every write transaction of a
// controller that set it (SetFence) first reads the row and fails with
// ErrFenced unless the epoch is still its own, so a primary that was
// paused or cut off past its lease cannot write after another took over.
// On PostgreSQL the read takes a share lock on the row (FOR SHARE),
// which a takeover's update must wait for: a write either commits
// before the takeover, and the new primary's recovery reads it, or sees
// the new epoch and fails. On SQLite every write transaction already
// excludes the others (BEGIN IMMEDIATE).
//
// Lapse is judged by the store's clock alone: the controllers' clocks
// may disagree, the database's is one.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// ErrFenced is the error of a write by a controller whose lease epoch
// is no longer the store's: another controller became primary.
var ErrFenced = errors.New("fenced: another controller holds the leader lease")

// LeaseBid is a controller asking for the lease.
type LeaseBid struct {
	// Holder is the controller's name (controller_name). A bid by the
	// lease's own holder takes it at once even before it lapses: the
	// holder restarted (a second controller run under the same name
	// would fence the first, which is why names must differ).
	Holder string
	// Addr and APIAddr are where nodes and clients reach the bidder;
	// StepKey is its step key's fingerprint.
	Addr, APIAddr, StepKey string
	// TTL is how long the lease lasts without renewal.
	TTL time.Duration
}

// Lease is the lease row as the store has it.
type Lease struct {
	Holder, Addr, APIAddr, StepKey string
	// Epoch is the fencing token; 0 when no controller ever held it.
	Epoch uint64
	// Left is how long until it lapses by the store's clock (negative
	// once it has).
	Left time.Duration
}

// Live reports whether l is held: taken and not lapsed.
func (l Lease) Live() bool { return l.Epoch != 0 && l.Left > 0 }

// leaseState is a Store's lease connection and fence.
type leaseState struct {
	// open opens the lease's own connection: renewals must not queue
	// behind the writer's batches.
	open func() (*sql.DB, error)
	mu   sync.Mutex
	db   *sql.DB
	// fence is the epoch every write checks (0: none).
	fence atomic.Uint64
}

func (l *leaseState) conn() (*sql.DB, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.db != nil {
		return l.db, nil
	}
	if l.open == nil {
		return nil, errors.New("store has no lease connection")
	}
	db, err := l.open()
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	l.db = db
	return db, nil
}

func (l *leaseState) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.db == nil {
		return nil
	}
	err := l.db.Close()
	l.db = nil
	return err
}

// nowNanos is the store's clock in unix nanoseconds.
func (d dialect) nowNanos() string {
	if d == postgresDialect {
		return `CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000000 AS BIGINT)`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000000000.0 AS INTEGER)`
}

// firstEpoch is the epoch of a store's first lease: the store's clock in
// milliseconds, not 1. Node daemons refuse answers of an epoch lower
// than one they saw (a deposed primary's); when an operator replaces the
// store (a fresh state directory, a new database) while the nodes keep
// running, the new store's epochs must still be higher than the old
// one's, or every node would refuse the new controller until restarted.
// An epoch grows by one per change of holder, far less than a
// millisecond's worth between two stores.
func firstEpoch(nowNanos string) string { return `(` + nowNanos + `) / 1000000` }

// leaseName is the one lease row's key.
const leaseName = "primary"

// AcquireLease takes the lease for bid when it is free, lapsed or
// already bid.Holder's, raising its epoch, and returns the lease as it
// stands afterwards and whether bid now holds it. Several controllers
// may bid at once: exactly one wins.
func (s *Store) AcquireLease(ctx context.Context, bid LeaseBid) (Lease, bool, error) {
	db, err := s.leases.conn()
	if err != nil {
		return Lease{}, false, fmt.Errorf("acquire lease: %w", err)
	}
	now := s.dialect.nowNanos()
	q := s.q(`INSERT INTO leases (name, holder, epoch, expires, addr, api_addr, step_key)
		VALUES ('` + leaseName + `', ?1, ` + firstEpoch(now) + `, ` + now + ` + ?2, ?3, ?4, ?5)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, epoch = leases.epoch + 1,
			expires = excluded.expires, addr = excluded.addr, api_addr = excluded.api_addr,
			step_key = excluded.step_key
		WHERE leases.expires < ` + now + ` OR leases.holder = excluded.holder
		RETURNING epoch`)
	var epoch int64
	err = db.QueryRowContext(ctx, q, bid.Holder, int64(bid.TTL), bid.Addr, bid.APIAddr, bid.StepKey).Scan(&epoch)
	won := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Lease{}, false, fmt.Errorf("acquire lease: %w", err)
	}
	l, err := s.CurrentLease(ctx)
	if err != nil {
		return Lease{}, false, err
	}
	// The row read back may already be a later winner's.
	return l, won && l.Epoch == uint64(epoch), nil
}

// RenewLease extends the lease held at epoch by ttl from now (the
// store's now) and reports whether it is still held at epoch.
func (s *Store) RenewLease(ctx context.Context, epoch uint64, ttl time.Duration) (bool, error) {
	return s.updateLease(ctx, "renew", `expires = `+s.dialect.nowNanos()+` + ?1`, int64(ttl), epoch)
}

// ReleaseLease lets the lease held at epoch lapse now, so that a
// standby takes over without waiting out its time (a clean shutdown).
func (s *Store) ReleaseLease(ctx context.Context, epoch uint64) error {
	_, err := s.updateLease(ctx, "release", `expires = ?1`, int64(0), epoch)
	return err
}

func (s *Store) updateLease(ctx context.Context, what, set string, arg int64, epoch uint64) (bool, error) {
	db, err := s.leases.conn()
	if err != nil {
		return false, fmt.Errorf("%s lease: %w", what, err)
	}
	res, err := db.ExecContext(ctx, s.q(`UPDATE leases SET `+set+` WHERE name = '`+leaseName+`' AND epoch = ?2`), arg, int64(epoch))
	if err != nil {
		return false, fmt.Errorf("%s lease: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("%s lease: %w", what, err)
	}
	return n == 1, nil
}

// CurrentLease reads the lease; the zero Lease when none was ever taken.
func (s *Store) CurrentLease(ctx context.Context) (Lease, error) {
	db, err := s.leases.conn()
	if err != nil {
		return Lease{}, fmt.Errorf("read lease: %w", err)
	}
	var l Lease
	var epoch, left int64
	err = db.QueryRowContext(ctx, `SELECT holder, epoch, expires - `+s.dialect.nowNanos()+`, addr, api_addr, step_key
		FROM leases WHERE name = '`+leaseName+`'`).Scan(&l.Holder, &epoch, &left, &l.Addr, &l.APIAddr, &l.StepKey)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, nil
	}
	if err != nil {
		return Lease{}, fmt.Errorf("read lease: %w", err)
	}
	l.Epoch, l.Left = uint64(epoch), time.Duration(left)
	return l, nil
}

// SetFence makes every later write check that the lease's epoch is
// still epoch, and fail with ErrFenced when it is not (0 turns the
// check off).
func (s *Store) SetFence(epoch uint64) { s.leases.fence.Store(epoch) }

// checkFence is the fence check at the start of a write transaction
// (txn.go): the lease's epoch must be fence.
func (d *driverStmts) checkFence(fence uint64) error {
	rows, err := d.fence.(driver.StmtQueryContext).QueryContext(context.Background(), nil)
	if err != nil {
		return fmt.Errorf("check lease: %w", err)
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w (no lease in the store; epoch %d expected)", ErrFenced, fence)
		}
		return fmt.Errorf("check lease: %w", err)
	}
	if e, ok := v[0].(int64); !ok || uint64(e) != fence {
		return fmt.Errorf("%w (epoch %v, this controller's %d)", ErrFenced, v[0], fence)
	}
	return nil
}
