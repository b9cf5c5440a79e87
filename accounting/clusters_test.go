package accounting

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

// openCluster opens cluster's store on the PostgreSQL database url and
// closes it when the test ends.
func openCluster(t *testing.T, url, cluster string) *Store {
	t.Helper()
	s, err := OpenURLCluster(url, cluster)
	if err != nil {
		t.Fatalf("open the store of cluster %s: %v", cluster, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// clusterJob is a job as a cluster's controller stamps it.
func clusterJob(cluster string, b *jobBuilder) *api.Job {
	j := b.obj()
	j.Cluster = cluster
	return j
}

// idsAt lists jobs as cluster:id.
func idsAt(jobs []api.Job) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.Cluster+":"+strconv.FormatUint(j.ID, 10))
	}
	return out
}

// TestSharedStoreClusters: two clusters on one PostgreSQL database, with
// overlapping job ids, each in its own schema. Each controller's store
// loads, numbers and queries only its own jobs; QueryClusters reads
// across them, sorted by cluster and id, with the filter applied to
// every cluster.
func TestSharedStoreClusters(t *testing.T) {
	url := pg.Database(t)
	east := openCluster(t, url, "east")
	west := openCluster(t, url, "West-2")
	mustWrite(t, east, &Batch{NewJobs: []*api.Job{
		clusterJob("east", makeJob(1)), clusterJob("east", makeJob(2).user("bob", 1001)),
	}, MaxJobID: 2})
	mustWrite(t, west, &Batch{NewJobs: []*api.Job{
		clusterJob("West-2", makeJob(1).user("bob", 1001).name("west1")),
		clusterJob("West-2", makeJob(7).ended(api.StateCompleted, at(5))),
	}, MaxJobID: 7})
	ctx := context.Background()

	for _, tt := range []struct {
		s        *Store
		wantIDs  []uint64
		wantLast uint64
		wantName string // of job 1
	}{
		{s: east, wantIDs: []uint64{1, 2}, wantLast: 2, wantName: "job1"},
		{s: west, wantIDs: []uint64{1, 7}, wantLast: 7, wantName: "west1"},
	} {
		loaded, err := tt.s.LoadJobs(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.wantIDs, idsOf(loaded)); diff != "" {
			t.Errorf("cluster %s loads (-want +got):\n%s", tt.s.ClusterName(), diff)
		}
		if loaded[0].Name != tt.wantName {
			t.Errorf("cluster %s: job 1 is %q, want %q", tt.s.ClusterName(), loaded[0].Name, tt.wantName)
		}
		queried, err := tt.s.QueryJobs(ctx, api.JobFilter{})
		if err != nil || !cmp.Equal(ids(queried), tt.wantIDs) {
			t.Errorf("cluster %s: QueryJobs = %v, %v; want %v", tt.s.ClusterName(), ids(queried), err, tt.wantIDs)
		}
		if last, err := tt.s.LastJobID(ctx); err != nil || last != tt.wantLast {
			t.Errorf("cluster %s: LastJobID = %d, %v; want %d", tt.s.ClusterName(), last, err, tt.wantLast)
		}
	}

	tests := []struct {
		name     string
		from     *Store
		clusters []string
		filter   api.JobFilter
		want     []string
	}{
		{name: "own cluster by default", from: west, want: []string{"West-2:1", "West-2:7"}},
		{name: "both", from: east, clusters: []string{"west-2", "east"},
			want: []string{"West-2:1", "West-2:7", "east:1", "east:2"}},
		{name: "all", from: west, clusters: []string{"ALL"},
			want: []string{"West-2:1", "West-2:7", "east:1", "east:2"}},
		{name: "named as its schema", from: east, clusters: []string{"WEST_2"}, want: []string{"West-2:1", "West-2:7"}},
		{name: "named twice", from: east, clusters: []string{"east", "East", " east "}, want: []string{"east:1", "east:2"}},
		{name: "filter on every cluster", from: east, clusters: []string{"all"}, filter: api.JobFilter{Users: []string{"bob"}},
			want: []string{"West-2:1", "east:2"}},
		{name: "ids on every cluster", from: east, clusters: []string{"all"}, filter: api.JobFilter{IDs: []uint64{1}},
			want: []string{"West-2:1", "east:1"}},
		{name: "unknown cluster selects nothing", from: east, clusters: []string{"north"}, want: []string{}},
		{name: "a name no cluster can have", from: east, clusters: []string{"no.such"}, want: []string{}},
		{name: "unknown next to known", from: east, clusters: []string{"north", "east"}, want: []string{"east:1", "east:2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.from.QueryClusters(ctx, tt.clusters, tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, idsAt(got)); diff != "" {
				t.Errorf("QueryClusters(%q) (-want +got):\n%s", tt.clusters, diff)
			}
		})
	}

	list, err := east.ListClusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range list {
		names = append(names, c.Name+"="+c.Schema)
		if c.Created.IsZero() {
			t.Errorf("cluster %s has no creation time", c.Name)
		}
	}
	if diff := cmp.Diff([]string{"West-2=tide_west_2", "east=tide_east"}, names); diff != "" {
		t.Errorf("ListClusters (-want +got):\n%s", diff)
	}

	// The tables are the clusters' own, not public's.
	var inPublic, inEast bool
	if err := east.r.QueryRow(`SELECT to_regclass('public.jobs') IS NOT NULL, to_regclass('tide_east.jobs') IS NOT NULL`).
		Scan(&inPublic, &inEast); err != nil {
		t.Fatal(err)
	}
	if inPublic || !inEast {
		t.Errorf("jobs table in public: %v, in tide_east: %v; want only the cluster's", inPublic, inEast)
	}

	// Each cluster's srun steps are its own: job 1 has a step in both.
	mustWrite(t, east, &Batch{Steps: []api.StepRecord{{JobID: 1, StepID: 0, Name: "east-step", State: api.StateCompleted}}})
	mustWrite(t, west, &Batch{Steps: []api.StepRecord{{JobID: 1, StepID: 0, Name: "west-step", State: api.StateFailed},
		{JobID: 7, StepID: 2, Name: "west-7", State: api.StateCompleted}}})
	stepNames := func(steps []api.StepRecord) []string {
		out := []string{}
		for _, st := range steps {
			out = append(out, fmt.Sprintf("%d.%d=%s", st.JobID, st.StepID, st.Name))
		}
		return out
	}
	for _, tt := range []struct {
		cluster string
		ids     []uint64
		want    []string
	}{
		{cluster: "West-2", ids: []uint64{1, 7}, want: []string{"1.0=west-step", "7.2=west-7"}},
		{cluster: "west_2", ids: []uint64{1}, want: []string{"1.0=west-step"}},
		{cluster: "east", ids: []uint64{1, 7}, want: []string{"1.0=east-step"}},
		{cluster: "", ids: []uint64{1}, want: []string{"1.0=east-step"}},
		{cluster: "north", ids: []uint64{1}, want: []string{}},
	} {
		got, err := east.ClusterSteps(ctx, tt.cluster, tt.ids)
		if err != nil {
			t.Errorf("ClusterSteps(%q, %v): %v", tt.cluster, tt.ids, err)
			continue
		}
		if diff := cmp.Diff(tt.want, stepNames(got)); diff != "" {
			t.Errorf("ClusterSteps(%q, %v) from east (-want +got):\n%s", tt.cluster, tt.ids, diff)
		}
	}
	if _, err := east.ClusterSteps(ctx, "all", []uint64{1}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("ClusterSteps(all): %v, want invalid argument (steps are asked of one cluster)", err)
	}

	// So is their usage: job 1's step 0 on gpu01 used 10 on east, 20 on
	// west (only the CPU time of usageOf differs).
	mustWrite(t, east, &Batch{Usage: []api.NodeUsage{usageOf(1, 0, "gpu01", true, 10)}})
	mustWrite(t, west, &Batch{Usage: []api.NodeUsage{usageOf(1, 0, "gpu01", true, 20),
		usageOf(7, api.BatchStepID, "gpu02", true, 70), usageOf(7, api.BatchStepID, "gpu01", true, 71)}})
	usageCPU := func(us []api.NodeUsage) []string {
		out := []string{}
		for _, u := range us {
			var cpu uint64
			for _, task := range u.Tasks {
				cpu += task.UserUsec
			}
			out = append(out, fmt.Sprintf("%d.%d@%s=%d", u.JobID, u.StepID, u.Node, cpu))
		}
		return out
	}
	batch := strconv.FormatUint(uint64(api.BatchStepID), 10)
	for _, tt := range []struct {
		cluster string
		ids     []uint64
		want    []string
	}{
		{cluster: "West-2", ids: []uint64{1, 7}, want: []string{"1.0@gpu01=20", "7." + batch + "@gpu01=71", "7." + batch + "@gpu02=70"}},
		{cluster: "west_2", ids: []uint64{1}, want: []string{"1.0@gpu01=20"}},
		{cluster: "east", ids: []uint64{1, 7}, want: []string{"1.0@gpu01=10"}},
		{cluster: "", ids: []uint64{1}, want: []string{"1.0@gpu01=10"}},
		{cluster: "north", ids: []uint64{1}, want: []string{}},
		{cluster: "West-2", ids: nil, want: []string{}},
	} {
		got, err := east.ClusterUsage(ctx, tt.cluster, tt.ids)
		if err != nil {
			t.Errorf("ClusterUsage(%q, %v): %v", tt.cluster, tt.ids, err)
			continue
		}
		if diff := cmp.Diff(tt.want, usageCPU(got)); diff != "" {
			t.Errorf("ClusterUsage(%q, %v) from east (-want +got):\n%s", tt.cluster, tt.ids, diff)
		}
	}
	if _, err := west.ClusterUsage(ctx, " All ", []uint64{1}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("ClusterUsage(all): %v, want invalid argument (usage is asked of one cluster)", err)
	}

	// A restart registers again, harmlessly, and finds its jobs.
	again := openCluster(t, url, "east")
	if jobs, err := again.LoadJobs(ctx, time.Time{}); err != nil || !cmp.Equal(idsOf(jobs), []uint64{1, 2}) {
		t.Errorf("east after reopening: %v, %v", idsOf(jobs), err)
	}
}

