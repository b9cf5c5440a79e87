package scontrol

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/scontroltest"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
)

// pingFake is the test cluster's API with several controllers, each
// answering a ping as results says (in the configured order).
type pingFake struct {
	*clitest.FakeAPI
	results []client.PingResult
}

func (p *pingFake) Endpoints() []string {
	var out []string
	for _, r := range p.results {
		out = append(out, r.Addr)
	}
	return out
}

func (p *pingFake) PingAll(context.Context) []client.PingResult { return p.results }

// Controllers' answers for the tests.
var (
	refused     = errors.New("connect: connection refused")
	upAsPrimary = func(addr, name string) client.PingResult {
		return client.PingResult{Addr: addr, Latency: 310 * time.Microsecond,
			Resp: api.PingResponse{Name: name, Cluster: "tide", Role: api.RolePrimary, Primary: name, PrimaryAPIAddr: addr, Epoch: 4}}
	}
	upAsStandby = func(addr, name, primary, primaryAddr string) client.PingResult {
		return client.PingResult{Addr: addr, Latency: 250 * time.Microsecond,
			Resp: api.PingResponse{Name: name, Cluster: "tide", Role: api.RoleStandby, Primary: primary, PrimaryAPIAddr: primaryAddr, Epoch: 4}}
	}
	down = func(addr string) client.PingResult {
		return client.PingResult{Addr: addr, Latency: 1200 * time.Microsecond, Err: refused}
	}
)

func runPing(t *testing.T, results []client.PingResult, uid int, args ...string) result {
	t.Helper()
	old := getuid
	getuid = func() int { return uid }
	t.Cleanup(func() { getuid = old })
	fake := &pingFake{FakeAPI: scontroltest.Cluster(), results: results}
	f, buf := clitest.Factory(fake.FakeAPI, nil)
	f.API = func() (cmdutil.API, error) { return fake, nil }
	cmd := newCmd(f, time.UTC)
	out, errOut, code := clitest.Run(cmd, buf, "scontrol", args)
	return result{out: out, errOut: errOut, code: code}
}

func TestPingControllersGolden(t *testing.T) {
	tests := []struct {
		name     string
		results  []client.PingResult
		uid      int
		args     []string
		golden   string
		wantCode int
		wantErr  string
	}{
		{name: "primary first, backup up",
			results: []client.PingResult{upAsPrimary("ctl1:6820", "ctl1"), upAsStandby("ctl2:6820", "ctl2", "ctl1", "ctl1:6820")},
			uid:     1000, args: []string{"ping"}, golden: "ping-controllers"},
		// After a failover: the first is down, and the standby that took
		// over is the primary.
		{name: "after a failover",
			results: []client.PingResult{down("ctl1:6820"), upAsPrimary("ctl2:6820", "ctl2")},
			uid:     1000, args: []string{"ping"}, golden: "ping-failover"},
		// The primary died and its lease has not lapsed: the standby
		// still names it, so the dead one is the primary that is DOWN.
		{name: "primary down, lease not lapsed, root",
			results: []client.PingResult{upAsStandby("ctl1:6820", "ctl1", "ctl2", "ctl2:6820"), down("ctl2:6820"),
				upAsStandby("ctl3:6820", "ctl3", "ctl2", "ctl2:6820")},
			uid: 0, args: []string{"ping"}, golden: "ping-primary-down-root"},
		{name: "all down",
			results: []client.PingResult{down("ctl1:6820"), down("ctl2:6820")},
			uid:     1000, args: []string{"ping"}, golden: "ping-all-down", wantCode: 1,
			wantErr: "scontrol: error: ping controllers: no tidectld could serve the request: ctl1:6820: connect: connection refused; ctl2:6820: connect: connection refused\n"},
		{name: "json after a failover",
			results: []client.PingResult{down("ctl1:6820"), upAsPrimary("ctl2:6820", "ctl2")},
			uid:     0, args: []string{"--json", "ping"}, golden: "json-ping-controllers"},
		{name: "json all down",
			results: []client.PingResult{down("ctl1:6820"), down("ctl2:6820")},
			uid:     1000, args: []string{"--json", "ping"}, golden: "json-ping-all-down", wantCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fixJSONCaller(t, append([]string{"/usr/bin/scontrol"}, tt.args...)...)
			r := runPing(t, tt.results, tt.uid, tt.args...)
			if r.code != tt.wantCode || r.errOut != tt.wantErr {
				t.Fatalf("exit %d, stderr %q; want %d, %q", r.code, r.errOut, tt.wantCode, tt.wantErr)
			}
			if tt.args[0] == "--json" {
				var doc struct {
					Pings []jsonPing `json:"pings"`
				}
				if err := json.Unmarshal([]byte(r.out), &doc); err != nil || len(doc.Pings) != len(tt.results) {
					t.Fatalf("JSON %v with %d pings, want %d:\n%s", err, len(doc.Pings), len(tt.results), r.out)
				}
			}
			golden(t, tt.golden, r.out)
		})
	}
}

// TestPingOneControllerUnchanged: a client with one controller (the
// socket) pings as before, by the cluster call.
func TestPingOneControllerUnchanged(t *testing.T) {
	r := runPing(t, []client.PingResult{upAsStandby("ctl9:6820", "ctl9", "", "")}, 0, "ping")
	if r.code != 0 || r.out != "Slurmctld(primary) at ctl1 is UP\n" {
		t.Fatalf("exit %d, output %q", r.code, r.out)
	}
}

// TestShowConfigControllers: show config ends with every controller's
// ping line, as Slurm's does.
func TestShowConfigControllers(t *testing.T) {
	r := runPing(t, []client.PingResult{down("ctl1:6820"), upAsPrimary("ctl2:6820", "ctl2")}, 1000, "show", "config")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	want := "\nSlurmctld(backup) at ctl1 is DOWN\nSlurmctld(primary) at ctl2 is UP\n"
	if !strings.HasSuffix(r.out, want) {
		t.Errorf("show config ends %q, want %q", r.out[max(0, len(r.out)-120):], want)
	}
}
