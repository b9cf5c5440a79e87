package sprio

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
)

// tideFake is the fake controller with the priority listing of a
// controller under policy tide.
type tideFake struct {
	*clitest.FakeAPI
	list api.PriorityList
	err  error
	// asked records the filters Priority was called with.
	asked []api.JobFilter
}

func (f *tideFake) Priority(_ context.Context, flt api.JobFilter) (api.PriorityList, error) {
	f.asked = append(f.asked, flt)
	if f.err != nil {
		return api.PriorityList{}, f.err
	}
	// The controller answers the jobs the filter selects.
	l := f.list
	l.Jobs = nil
	for _, j := range f.list.Jobs {
		for _, rec := range f.JobRecs {
			if rec.ID == j.JobID && flt.Match(&rec) {
				l.Jobs = append(l.Jobs, j)
			}
		}
	}
	return l, nil
}

// tideWeights are policy tide's default weights (no job-size weight).
var tideWeights = api.PriorityWeights{Age: 1500, Length: 3000, Fairshare: 500, MaxAge: 12 * 3600, LengthRef: 8 * 7 * 24 * 3600, JobSizeRef: 64}

// tidePriorities are factors for the pending jobs of
// clitest.SharingCluster, their priorities summed as the controller
// does.
func tidePriorities(w api.PriorityWeights) api.PriorityList {
	jobs := []api.JobPriority{
		{JobID: 210, Age: 0.0041667, Length: 0.3, JobSize: 0.5, Fairshare: 0.9},
		{JobID: 211, Age: 0.125, Length: 0.25, JobSize: 0.3333333, Fairshare: 0.125},
		{JobID: 212, Age: 0.0138889, Length: 0.6, JobSize: 1, Fairshare: 0.125, Nice: 100},
		{JobID: 213, Age: 0.0006944, Length: 0.2, JobSize: 0.8333333, Fairshare: 0.7},
		{JobID: 214, Age: 0.0555556, Length: 0.2, JobSize: 1, Fairshare: 0.5},
	}
	for i := range jobs {
		j := &jobs[i]
		j.Priority = w.Age*j.Age + w.Length*j.Length + w.JobSize*j.JobSize + w.Fairshare*j.Fairshare - float64(j.Nice)
	}
	return api.PriorityList{Now: clitest.SharingNow, Policy: "tide", Weights: &w, Orders: true, Jobs: jobs}
}

func runTide(t *testing.T, fake *tideFake, args ...string) (string, string, int) {
	t.Helper()
	f, bufs := clitest.Factory(fake.FakeAPI, nil)
	f.API = func() (cmdutil.API, error) { return fake, nil }
	return clitest.Run(newCmd(f, time.UTC), bufs, "sprio", args)
}

func TestTideGolden(t *testing.T) {
	withSize := tideWeights
	withSize.JobSize = 200
	tests := []struct {
		name    string
		args    []string
		weights *api.PriorityWeights
	}{
		{name: "tide-default"},
		{name: "tide-norm", args: []string{"-n"}},
		{name: "tide-weights", args: []string{"-w"}},
		{name: "tide-weights-norm", args: []string{"-w", "-n"}},
		{name: "tide-long", args: []string{"-l"}},
		{name: "tide-long-norm", args: []string{"-l", "-n"}},
		{name: "tide-user", args: []string{"-u", "alice,bob"}},
		{name: "tide-jobs-noheader", args: []string{"-h", "212", "210"}},
		{name: "tide-job-size-weight", weights: &withSize},
		{name: "tide-json", args: []string{"--json", "212"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tideWeights
			if tt.weights != nil {
				w = *tt.weights
			}
			fake := &tideFake{FakeAPI: clitest.SharingCluster(), list: tidePriorities(w)}
			out, errOut, code := runTide(t, fake, tt.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("sprio %v: exit %d, stderr %q", tt.args, code, errOut)
			}
			goldenpkg.Check(t, tt.name, out)
		})
	}
}

// TestTideFilter checks that the factors are asked with the job list's
// selection, so that private data and -u/-p/-j apply to both alike.
func TestTideFilter(t *testing.T) {
	fake := &tideFake{FakeAPI: clitest.SharingCluster(), list: tidePriorities(tideWeights)}
	if _, errOut, code := runTide(t, fake, "-p", "gpu", "-u", "bob", "212"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := api.JobFilter{States: []api.JobState{api.StatePending}, IDs: []uint64{212}, Users: []string{"bob"}, Partitions: []string{"gpu"}}
	if len(fake.asked) != 1 {
		t.Fatalf("asked %d times, want once", len(fake.asked))
	}
	if d := cmp.Diff(want, fake.asked[0]); d != "" {
		t.Errorf("filter (-want +got):\n%s", d)
	}
}

// TestTideFallsBack checks that sprio keeps Tide's level columns when
// the multifactor priority does not order the passes.
func TestTideFallsBack(t *testing.T) {
	levels, _, _ := run(t, clitest.SharingCluster())
	other := tidePriorities(tideWeights)
	other.Policy, other.Weights, other.Jobs = "backfill", nil, nil
	shareMode := tidePriorities(tideWeights)
	shareMode.Orders = false
	for _, tc := range []struct {
		name string
		list api.PriorityList
		err  error
	}{
		{name: "another policy", list: other},
		{name: "share mode", list: shareMode},
		{name: "controller without the call", err: api.Errorf(api.ErrNotFound, "GET /api/v1/jobs/priority: no such API call")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &tideFake{FakeAPI: clitest.SharingCluster(), list: tc.list, err: tc.err}
			out, errOut, code := runTide(t, fake)
			if code != 0 || errOut != "" || out != levels {
				t.Errorf("exit %d, stderr %q, output:\n%s\nwant the level columns:\n%s", code, errOut, out, levels)
			}
			out, errOut, code = runTide(t, fake, "-w")
			want := "sprio: error: -w/--weights is not supported by Tide's sprio, which shows Tide's own priority factors\n"
			if code != 1 || out != "" || errOut != want {
				t.Errorf("-w: exit %d, out %q, stderr %q; want exit 1 and %q", code, out, errOut, want)
			}
		})
	}
}

func TestTideError(t *testing.T) {
	fake := &tideFake{FakeAPI: clitest.SharingCluster(), err: api.Errorf(api.ErrPermissionDenied, "denied")}
	out, errOut, code := runTide(t, fake)
	if want := "sprio: error: Couldn't get priority factors from controller: denied\n"; code != 1 || out != "" || errOut != want {
		t.Errorf("exit %d, out %q, stderr %q; want exit 1 and %q", code, out, errOut, want)
	}
}
