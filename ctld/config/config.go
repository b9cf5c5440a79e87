// Package config reads and validates tidectld's YAML configuration. It
// is a package of its own, free of cgo, so that tools that only need the
// cluster description (the simulator, built with CGO_ENABLED=0) can read
// the controller's file without linking its SQLite store.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/viper"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	"github.com/tide-hpc/tide/hostlist"
	"github.com/tide-hpc/tide/topology"
)

// Version is the version of the controller config this build reads.
const Version = 1

// Config is tidectld's configuration (etc/tide.yaml documents every
// field). Order of precedence: Default, then the file, then
// TIDECTLD_* environment variables, then flags.
type Config struct {
	Version     int    `mapstructure:"version" json:"version"`
	ClusterName string `mapstructure:"cluster_name" json:"cluster_name"`
	// StateDir holds the SQLite database (state, accounting, spool).
	StateDir string `mapstructure:"state_dir" json:"state_dir"`
	// Store is the database of the controller's state and accounting:
	// sqlite:///path/tide.db or postgres://user@host:port/db. Empty (the
	// default) is the SQLite file tide.db in StateDir (store.go).
	Store string `mapstructure:"store" json:"store"`
	// Socket is the unix socket for local clients; NodeAddr the TCP
	// address node daemons reach (and /metrics).
	Socket   string `mapstructure:"socket" json:"socket"`
	NodeAddr string `mapstructure:"node_addr" json:"node_addr"`
	// KeyFile holds the cluster key node daemons present.
	KeyFile string `mapstructure:"key_file" json:"key_file"`
	// Operators may act on every job and node (root and the daemon's own
	// user always may).
	Operators []string `mapstructure:"operators" json:"operators"`
	// AllowRootJobs accepts jobs submitted by root.
	AllowRootJobs bool `mapstructure:"allow_root_jobs" json:"allow_root_jobs"`
	// FirstJobID is the id of the first job of a new cluster.
	FirstJobID uint64 `mapstructure:"first_job_id" json:"first_job_id"`
	// MaxArraySize is Slurm's MaxArraySize: array task ids must be
	// below it (so an array has at most that many tasks).
	MaxArraySize int    `mapstructure:"max_array_size" json:"max_array_size"`
	LogLevel     string `mapstructure:"log_level" json:"log_level"`

	Timeouts  TimeoutConfig     `mapstructure:"timeouts" json:"timeouts"`
	Scheduler SchedulerConfig   `mapstructure:"scheduler" json:"scheduler"`
	Partition []PartitionConfig `mapstructure:"partitions" json:"partitions"`
	Nodes     []NodeConfig      `mapstructure:"nodes" json:"nodes"`
	Topology  TopologyConfig    `mapstructure:"topology" json:"topology"`

	// Sharing the cluster (share.go): queues (Slurm accounts) with
	// guaranteed shares and caps, job classes, and the submission
	// buffer.
	Queues     []QueueConfig `mapstructure:"queues" json:"queues,omitempty"`
	QOS        []QOSConfig   `mapstructure:"qos" json:"qos,omitempty"`
	DefaultQOS string        `mapstructure:"default_qos" json:"default_qos"`
	Submit     SubmitConfig  `mapstructure:"submit" json:"submit"`

	// Connection hygiene (limits.go): caps on connections per listener
	// and peer, request timeouts and sizes, and where /metrics is
	// served ("" = on node_addr).
	MetricsAddr string       `mapstructure:"metrics_addr" json:"metrics_addr"`
	Limits      LimitsConfig `mapstructure:"limits" json:"limits"`

	// The user API over TCP (auth.go): where it listens ("" = off),
	// and how its requests authenticate (a JWT, a MUNGE credential).
	APIAddr string      `mapstructure:"api_addr" json:"api_addr"`
	JWT     JWTConfig   `mapstructure:"jwt" json:"jwt"`
	Munge   MungeConfig `mapstructure:"munge" json:"munge"`

	// PrivateData (privacy.go) is Slurm's PrivateData: what regular
	// users may not see of other users (events, jobs, nodes, usage).
	PrivateData []string `mapstructure:"private_data" json:"private_data"`

	// TLS (tls.go): the cluster CA, certificates for the controller and
	// the nodes, and whether node_addr and api_addr serve TLS.
	TLS TLSConfig `mapstructure:"tls" json:"tls"`

	// JobUsage (jobusage.go): each running job's usage series and the
	// idle-GPU flag.
	JobUsage JobUsageConfig `mapstructure:"job_usage" json:"job_usage"`
	// HA (ha.go): this controller's name and lease among the
	// controllers sharing its store.
	HA HAConfig `mapstructure:"ha" json:"ha"`
}

// TimeoutConfig holds the controller's timeouts.
type TimeoutConfig struct {
	// Node: a node that has not synced for this long is DOWN and its
	// jobs end NODE_FAIL.
	Node time.Duration `mapstructure:"node" json:"node"`
	// KillWait is the time between SIGTERM and SIGKILL.
	KillWait time.Duration `mapstructure:"kill_wait" json:"kill_wait"`
	// MinJobAge is how long finished jobs stay visible to squeue.
	MinJobAge time.Duration `mapstructure:"min_job_age" json:"min_job_age"`
	// SpoolKeep is how long scripts of finished jobs are kept.
	SpoolKeep time.Duration `mapstructure:"spool_keep" json:"spool_keep"`
}

// MarshalJSON prints durations as "30s" rather than nanoseconds, for
// `tidectld config dump`.
func (t TimeoutConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{
		"node": t.Node.String(), "kill_wait": t.KillWait.String(),
		"min_job_age": t.MinJobAge.String(), "spool_keep": t.SpoolKeep.String(),
	})
}

