package scontrol

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/scontroltest"
	"github.com/tide-hpc/tide/ctld/api"
)

// fixJSONCaller makes --json's meta deterministic: the command line and
// the caller's names come from the test, not the test binary.
func fixJSONCaller(t *testing.T, argv ...string) {
	t.Helper()
	oldArgs, oldCaller, oldClock := commandLine, callerNames, clock
	commandLine = func() []string { return argv }
	callerNames = func() (string, string) { return "alice", "users" }
	fixed := time.Date(2026, 11, 29, 19, 31, 17, 0, time.UTC)
	clock = func() time.Time { return fixed }
	t.Cleanup(func() { commandLine, callerNames, clock = oldArgs, oldCaller, oldClock })
}

func TestShowJSONGolden(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		golden   string
		wantCode int
		fake     *clitest.FakeAPI
	}{
		{name: "all jobs", args: []string{"--json", "show", "jobs"}, golden: "json-show-jobs"},
		{name: "running GPU job", args: []string{"--json", "show", "job", "101"}, golden: "json-show-job-gpu"},
		{name: "pending job", args: []string{"show", "job", "103", "--json"}, golden: "json-show-job-pending"},
		{name: "failed job", args: []string{"--json", "show", "job", "91"}, golden: "json-show-job-failed"},
		{name: "array", args: []string{"--json", "show", "job", "7"}, golden: "json-show-job-array", fake: arrayFake()},
		{name: "unknown job", args: []string{"--json", "show", "job", "999999"}, golden: "json-show-job-unknown", wantCode: 1},
		{name: "all nodes", args: []string{"--json", "show", "nodes"}, golden: "json-show-nodes"},
		{name: "drained node", args: []string{"--json", "show", "node", "gpu04"}, golden: "json-show-node-drained"},
		{name: "unknown node", args: []string{"--json", "show", "node", "gpu99"}, golden: "json-show-node-unknown", wantCode: 1},
		{name: "partitions", args: []string{"--json", "show", "partitions"}, golden: "json-show-partitions"},
		{name: "ping", args: []string{"--json", "ping"}, golden: "json-ping"},
		{name: "licenses", args: []string{"--json", "show", "licenses"}, golden: "json-show-licenses"},
		{name: "reservations", args: []string{"--json", "show", "reservations"}, golden: "json-show-reservations"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fixJSONCaller(t, append([]string{"/usr/bin/scontrol"}, tt.args...)...)
			fake := tt.fake
			if fake == nil {
				fake = scontroltest.Cluster()
			}
			r := run(t, fake, nil, time.UTC, tt.args...)
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d (stderr %q)", r.code, tt.wantCode, r.errOut)
			}
			var doc map[string]any
			if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, r.out)
			}
			golden(t, tt.golden, r.out)
		})
	}
}

// TestShowJSONShape checks what parsers of the data_parser layout rely
// on, apart from the golden files: meta.command is the command line,
// errors and warnings are lists, states are lists, and numbers that may
// be unset are {set, infinite, number}.
func TestShowJSONShape(t *testing.T) {
	fixJSONCaller(t, "scontrol", "--json", "show", "jobs")
	r := run(t, scontroltest.Cluster(), nil, time.UTC, "--json", "show", "jobs")
	var doc struct {
		Meta struct {
			Command []string `json:"command"`
			Plugin  struct {
				DataParser string `json:"data_parser"`
			} `json:"plugin"`
			Slurm struct {
				Release string `json:"release"`
			} `json:"slurm"`
		} `json:"meta"`
		Errors   []any `json:"errors"`
		Warnings []any `json:"warnings"`
		Jobs     []struct {
			JobID     uint64   `json:"job_id"`
			JobState  []string `json:"job_state"`
			TimeLimit struct {
				Set      bool  `json:"set"`
				Infinite bool  `json:"infinite"`
				Number   int64 `json:"number"`
			} `json:"time_limit"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Meta.Command; len(got) != 4 || got[0] != "scontrol" || got[3] != "jobs" {
		t.Errorf("meta.command = %q, want the command line", got)
	}
	if doc.Meta.Plugin.DataParser != "data_parser/v0.0.40" || doc.Meta.Slurm.Release != "22.05.8" {
		t.Errorf("meta = %+v", doc.Meta)
	}
	if doc.Errors == nil || doc.Warnings == nil {
		t.Errorf("errors %v, warnings %v: want empty lists", doc.Errors, doc.Warnings)
	}
	if len(doc.Jobs) == 0 {
		t.Fatal("no jobs")
	}
	for _, j := range doc.Jobs {
		if len(j.JobState) != 1 || j.JobState[0] == "" {
			t.Errorf("job %d: job_state %q, want one state", j.JobID, j.JobState)
		}
		if j.TimeLimit.Set == j.TimeLimit.Infinite && j.TimeLimit.Set {
			t.Errorf("job %d: time_limit both set and infinite", j.JobID)
		}
	}
}

// filterRecorder records the job filters scontrol asks the controller for.
type filterRecorder struct {
	*clitest.FakeAPI
	filters []api.JobFilter
}

func (r *filterRecorder) Jobs(ctx context.Context, f api.JobFilter) (api.JobList, error) {
	r.filters = append(r.filters, f)
	return r.FakeAPI.Jobs(ctx, f)
}

// TestShowJobsIncludesFinished: show jobs without an id lists finished
// jobs too, as Slurm does until MinJobAge (the controller forgets them
// then), text and JSON alike.
func TestShowJobsIncludesFinished(t *testing.T) {
	for _, args := range [][]string{{"show", "jobs"}, {"--json", "show", "jobs"}} {
		fixJSONCaller(t, append([]string{"scontrol"}, args...)...)
		rec := &filterRecorder{FakeAPI: scontroltest.Cluster()}
		f, buf := clitest.Factory(rec.FakeAPI, nil)
		f.API = func() (cmdutil.API, error) { return rec, nil }
		if _, errOut, code := clitest.Run(newCmd(f, time.UTC), buf, "scontrol", args); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errOut)
		}
		if len(rec.filters) != 1 || !rec.filters[0].All {
			t.Errorf("%q asked for %+v, want one filter with All", args, rec.filters)
		}
	}
}
