package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAuthConfig(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		env       map[string]string
		wantAddr  string
		wantJWT   JWTConfig
		wantMunge string
		wantError []string
	}{
		{name: "defaults: off", wantJWT: JWTConfig{MaxLifespan: 24 * time.Hour}, wantMunge: "/run/munge/munge.socket.2"},
		{name: "set", yaml: `
api_addr: 0.0.0.0:6820
jwt: {key_file: /etc/tide/jwt_hs256.key, max_lifespan: 1h}
munge: {socket: /run/munge/other.socket}
`, wantAddr: "0.0.0.0:6820", wantJWT: JWTConfig{KeyFile: "/etc/tide/jwt_hs256.key", MaxLifespan: time.Hour},
			wantMunge: "/run/munge/other.socket"},
		{name: "environment", env: map[string]string{"TIDECTLD_API_ADDR": "127.0.0.1:6820", "TIDECTLD_JWT_KEY_FILE": "/k"},
			wantAddr: "127.0.0.1:6820", wantJWT: JWTConfig{KeyFile: "/k", MaxLifespan: 24 * time.Hour}, wantMunge: DefaultMungeSocket},
		{name: "bad address", yaml: "api_addr: ctl\n", wantError: []string{`api_addr: "ctl" is not host:port`}},
		{name: "bad port", yaml: "api_addr: ctl:http\n", wantError: []string{`api_addr: "ctl:http" has no valid port`}},
		{name: "on node_addr", yaml: "api_addr: 127.0.0.1:6817\n", wantError: []string{"is also node_addr or metrics_addr"}},
		{name: "lifespans", yaml: "jwt: {max_lifespan: 30s}\n", wantError: []string{"jwt.max_lifespan: 30s is not between 1m and"}},
		{name: "no munge socket", yaml: "api_addr: :6820\nmunge: {socket: \"\"}\n", wantError: []string{"munge.socket: must not be empty"}},
		{name: "unknown key", yaml: "jwt: {keyfile: /k}\n", wantError: []string{"keyfile"}},
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
					t.Fatalf("no error, want %q", tt.wantError)
				}
				for _, w := range tt.wantError {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cl.APIAddr != tt.wantAddr || cl.JWT != tt.wantJWT || cl.Munge.Socket != tt.wantMunge {
				t.Errorf("got api_addr %q jwt %+v munge %q; want %q %+v %q", cl.APIAddr, cl.JWT, cl.Munge.Socket,
					tt.wantAddr, tt.wantJWT, tt.wantMunge)
			}
		})
	}
}

func TestAuthPathsRelativeToConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tide.yaml")
	if err := os.WriteFile(p, []byte(limitsBase+"jwt: {key_file: jwt.key}\nmunge: {socket: run/munge.sock}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.JWT.KeyFile != filepath.Join(dir, "jwt.key") || cfg.Munge.Socket != filepath.Join(dir, "run/munge.sock") {
		t.Errorf("key_file %q, munge.socket %q: not relative to %s", cfg.JWT.KeyFile, cfg.Munge.Socket, dir)
	}
}

func TestAuthDumpDurations(t *testing.T) {
	b, err := json.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"api_addr":""`, `"jwt":{"key_file":"","max_lifespan":"24h0m0s"}`, `"munge":{"socket":"/run/munge/munge.socket.2"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("config dump lacks %s:\n%s", want, b)
		}
	}
}
