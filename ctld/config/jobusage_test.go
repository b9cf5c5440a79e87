package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestJobUsageConfig(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		env       map[string]string
		want      JobUsageConfig
		wantError []string
	}{
		{name: "defaults", want: DefaultJobUsage()},
		{name: "set", yaml: `
job_usage:
  interval: 10s
  points: 128
  keep: 2h
  idle_gpu_threshold: 2.5
  idle_gpu_after: 20m
  idle_gpu_hook: /usr/local/sbin/tide-idle-gpu
  idle_gpu_hook_timeout: 5s
`, want: JobUsageConfig{Interval: 10 * time.Second, Points: 128, Keep: 2 * time.Hour, IdleGPUThreshold: 2.5,
			IdleGPUAfter: 20 * time.Minute, IdleGPUHook: "/usr/local/sbin/tide-idle-gpu", IdleGPUHookTimeout: 5 * time.Second}},
		{name: "environment", env: map[string]string{"TIDECTLD_JOB_USAGE_IDLE_GPU_AFTER": "45m"},
			want: func() JobUsageConfig { u := DefaultJobUsage(); u.IdleGPUAfter = 45 * time.Minute; return u }()},
		{name: "off", yaml: "job_usage: {interval: 0s, idle_gpu_after: 0s}\n",
			want: func() JobUsageConfig { u := DefaultJobUsage(); u.Interval, u.IdleGPUAfter = 0, 0; return u }()},
		{name: "bad values", yaml: `
job_usage: {interval: 100ms, points: 2, keep: -1s, idle_gpu_threshold: 120, idle_gpu_hook: hooks/idle.sh, idle_gpu_hook_timeout: 1h}
`, wantError: []string{"job_usage.interval: 100ms is not 0 (off) or between 1s and 1h", "job_usage.points: 2 is not between 8 and 4096",
			"job_usage.keep: -1s", "job_usage.idle_gpu_threshold: 120 is not a percentage",
			`job_usage.idle_gpu_hook: "hooks/idle.sh" is not an absolute path`, "job_usage.idle_gpu_hook_timeout: 1h0m0s"}},
		{name: "idle flag without samples", yaml: "job_usage: {interval: 0s}\n",
			wantError: []string{"job_usage.idle_gpu_after: 1h0m0s needs job_usage.interval"}},
		{name: "idle flag shorter than the interval", yaml: "job_usage: {interval: 1m, idle_gpu_after: 30s}\n",
			wantError: []string{"job_usage.idle_gpu_after: 30s is shorter than job_usage.interval 1m0s"}},
		{name: "hook that never runs", yaml: "job_usage: {idle_gpu_after: 0s, idle_gpu_hook: /bin/true}\n",
			wantError: []string{`job_usage.idle_gpu_hook: "/bin/true" would never run`}},
		{name: "negative idle time", yaml: "job_usage: {idle_gpu_after: -5m}\n",
			wantError: []string{"job_usage.idle_gpu_after: -5m0s is negative"}},
		{name: "unknown key", yaml: "job_usage: {idle_threshold: 3}\n", wantError: []string{"idle_threshold"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cfg, err := Parse(strings.NewReader(limitsBase + tt.yaml))
			var cl *Cluster
			if err == nil {
				cl, err = cfg.Validate()
			}
			if len(tt.wantError) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tt.wantError {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, cl.JobUsage); diff != "" {
				t.Errorf("job_usage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJobUsageDumpDurations(t *testing.T) {
	b, err := json.Marshal(DefaultJobUsage())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"interval":"30s"`, `"points":64`, `"keep":"1h0m0s"`, `"idle_gpu_threshold":5`,
		`"idle_gpu_after":"1h0m0s"`, `"idle_gpu_hook":""`, `"idle_gpu_hook_timeout":"30s"`} {
		if !strings.Contains(string(b), w) {
			t.Errorf("%s lacks %s", b, w)
		}
	}
}
