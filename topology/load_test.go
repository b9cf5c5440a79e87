package topology

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// shape flattens a tree into comparable data: each switch's parent and
// the nodes under it.
func shape(t *Tree) map[string]string {
	out := map[string]string{}
	for _, s := range t.Switches() {
		out[s] = "parent=" + t.Parent(s) + " nodes=" + strings.Join(t.NodesUnder(s), ",")
	}
	return out
}

func TestLoadFile(t *testing.T) {
	known := map[string]bool{"gpu01": true, "gpu02": true, "gpu03": true, "gpu04": true}
	want := map[string]string{
		"s1":    "parent=spine nodes=gpu01,gpu02",
		"s2":    "parent=spine nodes=gpu03,gpu04",
		"spine": "parent= nodes=gpu01,gpu02,gpu03,gpu04",
	}
	tests := []struct {
		name    string
		file    string
		wantErr []string
	}{
		{name: "slurm topology.conf", file: "cluster.conf"},
		{name: "yaml with a node list", file: "cluster.yaml"},
		{name: "yaml block from tide.yaml", file: "tide-block.yml"},
		{name: "no extension, slurm content", file: "topology"},
		{name: "misspelt yaml key", file: "misspelt.yaml", wantErr: []string{"testdata/misspelt.yaml", "field node not found"}},
		{name: "yaml with both lists", file: "both.yaml", wantErr: []string{"both top-level switches and topology.switches"}},
		{name: "slurm syntax error names file and line", file: "bad-line.conf",
			wantErr: []string{"topology: testdata/bad-line.conf: line 2: switch \"s2\" has both Nodes and Switches"}},
		{name: "tree error names the file", file: "unknown-node.conf",
			wantErr: []string{"testdata/unknown-node.conf: topology: switch \"s1\" names unknown node \"gpu05\""}},
		{name: "no switches", file: "empty.yaml", wantErr: []string{"testdata/empty.yaml: no switches defined"}},
		{name: "missing file", file: "nope.conf", wantErr: []string{"nope.conf", "no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree, err := LoadFile(filepath.Join("testdata", tt.file), known)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("LoadFile succeeded, want %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("err = %v, want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, shape(tree)); diff != "" {
				t.Errorf("tree (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseYAML(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []SwitchConfig
		wantErr string
	}{
		{name: "empty input", in: ""},
		{name: "string and list forms", in: "switches:\n- name: s1\n  nodes: gpu[01-02]\n- name: s2\n  nodes: [gpu03, gpu05]\n- {name: top, switches: [s1, s2]}\n",
			want: []SwitchConfig{{Name: "s1", Nodes: "gpu[01-02]"}, {Name: "s2", Nodes: "gpu03,gpu05"}, {Name: "top", Switches: "s1,s2"}}},
		{name: "unknown top-level key", in: "switchs: []\n", wantErr: "field switchs not found"},
		{name: "nodes as a map", in: "switches:\n- name: s1\n  nodes: {a: b}\n", wantErr: "want a hostlist expression or a list of them"},
		{name: "nested list in nodes", in: "switches:\n- name: s1\n  nodes: [[a]]\n", wantErr: "want a host name or expression"},
		{name: "not yaml", in: "switches: [\n", wantErr: "yaml: line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseYAML(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseYAML (-want +got):\n%s", diff)
			}
		})
	}
}
