package integration

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestStoreFromEnv(t *testing.T) {
	tests := []struct {
		name, v  string
		postgres bool
		err      string
	}{
		{name: "unset", v: ""},
		{name: "sqlite", v: "sqlite"},
		{name: "postgres", v: "postgres", postgres: true},
		{name: "unknown", v: "mysql", err: `TIDE_TEST_STORE="mysql": want sqlite or postgres`},
		{name: "URL", v: "postgres://db1/tide", err: `want sqlite or postgres`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg, err := storeFromEnv(tt.v)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("storeFromEnv(%q) = %v, %v; want an error with %q", tt.v, pg, err, tt.err)
				}
				return
			}
			if err != nil || pg != tt.postgres {
				t.Fatalf("storeFromEnv(%q) = %v, %v; want %v", tt.v, pg, err, tt.postgres)
			}
		})
	}
}

// TestChaosCheckPostgres checks invariant 5 on a PostgreSQL store: a
// database with tables, indexes and a foreign key passes; a row whose
// foreign key names a missing row (written with the keys' triggers off,
// as only a broken store would) is found; a database without the
// controller's tables is not taken for an intact one.
func TestChaosCheckPostgres(t *testing.T) {
	ctx := context.Background()
	url := pgUnit.Database(t)
	if v := checkPostgres(url); len(v) != 1 || !strings.Contains(v[0].detail, "no index") {
		t.Errorf("empty database: violations %v, want one saying it has no index", v)
	}
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, `CREATE TABLE jobs (id BIGINT PRIMARY KEY, name TEXT);
		CREATE INDEX jobs_name ON jobs (name);
		CREATE TABLE spool (job_id BIGINT PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE, script BYTEA);
		INSERT INTO jobs SELECT n, repeat('x', n % 50) || n FROM generate_series(1, 2000) n;
		INSERT INTO spool SELECT n, 'script' FROM generate_series(1, 2000, 3) n`); err != nil {
		t.Fatal(err)
	}
	if v := checkPostgres(url); len(v) != 0 {
		t.Fatalf("intact database: %v", v)
	}
	if _, err := db.Exec(ctx, `SET session_replication_role = replica; INSERT INTO spool VALUES (9999, 'orphan'), (9998, 'orphan'); SET session_replication_role = DEFAULT`); err != nil {
		t.Fatal(err)
	}
	v := checkPostgres(url)
	if len(v) != 1 || v[0].invariant != "5-database" || !strings.Contains(v[0].detail, "2 rows of spool name a missing jobs row") {
		t.Fatalf("orphaned spool rows: violations %v, want one 5-database naming 2 rows of spool", v)
	}
}

// TestStoreIsPostgres checks, in the PostgreSQL pass, that the
// controllers really keep their state in their own PostgreSQL database:
// a job written there and no tide.db in the state directory; and that a
// restarted controller finds its jobs there again. Two clusters at once
// do not see each other's jobs.
func TestStoreIsPostgres(t *testing.T) {
	if !onPostgres() {
		t.Skipf("%s is not postgres: the SQLite pass has no PostgreSQL store to check", storeEnv)
	}
	ctx := context.Background()
	a, b := newCluster(t, 1), newCluster(t, 1)
	if a.storeURL == "" || a.storeURL == b.storeURL {
		t.Fatalf("store URLs %q and %q: want two databases", a.storeURL, b.storeURL)
	}
	id := a.submit("#!/bin/sh\ntrue\n", "-J", "in-postgres")
	a.waitTerminal(id, 30*time.Second)
	db, err := pgx.Connect(ctx, a.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	var name, state string
	// In its cluster's schema (cluster_name it: accounting.ClusterSchema).
	if err := db.QueryRow(ctx, `SELECT name, state FROM tide_it.jobs WHERE id = $1`, id).Scan(&name, &state); err != nil {
		t.Fatalf("job %d in the controller's database: %v", id, err)
	}
	if name != "in-postgres" || state != "COMPLETED" {
		t.Errorf("job %d stored as %q %s, want in-postgres COMPLETED", id, name, state)
	}
	for _, c := range []*cluster{a, b} {
		if _, err := os.Stat(filepath.Join(c.dir, "ctld", "tide.db")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: tide.db in the state directory (%v): the controller wrote SQLite", c.dir, err)
		}
	}
	if r := b.cli("sacct", "-X", "-n", "-P", "-j", strconv.FormatUint(id, 10), "--format=JobName"); strings.Contains(r.out, "in-postgres") {
		t.Errorf("the other cluster's sacct lists job %d: %q", id, r.out)
	}
	kill(a.ctld, syscall.SIGTERM)
	a.startCtld()
	if got := a.job(id); got.Name != "in-postgres" || got.State != api.StateCompleted {
		t.Errorf("after a restart job %d is %q %s, want in-postgres COMPLETED", id, got.Name, got.State)
	}
}
