package ctld

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/config"
	"github.com/tide-hpc/tide/ctld/sched"
)

// reconfBase is the configuration the reload tests start from: two
// partitions, two queues and a class of their own.
const reconfBase = testConfigHeader + `partitions:
  - {name: gpu, nodes: "gpu[01-02]", default: true, default_time: "10:00", max_time: "1:00:00"}
  - {name: short, nodes: "gpu01", max_time: "30:00"}
nodes:
  - {names: "gpu[01-02]", cpus: 8, memory: 64G, gpus: 8}
queues:
  - {name: ml}
  - {name: vision}
qos:
  - {name: big, min_level: 2, max_level: 8}
`

// reconfRoot is root asking, as `scontrol reconfigure` does.
var reconfRoot = caller{uid: 0, gid: 0, user: "root", admin: true, known: true}

// reconfHarness is a harness whose server reloads from a file.
type reconfHarness struct {
	*harness
	path  string
	level *slog.LevelVar
}

func newReconfHarness(t *testing.T, yaml string) *reconfHarness {
	t.Helper()
	h := &reconfHarness{harness: newHarnessWith(t, yaml), path: filepath.Join(t.TempDir(), "tide.yaml"), level: new(slog.LevelVar)}
	h.write(yaml)
	h.s.EnableReconfigure(h.path, func() (Config, error) { return LoadConfig(h.path) }, h.level)
	return h
}

