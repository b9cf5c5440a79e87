package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestDiff(t *testing.T) {
	base := func() Config {
		c := Default()
		c.Partition = []PartitionConfig{{Name: "gpu", Nodes: "gpu[01-02]", MaxTime: "1:00:00"}, {Name: "short", Nodes: "gpu01"}}
		c.Queues = []QueueConfig{{Name: "ml"}}
		c.Operators = []string{"alice"}
		return c
	}
	two := 2
	tests := []struct {
		name string
		edit func(*Config)
		want []api.ConfigChange
	}{
		{name: "same", edit: func(*Config) {}},
		{name: "scalar and duration", edit: func(c *Config) {
			c.ClusterName = "other"
			c.Timeouts.KillWait = 9 * time.Second
		}, want: []api.ConfigChange{
			{Key: "cluster_name", Old: "tide", New: "other"},
			{Key: "timeouts.kill_wait", Old: "30s", New: "9s"},
		}},
		{name: "list compared whole", edit: func(c *Config) { c.Operators = []string{"alice", "bob"} },
			want: []api.ConfigChange{{Key: "operators", Old: "alice", New: "alice,bob"}}},
		{name: "named entries reordered: no change", edit: func(c *Config) {
			c.Partition[0], c.Partition[1] = c.Partition[1], c.Partition[0]
		}},
		{name: "named entry field", edit: func(c *Config) { c.Partition[0].MaxTime = "2:00:00" },
			want: []api.ConfigChange{{Key: "partitions[gpu].max_time", Old: "1:00:00", New: "2:00:00"}}},
		{name: "named entries added and removed", edit: func(c *Config) {
			c.Partition = []PartitionConfig{c.Partition[0], {Name: "debug", Nodes: "gpu02"}}
		}, want: []api.ConfigChange{
			{Key: "partitions[short]", Old: `{"name":"short","nodes":"gpu01","default":false,"default_time":"","max_time":"","max_nodes":0,"def_cpus_per_gpu":0,"def_mem_per_gpu":"","state":""}`, New: "(none)"},
			{Key: "partitions[debug]", Old: "(none)", New: `{"name":"debug","nodes":"gpu02","default":false,"default_time":"","max_time":"","max_nodes":0,"def_cpus_per_gpu":0,"def_mem_per_gpu":"","state":""}`},
		}},
		{name: "optional value set", edit: func(c *Config) { c.Queues[0].LendLimit = &two },
			want: []api.ConfigChange{{Key: "queues[ml].lend_limit", Old: "(unset)", New: "2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, new := base(), base()
			tt.edit(&new)
			if d := cmp.Diff(tt.want, Diff(old, new)); d != "" {
				t.Errorf("Diff (-want +got):\n%s", d)
			}
		})
	}
}
