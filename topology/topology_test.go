package topology

import (
	"strings"
	"testing"
)

func TestBuild(t *testing.T) {
	known := map[string]bool{"gpu01": true, "gpu02": true, "gpu03": true, "gpu04": true}
	tests := []struct {
		name    string
		cfg     []SwitchConfig
		wantErr string
	}{
		{name: "two leaves and a root", cfg: []SwitchConfig{
			{Name: "s1", Nodes: "gpu[01-02]"}, {Name: "s2", Nodes: "gpu[03-04]"}, {Name: "top", Switches: "s[1-2]"}}},
		{name: "unknown node", cfg: []SwitchConfig{{Name: "s1", Nodes: "gpu[01-05]"}}, wantErr: `unknown node "gpu05"`},
		{name: "node in two leaves", cfg: []SwitchConfig{{Name: "s1", Nodes: "gpu01"}, {Name: "s2", Nodes: "gpu01"}}, wantErr: "two leaf switches"},
		{name: "cycle", cfg: []SwitchConfig{{Name: "a", Switches: "b"}, {Name: "b", Switches: "a"}}, wantErr: "cycle"},
		{name: "unknown switch", cfg: []SwitchConfig{{Name: "a", Switches: "zz"}}, wantErr: `unknown switch "zz"`},
		{name: "duplicate", cfg: []SwitchConfig{{Name: "a"}, {Name: "a"}}, wantErr: "defined twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree, err := Build(tt.cfg, known)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tree.LeafOf("gpu03"); got != "s2" {
				t.Errorf("LeafOf(gpu03) = %q, want s2", got)
			}
		})
	}
}