func (h *reconfHarness) write(yaml string) {
	h.t.Helper()
	if err := os.WriteFile(h.path, []byte(yaml), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// reload writes yaml and reloads it as root.
func (h *reconfHarness) reload(yaml string) (api.ReconfigureResponse, error) {
	h.t.Helper()
	h.write(yaml)
	return h.s.reconfigure(reconfRoot, "test")
}

// running is what a reload may change, to compare before and after a
// refused one.
func (h *reconfHarness) running() (Config, []string) {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	var parts []string
	for name := range h.s.partitions {
		parts = append(parts, name)
	}
	slices.Sort(parts)
	return h.s.cl.Config, parts
}

// edit replaces old in yaml, which must hold it once.
func edit(t *testing.T, yaml, old, new string) string {
	t.Helper()
	if strings.Count(yaml, old) != 1 {
		t.Fatalf("the test's base config holds %q %d times", old, strings.Count(yaml, old))
	}
	return strings.Replace(yaml, old, new, 1)
}

func TestReconfigureKeysClassified(t *testing.T) {
	typ := reflect.TypeFor[Config]()
	seen := map[string]bool{}
	for i := range typ.NumField() {
		key, _, _ := strings.Cut(typ.Field(i).Tag.Get("mapstructure"), ",")
		seen[key] = true
		_, reload := reloaders[key]
		if restart := slices.Contains(restartOnly, key); reload == restart {
			t.Errorf("config key %s: reloadable %v, restart-only %v; it must be exactly one", key, reload, restart)
		}
	}
	for key := range reloaders {
		if !seen[key] {
			t.Errorf("reloaders names %s, which is not a key of Config", key)
		}
	}
	for _, key := range restartOnly {
		if !seen[key] {
			t.Errorf("restartOnly names %s, which is not a key of Config", key)
		}
	}
}

// TestReconfigureApplies changes one reloadable setting per case: the
// reload names it, the running configuration is then the file's, and
// the setting has its effect.
func TestReconfigureApplies(t *testing.T) {
	submit := func(h *reconfHarness, spec api.JobSpec) (*api.Job, error) {
		h.t.Helper()
		resp, err := h.submitAs(h.alice, spec)
		if err != nil {
			return nil, err
		}
		return h.job(resp.JobID), nil
	}
	mustSubmit := func(h *reconfHarness, spec api.JobSpec) *api.Job {
		h.t.Helper()
		j, err := submit(h, spec)
		if err != nil {
			h.t.Fatalf("submit %+v: %v", spec, err)
		}
		return j
	}
	nodeParts := func(h *reconfHarness, node string) []string {
		h.s.mu.Lock()
		defer h.s.mu.Unlock()
		return h.s.nodes[node].Partitions
	}
	tests := []struct {
		name string
		yaml func(t *testing.T) string
		// key is the change the reload must report (a prefix of it).
		key   string
		check func(t *testing.T, h *reconfHarness)
	}{
		{
			name: "partition default_time",
			yaml: func(t *testing.T) string {
				return edit(t, reconfBase, `default_time: "10:00"`, `default_time: "20:00"`)
			},
			key: "partitions[gpu].default_time",
			check: func(t *testing.T, h *reconfHarness) {
				if j := mustSubmit(h, api.JobSpec{GPUs: 1}); j.TimeLimit != 1200 {
					t.Errorf("new job's time limit %d s, want the new default 1200", j.TimeLimit)
				}
			},
		},
		{
			name: "partition added",
			yaml: func(t *testing.T) string {
				return edit(t, reconfBase, `max_time: "30:00"}`, `max_time: "30:00"}`+"\n"+`  - {name: debug, nodes: "gpu02", max_time: "5:00"}`)
			},
			key: "partitions[debug]",
			check: func(t *testing.T, h *reconfHarness) {
				if j := mustSubmit(h, api.JobSpec{GPUs: 1, Partition: "debug"}); j.Partition != "debug" {
					t.Errorf("job in partition %q, want debug", j.Partition)
				}
				if got := nodeParts(h, "gpu02"); !slices.Equal(got, []string{"gpu", "debug"}) {
					t.Errorf("gpu02 is in partitions %v, want [gpu debug]", got)
				}
			},
		},
		{
			name: "partition without jobs removed",
			yaml: func(t *testing.T) string {
				return edit(t, reconfBase, `  - {name: short, nodes: "gpu01", max_time: "30:00"}`+"\n", "")
			},
			key: "partitions[short]",
			check: func(t *testing.T, h *reconfHarness) {
				if _, err := submit(h, api.JobSpec{GPUs: 1, Partition: "short"}); err == nil || !strings.Contains(err.Error(), "invalid partition specified: short") {
					t.Errorf("submit to the removed partition: %v, want invalid partition", err)
				}
				if got := nodeParts(h, "gpu01"); !slices.Equal(got, []string{"gpu"}) {
					t.Errorf("gpu01 is in partitions %v, want [gpu]", got)
				}
			},
		},
		{
			name: "partition nodes",
			yaml: func(t *testing.T) string {
				return edit(t, reconfBase, `{name: short, nodes: "gpu01"`, `{name: short, nodes: "gpu[01-02]"`)
			},
			key: "partitions[short].nodes",
			check: func(t *testing.T, h *reconfHarness) {
				if got := nodeParts(h, "gpu02"); !slices.Equal(got, []string{"gpu", "short"}) {
					t.Errorf("gpu02 is in partitions %v, want [gpu short]", got)
				}
			},
		},
		{
			name: "partition max_time",
			yaml: func(t *testing.T) string { return edit(t, reconfBase, `max_time: "30:00"`, `max_time: "10:00"`) },
			key:  "partitions[short].max_time",
			check: func(t *testing.T, h *reconfHarness) {
				h.register("gpu01")
				h.register("gpu02")
				j := mustSubmit(h, api.JobSpec{GPUs: 1, Partition: "short", TimeLimit: 1200})
				h.s.schedulePass()
				if j = h.job(j.ID); j.State != api.StatePending || j.Reason != api.ReasonPartitionTimeLimit {
					t.Errorf("20-minute job in short (max 10): %s %s, want PENDING PartitionTimeLimit", j.State, j.Reason)
				}
			},
		},
		{
			name: "scheduler policy",
			yaml: func(*testing.T) string { return reconfBase + "scheduler: {policy: backfill}\n" },
			key:  "scheduler.policy",
			check: func(t *testing.T, h *reconfHarness) {
				if p := h.s.schedConfig().Policy; p != sched.PolicyBackfill {
					t.Errorf("pass policy %v, want backfill", p)
				}
				if got := h.s.configSummary()["SchedulerType"]; got != "sched/backfill" {
					t.Errorf("show config SchedulerType %q, want sched/backfill", got)
				}
			},
		},
		{
			name: "scheduler interval",
			yaml: func(*testing.T) string { return reconfBase + "scheduler: {interval: 7s}\n" },
			key:  "scheduler.interval",
			check: func(t *testing.T, h *reconfHarness) {
				h.s.mu.Lock()
				iv, _ := h.s.loopSettings()
				h.s.mu.Unlock()
				if iv != 7*time.Second {
					t.Errorf("loop interval %s, want 7s", iv)
				}
			},
		},
		{
			name: "scheduler preemption and default memory",
			yaml: func(*testing.T) string {
				return reconfBase + "scheduler: {preemption: false, def_mem_per_cpu_mb: 2048}\n"
			},
			key: "scheduler.",
			check: func(t *testing.T, h *reconfHarness) {
				if c := h.s.schedConfig(); !c.NoPreemption || c.DefMemPerCPUMB != 2048 {
					t.Errorf("pass config NoPreemption %v DefMemPerCPUMB %d, want true 2048", c.NoPreemption, c.DefMemPerCPUMB)
				}
				if got := h.s.configSummary()["DefMemPerCPU"]; got != "2048" {
					t.Errorf("show config DefMemPerCPU %q, want 2048", got)
				}
			},
		},
		{
			name: "timeouts",
			yaml: func(t *testing.T) string { return edit(t, reconfBase, "kill_wait: 5s", "kill_wait: 9s") },
			key:  "timeouts.kill_wait",
			check: func(t *testing.T, h *reconfHarness) {
				if got := h.s.configSummary()["KillWait"]; got != "9 sec" {
					t.Errorf("show config KillWait %q, want 9 sec", got)
				}
			},
		},
		{
			name: "queue limit",
			yaml: func(t *testing.T) string {
				return edit(t, reconfBase, "- {name: ml}", "- {name: ml, max_submit_per_user: 1}")
			},
			key: "queues[ml].max_submit_per_user",
			check: func(t *testing.T, h *reconfHarness) {
				mustSubmit(h, api.JobSpec{GPUs: 1, Account: "ml"})
				if _, err := submit(h, api.JobSpec{GPUs: 1, Account: "ml"}); err == nil || !strings.Contains(err.Error(), "MaxSubmitJobs") {
					t.Errorf("second job in ml (max_submit_per_user 1): %v, want MaxSubmitJobs", err)
				}
			},
		},
		{
			name: "queue added",
			yaml: func(t *testing.T) string {
				return edit(t, reconfBase, "- {name: vision}", "- {name: vision}\n  - {name: nlp}")
			},
			key: "queues[nlp]",
			check: func(t *testing.T, h *reconfHarness) {
				if j := mustSubmit(h, api.JobSpec{GPUs: 1, Account: "nlp"}); j.Account != "nlp" {
					t.Errorf("job in queue %q, want nlp", j.Account)
				}
			},
		},
		{
			name: "qos added and default_qos",
			yaml: func(t *testing.T) string {
				return edit(t, reconfBase, "max_level: 8}", "max_level: 8}\n  - {name: tiny}") + "default_qos: big\n"
			},
			key: "qos[tiny]",
			check: func(t *testing.T, h *reconfHarness) {
				if j := mustSubmit(h, api.JobSpec{GPUs: 1, QOS: "tiny"}); j.QOS != "tiny" {
					t.Errorf("job of class %q, want tiny", j.QOS)
				}
				if j := mustSubmit(h, api.JobSpec{GPUs: 1}); j.QOS != "big" {
					t.Errorf("job without --qos is of class %q, want the new default big", j.QOS)
				}
			},
		},
		{
			name: "private_data",
			yaml: func(*testing.T) string { return reconfBase + "private_data: [jobs]\n" },
			key:  "private_data",
			check: func(t *testing.T, h *reconfHarness) {
				if got := h.s.configSummary()["PrivateData"]; got != "jobs" {
					t.Errorf("show config PrivateData %q, want jobs", got)
				}
				if v := h.s.jobView(h.alice); v == (view{}) {
					t.Errorf("alice's view of jobs is everyone's; private_data jobs should narrow it")
				}
			},
		},
		{
			name: "allow_root_jobs",
			yaml: func(*testing.T) string { return reconfBase + "allow_root_jobs: true\n" },
			key:  "allow_root_jobs",
			check: func(t *testing.T, h *reconfHarness) {
				if got := h.s.configSummary()["DisableRootJobs"]; got != "No" {
					t.Errorf("show config DisableRootJobs %q, want No", got)
				}
			},
		},
		{
			name: "max_array_size",
			yaml: func(*testing.T) string { return reconfBase + "max_array_size: 5\n" },
			key:  "max_array_size",
			check: func(t *testing.T, h *reconfHarness) {
				if _, err := submit(h, api.JobSpec{GPUs: 1, Array: "0-9"}); err == nil {
					t.Errorf("array 0-9 with max_array_size 5 was accepted")
				}
				mustSubmit(h, api.JobSpec{GPUs: 1, Array: "0-4"})
			},
		},
		{
			name: "submit limits within the body limit",
			yaml: func(*testing.T) string { return reconfBase + "submit: {rate_per_queue: 7, max_script_size: 1000}\n" },
			key:  "submit.",
			check: func(t *testing.T, h *reconfHarness) {
				if q := h.s.sharing().Queue("ml"); q.SubmitRate != 7 {
					t.Errorf("queue ml's rate %g, want 7", q.SubmitRate)
				}
				if _, err := submit(h, api.JobSpec{GPUs: 1, Script: "#!/bin/sh\n" + strings.Repeat("#", 2000)}); err == nil {
					t.Errorf("a 2000-byte script with max_script_size 1000 was accepted")
				}
			},
		},
		{
			name: "log_level",
			yaml: func(*testing.T) string { return reconfBase + "log_level: debug\n" },
			key:  "log_level",
			check: func(t *testing.T, h *reconfHarness) {
				if got := h.level.Level(); got != slog.LevelDebug {
					t.Errorf("logger level %v, want DEBUG", got)
				}
			},
		},
		{
			name: "topology",
			yaml: func(*testing.T) string {
				return reconfBase + "topology:\n  switches:\n    - {name: s1, nodes: gpu01}\n    - {name: s2, nodes: gpu02}\n    - {name: top, switches: \"s[1-2]\"}\n"
			},
			key: "topology.switches",
			check: func(t *testing.T, h *reconfHarness) {
				h.s.mu.Lock()
				defer h.s.mu.Unlock()
				if a, b := h.s.nodes["gpu01"].Switch, h.s.nodes["gpu02"].Switch; a != "s1" || b != "s2" {
					t.Errorf("switches of gpu01, gpu02: %q %q, want s1 s2", a, b)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newReconfHarness(t, reconfBase)
			yaml := tt.yaml(t)
			resp, err := h.reload(yaml)
			if err != nil {
				t.Fatalf("reload: %v", err)
			}
			if !slices.ContainsFunc(resp.Changed, func(c api.ConfigChange) bool { return strings.HasPrefix(c.Key, tt.key) }) {
				t.Errorf("changes %+v name no %s", resp.Changed, tt.key)
			}
			want, err := LoadConfig(h.path)
			if err != nil {
				t.Fatal(err)
			}
			if d := config.Diff(h.s.cl.Config, want); len(d) > 0 {
				t.Errorf("running config differs from the file after the reload: %+v", d)
			}
			tt.check(t, h)
			// The same file again changes nothing.
			if resp, err := h.s.reconfigure(reconfRoot, "test"); err != nil || len(resp.Changed) != 0 {
				t.Errorf("second reload of the same file: %+v, %v; want no changes", resp.Changed, err)
			}
		})
	}
}

// TestReconfigureRestartOnly changes a key only a restart applies,
// together with a reloadable one: the reload is refused naming the
// key, and nothing changes.
func TestReconfigureRestartOnly(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"cluster_name", strings.Replace(reconfBase, "cluster_name: t\n", "cluster_name: u\n", 1), "cluster_name changed"},
		{"state_dir", strings.Replace(reconfBase, "state_dir: /unused\n", "state_dir: /elsewhere\n", 1), "state_dir changed"},
		{"socket", strings.Replace(reconfBase, "socket: /unused.sock", "socket: /other.sock", 1), "socket changed"},
		{"node_addr", strings.Replace(reconfBase, "node_addr: 127.0.0.1:0", "node_addr: 127.0.0.1:7817", 1), "node_addr changed"},
		{"key_file", reconfBase + "key_file: /etc/other.key\n", "key_file changed"},
		{"operators", reconfBase + "operators: [bob]\n", "operators changed"},
		{"first_job_id", reconfBase + "first_job_id: 100\n", "first_job_id changed"},
		{"metrics_addr", reconfBase + "metrics_addr: 127.0.0.1:9100\n", "metrics_addr changed"},
		{"limits", reconfBase + "limits: {idle_timeout: 30s}\n", "limits.idle_timeout changed"},
		{"api_addr", reconfBase + "api_addr: 127.0.0.1:7000\n", "api_addr changed"},
		{"jwt", reconfBase + "jwt: {max_lifespan: 1h}\n", "jwt.max_lifespan changed"},
		{"munge", reconfBase + "munge: {socket: /tmp/munge.sock}\n", "munge.socket changed"},
		{"tls", reconfBase + "tls: {mode: off}\n", "tls.mode changed"},
		{"nodes", strings.Replace(reconfBase, "cpus: 8", "cpus: 16", 1), "nodes changed"},
		{"submission body limit", reconfBase + "submit: {max_script_size: 16777216}\n", "submit.max_script_size changed: restart tidectld to apply (it sizes the submission body limit)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.yaml == reconfBase {
				t.Fatal("the case changes nothing")
			}
			h := newReconfHarness(t, reconfBase)
			beforeCfg, beforeParts := h.running()
			// A reloadable change rides along: it must not be applied.
			_, err := h.reload(tt.yaml + "scheduler: {max_starts: 7}\n")
			if err == nil {
				t.Fatal("reload accepted")
			}
			if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), tt.want) ||
				!strings.Contains(err.Error(), "restart tidectld to apply") || !strings.Contains(err.Error(), "nothing changed") {
				t.Errorf("error %q (%v), want a conflict naming %q", err, errors.Is(err, api.ErrConflict), tt.want)
			}
			afterCfg, afterParts := h.running()
			if d := config.Diff(beforeCfg, afterCfg); len(d) > 0 || !slices.Equal(beforeParts, afterParts) {
				t.Errorf("refused reload changed %+v (partitions %v -> %v)", d, beforeParts, afterParts)
			}
		})
	}
}