// MarshalJSON prints durations as "1s" rather than nanoseconds.
func (c SchedulerConfig) MarshalJSON() ([]byte, error) {
	type plain SchedulerConfig
	return json.Marshal(struct {
		Interval           string `json:"interval"`
		MinInterval        string `json:"min_interval"`
		StarvationAge      string `json:"starvation_age"`
		BackfillResolution string `json:"backfill_resolution"`
		BackfillWindow     string `json:"backfill_window"`
		PriorityMaxAge     string `json:"priority_max_age"`
		PriorityLengthRef  string `json:"priority_length_ref"`
		PriorityDecay      string `json:"priority_decay_half_life"`
		PriorityMaxLimitAs string `json:"priority_max_limit_as"`
		PriorityMaxLimit   string `json:"priority_max_limit"`
		plain
	}{c.Interval.String(), c.MinInterval.String(), c.StarvationAge.String(), c.BackfillResolution.String(), c.BackfillWindow.String(),
		c.PriorityMaxAge.String(), c.PriorityLengthRef.String(), c.PriorityDecayHalfLife.String(),
		c.PriorityMaxLimitAs.String(), c.PriorityMaxLimit.String(), plain(c)})
}

// SchedulerConfig tunes the scheduling loop.
type SchedulerConfig struct {
	// Interval is the period of the background pass (submissions and
	// job ends trigger passes at once).
	Interval       time.Duration `mapstructure:"interval" json:"interval"`
	MaxStarts      int           `mapstructure:"max_starts" json:"max_starts"`
	DefMemPerCPUMB int64         `mapstructure:"def_mem_per_cpu_mb" json:"def_mem_per_cpu_mb"`
	// MinInterval is the least time from the end of one triggered pass
	// to the start of the next (Slurm's sched_min_interval): under a
	// submission storm every submission asks for a pass, and each pass
	// reads every node and pending job, so passes back to back would
	// hold the lock most of the time. A trigger after a quiet spell
	// still runs at once. 0: no throttle.
	MinInterval time.Duration `mapstructure:"min_interval" json:"-"`
	// MaxGPUOversubscribe caps every partition's gpu_mem_oversubscribe
	// and gpu_compute_oversubscribe, so that no partition can promise
	// shared GPUs far more than they have by a typo.
	MaxGPUOversubscribe float64 `mapstructure:"max_gpu_oversubscribe" json:"max_gpu_oversubscribe"`
	// GPUMemHighWatermark is the default fraction of a shared GPU's
	// physical memory whose real use triggers reclaim (partitions may
	// override it); see docs/operations.md.
	GPUMemHighWatermark float64 `mapstructure:"gpu_mem_high_watermark" json:"gpu_mem_high_watermark"`
	// Policy decides what jobs behind one that does not fit may do:
	// tide (the default: backfill in the multifactor order, see
	// sched.PolicyTide), priority (the blocked job holds the nodes it
	// could use), backfill (Slurm's: every tested job that cannot start gets
	// a reservation in time, later jobs start only where they delay
	// none), easy (one reservation, for the first blocked job) or fifo
	// (strict order). See ctld/sched/README.md, "Policies".
	Policy string `mapstructure:"policy" json:"policy"`
	// StarvationAge is how long a job waits eligible before it is
	// Starving and rises one level per further period (negative: no
	// aging).
	StarvationAge time.Duration `mapstructure:"starvation_age" json:"-"`
	// BackfillMaxJobTest bounds the jobs a backfill pass tests once a
	// job of their partition could not start (Slurm's bf_max_job_test;
	// under priority and fifo, the blocked jobs that get an expected
	// start); BackfillMaxJobUser and BackfillMaxJobPart bound them per
	// user and per partition (bf_max_job_user, bf_max_job_part; 0 =
	// none). BackfillResolution is the plan's time step (bf_resolution)
	// and BackfillWindow how far ahead jobs are reserved (bf_window).
	BackfillMaxJobTest int           `mapstructure:"backfill_max_job_test" json:"backfill_max_job_test"`
	BackfillMaxJobUser int           `mapstructure:"backfill_max_job_user" json:"backfill_max_job_user"`
	BackfillMaxJobPart int           `mapstructure:"backfill_max_job_part" json:"backfill_max_job_part"`
	BackfillResolution time.Duration `mapstructure:"backfill_resolution" json:"-"`
	BackfillWindow     time.Duration `mapstructure:"backfill_window" json:"-"`
	// BackfillReserveDepth bounds the blocked jobs a backfill pass
	// reserves for (Maui's RESERVATIONDEPTH; 0: the policy's default,
	// every tested job under backfill, 8 under tide); later jobs only
	// start where they delay no reservation, and are not counted.
	BackfillReserveDepth int `mapstructure:"backfill_reserve_depth" json:"backfill_reserve_depth"`
	// BackfillDepth is the key backfill_max_job_test replaced; set, it
	// is refused with an error that names its successor.
	BackfillDepth *int `mapstructure:"backfill_depth" json:"-"`
	// The multifactor weights of policy tide (sched.Multifactor, Slurm's
	// PriorityWeight* and PriorityMaxAge): age up to PriorityMaxAge (and
	// PriorityAgeAfterMax of that slope beyond), the shortness of the
	// time limit up to PriorityLengthRef (a narrow job at its partition's
	// maximum counted as PriorityMaxLimitAs), job size (fewer GPUs,
	// linearly up to PriorityJobSizeRef GPUs; a negative weight favours
	// wide jobs), and fair share.
	PriorityWeightAge       float64       `mapstructure:"priority_weight_age" json:"priority_weight_age"`
	PriorityMaxAge          time.Duration `mapstructure:"priority_max_age" json:"-"`
	PriorityAgeAfterMax     float64       `mapstructure:"priority_age_after_max" json:"priority_age_after_max"`
	PriorityMaxLimitAs      time.Duration `mapstructure:"priority_max_limit_as" json:"-"`
	PriorityMaxLimit        time.Duration `mapstructure:"priority_max_limit" json:"-"`
	PriorityWeightLength    float64       `mapstructure:"priority_weight_length" json:"priority_weight_length"`
	PriorityLengthRef       time.Duration `mapstructure:"priority_length_ref" json:"-"`
	PriorityWeightJobSize   float64       `mapstructure:"priority_weight_job_size" json:"priority_weight_job_size"`
	PriorityJobSizeRef      int           `mapstructure:"priority_job_size_ref" json:"priority_job_size_ref"`
	PriorityWeightFairshare float64       `mapstructure:"priority_weight_fairshare" json:"priority_weight_fairshare"`
	// PriorityDecayHalfLife is how fast the accounts' GPU-time used
	// fades from the fair-share factor (Slurm's PriorityDecayHalfLife).
	PriorityDecayHalfLife time.Duration `mapstructure:"priority_decay_half_life" json:"-"`
	// Preemption lets the scheduler preempt borrowers and lower-priority
	// jobs (default true); false: jobs only wait.
	Preemption bool `mapstructure:"preemption" json:"preemption"`
	// LaunchFailLimit: a job whose launch fails on its node (the node
	// could not start it; nothing of it ran) is requeued, and held after
	// this many such failures in a row (0: it fails at once, FAILED).
	// See ctld/launchfail.go.
	LaunchFailLimit int `mapstructure:"launch_fail_limit" json:"launch_fail_limit"`
}

