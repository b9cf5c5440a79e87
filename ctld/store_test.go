package ctld

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestOpenStoreSQLite: without the store key the database is tide.db in
// the state directory, as before the key; a sqlite:// store puts it
// where the URL says.
func TestOpenStoreSQLite(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "elsewhere", "acct.db")
	if err := os.Mkdir(filepath.Dir(other), 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, store, want string
	}{
		{name: "default", store: "", want: filepath.Join(dir, "tide.db")},
		{name: "sqlite URL", store: "sqlite://" + other, want: other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := storeTestCluster(t, dir, tt.store)
			st, err := openStore(cl)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if st.Path() != tt.want {
				t.Errorf("store at %s, want %s", st.Path(), tt.want)
			}
			if _, err := os.Stat(tt.want); err != nil {
				t.Errorf("no database file: %v", err)
			}
		})
	}
}

// TestPostgresStoreLifecycle runs a job's life on a controller whose
// store is PostgreSQL, restarts the controller and checks that it
// recovers the job, its trail and the job id sequence from the store.
func TestPostgresStoreLifecycle(t *testing.T) {
	url := pgServer.Database(t)
	cl := storeTestCluster(t, t.TempDir(), url)
	h := &harness{t: t, clock: &fakeClock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)},
		alice: caller{uid: 1000, gid: 1000, user: "alice", known: true}, config: testConfig}
	start := func() {
		st, err := openStore(cl)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(st.Path(), "postgres://") {
			t.Fatalf("store %s, want the PostgreSQL one", st.Path())
		}
		s, err := newServer(cl, slog.New(slog.NewTextHandler(io.Discard, nil)), st, "k", h.clock.now)
		if err != nil {
			st.Close()
			t.Fatal(err)
		}
		h.s = s
	}
	start()
	defer func() { h.s.Close() }()

	h.register("gpu01")
	h.register("gpu02")
	id := h.submit(api.JobSpec{Name: "a", GPUs: 2})
	held := h.submit(api.JobSpec{Name: "b", Hold: true})
	h.s.schedulePass()
	host := h.job(id).BatchHost()
	if resp := h.sync(host); len(resp.Launch) != 1 || resp.Launch[0].Script == "" {
		t.Fatalf("launch = %+v", resp.Launch)
	}
	h.sync(host, running(id, 0))
	h.sync(host, finished(id, 0))
	if j := h.job(id); j.State != api.StateCompleted {
		t.Fatalf("job %d is %s, want COMPLETED", id, j.State)
	}

	// A crash: memory is lost, the database stays.
	h.s.Close()
	start()
	if j := h.job(held); j.State != api.StatePending || j.HoldKind == "" {
		t.Errorf("held job after restart: %s hold %q", j.State, j.HoldKind)
	}
	ctx := context.Background()
	jobs, err := h.s.store.QueryJobs(ctx, api.JobFilter{IDs: []uint64{id}})
	if err != nil || len(jobs) != 1 || jobs[0].State != api.StateCompleted {
		t.Fatalf("accounting of job %d after restart: %+v, %v", id, jobs, err)
	}
	ev, err := h.s.store.Events(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range ev {
		kinds = append(kinds, e.Kind)
	}
	if got := strings.Join(kinds, ","); got != "submit,start,launch,end" {
		t.Errorf("trail after restart = %s", got)
	}
	if next := h.submit(api.JobSpec{Name: "c"}); next <= held {
		t.Errorf("job id after restart %d, want above %d", next, held)
	}
}

// storeTestCluster is the harness's cluster with state_dir dir and the
// store key set to store.
func storeTestCluster(t *testing.T, dir, store string) *Cluster {
	t.Helper()
	cfg, err := ParseConfig(strings.NewReader(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.StateDir, cfg.Store = dir, store
	cl, err := cfg.Validate()
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