// TestReconfigureInvalidFile: a file that does not load or validate
// changes nothing, and the error names the problem.
func TestReconfigureInvalidFile(t *testing.T) {
	tests := []struct {
		name string
		yaml string // "" removes the file
		want []string
	}{
		{"corrupt YAML", "partitions: [ {name: gpu\nnodes: {", []string{"tide.yaml", "parse YAML"}},
		{"unknown key", reconfBase + "schedular: {policy: fifo}\n", []string{"schedular"}},
		{"invalid value", reconfBase + "scheduler: {policy: lottery}\n", []string{"invalid config", "tide.yaml", "scheduler.policy", "lottery"}},
		{"several problems", reconfBase + "scheduler: {policy: lottery, interval: -1s}\n", []string{"scheduler.policy", "scheduler.interval"}},
		{"missing file", "", []string{"read config", "tide.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newReconfHarness(t, reconfBase)
			beforeCfg, beforeParts := h.running()
			var err error
			if tt.yaml == "" {
				os.Remove(h.path)
				_, err = h.s.reconfigure(reconfRoot, "test")
			} else {
				_, err = h.reload(tt.yaml)
			}
			if !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("error %v, want invalid argument", err)
			}
			t.Logf("error: %v", err)
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q spans lines; scontrol would print them as \\n", err)
			}
			for _, w := range append(tt.want, "nothing changed") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			afterCfg, afterParts := h.running()
			if d := config.Diff(beforeCfg, afterCfg); len(d) > 0 || !slices.Equal(beforeParts, afterParts) {
				t.Errorf("refused reload changed %+v", d)
			}
		})
	}
}