// DefaultLaunchFailLimit is scheduler.launch_fail_limit's default: a
// job is held after its third failed launch in a row.
const DefaultLaunchFailLimit = 3

// DefaultPriorityDecayHalfLife is scheduler.priority_decay_half_life's
// default, Slurm's PriorityDecayHalfLife default (7 days).
const DefaultPriorityDecayHalfLife = 7 * 24 * time.Hour

// DefaultMinInterval is scheduler.min_interval's default: short enough
// that a job submitted to a quiet cluster starts at once, long enough
// that a storm of submissions shares passes.
const DefaultMinInterval = 20 * time.Millisecond

// maxMinInterval bounds scheduler.min_interval: beyond it triggered
// passes would be little faster than the periodic one.
const maxMinInterval = time.Second

// Bounds of the backfill settings (Slurm's).
const (
	maxBackfillMaxJobTest = 1000000
	maxBackfillResolution = time.Hour
	maxBackfillWindow     = 30 * 24 * time.Hour
)

// Backfill is the scheduler's backfill settings as the core takes them.
func (c SchedulerConfig) Backfill() sched.BackfillConfig {
	return sched.BackfillConfig{MaxJobTest: c.BackfillMaxJobTest, MaxJobUser: c.BackfillMaxJobUser,
		MaxJobPart: c.BackfillMaxJobPart, Resolution: c.BackfillResolution, Window: c.BackfillWindow,
		ReserveDepth: c.BackfillReserveDepth}
}

// Priority is the multifactor order of a pass under policy p as the
// core takes it: the configured weights under policy tide, nil (order
// by priority, then arrival) under the others.
func (c SchedulerConfig) Priority(p sched.Policy) *sched.Multifactor {
	if p != sched.PolicyTide {
		return nil
	}
	m := sched.DefaultMultifactor
	m.AgeWeight, m.MaxAge, m.AgeAfterMax = c.PriorityWeightAge, c.PriorityMaxAge, c.PriorityAgeAfterMax
	m.MaxLimitAs, m.MaxLimit = c.PriorityMaxLimitAs, c.PriorityMaxLimit
	m.LengthWeight, m.LengthRef = c.PriorityWeightLength, c.PriorityLengthRef
	m.SizeWeight, m.SizeRef = c.PriorityWeightJobSize, c.PriorityJobSizeRef
	m.FairshareWeight = c.PriorityWeightFairshare
	return &m
}

// maxPriorityWeight bounds each multifactor weight (Slurm's weights are
// 32-bit; a bound keeps sums exact in float64 and typos visible).
const maxPriorityWeight = 1e6

