package slurmjson

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestExit(t *testing.T) {
	tests := []struct {
		name       string
		done       bool
		code, sig  int
		sigName    string
		wantStatus string
		wantCode   Number
		wantSig    Number
	}{
		{name: "not ended", wantStatus: "PENDING"},
		{name: "success", done: true, wantStatus: "SUCCESS", wantCode: Num(0)},
		{name: "error", done: true, code: 3, wantStatus: "ERROR", wantCode: Num(3)},
		{name: "signal", done: true, sig: 9, sigName: "KILL", wantStatus: "SIGNALED", wantSig: Num(9)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Exit(tt.done, tt.code, tt.sig, tt.sigName)
			if diff := cmp.Diff([]string{tt.wantStatus}, e.Status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if e.ReturnCode != tt.wantCode || e.Signal.ID != tt.wantSig || e.Signal.Name != tt.sigName {
				t.Errorf("got %+v", e)
			}
		})
	}
}

func TestNumbers(t *testing.T) {
	got, _ := json.Marshal([]Number{Num(5), Unset(), Infinite(), Positive(0), Positive(int64(7)), Time(time.Time{}),
		Time(time.Unix(100, 0))})
	want := `[{"set":true,"infinite":false,"number":5},{"set":false,"infinite":false,"number":0},` +
		`{"set":false,"infinite":true,"number":0},{"set":false,"infinite":false,"number":0},` +
		`{"set":true,"infinite":false,"number":7},{"set":false,"infinite":false,"number":0},` +
		`{"set":true,"infinite":false,"number":100}]`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		secs int64
		m    int64
		ok   bool
	}{{0, 0, false}, {-1, 0, false}, {1, 1, true}, {60, 1, true}, {61, 2, true}} {
		if m, ok := Minutes(tt.secs); m != tt.m || ok != tt.ok {
			t.Errorf("Minutes(%d) = %d, %v; want %d, %v", tt.secs, m, ok, tt.m, tt.ok)
		}
	}
}

func TestMeta(t *testing.T) {
	m := NewMeta([]string{"/opt/tide/bin/scontrol", "--json", "show", "jobs"}, "alice", "users", "c1")
	if diff := cmp.Diff([]string{"scontrol", "--json", "show", "jobs"}, m.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	if m.Plugin.DataParser != DataParser || m.Slurm.Release != Release || m.Slurm.Cluster != "c1" || m.Client.User != "alice" {
		t.Errorf("meta = %+v", m)
	}
	for plugin, name := range map[string]string{"v0.0.38": "Slurm OpenAPI v0.0.38", "dbv0.0.38": "Slurm OpenAPI DB v0.0.38"} {
		l := LegacyMeta(plugin)
		if l.Plugin.Type != "openapi/"+plugin || l.Plugin.Name != name || l.Slurm.Version.Minor != 5 || l.Slurm.Release != "22.05.8" {
			t.Errorf("LegacyMeta(%s) = %+v", plugin, l)
		}
	}
	if diff := cmp.Diff([]string{"a", "b"}, CSV("a,,b")); diff != "" {
		t.Errorf("CSV (-want +got):\n%s", diff)
	}
}
