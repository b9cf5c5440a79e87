package ctld

import (
	"io"

	"github.com/tide-hpc/tide/ctld/config"
)

// The controller's configuration lives in package ctld/config (no cgo,
// so that the simulator can read the same YAML); these aliases keep the
// names the rest of ctld and its callers use.
type (
	// Config is tidectld's configuration; see config.Config.
	Config = config.Config
	// TimeoutConfig holds the controller's timeouts; see config.TimeoutConfig.
	TimeoutConfig = config.TimeoutConfig
	// SchedulerConfig tunes the scheduling loop; see config.SchedulerConfig.
	SchedulerConfig = config.SchedulerConfig
	// PartitionConfig is one partition as written; see config.PartitionConfig.
	PartitionConfig = config.PartitionConfig
	// NodeConfig declares nodes; see config.NodeConfig.
	NodeConfig = config.NodeConfig
	// TopologyConfig holds the switch tree; see config.TopologyConfig.
	TopologyConfig = config.TopologyConfig
	// Cluster is a validated, expanded configuration; see config.Cluster.
	Cluster = config.Cluster
)

// Re-exported constants of package config, for ctld's callers.
const (
	ConfigVersion              = config.Version
	DefaultMaxArraySize        = config.DefaultMaxArraySize
	DefaultMaxGPUOversubscribe = config.DefaultMaxGPUOversubscribe
	DefaultShardsPerGPU        = config.DefaultShardsPerGPU
	DefaultGPUMemHighWatermark = config.DefaultGPUMemHighWatermark
)

// DefaultConfig returns the built-in defaults (config.Default).
func DefaultConfig() Config { return config.Default() }

// LoadConfig reads a YAML config file over the defaults, then TIDECTLD_*
// environment variables (config.Load).
func LoadConfig(path string) (Config, error) { return config.Load(path) }

// ParseConfig reads YAML from r over the defaults and the environment
// (config.Parse).
func ParseConfig(r io.Reader) (Config, error) { return config.Parse(r) }
