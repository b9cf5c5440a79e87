package topology

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LoadFile reads a standalone topology file and builds the tree against
// the known nodes (nil accepts any node). A .conf file is Slurm's
// topology.conf syntax and a .yaml/.yml file is Tide's YAML; any other
// name is recognised by content (a first statement starting with
// SwitchName= means Slurm syntax). A file that defines no switch is an
// error, since pointing the controller at it was surely a mistake.
func LoadFile(path string, known map[string]bool) (*Tree, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	var cfg []SwitchConfig
	switch format := fileFormat(path, data); format {
	case "slurm":
		cfg, err = ParseSlurmConf(bytes.NewReader(data))
	default:
		cfg, err = ParseYAML(bytes.NewReader(data))
	}
	if err != nil {
		return nil, fmt.Errorf("topology: %s: %w", path, err)
	}
	if len(cfg) == 0 {
		return nil, fmt.Errorf("topology: %s: no switches defined", path)
	}
	t, err := Build(cfg, known)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// fileFormat picks "slurm" or "yaml" for LoadFile.
func fileFormat(path string, data []byte) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".conf":
		return "slurm"
	case ".yaml", ".yml":
		return "yaml"
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), maxSlurmLine)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(strings.ToLower(line), "switchname=") {
			return "slurm"
		}
		break
	}
	return "yaml"
}

// yamlFile is a standalone topology file: the switch list at the top, or
// under `topology:` so that the block can be cut from tide.yaml unchanged.
type yamlFile struct {
	Switches []yamlSwitch `yaml:"switches"`
	Topology *struct {
		Switches []yamlSwitch `yaml:"switches"`
	} `yaml:"topology"`
}

type yamlSwitch struct {
	Name     string   `yaml:"name"`
	Nodes    hostExpr `yaml:"nodes"`
	Switches hostExpr `yaml:"switches"`
}

// hostExpr is a hostlist expression written either as one string
// ("gpu[01-04]") or as a YAML list of them, which is easier to diff.
type hostExpr string

func (h *hostExpr) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*h = hostExpr(n.Value)
		return nil
	case yaml.SequenceNode:
		parts := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: want a host name or expression", c.Line)
			}
			parts = append(parts, c.Value)
		}
		*h = hostExpr(strings.Join(parts, ","))
		return nil
	}
	return fmt.Errorf("line %d: want a hostlist expression or a list of them", n.Line)
}

// ParseYAML reads Tide's YAML topology: a `switches:` list of
// {name, nodes, switches} entries, at the top level or under `topology:`.
// Unknown keys are errors, so a misspelt `node:` cannot silently drop a
// leaf. Empty input yields no switches.
func ParseYAML(r io.Reader) ([]SwitchConfig, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	var f yamlFile
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err // yaml's errors already say "yaml:" and the line
	}
	list := f.Switches
	if f.Topology != nil {
		if len(list) > 0 {
			return nil, errors.New("yaml: both top-level switches and topology.switches; keep one")
		}
		list = f.Topology.Switches
	}
	out := make([]SwitchConfig, 0, len(list))
	for _, s := range list {
		out = append(out, SwitchConfig{Name: s.Name, Nodes: string(s.Nodes), Switches: string(s.Switches)})
	}
	return out, nil
}
