package accounting

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestOpenURLSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "tide.db")
	if err := os.Mkdir(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := OpenURL("sqlite://" + path)
	if err != nil {
		t.Fatalf("OpenURL: %v", err)
	}
	defer s.Close()
	if s.dialect != sqliteDialect || s.Path() != path {
		t.Errorf("store is %s at %q, want sqlite at %q", s.dialect, s.Path(), path)
	}
	mustWrite(t, s, &Batch{NewJobs: []*api.Job{makeJob(1).obj()}})
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database not at %s: %v", path, err)
	}
}

func TestOpenURLErrors(t *testing.T) {
	tests := []struct {
		name, store string
		want        []string // in the error
	}{
		{name: "no scheme", store: "/var/lib/tide/tide.db", want: []string{"want sqlite:///path or postgres://"}},
		{name: "unknown scheme", store: "mysql://db/tide", want: []string{"mysql://db/tide", "want sqlite:///path"}},
		{name: "relative sqlite path", store: "sqlite://tide.db", want: []string{"want sqlite:///absolute/path"}},
		// Nothing listens on port 1: the error names the server and
		// hides the password.
		{name: "unreachable server", store: "postgres://tide:s3cret@127.0.0.1:1/tide?connect_timeout=5",
			want: []string{"127.0.0.1:1", "xxxxx"}},
		{name: "malformed URL", store: "postgres://tide:s3cret@127.0.0.1:notaport/tide", want: []string{"postgres"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenURL(tt.store)
			if err == nil {
				s.Close()
				t.Fatal("OpenURL succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q shows the password", err)
			}
			t.Logf("OpenURL error: %v", err)
		})
	}
}

// TestOpenNewerSchema: a database written by a newer Tide is refused,
// not downgraded.
func TestOpenNewerSchema(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		loc := be.newDB(t)
		s := be.open(t, loc)
		if _, err := s.w.Exec(`INSERT INTO schema_version (version, applied_at) VALUES (999, 0)`); err != nil {
			t.Fatal(err)
		}
		s.Close()
		var err error
		if be.name == "sqlite" {
			s, err = Open(loc)
		} else {
			s, err = OpenURL(loc)
		}
		if err == nil {
			s.Close()
			t.Fatal("Open of a newer schema succeeded")
		} else if !strings.Contains(err.Error(), "newer") {
			t.Errorf("Open error %q, want it to say the schema is newer", err)
		}
	})
}

// TestPostgresConcurrentOpen starts several stores on one new
// PostgreSQL database at once, as controllers sharing it do: the
// migration lock lets one apply the schema and the others find it
// done, and all of them then write and read the same data.
func TestPostgresConcurrentOpen(t *testing.T) {
	be := backends[1]
	url := be.newDB(t)
	const n = 4
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = OpenURL(url) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("store %d: %v", i, errs[i])
		}
		defer stores[i].Close()
	}
	var versions int
	if err := stores[0].r.QueryRow(`SELECT count(*) FROM schema_version`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if versions != SchemaVersion() {
		t.Errorf("schema_version has %d rows, want %d (each step applied once)", versions, SchemaVersion())
	}
	ctx := context.Background()
	for i, s := range stores {
		mustWrite(t, s, &Batch{NewJobs: []*api.Job{makeJob(uint64(i + 1)).obj()}, MaxJobID: uint64(i + 1)})
	}
	for i, s := range stores {
		jobs, err := s.LoadJobs(ctx, time.Time{})
		if err != nil || len(jobs) != n {
			t.Errorf("store %d loads %d jobs (%v), want %d", i, len(jobs), err, n)
		}
		if last, err := s.LastJobID(ctx); err != nil || last != n {
			t.Errorf("store %d: LastJobID = %d, %v; want %d", i, last, err, n)
		}
	}
}

// TestReadPoolCannotWrite: on either database the read pool refuses
// writes, which go through the writer connection only.
func TestReadPoolCannotWrite(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s := be.openNew(t)
		mustWrite(t, s, &Batch{NewJobs: []*api.Job{makeJob(1).obj()}})
		if _, err := s.r.Exec(`DELETE FROM jobs`); err == nil {
			t.Fatal("DELETE through the read pool succeeded")
		}
		if jobs, err := s.LoadJobs(context.Background(), time.Time{}); err != nil || len(jobs) != 1 {
			t.Errorf("LoadJobs = %d jobs, %v; want the job", len(jobs), err)
		}
	})
}