// TestSharedStoreRefusesName: a name that maps to no schema, or to the
// schema another name registered, is refused with a clear error.
func TestSharedStoreRefusesName(t *testing.T) {
	url := pg.Database(t)
	openCluster(t, url, "gpu-east")
	tests := []struct {
		name, cluster string
		class         error
		want          []string
	}{
		{name: "case differs", cluster: "GPU-EAST", class: api.ErrConflict,
			want: []string{`cluster_name "GPU-EAST" maps to PostgreSQL schema tide_gpu_east`, `cluster "gpu-east" already uses`}},
		{name: "dash against underscore", cluster: "gpu_east", class: api.ErrConflict, want: []string{`cluster "gpu-east" already uses`}},
		{name: "no schema", cluster: "gpu.east", class: api.ErrInvalidArgument, want: []string{`cluster_name "gpu.east" holds "."`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenURLCluster(url, tt.cluster)
			if err == nil {
				s.Close()
				t.Fatalf("cluster %q opened", tt.cluster)
			}
			if !errors.Is(err, tt.class) {
				t.Errorf("error %q is not of class %v", err, tt.class)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q, want it to contain %q", err, w)
				}
			}
		})
	}
	// The refused names left nothing behind.
	s := openCluster(t, url, "gpu-east")
	list, err := s.ListClusters(context.Background())
	if err != nil || len(list) != 1 {
		t.Errorf("clusters after the refusals: %+v, %v; want gpu-east alone", list, err)
	}
}