// validatePriority checks the multifactor settings.
func (c SchedulerConfig) validatePriority(bad func(string, ...any)) {
	for _, w := range []struct {
		key string
		v   float64
	}{{"priority_weight_age", c.PriorityWeightAge}, {"priority_weight_length", c.PriorityWeightLength},
		{"priority_weight_fairshare", c.PriorityWeightFairshare}} {
		if !(w.v >= 0 && w.v <= maxPriorityWeight) {
			bad("scheduler.%s: %v is not between 0 and %g", w.key, w.v, float64(maxPriorityWeight))
		}
	}
	// The size weight may be negative: it then favours wide jobs.
	if w := c.PriorityWeightJobSize; !(w >= -maxPriorityWeight && w <= maxPriorityWeight) {
		bad("scheduler.priority_weight_job_size: %v is not between %g and %g", w, -float64(maxPriorityWeight), float64(maxPriorityWeight))
	}
	if a := c.PriorityAgeAfterMax; !(a >= 0 && a <= 1) {
		bad("scheduler.priority_age_after_max: %v is not between 0 and 1", a)
	}
	if d := c.PriorityMaxLimitAs; d != 0 && (d < time.Minute || d > 365*24*time.Hour) {
		bad("scheduler.priority_max_limit_as: %s is not 0 (off) or between 1m and 8760h (a year)", d)
	}
	if d := c.PriorityMaxLimit; d < time.Minute || d > 365*24*time.Hour {
		bad("scheduler.priority_max_limit: %s is not between 1m and 8760h (a year)", d)
	}
	if d := c.PriorityMaxAge; d < time.Minute || d > 365*24*time.Hour {
		bad("scheduler.priority_max_age: %s is not between 1m and 8760h (a year)", d)
	}
	if d := c.PriorityDecayHalfLife; d < time.Minute || d > 365*24*time.Hour {
		bad("scheduler.priority_decay_half_life: %s is not between 1m and 8760h (a year)", d)
	}
	if d := c.PriorityLengthRef; d < 2*time.Minute || d > 365*24*time.Hour {
		bad("scheduler.priority_length_ref: %s is not between 2m and 8760h (a year)", d)
	}
	if n := c.PriorityJobSizeRef; n < 2 || n > 1<<20 {
		bad("scheduler.priority_job_size_ref: %d is not between 2 and %d GPUs", n, 1<<20)
	}
}

// validateBackfill checks the backfill settings (Slurm's bounds).
func (c SchedulerConfig) validateBackfill(bad func(string, ...any)) {
	if c.BackfillDepth != nil {
		bad("scheduler.backfill_depth: replaced by backfill_max_job_test (how many jobs a backfill pass tests, " +
			"each one that cannot start getting a reservation; default 500); for a single reservation use policy: easy")
	}
	if n := c.BackfillMaxJobTest; n < 1 || n > maxBackfillMaxJobTest {
		bad("scheduler.backfill_max_job_test: %d is not between 1 and %d", n, maxBackfillMaxJobTest)
	}
	if n := c.BackfillMaxJobUser; n < 0 || n > maxBackfillMaxJobTest {
		bad("scheduler.backfill_max_job_user: %d is not between 0 (no limit) and %d", n, maxBackfillMaxJobTest)
	}
	if n := c.BackfillMaxJobPart; n < 0 || n > maxBackfillMaxJobTest {
		bad("scheduler.backfill_max_job_part: %d is not between 0 (no limit) and %d", n, maxBackfillMaxJobTest)
	}
	if n := c.BackfillReserveDepth; n < 0 || n > maxBackfillMaxJobTest {
		bad("scheduler.backfill_reserve_depth: %d is not between 0 (the policy's default) and %d", n, maxBackfillMaxJobTest)
	}
	res := c.BackfillResolution
	if res < time.Second || res > maxBackfillResolution {
		bad("scheduler.backfill_resolution: %s is not between 1s and 1h", res)
	}
	if w := c.BackfillWindow; w < time.Minute || w > maxBackfillWindow {
		bad("scheduler.backfill_window: %s is not between 1m and 720h (30 days)", w)
	} else if w < res {
		bad("scheduler.backfill_window: %s is shorter than backfill_resolution %s", w, res)
	}
}

// DefaultMaxArraySize is max_array_size's default, Slurm's: task ids
// 0-10000.
const DefaultMaxArraySize = 10001

// Defaults and bounds of the GPU slicing settings.
const (
	// DefaultMaxGPUOversubscribe is scheduler.max_gpu_oversubscribe's
	// default: shared GPUs may be promised 20% more than they have.
	DefaultMaxGPUOversubscribe = 1.2
	// DefaultShardsPerGPU is a partition's shards_per_gpu default: a
	// --gres=shard is 1/8 of a GPU's memory.
	DefaultShardsPerGPU = 8
	// maxShardsPerGPU bounds shards_per_gpu (a shard under 1% of a GPU
	// is no unit anyone asks for).
	maxShardsPerGPU = 128
	// DefaultGPUMemHighWatermark is scheduler.gpu_mem_high_watermark's
	// default: reclaim when a shared GPU's memory is 95% used, early
	// enough that the next allocation does not fail first.
	DefaultGPUMemHighWatermark = 0.95
	// minGPUMemHighWatermark bounds the watermark from below: under half
	// the card, reclaim would preempt slices that are within their promise.
	minGPUMemHighWatermark = 0.5
)