// TestReconfigureJobsKeepWhatTheyUse: a partition, queue or class that
// a pending or running job names cannot be removed, nor can queues be
// turned off under jobs; once the jobs end, the same file applies.
func TestReconfigureJobsKeepWhatTheyUse(t *testing.T) {
	noShort := edit(t, reconfBase, `  - {name: short, nodes: "gpu01", max_time: "30:00"}`+"\n", "")
	tests := []struct {
		name string
		spec api.JobSpec
		run  bool // start the job before the reload
		yaml string
		want string
	}{
		{"pending job's partition", api.JobSpec{GPUs: 1, Partition: "short"}, false, noShort,
			"partition short removed while pending or running jobs use it: "},
		{"running job's partition", api.JobSpec{GPUs: 1, Partition: "short", TimeLimit: 600}, true, noShort,
			"partition short removed while pending or running jobs use it: "},
		{"one of a pending job's partitions", api.JobSpec{GPUs: 1, Partition: "gpu,short"}, false, noShort,
			"partition short removed"},
		{"queue", api.JobSpec{GPUs: 1, Account: "vision"}, false, edit(t, reconfBase, "  - {name: vision}\n", ""),
			"queue vision removed while pending or running jobs use it: "},
		{"qos", api.JobSpec{GPUs: 1, QOS: "big"}, true, edit(t, reconfBase, "qos:\n  - {name: big, min_level: 2, max_level: 8}\n", ""),
			"qos big removed while pending or running jobs use it: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newReconfHarness(t, reconfBase)
			h.register("gpu01")
			resp, err := h.submitAs(h.alice, tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			id := resp.JobID
			report := api.NodeJobReport{}
			if tt.run {
				h.s.schedulePass()
				j := h.job(id)
				if j.State != api.StateRunning {
					t.Fatalf("job %d is %s (%s), want RUNNING", id, j.State, j.Reason)
				}
				report = running(id, 0)
				h.sync("gpu01", report)
			}
			before := *h.job(id)
			beforeCfg, beforeParts := h.running()
			_, err = h.reload(tt.yaml)
			if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), itoa(id)) {
				t.Fatalf("reload: %v, want a conflict %q naming job %d", err, tt.want, id)
			}
			afterCfg, afterParts := h.running()
			if d := config.Diff(beforeCfg, afterCfg); len(d) > 0 || !slices.Equal(beforeParts, afterParts) {
				t.Errorf("refused reload changed %+v", d)
			}
			if d := cmp.Diff(before, *h.job(id)); d != "" {
				t.Errorf("job changed by a refused reload (-before +after):\n%s", d)
			}
			// Once the job is gone the same file applies.
			if tt.run {
				h.sync("gpu01", finished(id, 0))
			} else if _, err := h.s.cancel(h.alice, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{id}}}); err != nil {
				t.Fatal(err)
			}
			if j := h.job(id); !j.State.Terminal() {
				t.Fatalf("job %d still %s", id, j.State)
			}
			if _, err := h.s.reconfigure(reconfRoot, "test"); err != nil {
				t.Errorf("reload after the job ended: %v", err)
			}
		})
	}
}

