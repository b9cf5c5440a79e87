package ctld

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestConfigSummarySlurmKeys: scontrol show config carries the keys tools
// and Slurm's test suite read, mapped from the controller's config.
func TestConfigSummarySlurmKeys(t *testing.T) {
	for _, tt := range []struct {
		name   string
		config string
		want   map[string]string
	}{
		{name: "defaults", config: strings.Replace(testConfigHeader, "127.0.0.1:0", "127.0.0.1:16817", 1) + `
partitions:
  - {name: gpu, nodes: "gpu[01-02]", default: true}
nodes:
  - {names: "gpu01", cpus: 8, memory: 64G, gpus: 8}
  - {names: "gpu02", cpus: 32, memory: 64G, gpus: 8}
`, want: map[string]string{
			// Nodes of fewer CPUs: --overcommit's 512 tasks per node.
			"SlurmctldPort": "16817", "SLURM_VERSION": "22.05.8", "MaxTasksPerNode": "512",
			"MinJobAge": "300 sec", "KillWait": "5 sec", "SchedulerType": "sched/backfill",
			"SelectType": "select/cons_tres", "ClusterName": "t",
			"AccountingStorageTRES": "cpu,mem,node,billing,gres/gpu", "EnforcePartLimits": "NO",
		}},
		{name: "backfill", config: strings.Replace(testConfigHeader, "127.0.0.1:0", "10.1.2.3:6817", 1) + `
scheduler: {policy: backfill}
partitions:
  - {name: gpu, nodes: "gpu01", default: true}
nodes:
  - {names: "gpu01", memory: 64G}
`, want: map[string]string{
			"SlurmctldPort": "6817", "SchedulerType": "sched/backfill",
			// Nodes that report their own CPUs: the --overcommit bound.
			"MaxTasksPerNode": "512",
		}},
		{name: "a node of more CPUs than 512 raises MaxTasksPerNode", config: testConfigHeader + `
partitions:
  - {name: gpu, nodes: "gpu[01-02]", default: true}
nodes:
  - {names: "gpu01", cpus: 8, memory: 64G}
  - {names: "gpu02", cpus: 1024, memory: 64G}
`, want: map[string]string{"MaxTasksPerNode": "1024"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessWith(t, tt.config)
			got := h.s.configSummary()
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			host, _ := os.Hostname()
			addr := "127.0.0.1"
			if tt.name == "backfill" {
				addr = "10.1.2.3"
			}
			if diff := cmp.Diff(host+"("+addr+")", got["SlurmctldHost[0]"]); diff != "" {
				t.Errorf("SlurmctldHost[0] (-want +got):\n%s", diff)
			}
		})
	}
}
