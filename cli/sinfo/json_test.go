package sinfo

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
)

func orderedKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", raw)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// Slurm 22.05's key order (src/plugins/openapi/v0.0.38 nodes.c and
// partitions.c, _dump_node and _dump_part).
var (
	slurmNodeKeys = []string{"architecture", "burstbuffer_network_address", "boards", "boot_time", "comment",
		"cores", "cpu_binding", "cpu_load", "extra", "free_memory", "cpus", "last_busy", "features",
		"active_features", "gres", "gres_drained", "gres_used", "mcs_label", "name", "next_state_after_reboot",
		"address", "hostname", "state", "state_flags", "next_state_after_reboot_flags", "operating_system",
		"owner", "partitions", "port", "real_memory", "reason", "reason_changed_at", "reason_set_by_user",
		"slurmd_start_time", "sockets", "threads", "temporary_disk", "weight", "tres", "slurmd_version",
		"alloc_memory", "alloc_cpus", "idle_cpus", "tres_used", "tres_weighted"}
	tideNodeKeys  = []string{"gpus_total", "gpus_alloc", "gpus_idle", "gpus"}
	slurmPartKeys = []string{"flags", "preemption_mode", "allowed_allocation_nodes", "allowed_accounts",
		"allowed_groups", "allowed_qos", "alternative", "billing_weights", "default_memory_per_cpu",
		"default_memory_per_node", "default_time_limit", "denied_accounts", "denied_qos",
		"preemption_grace_time", "maximum_cpus_per_node", "maximum_memory_per_cpu", "maximum_memory_per_node",
		"maximum_nodes_per_job", "max_time_limit", "min nodes per job", "name", "nodes", "over_time_limit",
		"priority_job_factor", "priority_tier", "qos", "state", "total_cpus", "total_nodes", "tres"}
)

// TestJSONLayout checks sinfo --json against Slurm 22.05's layout: the
// envelope, and every node and partition with v0.0.38's keys in order
// (Tide's GPU detail after them).
func TestJSONLayout(t *testing.T) {
	out, _, err := exec(t, slurmfmttest.Cluster(), "--json")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"meta", "errors", "warnings", "nodes", "partitions"}, orderedKeys(t, []byte(out))); diff != "" {
		t.Errorf("top-level keys (-want +got):\n%s", diff)
	}
	var doc struct {
		Meta struct {
			Plugin struct{ Type, Name string }
			Slurm  struct {
				Release string
			} `json:"Slurm"`
		}
		Nodes      []json.RawMessage
		Partitions []json.RawMessage
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Meta.Plugin.Type != "openapi/v0.0.38" || doc.Meta.Slurm.Release != "22.05.8" {
		t.Errorf("meta = %+v", doc.Meta)
	}
	if len(doc.Nodes) == 0 || len(doc.Partitions) == 0 {
		t.Fatalf("%d nodes, %d partitions", len(doc.Nodes), len(doc.Partitions))
	}
	for _, n := range doc.Nodes {
		if diff := cmp.Diff(append(append([]string{}, slurmNodeKeys...), tideNodeKeys...), orderedKeys(t, n)); diff != "" {
			t.Errorf("node keys (-want +got):\n%s", diff)
		}
	}
	for _, p := range doc.Partitions {
		if diff := cmp.Diff(slurmPartKeys, orderedKeys(t, p)); diff != "" {
			t.Errorf("partition keys (-want +got):\n%s", diff)
		}
	}
}