func TestReconfigureQueuesOnOffUnderJobs(t *testing.T) {
	h := newReconfHarness(t, testConfig)
	id := h.submit(api.JobSpec{GPUs: 1})
	_, err := h.reload(testConfig + "queues:\n  - {name: ml}\n")
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "turning queues and qos on or off while 1 jobs are pending or running") {
		t.Fatalf("reload: %v, want a conflict about turning queues on", err)
	}
	if h.s.sharing().Configured {
		t.Error("queues turned on by a refused reload")
	}
	if _, err := h.s.cancel(h.alice, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{id}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.reconfigure(reconfRoot, "test"); err != nil {
		t.Fatalf("reload without jobs: %v", err)
	}
	if !h.s.sharing().Configured {
		t.Error("queues not on after the reload")
	}
}

// TestReconfigureKeepsJobs: running and pending jobs come out of a
// reload untouched, and the next pass uses the new settings.
func TestReconfigureKeepsJobs(t *testing.T) {
	h := newReconfHarness(t, reconfBase)
	h.register("gpu01")
	h.register("gpu02")
	run := h.submit(api.JobSpec{GPUs: 8, TimeLimit: 1800})
	h.s.schedulePass()
	h.sync(h.job(run).BatchHost(), running(run, 0))
	wait := h.submit(api.JobSpec{GPUs: 8, TimeLimit: 1800, Hold: true})
	before := map[uint64]api.Job{run: *h.job(run), wait: *h.job(wait)}
	if before[run].State != api.StateRunning || before[wait].State != api.StatePending {
		t.Fatalf("before: %s and %s", before[run].State, before[wait].State)
	}
	// Lower the partition's max_time under the running job: it runs on.
	yaml := edit(t, reconfBase, `max_time: "1:00:00"`, `max_time: "20:00"`) + "scheduler: {policy: fifo}\n"
	if _, err := h.reload(yaml); err != nil {
		t.Fatal(err)
	}
	for id, b := range before {
		if d := cmp.Diff(b, *h.job(id)); d != "" {
			t.Errorf("job %d changed by the reload (-before +after):\n%s", id, d)
		}
	}
	h.s.schedulePass()
	if j := h.job(run); j.State != api.StateRunning {
		t.Errorf("running job is %s after a pass", j.State)
	}
	next := h.submit(api.JobSpec{GPUs: 1, TimeLimit: 1800})
	h.s.schedulePass()
	if j := h.job(next); j.State != api.StatePending || j.Reason != api.ReasonPartitionTimeLimit {
		t.Errorf("new 30-minute job: %s %s, want PENDING PartitionTimeLimit (max_time now 20 min)", j.State, j.Reason)
	}
}

