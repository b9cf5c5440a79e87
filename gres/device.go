package gres

import (
	"fmt"
	"strings"
)

// Health words a node reports for each GPU.
const (
	Healthy   = "ok"
	Unhealthy = "unhealthy"
)

// Device is one GPU as a node reports it at registration.
type Device struct {
	Index    int    `json:"index"`
	UUID     string `json:"uuid"`
	Model    string `json:"model"`
	MemoryMB int64  `json:"memory_mb"`
	Health   string `json:"health,omitempty"`
}

// FakeConfig describes a fake inventory: Count identical GPUs.
type FakeConfig struct {
	Count    int    `mapstructure:"count" json:"count"`
	Model    string `mapstructure:"model" json:"model"`
	MemoryMB int64  `mapstructure:"memory_mb" json:"memory_mb"`
}

// Fake returns a deterministic inventory for node: UUIDs derive from the
// node name so that restarts report the same devices.
func Fake(node string, c FakeConfig) ([]Device, error) {
	if c.Count < 0 || c.Count > 64 {
		return nil, fmt.Errorf("fake gpu count %d: must be between 0 and 64", c.Count)
	}
	model := c.Model
	if model == "" {
		model = "a100"
	}
	mem := c.MemoryMB
	if mem == 0 {
		mem = 80 * 1024
	}
	out := make([]Device, c.Count)
	for i := range out {
		out[i] = Device{
			Index:    i,
			UUID:     fakeUUID(node, i),
			Model:    strings.ToLower(model),
			MemoryMB: mem,
			Health:   Healthy,
		}
	}
	return out, nil
}

// fakeUUID builds a stable GPU-xxxxxxxx-... identifier from an FNV hash of
// the node name and index.
func fakeUUID(node string, idx int) string {
	h := uint64(14695981039346656037)
	for _, c := range []byte(fmt.Sprintf("%s/%d", node, idx)) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return fmt.Sprintf("GPU-%08x-%04x-%04x-%04x-%012x", uint32(h>>32), uint16(h>>16), uint16(h), idx, h&0xffffffffffff)
}

// FormatIndices prints GPU indices the way CUDA_VISIBLE_DEVICES and
// SLURM_JOB_GPUS expect them: "0,1".
func FormatIndices(idx []int) string {
	var b strings.Builder
	for i, x := range idx {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d", x)
	}
	return b.String()
}
