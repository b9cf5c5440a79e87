package config

import (
	"strings"
	"testing"
)

func TestStoreKey(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string // in the error; "" for none
	}{
		{name: "unset", yaml: ""},
		{name: "sqlite", yaml: "store: sqlite:///var/lib/tide/ctld/tide.db"},
		{name: "postgres", yaml: "store: postgres://tide@db1:5432/tide?sslmode=require"},
		{name: "postgresql scheme", yaml: "store: postgresql://db1/tide"},
		{name: "bare path", yaml: "store: /var/lib/tide/tide.db", want: "is not a URL"},
		{name: "relative sqlite", yaml: "store: sqlite://tide.db", want: "absolute path"},
		{name: "sqlite directory", yaml: "store: sqlite:///var/lib/tide/", want: "absolute path"},
		{name: "other scheme", yaml: "store: mysql://db1/tide", want: `scheme "mysql" is not sqlite or postgres`},
		{name: "postgres without database", yaml: "store: postgres://tide:pw@db1:5432", want: "names no database"},
		// The cluster's schema is named after it: checked here, not
		// first at the controller's start.
		{name: "postgres, cluster name with a dot", yaml: "cluster_name: gpu.east\nstore: postgres://db1/tide", want: `cluster_name "gpu.east" holds "."`},
		{name: "postgres, cluster named all", yaml: "cluster_name: all\nstore: postgres://db1/tide", want: "sacct -M's word"},
		{name: "sqlite, cluster name with a dot", yaml: "cluster_name: gpu.east\nstore: sqlite:///var/lib/tide/tide.db"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(strings.NewReader(minimalYAML + tt.yaml + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = cfg.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate error %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), ":pw@") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// TestStoreKeyFromEnvironment: like every key, store can come from
// TIDECTLD_STORE (a password kept out of the file).
func TestStoreKeyFromEnvironment(t *testing.T) {
	t.Setenv("TIDECTLD_STORE", "postgres://db1/tide")
	cfg, err := Parse(strings.NewReader(minimalYAML))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store != "postgres://db1/tide" {
		t.Errorf("store = %q, want the environment's", cfg.Store)
	}
}

const minimalYAML = `version: 1
partitions:
  - {name: gpu, nodes: "gpu01", default: true}
nodes:
  - {names: "gpu01", cpus: 8, memory: 64G, gpus: 8}
`