// TestSharedStoreConcurrentOpen: the controllers of two clusters (two
// each, as a primary and a standby) start at once on a new database:
// none fails, and each cluster registers once.
func TestSharedStoreConcurrentOpen(t *testing.T) {
	url := pg.Database(t)
	clusters := []string{"a", "b", "a", "b"}
	stores := make([]*Store, len(clusters))
	errs := make([]error, len(clusters))
	var wg sync.WaitGroup
	for i, c := range clusters {
		wg.Go(func() { stores[i], errs[i] = OpenURLCluster(url, c) })
	}
	wg.Wait()
	for i := range stores {
		if errs[i] != nil {
			t.Errorf("store %d of cluster %s: %v", i, clusters[i], errs[i])
			continue
		}
		defer stores[i].Close()
	}
	if t.Failed() {
		return
	}
	list, err := stores[0].ListClusters(context.Background())
	if err != nil || len(list) != 2 || list[0].Name != "a" || list[1].Name != "b" {
		t.Errorf("ListClusters = %+v, %v; want a and b", list, err)
	}
	for _, s := range stores[:2] {
		var versions int
		if err := s.r.QueryRow(`SELECT count(*) FROM schema_version`).Scan(&versions); err != nil || versions != SchemaVersion() {
			t.Errorf("cluster %s: %d schema versions, %v; want %d", s.ClusterName(), versions, err, SchemaVersion())
		}
	}
}

