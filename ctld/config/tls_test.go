package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const tlsHead = "version: 1\nnodes: [{names: \"n[1-2]\"}]\npartitions: [{name: a, nodes: \"n[1-2]\"}]\n"

func TestTLSConfig(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       TLSConfig
		err        string
	}{
		{name: "defaults", want: TLSConfig{Mode: TLSAuto, CertValidity: DefaultCertValidity}},
		{name: "on", yaml: "tls: {mode: on, cert_validity: 24h, hostnames: [ctl.example, 10.0.0.1]}",
			want: TLSConfig{Mode: TLSOn, CertValidity: 24 * time.Hour, Hostnames: []string{"ctl.example", "10.0.0.1"}}},
		{name: "bad mode", yaml: "tls: {mode: yes please}", err: `tls.mode: "yes please" is not auto, on or off`},
		{name: "validity too short", yaml: "tls: {cert_validity: 1s}", err: "tls.cert_validity: 1s is not between"},
		{name: "validity too long", yaml: "tls: {cert_validity: 87600h}", err: "tls.cert_validity: 87600h0m0s is not between"},
		{name: "bad host name", yaml: "tls: {hostnames: [\"ctl example\"]}", err: `tls.hostnames[0]: "ctl example" is not a host name`},
		{name: "wildcard", yaml: "tls: {hostnames: [\"*.example\"]}", err: `tls.hostnames[0]: "*.example"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse(strings.NewReader(tlsHead + tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			_, err = cfg.Validate()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Validate = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cfg.TLS); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestTLSModeFromEnv(t *testing.T) {
	t.Setenv("TIDECTLD_TLS_MODE", "on")
	cfg, err := Parse(strings.NewReader(tlsHead))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS.Mode != TLSOn {
		t.Fatalf("TIDECTLD_TLS_MODE=on gives mode %q", cfg.TLS.Mode)
	}
}

func TestControllerHosts(t *testing.T) {
	tests := []struct {
		name, hostname, nodeAddr, apiAddr string
		extra                             []string
		want                              []string
	}{
		{name: "wildcards", hostname: "ctl.example.org", nodeAddr: "0.0.0.0:6817", apiAddr: "[::]:6820",
			want: []string{"ctl.example.org", "ctl", "localhost", "127.0.0.1", "::1"}},
		{name: "addresses and extras", hostname: "ctl", nodeAddr: "10.1.0.1:6817", apiAddr: "ctl-api.example:6820",
			extra: []string{"10.1.0.1", "login-ctl"},
			want:  []string{"ctl", "localhost", "127.0.0.1", "::1", "10.1.0.1", "ctl-api.example", "login-ctl"}},
		{name: "no api_addr", hostname: "", nodeAddr: "127.0.0.1:6817",
			want: []string{"localhost", "127.0.0.1", "::1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.NodeAddr, c.APIAddr, c.TLS.Hostnames = tc.nodeAddr, tc.apiAddr, tc.extra
			if diff := cmp.Diff(tc.want, c.ControllerHosts(tc.hostname)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
