package pgtest

import (
	"context"
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

var pg Lazy

func TestMain(m *testing.M) {
	code := m.Run()
	if err := pg.Stop(); err != nil {
		println("pgtest:", err.Error())
		code = 1
	}
	os.Exit(code)
}

// TestDatabasesAreSeparate checks that each test database is fresh and
// reachable over TCP with the password.
func TestDatabasesAreSeparate(t *testing.T) {
	ctx := context.Background()
	a, b := pg.Database(t), pg.Database(t)
	if a == b {
		t.Fatalf("two databases share the URL %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, `CREATE TABLE x (n BIGINT)`); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'x'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database %s sees the table created in %s", b, a)
	}
}

// TestSocketURL checks that SocketURL reaches its database over the unix
// socket, not over TCP.
func TestSocketURL(t *testing.T) {
	s := pg.Server(t)
	ctx := context.Background()
	name, _, err := s.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.DropDatabase(ctx, name) })
	c, err := pgx.Connect(ctx, s.SocketURL(name))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var db string
	var addr *string
	if err := c.QueryRow(ctx, `SELECT current_database(), host(inet_client_addr())`).Scan(&db, &addr); err != nil {
		t.Fatal(err)
	}
	if db != name || addr != nil {
		t.Errorf("connected to %q from %v, want %q over the unix socket (no client address)", db, addr, name)
	}
}

// TestWrongPasswordRefused checks that the server does not trust TCP
// connections: other users of the machine cannot reach test data.
func TestWrongPasswordRefused(t *testing.T) {
	s := pg.Server(t)
	ctx := context.Background()
	url := "postgres://" + superuser + ":wrong@127.0.0.1:" + strconv.Itoa(s.Port) + "/postgres?sslmode=disable"
	if c, err := pgx.Connect(ctx, url); err == nil {
		c.Close(ctx)
		t.Fatal("connected with a wrong password")
	}
}

// TestStopEndsServer starts a second server and checks that Stop ends
// its process and removes its directory.
func TestStopEndsServer(t *testing.T) {
	pg.Server(t) // skips when not installed
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	pid, dir := s.PID, s.Dir
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("postgres pid %d still runs after Stop", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s left after Stop (stat: %v)", dir, err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestNotInstalled: without server binaries Start says so, and tests
// that ask for a database skip rather than fail.
func TestNotInstalled(t *testing.T) {
	t.Setenv("TIDE_PG_BIN", t.TempDir())
	if d := BinDir(); d != "" {
		t.Fatalf("BinDir = %q in an empty directory", d)
	}
	if s, err := Start(); !errors.Is(err, ErrNotInstalled) {
		if s != nil {
			s.Stop()
		}
		t.Fatalf("Start = %v, want ErrNotInstalled", err)
	}
	var l Lazy
	skipped := false
	t.Run("database", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		l.Database(t)
	})
	if !skipped {
		t.Error("Lazy.Database did not skip")
	}
}