// PartitionConfig is one partition as written.
type PartitionConfig struct {
	Name        string `mapstructure:"name" json:"name"`
	Nodes       string `mapstructure:"nodes" json:"nodes"`
	Default     bool   `mapstructure:"default" json:"default"`
	DefaultTime string `mapstructure:"default_time" json:"default_time"`
	MaxTime     string `mapstructure:"max_time" json:"max_time"`
	MaxNodes    int    `mapstructure:"max_nodes" json:"max_nodes"`
	// AllowGroups, AllowAccounts and AllowQOS (Slurm's AllowGroups,
	// AllowAccounts, AllowQos) list who may submit to the partition: a
	// user in one of the groups, a job of one of the accounts (queues)
	// and classes; empty or ALL is everybody. DenyAccounts and DenyQOS
	// refuse the ones listed instead (with its Allow list, each is an
	// error).
	AllowGroups   []string `mapstructure:"allow_groups" json:"allow_groups,omitempty"`
	AllowAccounts []string `mapstructure:"allow_accounts" json:"allow_accounts,omitempty"`
	AllowQOS      []string `mapstructure:"allow_qos" json:"allow_qos,omitempty"`
	DenyAccounts  []string `mapstructure:"deny_accounts" json:"deny_accounts,omitempty"`
	DenyQOS       []string `mapstructure:"deny_qos" json:"deny_qos,omitempty"`
	// DefCPUsPerGPU and DefMemPerGPU (Slurm's DefCpuPerGPU and
	// DefMemPerGPU) are reserved with every GPU of a job that does not
	// say, so that GPU jobs bring their CPUs and memory and CPU-heavy
	// jobs cannot strand a node's GPUs.
	DefCPUsPerGPU int    `mapstructure:"def_cpus_per_gpu" json:"def_cpus_per_gpu"`
	DefMemPerGPU  string `mapstructure:"def_mem_per_gpu" json:"def_mem_per_gpu"`
	// Comm is the default --comm of the partition's jobs (model or data).
	Comm string `mapstructure:"comm" json:"comm,omitempty"`
	// Policy places jobs: pack (default: fullest nodes and leaves first)
	// or spread (emptiest first).
	Policy string `mapstructure:"policy" json:"policy,omitempty"`
	State  string `mapstructure:"state" json:"state"`
	// GPUSlicing (default true) lets jobs take slices of shared GPUs.
	// GPUMemOversubscribe and GPUComputeOversubscribe (default 1.0, at
	// most scheduler.max_gpu_oversubscribe) are how far the slices of
	// one GPU may overcommit its memory and compute. ShardsPerGPU
	// (default 8) sizes --gres=shard: GPU memory / shards_per_gpu.
	GPUSlicing              *bool   `mapstructure:"gpu_slicing" json:"gpu_slicing,omitempty"`
	GPUMemOversubscribe     float64 `mapstructure:"gpu_mem_oversubscribe" json:"gpu_mem_oversubscribe,omitempty"`
	GPUComputeOversubscribe float64 `mapstructure:"gpu_compute_oversubscribe" json:"gpu_compute_oversubscribe,omitempty"`
	ShardsPerGPU            int     `mapstructure:"shards_per_gpu" json:"shards_per_gpu,omitempty"`
	// GPUMemHighWatermark overrides scheduler.gpu_mem_high_watermark for
	// the GPUs this partition's slices share (0 = the scheduler's). A
	// GPU shared by jobs of several partitions uses the lowest.
	GPUMemHighWatermark float64 `mapstructure:"gpu_mem_high_watermark" json:"gpu_mem_high_watermark,omitempty"`
}

// NodeConfig declares nodes and, optionally, what they must have. A node
// that registers with less is drained with a reason.
type NodeConfig struct {
	Names    string   `mapstructure:"names" json:"names"`
	CPUs     int      `mapstructure:"cpus" json:"cpus"`
	Memory   string   `mapstructure:"memory" json:"memory"`
	GPUs     int      `mapstructure:"gpus" json:"gpus"`
	Features []string `mapstructure:"features" json:"features"`
}

// TopologyConfig holds the switch tree: inline, or in a file (Slurm's
// topology.conf syntax, or YAML) that replaces the inline list.
type TopologyConfig struct {
	File     string                  `mapstructure:"file" json:"file,omitempty"`
	Switches []topology.SwitchConfig `mapstructure:"switches" json:"switches"`
}

// Default returns the built-in defaults.
func Default() Config {
	return Config{
		Version:      Version,
		ClusterName:  "tide",
		StateDir:     "/var/lib/tide/ctld",
		Socket:       "/run/tide/tidectld.sock",
		NodeAddr:     "0.0.0.0:6817",
		KeyFile:      "/etc/tide/cluster.key",
		FirstJobID:   1,
		MaxArraySize: DefaultMaxArraySize,
		LogLevel:     "info",
		Timeouts: TimeoutConfig{
			Node:      30 * time.Second,
			KillWait:  30 * time.Second,
			MinJobAge: 300 * time.Second,
			SpoolKeep: 7 * 24 * time.Hour,
		},
		Scheduler: SchedulerConfig{Interval: time.Second, MinInterval: DefaultMinInterval, MaxGPUOversubscribe: DefaultMaxGPUOversubscribe,
			GPUMemHighWatermark: DefaultGPUMemHighWatermark, Policy: sched.PolicyTide.String(),
			StarvationAge: DefaultStarvationAge, Preemption: true, LaunchFailLimit: DefaultLaunchFailLimit,
			BackfillMaxJobTest: sched.DefaultBackfillMaxJobTest, BackfillResolution: sched.DefaultBackfillResolution,
			BackfillWindow:    sched.DefaultBackfillWindow,
			PriorityWeightAge: sched.DefaultMultifactor.AgeWeight, PriorityMaxAge: sched.DefaultMultifactor.MaxAge,
			PriorityAgeAfterMax: sched.DefaultMultifactor.AgeAfterMax, PriorityMaxLimitAs: sched.DefaultMultifactor.MaxLimitAs,
			PriorityMaxLimit:     sched.DefaultMultifactor.MaxLimit,
			PriorityWeightLength: sched.DefaultMultifactor.LengthWeight, PriorityLengthRef: sched.DefaultMultifactor.LengthRef,
			PriorityWeightJobSize: sched.DefaultMultifactor.SizeWeight, PriorityJobSizeRef: sched.DefaultMultifactor.SizeRef,
			PriorityWeightFairshare: sched.DefaultMultifactor.FairshareWeight, PriorityDecayHalfLife: DefaultPriorityDecayHalfLife},
		DefaultQOS: "batch",
		Submit: SubmitConfig{RatePerQueue: DefaultSubmitRate, Buffer: DefaultSubmitBuffer,
			MaxScriptSize: DefaultMaxScriptSize, MaxEnvSize: DefaultMaxEnvSize, MaxEnvVars: DefaultMaxEnvVars},
		Limits: DefaultLimits(),
		JWT:    JWTConfig{MaxLifespan: DefaultJWTMaxLifespan},
		Munge:  MungeConfig{Socket: DefaultMungeSocket},
		TLS:    TLSConfig{Mode: TLSAuto, CertValidity: DefaultCertValidity},
		// jobusage.go
		JobUsage: DefaultJobUsage(),
		HA:       HAConfig{LeaseTTL: DefaultLeaseTTL},
	}
}