// TestReconfigurePermission: over the HTTP API a user who is not an
// operator is refused and nothing changes; root's reload applies.
func TestReconfigurePermission(t *testing.T) {
	h := newReconfHarness(t, reconfBase)
	h.write(reconfBase + "scheduler: {max_starts: 3}\n")
	post := func(uid uint32) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "http://tide"+api.PathReconfigure, nil)
		r = r.WithContext(context.WithValue(r.Context(), credKey{}, syscall.Ucred{Uid: uid, Gid: uid, Pid: 1}))
		w := httptest.NewRecorder()
		h.s.localHandler().ServeHTTP(w, r)
		return w
	}
	user := uint32(54321)
	if user == h.s.self {
		user++
	}
	w := post(user)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "Access/permission denied") {
		t.Errorf("non-operator: %d %s, want 403 Access/permission denied", w.Code, w.Body)
	}
	if got := h.s.cl.Scheduler.MaxStarts; got != 0 {
		t.Errorf("max_starts %d after a refused reload, want 0", got)
	}
	w = post(0)
	if w.Code != http.StatusOK {
		t.Fatalf("root: %d %s", w.Code, w.Body)
	}
	var resp api.ReconfigureResponse
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	want := []api.ConfigChange{{Key: "scheduler.max_starts", Old: "0", New: "3"}}
	if d := cmp.Diff(want, resp.Changed); d != "" {
		t.Errorf("changes (-want +got):\n%s", d)
	}
	if got := h.s.cl.Scheduler.MaxStarts; got != 3 {
		t.Errorf("max_starts %d after root's reload, want 3", got)
	}
	// The audit trail records both.
	recs, err := h.s.store.AuditLog(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 || recs[0].Action != "reconfigure" || !strings.Contains(recs[0].Detail, "scheduler.max_starts") {
		t.Errorf("audit %+v, want a reconfigure record naming scheduler.max_starts", recs)
	}
}

