package sacct

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/scontroltest"
	"github.com/tide-hpc/tide/ctld/api"
)

// TestClusterList: -M/--clusters (and -L) as the controller is asked:
// the names, "all" for every cluster, nothing without the option.
func TestClusterList(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "no -M", args: nil, want: nil},
		{name: "one", args: []string{"-M", "tide"}, want: []string{"tide"}},
		{name: "a list", args: []string{"--clusters=gpu-b,tide"}, want: []string{"gpu-b", "tide"}},
		{name: "the hidden --cluster, twice", args: []string{"--cluster=a", "-Mb"}, want: []string{"a", "b"}},
		{name: "blanks dropped", args: []string{"-M", " a ,,b"}, want: []string{"a", "b"}},
		{name: "all", args: []string{"-M", "all"}, want: []string{"all"}},
		{name: "all, any case", args: []string{"--clusters=ALL"}, want: []string{"all"}},
		{name: "the vestigial -1", args: []string{"-M-1"}, want: []string{"all"}},
		{name: "all wins in a list", args: []string{"-M", "a,All"}, want: []string{"all"}},
		{name: "-L", args: []string{"-L"}, want: []string{"all"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, 1000, nil, append([]string{"-X", "-n"}, tt.args...)...)
			if r.code != 0 || len(r.filters) != 1 {
				t.Fatalf("exit %d (stderr %q), %d queries", r.code, r.errOut, len(r.filters))
			}
			if diff := cmp.Diff(tt.want, r.filters[0].Clusters); diff != "" {
				t.Errorf("sacct %q asks for clusters (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

// clustersAPI is the canned cluster "tide" (with srun steps of job 101)
// sharing its accounting store with cluster "gpu-b", whose job ids
// repeat tide's. It answers -M as the controller does: the clusters
// asked, sorted by cluster and id, each job carrying its cluster.
type clustersAPI struct {
	*stepAPI
	other      []api.Job
	otherSteps []api.StepRecord // gpu-b's steps
	refuse     error            // the controller's answer to any -M, when set
	filters    []api.JobFilter
	// stepAsks records ClusterSteps' calls (cluster, ids).
	stepAsks []string
	// usage is tide's, otherUsage gpu-b's; usageErr, when set, is
	// ClusterUsage's answer (a controller that does not serve it).
	usage, otherUsage []api.StepUsage
	usageErr          error
	// usageAsks records ClusterUsage's calls (cluster, ids).
	usageAsks []string
}

// Usage answers tide's usage.
func (c *clustersAPI) Usage(ctx context.Context, ids []uint64) ([]api.StepUsage, error) {
	return usageOfJobs(c.usage, ids), nil
}

// ClusterUsage answers gpu-b's usage from its own table.
func (c *clustersAPI) ClusterUsage(ctx context.Context, cluster string, ids []uint64) ([]api.StepUsage, error) {
	c.usageAsks = append(c.usageAsks, fmt.Sprintf("%s%v", cluster, ids))
	if c.usageErr != nil {
		return nil, c.usageErr
	}
	if cluster != "gpu-b" {
		return nil, nil
	}
	return usageOfJobs(c.otherUsage, ids), nil
}

// usageOfJobs is the usage of list's steps of the jobs ids.
func usageOfJobs(list []api.StepUsage, ids []uint64) []api.StepUsage {
	var out []api.StepUsage
	for _, u := range list {
		if slices.Contains(ids, u.JobID) {
			out = append(out, u)
		}
	}
	return out
}

// ClusterSteps answers gpu-b's steps from its own table.
func (c *clustersAPI) ClusterSteps(ctx context.Context, cluster string, ids []uint64) ([]api.StepRecord, error) {
	c.stepAsks = append(c.stepAsks, fmt.Sprintf("%s%v", cluster, ids))
	if cluster != "gpu-b" {
		return nil, nil
	}
	var out []api.StepRecord
	for _, st := range c.otherSteps {
		if slices.Contains(ids, st.JobID) {
			out = append(out, st)
		}
	}
	return out, nil
}

func (c *clustersAPI) Accounting(ctx context.Context, f api.JobFilter) (api.JobList, error) {
	c.filters = append(c.filters, f)
	local, err := c.FakeAPI.Accounting(ctx, f)
	if err != nil || len(f.Clusters) == 0 {
		return local, err
	}
	if c.refuse != nil {
		return api.JobList{}, c.refuse
	}
	asked := func(name string) bool { return slices.Contains(f.Clusters, "all") || slices.Contains(f.Clusters, name) }
	out := []api.Job{}
	if asked("gpu-b") {
		for _, j := range c.other {
			if f.Match(&j) {
				out = append(out, j)
			}
		}
	}
	if asked("tide") {
		for _, j := range local.Jobs {
			j.Cluster = "tide"
			out = append(out, j)
		}
	}
	return api.JobList{Jobs: out, Now: local.Now}, nil
}

// newClustersAPI builds clustersAPI: gpu-b's jobs 90 and 101 are copies
// of tide's under other names.
func newClustersAPI(t *testing.T) *clustersAPI {
	t.Helper()
	fake := scontroltest.Cluster()
	jobs := map[uint64]api.Job{}
	for _, j := range append(append([]api.Job{}, fake.Finished...), fake.JobRecs...) {
		jobs[j.ID] = j
	}
	j90, j101 := jobs[90], jobs[101]
	if j90.ID == 0 || j101.ID == 0 || j101.StartTime.IsZero() {
		t.Fatal("canned jobs 90 and 101 are missing")
	}
	var other []api.Job
	for _, j := range []api.Job{j90, j101} {
		j.Cluster, j.Name = "gpu-b", "b-"+j.Name
		other = append(other, j)
	}
	start := j101.StartTime
	return &clustersAPI{other: other, stepAPI: &stepAPI{FakeAPI: fake, steps: []api.StepRecord{
		{JobID: 101, StepID: 0, Name: "hostname", State: api.StateCompleted, Start: start.Add(time.Second),
			End: start.Add(3 * time.Second), Nodes: j101.NodeNames(), NTasks: 4, CPUs: 4},
	}}, otherSteps: []api.StepRecord{
		{JobID: 101, StepID: 0, Name: "b-eval", State: api.StateFailed, Exit: api.ExitStatus{Code: 3},
			Start: start.Add(2 * time.Second), End: start.Add(5 * time.Second), Nodes: j101.NodeNames(), NTasks: 2, CPUs: 2},
	},
		// Job 101 runs on both: its batch step's values so far, and its
		// step 0's totals, tide's 4 s of CPU and 1 MiB, gpu-b's 9 s and
		// 3 MiB.
		usage: []api.StepUsage{
			clusterStepUsage(api.BatchStepID, false, 1_000_000, 2<<20),
			clusterStepUsage(0, true, 4_000_000, 1<<20),
		},
		otherUsage: []api.StepUsage{
			clusterStepUsage(api.BatchStepID, false, 2_000_000, 5<<20),
			clusterStepUsage(0, true, 9_000_000, 3<<20),
		}}
}

// clusterStepUsage is the usage of step of job 101: one task on gpu01
// that used user microseconds of CPU and rss bytes.
func clusterStepUsage(step uint32, final bool, user, rss uint64) api.StepUsage {
	return api.StepUsage{JobID: 101, StepID: step, UserID: 1000, Nodes: 1, Tasks: 1, Final: final, UserUsec: user,
		CPU: one(user, "gpu01"), RSS: one(rss, "gpu01"), VMSize: one(rss, "gpu01")}
}

// runClusters runs sacct as root against c.
func runClusters(t *testing.T, c *clustersAPI, args ...string) result {
	t.Helper()
	f, buf := clitest.Factory(c.FakeAPI, nil)
	f.API = func() (cmdutil.API, error) { return c, nil }
	f.UID = func() int { return 0 }
	out, errOut, code := clitest.Run(newCmd(f, time.UTC), buf, "sacct", args)
	return result{out: out, errOut: errOut, code: code, filters: c.filters}
}

// TestClusters: sacct -M reports the jobs of the clusters asked, sorted
// by cluster then id, with each job's cluster in the Cluster field; each
// job gets the srun steps of its own cluster (gpu-b's job 101 is not
// tide's job 101: it shows gpu-b's step b-eval, tide's shows hostname).
func TestClusters(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		want   string
		golden string
	}{
		{name: "no -M: the controller's own", args: nil, want: "tide|90|COMPLETED\n"},
		{name: "the local cluster", args: []string{"-M", "tide"}, want: "tide|90|COMPLETED\n"},
		{name: "the other cluster", args: []string{"-M", "gpu-b"}, want: "gpu-b|90|COMPLETED\n"},
		{name: "all", args: []string{"--clusters", "all"}, want: "gpu-b|90|COMPLETED\ntide|90|COMPLETED\n"},
		{name: "a list", args: []string{"--cluster=tide,gpu-b"}, want: "gpu-b|90|COMPLETED\ntide|90|COMPLETED\n"},
		{name: "a cluster with no jobs", args: []string{"-M", "north"}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--jobs", "90", "-X", "-P", "-n", "-o", "Cluster,JobID,State"}, tt.args...)
			r := runClusters(t, newClustersAPI(t), args...)
			if r.code != 0 || r.out != tt.want || r.errOut != "" {
				t.Errorf("sacct %v: %q (exit %d, stderr %q), want %q", args, r.out, r.code, r.errOut, tt.want)
			}
		})
	}

	t.Run("steps and usage stay with their cluster", func(t *testing.T) {
		c := newClustersAPI(t)
		r := runClusters(t, c, "-M", "all", "-j", "101", "-P", "-o", "Cluster,JobID,JobName,State,TotalCPU,MaxRSS")
		if r.code != 0 || r.errOut != "" {
			t.Fatalf("exit %d, stderr %q", r.code, r.errOut)
		}
		golden(t, "clusters-all", r.out)
		// Tide's own are not asked of the store: its controller serves
		// them with their running values.
		if want := []string{"gpu-b[101]"}; !cmp.Equal(c.usageAsks, want) {
			t.Errorf("ClusterUsage asked %q, want %q", c.usageAsks, want)
		}
	})
	t.Run("job rows' CPU times with -X", func(t *testing.T) {
		c := newClustersAPI(t)
		r := runClusters(t, c, "-M", "all", "-j", "90,101", "-X", "-P", "-n", "-o", "Cluster,JobID,TotalCPU")
		want := "gpu-b|90|00:00:00\ngpu-b|101|00:00:09\ntide|90|00:00:00\ntide|101|00:00:04\n"
		if r.code != 0 || r.out != want || r.errOut != "" {
			t.Errorf("exit %d, out %q (stderr %q), want %q", r.code, r.out, r.errOut, want)
		}
		if want := []string{"gpu-b[90 101]"}; !cmp.Equal(c.usageAsks, want) {
			t.Errorf("ClusterUsage asked %q, want %q", c.usageAsks, want)
		}
	})
	t.Run("a controller that does not serve other clusters' usage", func(t *testing.T) {
		c := newClustersAPI(t)
		c.usageErr = api.Errorf(api.ErrNotFound, "the controller does not serve the usage of cluster gpu-b")
		r := runClusters(t, c, "-M", "all", "-j", "101", "-P", "-n", "-o", "Cluster,JobID,TotalCPU,MaxRSS")
		want := "gpu-b|101|00:00:00|\ngpu-b|101.batch|00:00:00|\ngpu-b|101.0|00:00:00|\n" +
			"tide|101|00:00:04|\ntide|101.batch|00:00:01|2M\ntide|101.0|00:00:04|1M\n"
		if r.code != 0 || r.out != want || r.errOut != "" {
			t.Errorf("exit %d, out %q (stderr %q), want %q", r.code, r.out, r.errOut, want)
		}
	})
	t.Run("a failed read of other clusters' usage", func(t *testing.T) {
		c := newClustersAPI(t)
		c.usageErr = api.Errorf(api.ErrInternal, "query usage: connection refused")
		r := runClusters(t, c, "-M", "all", "-j", "101", "-P", "-o", "Cluster,JobID,TotalCPU")
		if wantErr := "load job usage of cluster gpu-b: query usage: connection refused"; r.code != 1 || r.out != "" ||
			!strings.Contains(r.errOut, wantErr) {
			t.Errorf("exit %d, out %q, stderr %q; want exit 1 with %q", r.code, r.out, r.errOut, wantErr)
		}
	})
	t.Run("json", func(t *testing.T) {
		r := runClusters(t, newClustersAPI(t), "-M", "all", "-j", "101", "--json")
		if r.code != 0 || r.errOut != "" {
			t.Fatalf("exit %d, stderr %q", r.code, r.errOut)
		}
		for _, want := range []string{`"cluster": "gpu-b"`, `"cluster": "tide"`} {
			if !strings.Contains(r.out, want) {
				t.Errorf("--json lacks %s:\n%s", want, r.out)
			}
		}
		if n := strings.Count(r.out, `"hostname"`); n != 1 {
			t.Errorf("--json shows tide's step 101.0 %d times, want once (under tide's job only)", n)
		}
		if n := strings.Count(r.out, `"b-eval"`); n != 1 {
			t.Errorf("--json shows gpu-b's step 101.0 %d times, want once (under gpu-b's job)", n)
		}
	})
	t.Run("the controller refuses", func(t *testing.T) {
		c := newClustersAPI(t)
		c.refuse = api.Invalid("cluster gpu-b: the accounting store is SQLite: it holds only cluster tide; several clusters need a shared PostgreSQL store")
		r := runClusters(t, c, "-M", "gpu-b", "-X")
		if r.code != 1 || !strings.Contains(r.errOut, "several clusters need a shared PostgreSQL store") || r.out != "" {
			t.Errorf("exit %d, out %q, stderr %q; want exit 1 with the controller's reason", r.code, r.out, r.errOut)
		}
	})
}

var _ cmdutil.API = (*clustersAPI)(nil)
