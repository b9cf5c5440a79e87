package topology

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSlurmConf(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []SwitchConfig
		wantErr []string // exact lines of the joined error
	}{
		{
			name: "slurm documentation example",
			in: `# topology.conf
# Switch Configuration
SwitchName=s0 Nodes=tux[0-3]
SwitchName=s1 Nodes=tux[4-7]

SwitchName=s2 Switches=s[0-1]
`,
			want: []SwitchConfig{{Name: "s0", Nodes: "tux[0-3]"}, {Name: "s1", Nodes: "tux[4-7]"}, {Name: "s2", Switches: "s[0-1]"}},
		},
		{
			name: "keys in any case and LinkSpeed ignored",
			in:   "switchname=s1 NODES=gpu[001-016] linkSpeed=100\nSWITCHNAME=top sWiTcHeS=s1 LinkSpeed=\n",
			want: []SwitchConfig{{Name: "s1", Nodes: "gpu[001-016]"}, {Name: "top", Switches: "s1"}},
		},
		{
			name: "continuation lines and trailing comments",
			in:   "SwitchName=s1 \\\n\tNodes=gpu[01-02] # first leaf\nSwitchName=s2 \\  # comment after the backslash\n Nodes=gpu03\n",
			want: []SwitchConfig{{Name: "s1", Nodes: "gpu[01-02]"}, {Name: "s2", Nodes: "gpu03"}},
		},
		{
			name: "quoted values, tabs and CRLF",
			in:   "SwitchName=\"s1\"\tNodes=\"gpu[01-02]\"\r\nSwitchName=s2\tSwitches=s1\r\n",
			want: []SwitchConfig{{Name: "s1", Nodes: "gpu[01-02]"}, {Name: "s2", Switches: "s1"}},
		},
		{
			name: "key order is free and a switch may be empty",
			in:   "Nodes=gpu01 SwitchName=s1\nSwitchName=s2\n",
			want: []SwitchConfig{{Name: "s1", Nodes: "gpu01"}, {Name: "s2"}},
		},
		{
			name: "file ends inside a continuation",
			in:   "SwitchName=s1 \\\nNodes=gpu01 \\",
			want: []SwitchConfig{{Name: "s1", Nodes: "gpu01"}},
		},
		{name: "only comments", in: "# nothing\n\n   \n"},
		{
			name:    "unknown key",
			in:      "SwitchName=s1 Nodes=gpu01 Speed=10\n",
			wantErr: []string{`line 1: unknown key "Speed" (want LinkSpeed, Nodes, SwitchName, Switches)`},
		},
		{
			name:    "missing SwitchName",
			in:      "SwitchName=s1 Nodes=gpu01\nNodes=gpu02\n",
			wantErr: []string{"line 2: missing SwitchName"},
		},
		{
			name:    "both Nodes and Switches",
			in:      "SwitchName=s1 Nodes=gpu01\n\nSwitchName=s2 Nodes=gpu02 Switches=s1\n",
			wantErr: []string{`line 3: switch "s2" has both Nodes and Switches; a switch holds either nodes (leaf) or switches`},
		},
		{
			name:    "error on a continued line names its first line",
			in:      "# leaf\nSwitchName=s1 \\\n  Nodes=gpu01 \\\n  Bogus=1\n",
			wantErr: []string{`line 2: unknown key "Bogus" (want LinkSpeed, Nodes, SwitchName, Switches)`},
		},
		{
			name:    "word without equals",
			in:      "SwitchName=s1 gpu01\n",
			wantErr: []string{`line 1: "gpu01" is not Key=Value`},
		},
		{
			name:    "key given twice",
			in:      "SwitchName=s1 Nodes=gpu01 nodes=gpu02\n",
			wantErr: []string{"line 1: Nodes given twice"},
		},
		{
			name:    "empty value",
			in:      "SwitchName=s1 Nodes=\n",
			wantErr: []string{"line 1: Nodes has no value"},
		},
		{
			name:    "SwitchName list",
			in:      "SwitchName=s[1-2] Nodes=gpu01\n",
			wantErr: []string{"line 1: SwitchName=s[1-2]: a line defines one switch, not a list"},
		},
		{
			name:    "switch defined twice",
			in:      "SwitchName=s1 Nodes=gpu01\nSwitchName=s2 Nodes=gpu02\nSwitchName=s1 Nodes=gpu03\n",
			wantErr: []string{`line 3: switch "s1" already defined on line 1`},
		},
		{
			name:    "block topology",
			in:      "BlockName=b1 Nodes=gpu[01-04]\n",
			wantErr: []string{"line 1: BlockName belongs to Slurm's topology/block, which Tide does not read; describe the tree with SwitchName lines", "line 1: missing SwitchName"},
		},
		{
			name:    "unterminated quote",
			in:      "SwitchName=s1 Nodes=\"gpu01\n",
			wantErr: []string{"line 1: unterminated quote"},
		},
		{
			name: "every bad line is reported",
			in:   "SwitchName=s1 Nodes=gpu01 Foo=1\nSwitchName=s2 Nodes=gpu02\nLinkSpeed=10\n",
			wantErr: []string{
				`line 1: unknown key "Foo" (want LinkSpeed, Nodes, SwitchName, Switches)`,
				"line 3: missing SwitchName",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSlurmConf(strings.NewReader(tt.in))
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("ParseSlurmConf = %+v, want errors %q", got, tt.wantErr)
				}
				if diff := cmp.Diff(tt.wantErr, strings.Split(err.Error(), "\n")); diff != "" {
					t.Errorf("error lines (-want +got):\n%s", diff)
				}
				var se *SyntaxError
				if !errors.As(err, &se) || se.Line < 1 {
					t.Errorf("err = %#v, want a *SyntaxError with a line", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseSlurmConf (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseSlurmConfThenBuild checks that tree problems a line-level
// parser cannot see are still caught, by Build.
func TestParseSlurmConfThenBuild(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{name: "valid", in: "SwitchName=s1 Nodes=gpu[01-02]\nSwitchName=s2 Nodes=gpu[03-04]\nSwitchName=top Switches=s[1-2]\n"},
		{name: "cycle", in: "SwitchName=a Switches=b\nSwitchName=b Switches=a\n", wantErr: "cycle"},
		{name: "unknown node", in: "SwitchName=s1 Nodes=gpu[01-09]\n", wantErr: `names 5 unknown nodes gpu[05-09]`},
		{name: "node in two leaves", in: "SwitchName=s1 Nodes=gpu01\nSwitchName=s2 Nodes=gpu[01-02]\n", wantErr: `node "gpu01" is in two leaf switches (s1 and s2)`},
		{name: "unknown switch", in: "SwitchName=top Switches=s[1-3]\nSwitchName=s1 Nodes=gpu01\n", wantErr: `unknown switch "s2"`},
	}
	known := map[string]bool{"gpu01": true, "gpu02": true, "gpu03": true, "gpu04": true}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseSlurmConf(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Build(cfg, known)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Build err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestFormatSlurmConfRoundTrip(t *testing.T) {
	cfg := []SwitchConfig{{Name: "s1", Nodes: "gpu[01-02]"}, {Name: "s2"}, {Name: "top", Switches: "s[1-2]"}}
	text := FormatSlurmConf(cfg)
	want := "SwitchName=s1 Nodes=gpu[01-02]\nSwitchName=s2\nSwitchName=top Switches=s[1-2]\n"
	if text != want {
		t.Errorf("FormatSlurmConf = %q, want %q", text, want)
	}
	got, err := ParseSlurmConf(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cfg, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}