// TestSharedStoreHalfRegistered: a cluster registered but not yet
// migrated (its controller is starting) has no jobs; it does not fail a
// query of every cluster.
func TestSharedStoreHalfRegistered(t *testing.T) {
	url := pg.Database(t)
	s := openCluster(t, url, "a")
	mustWrite(t, s, &Batch{NewJobs: []*api.Job{clusterJob("a", makeJob(1))}})
	if _, err := s.w.Exec(`CREATE SCHEMA tide_b`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.Exec(`INSERT INTO public.tide_clusters (name, schema, created) VALUES ('b', 'tide_b', 0)`); err != nil {
		t.Fatal(err)
	}
	got, err := s.QueryClusters(context.Background(), []string{"all"}, api.JobFilter{})
	if err != nil || !cmp.Equal(idsAt(got), []string{"a:1"}) {
		t.Errorf("QueryClusters(all) = %v, %v; want a:1", idsAt(got), err)
	}
}

// TestPublicStoreWithoutCluster: OpenURL without a cluster keeps its
// tables in public, as before clusters had schemas, and sees no
// cluster's rows.
func TestPublicStoreWithoutCluster(t *testing.T) {
	url := pg.Database(t)
	a := openCluster(t, url, "a")
	mustWrite(t, a, &Batch{NewJobs: []*api.Job{clusterJob("a", makeJob(1))}})
	plain := backends[1].open(t, url)
	if jobs, err := plain.LoadJobs(context.Background(), time.Time{}); err != nil || len(jobs) != 0 {
		t.Errorf("the public store loads %v, %v; want nothing", idsOf(jobs), err)
	}
	if plain.ClusterName() != "" {
		t.Errorf("ClusterName = %q, want none", plain.ClusterName())
	}
	got, err := plain.QueryClusters(context.Background(), []string{"a"}, api.JobFilter{})
	if err != nil || !cmp.Equal(idsAt(got), []string{"a:1"}) {
		t.Errorf("QueryClusters(a) from the public store = %v, %v; want a:1", idsAt(got), err)
	}
}

// TestSQLiteOneCluster: an SQLite store holds one cluster. Naming it
// (any case) or all reads it; naming another is refused, saying why.
func TestSQLiteOneCluster(t *testing.T) {
	s, err := OpenURLCluster("sqlite://"+filepath.Join(t.TempDir(), "tide.db"), "tide")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A job from before jobs carried their cluster gets the store's.
	mustWrite(t, s, &Batch{NewJobs: []*api.Job{clusterJob("tide", makeJob(1)), makeJob(2).obj()}})
	ctx := context.Background()
	for _, clusters := range [][]string{nil, {"tide"}, {"TIDE"}, {"all"}, {"tide", "all", ""}} {
		got, err := s.QueryClusters(ctx, clusters, api.JobFilter{})
		if err != nil || !cmp.Equal(idsAt(got), []string{"tide:1", "tide:2"}) {
			t.Errorf("QueryClusters(%q) = %v, %v; want tide:1 tide:2", clusters, idsAt(got), err)
		}
	}
	_, err = s.QueryClusters(ctx, []string{"tide", "other"}, api.JobFilter{})
	want := "cluster other: the accounting store is SQLite: it holds only cluster tide; several clusters need a shared PostgreSQL store"
	if err == nil || err.Error() != want || !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("QueryClusters(tide, other) error %v, want %q (invalid argument)", err, want)
	}
	if _, err := s.ClusterSteps(ctx, "other", []uint64{1}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("ClusterSteps(other) on SQLite: %v, want invalid argument", err)
	}
	if steps, err := s.ClusterSteps(ctx, "TIDE", []uint64{1}); err != nil || len(steps) != 0 {
		t.Errorf("ClusterSteps(TIDE) on SQLite: %v, %v; want its own (none)", steps, err)
	}
	if _, err := s.ClusterUsage(ctx, "other", []uint64{1}); err == nil || !strings.HasPrefix(err.Error(), "cluster other: the accounting store is SQLite") ||
		!errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("ClusterUsage(other) on SQLite: %v, want invalid argument naming the cluster", err)
	}
	mustWrite(t, s, &Batch{Usage: []api.NodeUsage{usageOf(1, 0, "gpu01", true, 5)}})
	if got, err := s.ClusterUsage(ctx, "TIDE", []uint64{1, 2}); err != nil || len(got) != 1 || got[0].Tasks[0].UserUsec != 5 {
		t.Errorf("ClusterUsage(TIDE) on SQLite: %+v, %v; want its own step 1.0", got, err)
	}
	if list, err := s.ListClusters(ctx); err != nil || len(list) != 1 || list[0].Name != "tide" || list[0].Schema != "" {
		t.Errorf("ListClusters = %+v, %v; want tide alone", list, err)
	}

	// Opened without a name (Open), it knows no cluster to name.
	plain := openTest(t)
	if _, err := plain.QueryClusters(ctx, []string{"x"}, api.JobFilter{}); err == nil ||
		!strings.Contains(err.Error(), "holds only this controller's cluster") {
		t.Errorf("QueryClusters(x) on an unnamed store: %v", err)
	}
	if list, err := plain.ListClusters(ctx); err != nil || len(list) != 0 {
		t.Errorf("ListClusters on an unnamed store = %+v, %v; want none", list, err)
	}
}