func TestReconfigureUnavailableWithoutSource(t *testing.T) {
	h := newHarness(t)
	if _, err := h.s.reconfigure(reconfRoot, "test"); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("reload without a source: %v, want unavailable", err)
	}
}

// TestReconfigureOnSIGHUP: SIGHUP reloads the file (and does not end
// the process, which is this test binary).
func TestReconfigureOnSIGHUP(t *testing.T) {
	h := newReconfHarness(t, reconfBase)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := h.s.ReloadOnHangup(ctx)
	defer stop()
	h.write(reconfBase + "scheduler: {max_starts: 5}\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.s.mu.Lock()
		got := h.s.cl.Scheduler.MaxStarts
		h.s.mu.Unlock()
		if got == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("max_starts %d 10s after SIGHUP, want 5", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReconfigureGate: a closed gate holds new requests until it opens,
// and a reload that cannot wait out a request gives up and reopens it.
func TestReconfigureGate(t *testing.T) {
	var g requestGate
	g.enter()
	if busy := g.close(20 * time.Millisecond); busy != 1 {
		t.Fatalf("close with one request in progress: %d busy, want 1", busy)
	}
	g.enter() // open again: does not block
	g.leave()

	closed := make(chan int)
	go func() { closed <- g.close(time.Minute) }()
	// The close waits for the request in progress; a new one waits for
	// the close.
	entered := make(chan struct{})
	go func() {
		for {
			g.mu.Lock()
			c := g.closed
			g.mu.Unlock()
			if c != nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		g.enter()
		close(entered)
	}()
	select {
	case <-entered:
		t.Fatal("a request entered a closing gate")
	case <-closed:
		t.Fatal("close returned with a request in progress")
	case <-time.After(50 * time.Millisecond):
	}
	g.leave()
	if busy := <-closed; busy != 0 {
		t.Fatalf("close: %d busy after the last request left", busy)
	}
	select {
	case <-entered:
		t.Fatal("a request entered the closed gate")
	case <-time.After(20 * time.Millisecond):
	}
	g.open()
	<-entered
	g.leave()
}

// TestReconfigureUnderLoad reloads back and forth while submissions,
// listings and scheduling passes run: every request is answered from
// one configuration or the other (run with -race, this also shows that
// nothing reads the settings while a reload writes them).
func TestReconfigureUnderLoad(t *testing.T) {
	h := newReconfHarness(t, reconfBase)
	h.register("gpu01")
	h.register("gpu02")
	h.s.users.names[1000] = cached{name: "alice", at: time.Now()}
	handler := h.s.gated(h.s.localHandler())
	alt := edit(t, reconfBase, `default_time: "10:00"`, `default_time: "20:00"`) +
		"scheduler: {policy: backfill, max_starts: 2}\nprivate_data: [jobs]\n"
	alt = edit(t, alt, `  - {name: short, nodes: "gpu01", max_time: "30:00"}`, `  - {name: debug, nodes: "gpu02", max_time: "30:00"}`)
	body, err := json.Marshal(api.SubmitRequest{Spec: api.JobSpec{Script: "#!/bin/sh\ntrue\n", WorkDir: "/tmp", GPUs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path string, body []byte) int {
		var rd *strings.Reader
		if body != nil {
			rd = strings.NewReader(string(body))
		} else {
			rd = strings.NewReader("")
		}
		r := httptest.NewRequest(method, "http://tide"+path, rd)
		r = r.WithContext(context.WithValue(r.Context(), credKey{}, syscall.Ucred{Uid: 1000, Gid: 1000, Pid: 1}))
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		return w.Code
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failures atomic.Int64
	for _, req := range []struct {
		method, path string
		body         []byte
	}{
		{"POST", "/api/v1/jobs", body}, {"POST", "/api/v1/jobs", body},
		{"GET", "/api/v1/cluster", nil}, {"GET", "/api/v1/nodes", nil}, {"GET", "/api/v1/jobs", nil}, {"GET", api.PathQueues, nil},
	} {
		wg.Go(func() {
			for i := 0; i < 200; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if code := do(req.method, req.path, req.body); code != http.StatusOK {
					failures.Add(1)
					t.Errorf("%s %s: %d", req.method, req.path, code)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				h.s.schedulePass()
			}
		}
	})
	for i := range 20 {
		yaml := reconfBase
		if i%2 == 0 {
			yaml = alt
		}
		if _, err := h.reload(yaml); err != nil {
			t.Errorf("reload %d: %v", i, err)
		}
	}
	close(stop)
	wg.Wait()
	if failures.Load() > 0 {
		t.Fatalf("%d requests failed", failures.Load())
	}
}
