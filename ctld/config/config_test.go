package config

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

func TestSampleConfigValidates(t *testing.T) {
	cfg, err := Load("../../etc/tide.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cfg.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if cl.DefaultPart != "gpu" || len(cl.NodeOrder) != 17 || cl.Tree.LeafOf("gpu020") != "s2" {
		t.Fatalf("unexpected cluster: default=%q nodes=%d leaf=%q", cl.DefaultPart, len(cl.NodeOrder), cl.Tree.LeafOf("gpu020"))
	}
	if cl.Partitions[0].MaxTime != 7*86400 || cl.Partitions[0].DefaultTime != 3600 {
		t.Fatalf("partition times: %+v", cl.Partitions[0])
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{name: "unknown key", yaml: "version: 1\nclustr_name: x\n", want: []string{"clustr_name"}},
		{name: "not yaml", yaml: "version: [1\n", want: []string{"parse YAML"}},
		{name: "every problem at once", yaml: `
version: 2
partitions:
  - name: gpu
    nodes: gpu[01-03]
    max_time: forever
nodes:
  - names: gpu[01-02]
    memory: lots
`, want: []string{"version: 2", "max_time", "gpu03", "memory"}},
		{name: "no partitions", yaml: "version: 1\n", want: []string{"at least one partition"}},
		{name: "bad hostlist", yaml: "version: 1\nnodes:\n  - names: gpu[01-\n", want: []string{"not a valid hostlist"}},
		{name: "two defaults", yaml: `
version: 1
nodes: [{names: "n[1-2]"}]
partitions:
  - {name: a, nodes: n1, default: true}
  - {name: b, nodes: n2, default: true}
`, want: []string{"both a and b"}},
		{name: "topology unknown node", yaml: `
version: 1
nodes: [{names: "n[1-2]"}]
partitions: [{name: a, nodes: "n[1-2]"}]
topology: {switches: [{name: s1, nodes: "n[1-3]"}]}
`, want: []string{`unknown node "n3"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(strings.NewReader(tt.yaml))
			if err == nil {
				_, err = cfg.Validate()
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestTopologyFile(t *testing.T) {
	dir := t.TempDir()
	conf := "SwitchName=s1 Nodes=n[1-2]\nSwitchName=s2 Nodes=n3\nSwitchName=top Switches=s[1-2]\n"
	if err := os.WriteFile(dir+"/topology.conf", []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	yaml := `
version: 1
nodes: [{names: "n[1-3]"}]
partitions: [{name: a, nodes: "n[1-3]"}]
topology: {file: topology.conf}
`
	if err := os.WriteFile(dir+"/tide.yaml", []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(dir + "/tide.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cfg.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if got := cl.Tree.LeafOf("n3"); got != "s2" {
		t.Fatalf("LeafOf(n3) = %q", got)
	}
	os.WriteFile(dir+"/topology.conf", []byte("SwitchName=s1 Nodes=n[1-9]\n"), 0o644)
	if _, err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "unknown node") {
		t.Fatalf("unknown nodes in topology.conf accepted: %v", err)
	}
}

func TestPartitionSlicingConfig(t *testing.T) {
	const head = "version: 1\nnodes: [{names: \"n[1-2]\"}]\n"
	tests := []struct {
		name string
		yaml string
		// want is the partition's settings, or err a piece of the error.
		want api.Partition
		err  string
	}{
		{name: "defaults", yaml: "partitions: [{name: a, nodes: n1}]",
			want: api.Partition{GPUSlicing: true, GPUMemOversubscribe: 1, GPUComputeOversubscribe: 1, ShardsPerGPU: 8}},
		{name: "slicing-off", yaml: "partitions: [{name: a, nodes: n1, gpu_slicing: false}]",
			want: api.Partition{GPUSlicing: false, GPUMemOversubscribe: 1, GPUComputeOversubscribe: 1, ShardsPerGPU: 8}},
		{name: "ratios-at-the-cap", yaml: "partitions: [{name: a, nodes: n1, gpu_mem_oversubscribe: 1.2, gpu_compute_oversubscribe: 1.1, shards_per_gpu: 10}]",
			want: api.Partition{GPUSlicing: true, GPUMemOversubscribe: 1.2, GPUComputeOversubscribe: 1.1, ShardsPerGPU: 10}},
		{name: "raised-cap", yaml: "scheduler: {max_gpu_oversubscribe: 2}\npartitions: [{name: a, nodes: n1, gpu_mem_oversubscribe: 1.5}]",
			want: api.Partition{GPUSlicing: true, GPUMemOversubscribe: 1.5, GPUComputeOversubscribe: 1, ShardsPerGPU: 8}},
		{name: "over-the-cap", yaml: "partitions: [{name: a, nodes: n1, gpu_mem_oversubscribe: 1.5}]",
			err: "partition a gpu_mem_oversubscribe: 1.5 is above scheduler.max_gpu_oversubscribe (1.2)"},
		{name: "compute-over-the-cap", yaml: "partitions: [{name: a, nodes: n1, gpu_compute_oversubscribe: 3}]",
			err: "gpu_compute_oversubscribe: 3 is above"},
		{name: "negative", yaml: "partitions: [{name: a, nodes: n1, gpu_mem_oversubscribe: -1}]",
			err: "must be positive"},
		{name: "cap-below-one", yaml: "scheduler: {max_gpu_oversubscribe: 0.5}\npartitions: [{name: a, nodes: n1}]",
			err: "scheduler.max_gpu_oversubscribe: 0.5 is below 1.0"},
		{name: "too-many-shards", yaml: "partitions: [{name: a, nodes: n1, shards_per_gpu: 500}]",
			err: "shards_per_gpu: 500 is not between 1 and 128"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(strings.NewReader(head + tt.yaml + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			cl, err := cfg.Validate()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := cl.Partitions[0]
			got := api.Partition{GPUSlicing: p.GPUSlicing, GPUMemOversubscribe: p.GPUMemOversubscribe,
				GPUComputeOversubscribe: p.GPUComputeOversubscribe, ShardsPerGPU: p.ShardsPerGPU}
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tt.want) {
				t.Errorf("slicing settings %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestGPUMemHighWatermarkConfig(t *testing.T) {
	const head = "version: 1\nnodes: [{names: \"n[1-2]\"}]\n"
	tests := []struct {
		name string
		yaml string
		// want is each partition's watermark, or err a piece of the error.
		want []float64
		err  string
	}{
		{name: "default", yaml: "partitions: [{name: a, nodes: n1}]", want: []float64{0.95}},
		{name: "controller-wide", yaml: "scheduler: {gpu_mem_high_watermark: 0.9}\npartitions: [{name: a, nodes: n1}, {name: b, nodes: n2}]",
			want: []float64{0.9, 0.9}},
		{name: "partition-override", yaml: "partitions: [{name: a, nodes: n1, gpu_mem_high_watermark: 0.8}, {name: b, nodes: n2}]",
			want: []float64{0.8, 0.95}},
		{name: "full-card", yaml: "scheduler: {gpu_mem_high_watermark: 1}\npartitions: [{name: a, nodes: n1}]", want: []float64{1}},
		{name: "controller-too-high", yaml: "scheduler: {gpu_mem_high_watermark: 1.1}\npartitions: [{name: a, nodes: n1}]",
			err: "scheduler.gpu_mem_high_watermark: 1.1 is not between 0.5 and 1.0"},
		{name: "partition-too-low", yaml: "partitions: [{name: a, nodes: n1, gpu_mem_high_watermark: 0.2}]",
			err: "partition a gpu_mem_high_watermark: 0.2 is not between 0.5 and 1.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(strings.NewReader(head + tt.yaml + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			cl, err := cfg.Validate()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []float64
			for _, p := range cl.Partitions {
				got = append(got, p.GPUMemHighWatermark)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("watermarks %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMaxArraySizeConfig(t *testing.T) {
	const head = "version: 1\nnodes: [{names: n1}]\npartitions: [{name: a, nodes: n1}]\n"
	tests := []struct {
		name string
		yaml string
		want int
		err  string
	}{
		{name: "default is Slurm's", yaml: "", want: 10001},
		{name: "set", yaml: "max_array_size: 1001", want: 1001},
		{name: "zero", yaml: "max_array_size: 0", err: "max_array_size: 0 is not between 1 and 4000001"},
		{name: "above Slurm's hard limit", yaml: "max_array_size: 5000000", err: "max_array_size: 5000000 is not between 1 and 4000001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(strings.NewReader(head + tt.yaml + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			cl, err := cfg.Validate()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cl.MaxArraySize != tt.want {
				t.Fatalf("max_array_size = %d, want %d", cl.MaxArraySize, tt.want)
			}
		})
	}
}

// TestBackfillConfig: the backfill keys, their Slurm defaults and
// bounds, and the refused backfill_depth.
func TestBackfillConfig(t *testing.T) {
	const head = "version: 1\nnodes: [{names: n1}]\npartitions: [{name: a, nodes: n1}]\n"
	tests := []struct {
		name string
		yaml string
		want sched.BackfillConfig
		errs []string
	}{
		{name: "defaults", want: sched.BackfillConfig{MaxJobTest: 500, Resolution: time.Minute, Window: 7 * 24 * time.Hour}},
		{name: "set", yaml: "scheduler: {backfill_max_job_test: 50, backfill_max_job_user: 5, backfill_max_job_part: 20, backfill_resolution: 5m, backfill_window: 48h}",
			want: sched.BackfillConfig{MaxJobTest: 50, MaxJobUser: 5, MaxJobPart: 20, Resolution: 5 * time.Minute, Window: 48 * time.Hour}},
		{name: "old depth key", yaml: "scheduler: {backfill_depth: 4}",
			errs: []string{"scheduler.backfill_depth: replaced by backfill_max_job_test", "policy: easy"}},
		{name: "out of bounds", yaml: "scheduler: {backfill_max_job_test: 0, backfill_max_job_user: -1, backfill_max_job_part: -2, backfill_resolution: 2h, backfill_window: 40s}",
			errs: []string{"scheduler.backfill_max_job_test: 0 is not between 1 and 1000000", "scheduler.backfill_max_job_user: -1",
				"scheduler.backfill_max_job_part: -2", "scheduler.backfill_resolution: 2h0m0s is not between 1s and 1h",
				"scheduler.backfill_window: 40s is not between 1m and 720h (30 days)"}},
		{name: "window shorter than resolution", yaml: "scheduler: {backfill_resolution: 30m, backfill_window: 10m}",
			errs: []string{"scheduler.backfill_window: 10m0s is shorter than backfill_resolution 30m0s"}},
		{name: "window too long", yaml: "scheduler: {backfill_window: 800h}",
			errs: []string{"scheduler.backfill_window: 800h0m0s is not between 1m and 720h (30 days)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := validateCase(t, head+tt.yaml, tt.errs)
			if cl == nil {
				return
			}
			if diff := cmp.Diff(tt.want, cl.Scheduler.Backfill()); diff != "" {
				t.Errorf("backfill config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSchedulerPolicyConfig(t *testing.T) {
	const head = "version: 1\nnodes: [{names: n1}]\npartitions: [{name: a, nodes: n1}]\n"
	tests := []struct {
		name string
		yaml string
		want sched.Policy
		err  string
	}{
		{name: "default is tide", yaml: "", want: sched.PolicyTide},
		{name: "tide", yaml: "scheduler: {policy: tide}", want: sched.PolicyTide},
		{name: "backfill", yaml: "scheduler: {policy: backfill}", want: sched.PolicyBackfill},
		{name: "fifo, any case", yaml: "scheduler: {policy: FIFO}", want: sched.PolicyFIFO},
		{name: "priority", yaml: "scheduler: {policy: priority}", want: sched.PolicyPriority},
		{name: "easy", yaml: "scheduler: {policy: easy}", want: sched.PolicyEASY},
		{name: "unknown", yaml: "scheduler: {policy: lottery}", err: `scheduler.policy: "lottery" is not tide, priority, fifo, backfill or easy`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(strings.NewReader(head + tt.yaml + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			cl, err := cfg.Validate()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cl.Policy != tt.want {
				t.Fatalf("policy = %v, want %v", cl.Policy, tt.want)
			}
		})
	}
}

// TestPriorityConfig: policy tide's multifactor weights, their defaults
// (the core's), their bounds, and that other policies order without them.
func TestPriorityConfig(t *testing.T) {
	const head = "version: 1\nnodes: [{names: n1}]\npartitions: [{name: a, nodes: n1}]\n"
	def := sched.DefaultMultifactor
	set := def
	set.AgeWeight, set.MaxAge, set.LengthWeight, set.LengthRef = 10, 2*time.Hour, 20, 48*time.Hour
	set.SizeWeight, set.SizeRef, set.FairshareWeight = 5, 16, 0
	set.AgeAfterMax, set.MaxLimitAs, set.MaxLimit = 0.5, 2*time.Hour, 48*time.Hour
	off := def
	off.AgeAfterMax, off.MaxLimitAs, off.SizeWeight = 0, 0, -3
	tests := []struct {
		name string
		yaml string
		want *sched.Multifactor
		errs []string
	}{
		{name: "tide defaults", yaml: "scheduler: {policy: tide}", want: &def},
		{name: "other policies have none", yaml: "scheduler: {policy: backfill, priority_weight_age: 7}"},
		{name: "set", yaml: "scheduler: {policy: tide, priority_weight_age: 10, priority_max_age: 2h, priority_weight_length: 20, " +
			"priority_length_ref: 48h, priority_weight_job_size: 5, priority_job_size_ref: 16, priority_weight_fairshare: 0, " +
			"priority_age_after_max: 0.5, priority_max_limit_as: 2h, priority_max_limit: 48h}", want: &set},
		{name: "capped age, limits at their word, wide jobs first", yaml: "scheduler: {policy: tide, priority_age_after_max: 0, " +
			"priority_max_limit_as: 0, priority_weight_job_size: -3}", want: &off},
		{name: "out of bounds", yaml: "scheduler: {policy: tide, priority_weight_age: -1, priority_weight_length: 2e6, priority_max_age: 10s, " +
			"priority_length_ref: 9000h, priority_job_size_ref: 1, priority_weight_job_size: -2e6, priority_age_after_max: 1.5, " +
			"priority_max_limit_as: 10s, priority_max_limit: 0s}",
			errs: []string{"scheduler.priority_weight_age: -1 is not between 0 and 1e+06", "scheduler.priority_weight_length: 2e+06",
				"scheduler.priority_max_age: 10s", "scheduler.priority_length_ref: 9000h0m0s", "scheduler.priority_job_size_ref: 1 is not",
				"scheduler.priority_weight_job_size: -2e+06 is not between -1e+06 and 1e+06", "scheduler.priority_age_after_max: 1.5 is not between 0 and 1",
				"scheduler.priority_max_limit_as: 10s is not 0 (off)", "scheduler.priority_max_limit: 0s is not between"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := validateCase(t, head+tt.yaml, tt.errs)
			if cl == nil {
				return
			}
			if diff := cmp.Diff(tt.want, cl.Scheduler.Priority(cl.Policy)); diff != "" {
				t.Errorf("multifactor (-want +got):\n%s", diff)
			}
		})
	}
}

// validateCase parses and validates yaml: with errs, it checks that
// validation fails naming each of them and returns nil; without, that
// it succeeds, and returns the cluster.
func validateCase(t *testing.T, yaml string, errs []string) *Cluster {
	t.Helper()
	cfg, err := Parse(strings.NewReader(yaml + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cfg.Validate()
	if len(errs) > 0 {
		if err == nil {
			t.Fatal("no error")
		}
		for _, w := range errs {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error lacks %q:\n%v", w, err)
			}
		}
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
