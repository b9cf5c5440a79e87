package config

import (
	"encoding/json"
	"path/filepath"
	"time"
)

// Defaults and bounds of job_usage.* (issue 25): the usage series the
// controller keeps of each running job, and the idle-GPU flag.
const (
	// DefaultJobUsageInterval is job_usage.interval: one sample of every
	// running job per node heartbeat or so, as tided's default
	// acct_gather_frequency (30s) refreshes CPU and memory.
	DefaultJobUsageInterval = 30 * time.Second
	// DefaultJobUsagePoints is job_usage.points: the points kept per job
	// (about 1.8 KiB); older points merge pairwise when it fills, so a
	// series covers the job's whole run at a coarser step.
	DefaultJobUsagePoints = 64
	// DefaultJobUsageKeep is job_usage.keep: how long a finished job's
	// series stays in memory.
	DefaultJobUsageKeep = time.Hour
	// DefaultIdleGPUThreshold is job_usage.idle_gpu_threshold: a job
	// whose GPUs' mean utilisation is under it (percent) is idle.
	DefaultIdleGPUThreshold = 5.0
	// DefaultIdleGPUAfter is job_usage.idle_gpu_after: a job idle this
	// long is flagged.
	DefaultIdleGPUAfter = time.Hour
	// DefaultIdleGPUHookTimeout is job_usage.idle_gpu_hook_timeout.
	DefaultIdleGPUHookTimeout = 30 * time.Second

	minJobUsagePoints = 8
	maxJobUsagePoints = 4096
)

// JobUsageConfig is job_usage.*: the usage series the controller keeps
// of each running job (GPU utilisation and memory from the nodes'
// heartbeats, CPU and resident memory from tided's samples), for the
// API, scontrol show job -d, the dashboard and the per-job metrics; and
// the flag on jobs that hold GPUs without using them.
type JobUsageConfig struct {
	// Interval is how often every running job is sampled (0: no series,
	// no per-job metrics, no idle flag).
	Interval time.Duration `mapstructure:"interval" json:"-"`
	// Points bounds the points kept per job: when they are all used,
	// neighbours merge pairwise and each point covers twice the time.
	Points int `mapstructure:"points" json:"points"`
	// Keep is how long a finished job's series stays in memory.
	Keep time.Duration `mapstructure:"keep" json:"-"`
	// IdleGPUThreshold (percent) and IdleGPUAfter: a running job whose
	// GPUs' mean utilisation stayed under the threshold for
	// IdleGPUAfter is flagged (an idle_gpu event, a metric, the hook).
	// IdleGPUAfter 0: never.
	IdleGPUThreshold float64       `mapstructure:"idle_gpu_threshold" json:"idle_gpu_threshold"`
	IdleGPUAfter     time.Duration `mapstructure:"idle_gpu_after" json:"-"`
	// IdleGPUHook is an executable the controller runs, as its own user,
	// for each flagged job, the job's facts in its environment and
	// nothing in its arguments; killed after IdleGPUHookTimeout.
	IdleGPUHook        string        `mapstructure:"idle_gpu_hook" json:"idle_gpu_hook"`
	IdleGPUHookTimeout time.Duration `mapstructure:"idle_gpu_hook_timeout" json:"-"`
}

// DefaultJobUsage returns job_usage.*'s defaults.
func DefaultJobUsage() JobUsageConfig {
	return JobUsageConfig{Interval: DefaultJobUsageInterval, Points: DefaultJobUsagePoints, Keep: DefaultJobUsageKeep,
		IdleGPUThreshold: DefaultIdleGPUThreshold, IdleGPUAfter: DefaultIdleGPUAfter,
		IdleGPUHookTimeout: DefaultIdleGPUHookTimeout}
}

// jobUsageDefaults are the viper defaults of job_usage.* (a key viper
// does not know is not read from the environment).
func jobUsageDefaults(u JobUsageConfig) map[string]any {
	return map[string]any{
		"job_usage.interval":              u.Interval,
		"job_usage.points":                u.Points,
		"job_usage.keep":                  u.Keep,
		"job_usage.idle_gpu_threshold":    u.IdleGPUThreshold,
		"job_usage.idle_gpu_after":        u.IdleGPUAfter,
		"job_usage.idle_gpu_hook":         u.IdleGPUHook,
		"job_usage.idle_gpu_hook_timeout": u.IdleGPUHookTimeout,
	}
}

// MarshalJSON prints durations as "30s" rather than nanoseconds, for
// `tidectld config dump`.
func (u JobUsageConfig) MarshalJSON() ([]byte, error) {
	type plain JobUsageConfig
	return json.Marshal(struct {
		plain
		Interval           string `json:"interval"`
		Keep               string `json:"keep"`
		IdleGPUAfter       string `json:"idle_gpu_after"`
		IdleGPUHookTimeout string `json:"idle_gpu_hook_timeout"`
	}{plain(u), u.Interval.String(), u.Keep.String(), u.IdleGPUAfter.String(), u.IdleGPUHookTimeout.String()})
}

// validateJobUsage checks job_usage.*.
func (c Config) validateJobUsage(bad func(string, ...any)) {
	u := c.JobUsage
	if u.Interval != 0 && (u.Interval < time.Second || u.Interval > time.Hour) {
		bad("job_usage.interval: %s is not 0 (off) or between 1s and 1h", u.Interval)
	}
	if u.Points < minJobUsagePoints || u.Points > maxJobUsagePoints {
		bad("job_usage.points: %d is not between %d and %d", u.Points, minJobUsagePoints, maxJobUsagePoints)
	}
	if u.Keep < 0 || u.Keep > 7*24*time.Hour {
		bad("job_usage.keep: %s is not between 0 and 168h", u.Keep)
	}
	if !(u.IdleGPUThreshold >= 0 && u.IdleGPUThreshold <= 100) {
		bad("job_usage.idle_gpu_threshold: %v is not a percentage between 0 and 100", u.IdleGPUThreshold)
	}
	switch {
	case u.IdleGPUAfter < 0:
		bad("job_usage.idle_gpu_after: %s is negative (0 turns the idle-GPU flag off)", u.IdleGPUAfter)
	case u.IdleGPUAfter > 0 && u.Interval == 0:
		bad("job_usage.idle_gpu_after: %s needs job_usage.interval (0, no samples to judge by); set idle_gpu_after: 0 to turn the flag off", u.IdleGPUAfter)
	case u.IdleGPUAfter > 0 && u.IdleGPUAfter < u.Interval:
		bad("job_usage.idle_gpu_after: %s is shorter than job_usage.interval %s", u.IdleGPUAfter, u.Interval)
	}
	if u.IdleGPUHook != "" {
		if !filepath.IsAbs(u.IdleGPUHook) {
			bad("job_usage.idle_gpu_hook: %q is not an absolute path", u.IdleGPUHook)
		}
		if u.IdleGPUAfter == 0 {
			bad("job_usage.idle_gpu_hook: %q would never run: job_usage.idle_gpu_after is 0 (the flag is off)", u.IdleGPUHook)
		}
	}
	if u.IdleGPUHookTimeout < time.Second || u.IdleGPUHookTimeout > 10*time.Minute {
		bad("job_usage.idle_gpu_hook_timeout: %s is not between 1s and 10m", u.IdleGPUHookTimeout)
	}
}
