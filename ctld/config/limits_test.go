package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const limitsBase = `
version: 1
node_addr: 127.0.0.1:6817
nodes: [{names: "n1"}]
partitions: [{name: a, nodes: n1}]
`

func TestLimitsConfig(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		env       map[string]string
		want      LimitsConfig
		wantBody  int64
		wantAddr  string
		wantError []string
	}{
		{name: "defaults", want: DefaultLimits(), wantBody: 16 << 20},
		{name: "set", yaml: `
metrics_addr: 127.0.0.1:9100
limits:
  connections: 100
  connections_per_peer: 10
  operator_reserve: 5
  unauthenticated: 20
  unauthenticated_per_peer: 4
  unauthenticated_timeout: 2s
  header_timeout: 3s
  body_timeout: 4s
  write_timeout: 5s
  idle_timeout: 6s
  max_submit_body: 64M
`, want: LimitsConfig{Connections: 100, ConnectionsPerPeer: 10, OperatorReserve: 5, Unauthenticated: 20,
			UnauthenticatedPerPeer: 4, UnauthenticatedTimeout: 2 * time.Second, HeaderTimeout: 3 * time.Second,
			BodyTimeout: 4 * time.Second, WriteTimeout: 5 * time.Second, IdleTimeout: 6 * time.Second, MaxSubmitBody: "64M"},
			wantBody: 64 << 20, wantAddr: "127.0.0.1:9100"},
		{name: "environment", env: map[string]string{"TIDECTLD_LIMITS_CONNECTIONS": "5000", "TIDECTLD_METRICS_ADDR": ":9100"},
			want: func() LimitsConfig { l := DefaultLimits(); l.Connections = 5000; return l }(), wantBody: 16 << 20, wantAddr: ":9100"},
		{name: "body follows the script limit", yaml: "submit: {max_script_size: 33554432}\n",
			want: DefaultLimits(), wantBody: 2*(32<<20+1<<20) + 1<<20},
		{name: "inconsistent", yaml: `
limits: {connections: 10, connections_per_peer: 11, operator_reserve: 10, unauthenticated: 10, unauthenticated_per_peer: 0}
`, wantError: []string{"limits.connections_per_peer: 11", "limits.operator_reserve: 10", "limits.unauthenticated: 10", "limits.unauthenticated_per_peer: 0"}},
		{name: "bad values", yaml: `
metrics_addr: nonsense
limits: {connections: 0, idle_timeout: 1ms, max_submit_body: lots}
`, wantError: []string{"limits.connections: 0", "limits.idle_timeout: 1ms is too short", "limits.max_submit_body", `metrics_addr: "nonsense"`}},
		{name: "metrics on node_addr", yaml: "metrics_addr: 127.0.0.1:6817\n", wantError: []string{"metrics_addr: \"127.0.0.1:6817\" is node_addr"}},
		{name: "tiny body", yaml: "limits: {max_submit_body: \"0\"}\n", wantError: []string{"limits.max_submit_body: 0 is below 1M"}},
		{name: "unknown key", yaml: "limits: {conections: 1}\n", wantError: []string{"conections"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cfg, err := Parse(strings.NewReader(limitsBase + tt.yaml))
			var cl *Cluster
			if err == nil {
				cl, err = cfg.Validate()
			}
			if len(tt.wantError) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tt.wantError {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, cl.Limits); diff != "" {
				t.Errorf("limits (-want +got):\n%s", diff)
			}
			if n, err := cl.SubmitBodyLimit(); err != nil || n != tt.wantBody {
				t.Errorf("SubmitBodyLimit = %d, %v; want %d", n, err, tt.wantBody)
			}
			if cl.MetricsAddr != tt.wantAddr {
				t.Errorf("metrics_addr = %q, want %q", cl.MetricsAddr, tt.wantAddr)
			}
		})
	}
}

func TestLimitsDumpDurations(t *testing.T) {
	b, err := json.Marshal(DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"connections":4096`, `"idle_timeout":"1m30s"`, `"unauthenticated_timeout":"5s"`, `"max_submit_body":""`} {
		if !strings.Contains(string(b), w) {
			t.Errorf("%s lacks %s", b, w)
		}
	}
}
