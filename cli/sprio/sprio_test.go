package sprio

import (
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
)

func run(t *testing.T, fake *clitest.FakeAPI, args ...string) (string, string, int) {
	t.Helper()
	f, bufs := clitest.Factory(fake, nil)
	return clitest.Run(newCmd(f, time.UTC), bufs, "sprio", args)
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
		fake func(*clitest.FakeAPI)
	}{
		{name: "default"},
		{name: "long", args: []string{"-l"}},
		{name: "norm", args: []string{"-n"}},
		{name: "user", args: []string{"-u", "alice"}},
		{name: "me", args: []string{"--me"}, fake: func(f *clitest.FakeAPI) { f.JobRecs[5].UserID = 1000 }},
		{name: "jobs-as-arguments", args: []string{"212", "211"}},
		{name: "jobs-flag-noheader", args: []string{"-h", "-j", "210,213"}},
		{name: "partition-none", args: []string{"-p", "debug"}},
		{name: "running-job-is-not-pending", args: []string{"-j", "201"}},
		{name: "json", args: []string{"--json", "211", "214"}},
		{name: "no-queues-endpoint", fake: func(f *clitest.FakeAPI) {
			f.QueuesErr = api.Errorf(api.ErrNotFound, "404 page not found")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := clitest.SharingCluster()
			if tt.fake != nil {
				tt.fake(fake)
			}
			out, errOut, code := run(t, fake, tt.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("sprio %v: exit %d, stderr %q", tt.args, code, errOut)
			}
			goldenpkg.Check(t, tt.name, out)
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		fake    func(*clitest.FakeAPI)
		wantErr string
		code    int
	}{
		{name: "bad job id", args: []string{"-j", "x1"}, wantErr: "sprio: error: Invalid job id: x1\n", code: 2},
		{name: "unknown flag", args: []string{"--frobnicate"}, wantErr: "sprio: unrecognized option '--frobnicate'\nTry \"sprio --help\" for more information\n", code: 1},
		{name: "controller down", fake: func(f *clitest.FakeAPI) { f.Err = api.Errorf(api.ErrUnavailable, "cannot reach tidectld") },
			wantErr: "sprio: error: Couldn't get priority factors from controller: cannot reach tidectld\n", code: 1},
		{name: "queues refused", fake: func(f *clitest.FakeAPI) { f.QueuesErr = api.Errorf(api.ErrPermissionDenied, "denied") },
			wantErr: "sprio: error: Couldn't get queues from controller: denied\n", code: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := clitest.SharingCluster()
			if tt.fake != nil {
				tt.fake(fake)
			}
			out, errOut, code := run(t, fake, tt.args...)
			if out != "" || errOut != tt.wantErr || code != tt.code {
				t.Errorf("got out %q err %q exit %d; want err %q exit %d", out, errOut, code, tt.wantErr, tt.code)
			}
		})
	}
}