// Load reads a YAML config file over the defaults, then TIDECTLD_*
// environment variables. Unknown keys are errors.
func Load(path string) (Config, error) {
	var data []byte
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("read config: %w", err)
		}
		data = b
	}
	cfg, err := Parse(bytes.NewReader(data))
	if err != nil {
		if path != "" {
			return Config{}, fmt.Errorf("config %s: %w", path, err)
		}
		return Config{}, err
	}
	if path != "" {
		cfg.resolvePaths(filepath.Dir(path))
	}
	return cfg, nil
}

// Parse reads YAML from r over the defaults and the environment.
func Parse(r io.Reader) (Config, error) {
	v := viper.New()
	v.SetConfigType("yaml")
	v.SetEnvPrefix("TIDECTLD")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	def := Default()
	for k, val := range map[string]any{
		"version": def.Version, "cluster_name": def.ClusterName, "state_dir": def.StateDir, "store": def.Store,
		"socket": def.Socket, "node_addr": def.NodeAddr, "key_file": def.KeyFile,
		"first_job_id": def.FirstJobID, "log_level": def.LogLevel, "allow_root_jobs": false,
		"max_array_size":     def.MaxArraySize,
		"ha.controller_name": "", "ha.lease_ttl": def.HA.LeaseTTL,
		"timeouts.node": def.Timeouts.Node, "timeouts.kill_wait": def.Timeouts.KillWait,
		"timeouts.min_job_age": def.Timeouts.MinJobAge, "timeouts.spool_keep": def.Timeouts.SpoolKeep,
		"scheduler.interval": def.Scheduler.Interval, "scheduler.min_interval": def.Scheduler.MinInterval, "scheduler.max_starts": 0,
		"scheduler.def_mem_per_cpu_mb": 0, "scheduler.max_gpu_oversubscribe": def.Scheduler.MaxGPUOversubscribe,
		"scheduler.gpu_mem_high_watermark":    def.Scheduler.GPUMemHighWatermark,
		"scheduler.policy":                    def.Scheduler.Policy,
		"scheduler.starvation_age":            def.Scheduler.StarvationAge,
		"scheduler.backfill_max_job_test":     def.Scheduler.BackfillMaxJobTest,
		"scheduler.backfill_max_job_user":     0,
		"scheduler.backfill_max_job_part":     0,
		"scheduler.backfill_reserve_depth":    0,
		"scheduler.backfill_resolution":       def.Scheduler.BackfillResolution,
		"scheduler.backfill_window":           def.Scheduler.BackfillWindow,
		"scheduler.priority_weight_age":       def.Scheduler.PriorityWeightAge,
		"scheduler.priority_max_age":          def.Scheduler.PriorityMaxAge,
		"scheduler.priority_age_after_max":    def.Scheduler.PriorityAgeAfterMax,
		"scheduler.priority_max_limit_as":     def.Scheduler.PriorityMaxLimitAs,
		"scheduler.priority_max_limit":        def.Scheduler.PriorityMaxLimit,
		"scheduler.priority_decay_half_life":  def.Scheduler.PriorityDecayHalfLife,
		"scheduler.priority_weight_length":    def.Scheduler.PriorityWeightLength,
		"scheduler.priority_length_ref":       def.Scheduler.PriorityLengthRef,
		"scheduler.priority_weight_job_size":  def.Scheduler.PriorityWeightJobSize,
		"scheduler.priority_job_size_ref":     def.Scheduler.PriorityJobSizeRef,
		"scheduler.priority_weight_fairshare": def.Scheduler.PriorityWeightFairshare,
		"scheduler.preemption":                def.Scheduler.Preemption,
		"scheduler.launch_fail_limit":         def.Scheduler.LaunchFailLimit,
		"default_qos":                         def.DefaultQOS,
		"submit.rate_per_queue":               def.Submit.RatePerQueue,
		"submit.rate_per_user":                def.Submit.RatePerUser,
		"submit.buffer":                       def.Submit.Buffer,
		"submit.max_script_size":              def.Submit.MaxScriptSize,
		"submit.max_env_size":                 def.Submit.MaxEnvSize,
		"submit.max_env_vars":                 def.Submit.MaxEnvVars,
	} {
		v.SetDefault(k, val)
	}
	for k, val := range limitsDefaults(def.Limits) {
		v.SetDefault(k, val)
	}
	for k, val := range authDefaults(def) {
		v.SetDefault(k, val)
	}
	for k, val := range tlsDefaults(def) {
		v.SetDefault(k, val)
	}
	for k, val := range jobUsageDefaults(def.JobUsage) {
		v.SetDefault(k, val)
	}
	if err := v.ReadConfig(r); err != nil {
		return Config{}, fmt.Errorf("parse YAML: %w", err)
	}
	var cfg Config
	if err := v.UnmarshalExact(&cfg); err != nil {
		return Config{}, fmt.Errorf("%w", err)
	}
	return cfg, nil
}

