package queues

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
)

func run(t *testing.T, fake *clitest.FakeAPI, args ...string) (string, string, int) {
	t.Helper()
	f, bufs := clitest.Factory(fake, nil)
	return clitest.Run(NewCmd(f), bufs, "queues", args)
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
		fake func(*clitest.FakeAPI)
	}{
		{name: "default"},
		{name: "long", args: []string{"-l"}},
		{name: "qos", args: []string{"--qos"}},
		{name: "qos-parsable", args: []string{"--qos", "-P", "-n"}},
		{name: "parsable", args: []string{"-P"}},
		{name: "named", args: []string{"fps", "prod"}},
		{name: "noheader", args: []string{"-n"}},
		{name: "json", args: []string{"--json"}},
		{name: "long-names", fake: func(f *clitest.FakeAPI) {
			f.Sharing.Queues[3].Name = "fast-physics-simulation"
			f.Sharing.Queues = append(f.Sharing.Queues, api.QueueStatus{Name: "orphan", Parent: "gone", Guaranteed: 2, LendLimit: -1, BorrowLimit: -1})
		}},
		{name: "none", fake: func(f *clitest.FakeAPI) { f.Sharing = api.QueueList{} }},
		{name: "json-none", args: []string{"--json"}, fake: func(f *clitest.FakeAPI) { f.Sharing = api.QueueList{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := clitest.SharingCluster()
			if tt.fake != nil {
				tt.fake(fake)
			}
			out, errOut, code := run(t, fake, tt.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("queues %v: exit %d, stderr %q", tt.args, code, errOut)
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
		{name: "unknown queue", args: []string{"moba", "nope"}, wantErr: "queues: error: no queue \"nope\" (tide queues lists them)\n", code: 1},
		{name: "controller down", fake: func(f *clitest.FakeAPI) { f.Err = api.Errorf(api.ErrUnavailable, "cannot reach tidectld") },
			wantErr: "queues: error: load queues: cannot reach tidectld\n", code: 1},
		{name: "bad flag", args: []string{"--bogus"}, wantErr: "queues: error: unknown flag: --bogus\n", code: 2},
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

func TestTreeOrder(t *testing.T) {
	qs := []api.QueueStatus{
		{Name: "b1", Parent: "b"}, {Name: "a"}, {Name: "b"}, {Name: "a1", Parent: "a"},
		{Name: "b1x", Parent: "b1"}, {Name: "lost", Parent: "nowhere"}, {Name: "c1", Parent: "c2"}, {Name: "c2", Parent: "c1"},
	}
	var got []string
	for _, r := range treeOrder(qs) {
		got = append(got, r.q.Name+":"+string(rune('0'+r.depth)))
	}
	want := []string{"a:0", "a1:1", "b:0", "b1:1", "b1x:2", "lost:0", "c1:0", "c2:1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}