// resolvePaths makes relative paths relative to the config file's folder.
func (c *Config) resolvePaths(dir string) {
	for _, p := range []*string{&c.StateDir, &c.Socket, &c.KeyFile, &c.Topology.File, &c.JWT.KeyFile, &c.Munge.Socket} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// Cluster is a validated, expanded configuration: what the controller
// runs with.
type Cluster struct {
	Config
	Partitions   []api.Partition
	DefaultPart  string
	NodeOrder    []string
	NodeDecl     map[string]NodeConfig
	NodeMemoryMB map[string]int64
	Tree         *topology.Tree
	// Policy is scheduler.policy, parsed once.
	Policy sched.Policy
	// Sharing holds the validated queues and job classes.
	Sharing Sharing
	// Private is private_data, parsed once.
	Private PrivateData
}

// Validate checks the config and expands node lists. It reports every
// problem at once.
func (c Config) Validate() (*Cluster, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Version != Version {
		bad("version: %d is not supported (this tidectld reads version %d)", c.Version, Version)
	}
	if c.ClusterName == "" {
		bad("cluster_name: must not be empty")
	}
	if c.StateDir == "" {
		bad("state_dir: must not be empty")
	}
	if err := validateStore(c.Store); err != nil {
		errs = append(errs, err)
	} else if c.ClusterName != "" && isPostgresStore(c.Store) {
		// The store keeps the cluster's rows in a schema named after
		// it: check the name now rather than at the controller's start.
		if _, err := api.ClusterSchema(c.ClusterName); err != nil {
			bad("%v", err)
		}
	}
	if c.Socket == "" {
		bad("socket: must not be empty")
	}
	if c.NodeAddr == "" {
		bad("node_addr: must not be empty")
	}
	if c.FirstJobID == 0 {
		bad("first_job_id: must be at least 1")
	}
	if c.MaxArraySize < 1 || c.MaxArraySize > api.MaxArrayTaskLimit {
		bad("max_array_size: %d is not between 1 and %d", c.MaxArraySize, api.MaxArrayTaskLimit)
	}
	if c.Timeouts.Node < time.Second {
		bad("timeouts.node: %s is too short (at least 1s)", c.Timeouts.Node)
	}
	if c.Timeouts.KillWait < 0 {
		bad("timeouts.kill_wait: must not be negative")
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		bad("log_level: %q is not debug, info, warn or error", c.LogLevel)
	}
	if c.Scheduler.Interval <= 0 {
		bad("scheduler.interval: must be positive")
	}
	if d := c.Scheduler.MinInterval; d < 0 || d > maxMinInterval {
		bad("scheduler.min_interval: %s is not between 0 (no throttle) and %s", d, maxMinInterval)
	}
	if c.Scheduler.MaxGPUOversubscribe < 1 {
		bad("scheduler.max_gpu_oversubscribe: %g is below 1.0", c.Scheduler.MaxGPUOversubscribe)
	}
	if w := c.Scheduler.GPUMemHighWatermark; !watermarkOK(w) {
		bad("scheduler.gpu_mem_high_watermark: %g is not between %g and 1.0", w, minGPUMemHighWatermark)
	}
	if c.Scheduler.LaunchFailLimit < 0 {
		bad("scheduler.launch_fail_limit: %d must not be negative", c.Scheduler.LaunchFailLimit)
	}
	policy, perr := sched.ParsePolicy(c.Scheduler.Policy)
	if perr != nil {
		bad("scheduler.policy: %q is not tide, priority, fifo, backfill or easy", c.Scheduler.Policy)
	}
	c.Scheduler.validateBackfill(bad)
	c.Scheduler.validatePriority(bad)
	cl := &Cluster{Config: c, NodeDecl: map[string]NodeConfig{}, NodeMemoryMB: map[string]int64{}, Policy: policy}
	for i, n := range c.Nodes {
		names, err := hostlist.Expand(n.Names)
		if err != nil || len(names) == 0 {
			bad("nodes[%d].names: %q is not a valid hostlist: %v", i, n.Names, err)
			continue
		}
		var mem int64
		if n.Memory != "" {
			if mem, err = api.ParseMemMB(n.Memory); err != nil {
				bad("nodes[%d].memory: %v", i, err)
			}
		}
		if n.CPUs < 0 || n.GPUs < 0 {
			bad("nodes[%d]: cpus and gpus must not be negative", i)
		}
		for _, name := range names {
			if _, dup := cl.NodeDecl[name]; dup {
				bad("nodes[%d]: node %s declared twice", i, name)
				continue
			}
			cl.NodeDecl[name] = n
			cl.NodeMemoryMB[name] = mem
			cl.NodeOrder = append(cl.NodeOrder, name)
		}
	}
	if len(c.Partition) == 0 {
		bad("partitions: at least one partition is needed")
	}
	seen := map[string]bool{}
	for i, p := range c.Partition {
		if p.Name == "" {
			bad("partitions[%d].name: must not be empty", i)
			continue
		}
		if seen[p.Name] {
			bad("partitions[%d]: partition %s defined twice", i, p.Name)
		}
		seen[p.Name] = true
		nodes, err := hostlist.Expand(p.Nodes)
		if err != nil {
			bad("partitions[%d] (%s).nodes: %v", i, p.Name, err)
		}
		for _, n := range nodes {
			if _, ok := cl.NodeDecl[n]; !ok {
				bad("partition %s names node %s, which is not declared under nodes", p.Name, n)
			}
		}
		part := api.Partition{Name: p.Name, NodesExpr: p.Nodes, Nodes: nodes, Default: p.Default,
			DefaultTime: api.Infinite, MaxTime: api.Infinite, MaxNodes: p.MaxNodes, State: "UP",
			DefCPUsPerGPU: p.DefCPUsPerGPU, Comm: p.Comm}
		switch p.Comm {
		case "", "model", "data":
		default:
			bad("partition %s comm: %q is not model or data", p.Name, p.Comm)
		}
		switch p.Policy {
		case "", "pack":
		case "spread":
			part.Spread = true
		default:
			bad("partition %s policy: %q is not pack or spread", p.Name, p.Policy)
		}
		if p.DefCPUsPerGPU < 0 {
			bad("partition %s def_cpus_per_gpu: must not be negative", p.Name)
		}
		if p.DefMemPerGPU != "" {
			if part.DefMemPerGPUMB, err = api.ParseMemMB(p.DefMemPerGPU); err != nil {
				bad("partition %s def_mem_per_gpu: %v", p.Name, err)
			}
		}
		if p.DefaultTime != "" {
			if part.DefaultTime, err = api.ParseTimeLimit(p.DefaultTime); err != nil {
				bad("partition %s default_time: %v", p.Name, err)
			}
		}
		if p.MaxTime != "" {
			if part.MaxTime, err = api.ParseTimeLimit(p.MaxTime); err != nil {
				bad("partition %s max_time: %v", p.Name, err)
			}
		}
		switch strings.ToUpper(p.State) {
		case "", "UP":
		case "DOWN", "DRAIN", "INACTIVE":
			part.State = strings.ToUpper(p.State)
		default:
			bad("partition %s state: %q is not UP, DOWN, DRAIN or INACTIVE", p.Name, p.State)
		}
		if p.MaxNodes < 0 {
			bad("partition %s max_nodes: must not be negative", p.Name)
		}
		part.Access = partitionAccess(p, bad)
		errs = append(errs, setSlicing(&part, p, c.Scheduler.MaxGPUOversubscribe)...)
		part.GPUMemHighWatermark = c.Scheduler.GPUMemHighWatermark
		if w := p.GPUMemHighWatermark; w != 0 {
			part.GPUMemHighWatermark = w
			if !watermarkOK(w) {
				bad("partition %s gpu_mem_high_watermark: %g is not between %g and 1.0", p.Name, w, minGPUMemHighWatermark)
			}
		}
		if p.Default {
			if cl.DefaultPart != "" {
				bad("partitions: both %s and %s are marked default", cl.DefaultPart, p.Name)
			}
			cl.DefaultPart = p.Name
		}
		cl.Partitions = append(cl.Partitions, part)
	}
	if cl.DefaultPart == "" && len(cl.Partitions) > 0 {
		// Slurm takes the first partition when none is marked default.
		cl.DefaultPart = cl.Partitions[0].Name
		cl.Partitions[0].Default = true
	}
	known := map[string]bool{}
	for n := range cl.NodeDecl {
		known[n] = true
	}
	var tree *topology.Tree
	var err error
	if c.Topology.File != "" {
		if len(c.Topology.Switches) > 0 {
			bad("topology: give either file or switches, not both")
		}
		tree, err = topology.LoadFile(c.Topology.File, known)
	} else {
		tree, err = topology.Build(c.Topology.Switches, known)
	}
	if err != nil {
		errs = append(errs, err)
	}
	cl.Tree = tree
	c.validateSharing(cl, bad)
	c.validateLimits(bad)
	c.validateAuth(bad)
	c.validateTLS(bad)
	c.validatePrivacy(cl, bad)
	c.validateJobUsage(bad)
	c.HA.validate(bad)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cl, nil
}

// setSlicing fills part's GPU slicing settings from its config, with
// defaults, and returns what is wrong with them: ratios must be positive
// and at most the controller's cap, shards_per_gpu between 1 and 128.
func setSlicing(part *api.Partition, p PartitionConfig, maxRatio float64) []error {
	var errs []error
	part.GPUSlicing = p.GPUSlicing == nil || *p.GPUSlicing
	part.ShardsPerGPU = p.ShardsPerGPU
	if part.ShardsPerGPU == 0 {
		part.ShardsPerGPU = DefaultShardsPerGPU
	}
	if part.ShardsPerGPU < 1 || part.ShardsPerGPU > maxShardsPerGPU {
		errs = append(errs, fmt.Errorf("partition %s shards_per_gpu: %d is not between 1 and %d", p.Name, p.ShardsPerGPU, maxShardsPerGPU))
	}
	for _, r := range []struct {
		key string
		in  float64
		out *float64
	}{
		{"gpu_mem_oversubscribe", p.GPUMemOversubscribe, &part.GPUMemOversubscribe},
		{"gpu_compute_oversubscribe", p.GPUComputeOversubscribe, &part.GPUComputeOversubscribe},
	} {
		switch {
		case r.in == 0:
			*r.out = 1
		case r.in < 0:
			errs = append(errs, fmt.Errorf("partition %s %s: %g must be positive", p.Name, r.key, r.in))
		case r.in > maxRatio:
			errs = append(errs, fmt.Errorf("partition %s %s: %g is above scheduler.max_gpu_oversubscribe (%g); raise that cap first if you mean it",
				p.Name, r.key, r.in, maxRatio))
		default:
			*r.out = r.in
		}
	}
	return errs
}

// watermarkOK reports whether w is a usable high watermark.
func watermarkOK(w float64) bool {
	return w >= minGPUMemHighWatermark && w <= 1
}
